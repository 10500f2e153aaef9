"""Case names: normalized for comparison, and matched party by party.

A name as written in an answer and an opinion's official name rarely agree letter for letter: Bluebook
abbreviations (``Univ.``, ``Dep't``, ``Tex.``), ``v.``/``vs.``, ``et al.``, corporate suffixes, leading
``In re``. :func:`parse_case_name` reduces a name to its parties, each a set of lowercase words with the
abbreviations expanded and the noise removed; :func:`names_match` then compares parties.

Matching rules (the contract):

- a party matches when one of its *distinctive* words (not a generic word such as ``state``, ``board``,
  ``university`` or ``united states``) appears in the other party; a party with no distinctive word is
  compared on all its words;
- a full citation's name matches when every written party matches its counterpart (plaintiff with
  plaintiff, defendant with defendant); when either name has a single party (``In re Gault``, or a name
  of which only one side was found), that party must match one of the other name's parties;
- a short form's name (``Fisher``) matches when it matches either party.

Pure Python: no Django, no eyecite.
"""

from __future__ import annotations

import re
import unicodedata
from collections.abc import Iterable
from dataclasses import dataclass

# Bluebook T6 (words in case names), in the forms models write them; keys are lowercase, apostrophes
# straight. A few multi-word expansions ("R.R." -> "railroad") count as one word each.
T6_ABBREVIATIONS: dict[str, str] = {
    "acad.": "academy",
    "adm'r": "administrator",
    "adm'x": "administratrix",
    "admin.": "administration",
    "advert.": "advertising",
    "agric.": "agriculture",
    "all.": "alliance",
    "am.": "american",
    "ass'n": "association",
    "assocs.": "associates",
    "atl.": "atlantic",
    "auth.": "authority",
    "auto.": "automobile",
    "ave.": "avenue",
    "bankr.": "bankruptcy",
    "bd.": "board",
    "bhd.": "brotherhood",
    "bros.": "brothers",
    "bldg.": "building",
    "bus.": "business",
    "cas.": "casualty",
    "cent.": "central",
    "chem.": "chemical",
    "cmty.": "community",
    "co.": "company",
    "comm'n": "commission",
    "comm'r": "commissioner",
    "comm.": "committee",
    "commc'n": "communication",
    "commc'ns": "communications",
    "consol.": "consolidated",
    "constr.": "construction",
    "coop.": "cooperative",
    "corp.": "corporation",
    "corr.": "correction",
    "cnty.": "county",
    "coll.": "college",
    "ctr.": "center",
    "def.": "defense",
    "dep't": "department",
    "dept.": "department",
    "dev.": "development",
    "dir.": "director",
    "disc.": "discount",
    "dist.": "district",
    "distrib.": "distribution",
    "div.": "division",
    "e.": "east",
    "econ.": "economic",
    "educ.": "education",
    "elec.": "electric",
    "emp.": "employment",
    "enter.": "enterprise",
    "ent.": "entertainment",
    "envtl.": "environmental",
    "equip.": "equipment",
    "exch.": "exchange",
    "exec.": "executive",
    "fed.": "federal",
    "fin.": "finance",
    "gen.": "general",
    "gov't": "government",
    "grp.": "group",
    "guar.": "guaranty",
    "hosp.": "hospital",
    "hous.": "housing",
    "indem.": "indemnity",
    "indep.": "independent",
    "indus.": "industries",
    "info.": "information",
    "inc.": "incorporated",
    "ins.": "insurance",
    "inst.": "institute",
    "int'l": "international",
    "inv.": "investment",
    "lab.": "laboratory",
    "liab.": "liability",
    "ltd.": "limited",
    "mach.": "machinery",
    "maint.": "maintenance",
    "mfg.": "manufacturing",
    "mfr.": "manufacturer",
    "mgmt.": "management",
    "mkt.": "market",
    "mktg.": "marketing",
    "mortg.": "mortgage",
    "mun.": "municipal",
    "mut.": "mutual",
    "n.": "north",
    "nat'l": "national",
    "ne.": "northeast",
    "nw.": "northwest",
    "org.": "organization",
    "pac.": "pacific",
    "p'ship": "partnership",
    "pharm.": "pharmaceutical",
    "prod.": "products",
    "prof'l": "professional",
    "prop.": "property",
    "prot.": "protection",
    "pub.": "public",
    "publ'g": "publishing",
    "r.r.": "railroad",
    "ry.": "railway",
    "rd.": "road",
    "rehab.": "rehabilitation",
    "reg'l": "regional",
    "res.": "resources",
    "rest.": "restaurant",
    "sav.": "savings",
    "sch.": "school",
    "sci.": "science",
    "sec.": "securities",
    "serv.": "service",
    "servs.": "services",
    "s.": "south",
    "se.": "southeast",
    "sw.": "southwest",
    "soc'y": "society",
    "sys.": "system",
    "tech.": "technology",
    "tel.": "telephone",
    "transp.": "transportation",
    "twp.": "township",
    "unemp.": "unemployment",
    "univ.": "university",
    "util.": "utility",
    "vill.": "village",
    "w.": "west",
    # Bluebook T10 (geographic terms) as they appear in case names.
    "u.s.": "united states",
    "ala.": "alabama",
    "ariz.": "arizona",
    "ark.": "arkansas",
    "cal.": "california",
    "colo.": "colorado",
    "conn.": "connecticut",
    "del.": "delaware",
    "d.c.": "district columbia",
    "fla.": "florida",
    "ga.": "georgia",
    "ill.": "illinois",
    "ind.": "indiana",
    "kan.": "kansas",
    "ky.": "kentucky",
    "la.": "louisiana",
    "md.": "maryland",
    "mass.": "massachusetts",
    "mich.": "michigan",
    "minn.": "minnesota",
    "miss.": "mississippi",
    "mo.": "missouri",
    "mont.": "montana",
    "neb.": "nebraska",
    "nev.": "nevada",
    "n.h.": "new hampshire",
    "n.j.": "new jersey",
    "n.m.": "new mexico",
    "n.y.": "new york",
    "n.c.": "north carolina",
    "n.d.": "north dakota",
    "okla.": "oklahoma",
    "or.": "oregon",
    "pa.": "pennsylvania",
    "r.i.": "rhode island",
    "s.c.": "south carolina",
    "s.d.": "south dakota",
    "tenn.": "tennessee",
    "tex.": "texas",
    "vt.": "vermont",
    "va.": "virginia",
    "wash.": "washington",
    "wis.": "wisconsin",
    "wyo.": "wyoming",
}

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


def names_match(written: str, official: Iterable[str], *, short_form: bool = False) -> bool:
    """Whether the name written in an answer is consistent with one of the ``official`` names of a case.

    See the module docstring for the rules. An empty written name matches nothing: the caller decides
    what an unnamed citation means.
    """
    parsed = parse_case_name(written)
    if parsed.is_empty:
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
