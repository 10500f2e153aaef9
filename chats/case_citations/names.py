"""Case names: normalized for comparison, and matched party by party.

:func:`parse_case_name` reduces a name to its parties, each a set of lowercase words with Bluebook
abbreviations (T6 and T10, ``chats/data/bluebook``) expanded and the noise (``v.``, ``et al.``, corporate
suffixes, ``In re``) removed; :func:`names_match` compares parties: a party matches on one of its distinctive
words; a full citation's name when every written party matches its counterpart; a short form's when it matches
either party; a name made only of generic words matches nothing. Pure Python: no Django, no eyecite. The
rules in full: docs/verification.md.
"""

from __future__ import annotations

import json
import re
import unicodedata
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path

_BLUEBOOK = Path(__file__).resolve().parent.parent / "data" / "bluebook"


def _load_abbreviations() -> dict[str, str]:
    """Bluebook T6 and T10 as data (``chats/data/bluebook``, see its README for the source): lowercase
    abbreviation, apostrophes straight -> the words it stands for (its first reading)."""
    table: dict[str, str] = {}
    for name in ("case_name_abbreviations.json", "supplement.json"):
        for abbreviation, expansions in json.loads((_BLUEBOOK / name).read_text(encoding="utf-8")).items():
            # The first reading only: a second (`Educ.`: "Education", "Educational") would be a distinctive word
            # the official name never has.
            table[_key_of(abbreviation)] = expansions[0].lower()
    for abbreviation, state in json.loads((_BLUEBOOK / "state_abbreviations.json").read_text(encoding="utf-8")).items():
        if abbreviation.lower() != state.lower():
            table[_key_of(abbreviation)] = state.lower()
    table.pop("&", None)  # `&` is a connector, handled before the words are read
    return table


def _key_of(abbreviation: str) -> str:
    return abbreviation.lower().replace("\u2019", "'").replace(" ", "")


T6_ABBREVIATIONS: dict[str, str] = _load_abbreviations()

# Words that say nothing about which case it is: dropped before comparing.
NOISE_WORDS = frozenset(
    {
        "a", "an", "and", "at", "by", "for", "in", "of", "on", "the", "to",
        "et", "al", "rel", "ex",
        "company", "corporation", "incorporated", "limited", "inc", "corp", "co", "ltd", "llc", "lp", "llp",
        "plc", "na",
    }
)  # fmt: skip

# Words too common in party names to tell two cases apart on their own.
GENERIC_WORDS = frozenset(
    {
        "united", "states", "state", "people", "commonwealth", "city", "county", "town", "township", "village",
        "board", "department", "commission", "commissioner", "committee", "government", "national",
        "international", "american", "america", "university", "college", "school", "district", "association",
        "education", "public", "federal", "general", "north", "south", "east", "west", "new", "regents",
        "trustees", "secretary", "director", "attorney", "administrator", "court", "estate", "matter",
        "services", "service", "authority", "office", "agency", "bank", "insurance", "group", "holdings",
    }
)  # fmt: skip

_LEADING_SINGLE_PARTY = re.compile(
    r"^\s*(?:in\s+the\s+matter\s+of|in\s+re|ex\s+parte|matter\s+of|application\s+of|petition\s+of|estate\s+of)\b",
    re.IGNORECASE,
)
_VERSUS = re.compile(r"\s+(?:v|vs|versus)\.?\s+", re.IGNORECASE)
_SPACED_INITIALS = re.compile(r"\b([a-z])\.\s+(?=[a-z]\.)")  # "u. s." -> "u.s."
_TOKEN_EDGE = re.compile(r"^[^\w'.&]+|[^\w'.&]+$")
_NON_WORD = re.compile(r"[^a-z0-9]+")
_QUOTES = str.maketrans({"\u2019": "'", "\u2018": "'", "\u02bc": "'", "`": "'"})


@dataclass(frozen=True, slots=True)
class CaseName:
    """A parsed case name: one party (``In re Gault``, a short form) or two (plaintiff, defendant)."""

    parties: tuple[frozenset[str], ...]

    @property
    def is_empty(self) -> bool:
        return not any(self.parties)


def _ascii_lower(text: str) -> str:
    folded = unicodedata.normalize("NFKD", text.translate(_QUOTES))
    return "".join(ch for ch in folded if not unicodedata.combining(ch)).lower()


def party_words(text: str) -> frozenset[str]:
    """The normalized words of one party: T6/T10 abbreviations expanded, punctuation and noise removed."""
    text = _SPACED_INITIALS.sub(r"\1.", _ascii_lower(text)).replace("&", " and ")
    words: list[str] = []
    for raw in text.split():
        token = _TOKEN_EDGE.sub("", raw)
        expansion = T6_ABBREVIATIONS.get(token) or T6_ABBREVIATIONS.get(token.rstrip(".") + ".")
        if expansion is None and "'" in token:
            expansion = T6_ABBREVIATIONS.get(token.rstrip("."))
        pieces = expansion.split() if expansion else _NON_WORD.split(token.replace("'", ""))
        words.extend(piece for piece in pieces if piece and piece not in NOISE_WORDS)
    return frozenset(words)


def parse_case_name(name: str) -> CaseName:
    """``name`` as parties: split at the first ``v.``/``vs.``; a leading ``In re``/``Ex parte`` makes it one."""
    name = name.strip()
    single = _LEADING_SINGLE_PARTY.match(name)
    if single:
        name = name[single.end() :]
    sides = [name] if single else _VERSUS.split(name, maxsplit=1)
    return CaseName(parties=tuple(party_words(side) for side in sides))


def distinctive(words: frozenset[str]) -> frozenset[str]:
    """The words of a party that identify it; all of them when none is distinctive."""
    return (words - GENERIC_WORDS) or words


def _party_matches(written: frozenset[str], official: frozenset[str]) -> bool:
    return bool(written) and bool(distinctive(written) & official)


def only_generic(name: CaseName) -> bool:
    """Whether every party of ``name`` is made only of generic words (`County Comm'n`): such a name fits any
    case of that kind, so it never suffices to say which case is meant."""
    return not any(party - GENERIC_WORDS for party in name.parties)


def names_match(written: str, official: Iterable[str], *, short_form: bool = False) -> bool:
    """Whether the name written in an answer is consistent with one of the ``official`` names of a case.

    See the module docstring for the rules. An empty written name matches nothing: the caller decides
    what an unnamed citation means.
    """
    parsed = parse_case_name(written)
    if parsed.is_empty or only_generic(parsed):
        return False
    return any(_matches(parsed, parse_case_name(name), short_form=short_form) for name in official if name)


def _matches(written: CaseName, official: CaseName, *, short_form: bool) -> bool:
    if official.is_empty:
        return False
    written_parties = [party for party in written.parties if party]
    if short_form or len(written_parties) == 1 or len(official.parties) == 1:
        return all(any(_party_matches(party, other) for other in official.parties) for party in written_parties)
    return all(
        _party_matches(party, other) for party, other in zip(written.parties, official.parties, strict=False) if party
    )
