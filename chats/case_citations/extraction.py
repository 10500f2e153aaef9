"""The citations written in an answer, found by eyecite (Free Law Project).

:func:`extract_citations` returns one :class:`FoundCitation` per citation span eyecite finds, in the order
of the text: full case citations with their normalized volume/reporter/page (``570 U. S. 297`` and
``570 U.S. 297`` give the same :class:`CitationKey`) and the case name as written; short forms, ``id.``,
``supra`` and references by name linked to the full citation eyecite resolves them to; statutes and
anything else as what they are, so that the caller can list them as unchecked.

eyecite is imported on first use, not at start-up, and used through its public API as published: the only
thing passed to it is a tokenizer (:func:`tokenizer`), which selects the same extractors as its default one.
"""

from __future__ import annotations

import functools
import logging
import re
from dataclasses import dataclass, replace
from typing import Any, NamedTuple

from chats.models import CaseCitationKind

Kind = CaseCitationKind  # the forms a citation takes: the kinds its rows store


class CitationKey(NamedTuple):
    """A case citation's volume, canonical reporter (reporters-db) and first page."""

    volume: str
    reporter: str
    page: str

    def __str__(self) -> str:
        return f"{self.volume} {self.reporter} {self.page}"


@dataclass(frozen=True, slots=True)
class FoundCitation:
    """One citation span of the text.

    ``start``/``end`` index the text given to :func:`extract_citations` (the citation itself, e.g.
    ``570 U.S. 297`` or ``Id., at 312``, not the case name before it). ``key`` is set for a full case
    citation with a page number. ``case_name`` is the name as written: ``plaintiff v. defendant`` of a full
    citation, the short name of a short form or ``supra`` (empty when none is written). ``antecedent`` is
    the index, in the returned list, of the full citation a short form, ``id.``, ``supra`` or reference
    resolves to (``None`` if it resolves to none).
    """

    start: int
    end: int
    kind: Kind
    text: str
    citation: str
    key: CitationKey | None = None
    case_name: str = ""
    antecedent: int | None = None
    # The pin cite as written (`311`, `311-12`), and what the parenthetical after the citation says: the year
    # and the court (the court's courts-db id, as eyecite's own lookup gives it), empty when not written.
    pin: str = ""
    year: str = ""
    court: str = ""
    # A short form's own volume and reporter (`412 F.3d` of `Jones, 412 F.3d at 880`), to agree with its antecedent.
    written_volume: str = ""
    written_reporter: str = ""
    # Why a citation cannot be looked up at all (a docket number): the check lists it as unchecked with this.
    unresolvable: str = ""


@functools.cache
def _eyecite() -> Any:
    import eyecite

    # eyecite warns of each overlap of its own full spans (any pin cite makes one), quoting the answer's
    # citations: noise in the logs, and the client's text in them. The spans are not used here.
    logging.getLogger("eyecite.helpers").addFilter(_not_an_overlap_warning)
    return eyecite


def _not_an_overlap_warning(record: logging.LogRecord) -> bool:
    return not str(record.msg).startswith("Unknown overlap case")


@functools.cache
def tokenizer() -> Any:
    """eyecite's default tokenizer (Aho-Corasick prefilter, then the regexes of the extractors it selects),
    selecting the same extractors without hashing them: an extractor's hash is that of its ``repr``, which
    spells out its whole regex, and hashing them took a quarter of the time of a 20 KB answer."""
    from eyecite.tokenizers import AhocorasickTokenizer, _strip_ws

    class Tokenizer(AhocorasickTokenizer):
        def get_extractors(self, text: str) -> Any:
            stripped = _strip_ws(text)
            selected = {id(extractor): extractor for extractor in self.unfiltered_extractors}
            for _, extractors in self.case_sensitive_filter.iter(stripped):
                selected.update((id(extractor), extractor) for extractor in extractors)
            for _, extractors in self.case_insensitive_filter.iter(stripped.lower()):
                selected.update((id(extractor), extractor) for extractor in extractors)
            return selected.values()

    return Tokenizer()


def _key(citation: Any) -> CitationKey | None:
    groups = citation.groups
    if not groups.get("volume") or not groups.get("page"):
        return None
    return CitationKey(str(groups["volume"]), str(citation.corrected_reporter()), str(groups["page"]))


# A name is read backwards from the comma before a citation, over capitalized words and these connectors,
# and stops at a signal, a lowercase word or the end of a sentence.
_CONNECTORS = frozenset(
    {"of", "the", "and", "&", "for", "de", "del", "la", "ex", "rel.", "on", "at", "to", "von", "van"}
)
_SIGNALS = frozenset({"see", "cf.", "compare", "accord", "contra", "but", "e.g.", "in", "under", "following", "also"})
_SINGLE_PARTY = re.compile(r"(?:\b(?:In re|Ex parte|In the Matter of|Matter of)\s+)([^,;()]+)$")
_VERSUS = re.compile(r"\s(?:v|vs)\.?\s")
_ABBREVIATION = re.compile(r"^(?:[A-Z][a-z]{0,4}\.|(?:[A-Za-z]\.)+|[A-Za-z]+'[a-z]+\.?)$")
_CORPORATE_SUFFIXES = frozenset({"inc", "ltd", "llc", "l.l.c", "co", "corp", "n.a", "p.c", "l.p", "llp", "et al"})
_NAME_WINDOW = 250
_TRAILING_PARENTHETICAL = re.compile(r"\s*\([^()]*\)\s*$")
# Markdown emphasis around case names (*Fisher*, _Id._, **Grutter**): blanked, keeping every offset.
# Markers touch their text on one side only, so a blank page number ("570 U.S. ___") is left alone.
_EMPHASIS = re.compile(r"(?<![\w*_])[*_]+(?=[^\s*_])|(?<=[^\s*_])[*_]+(?![\w*_])")
_PIN_AND_PARENTHETICAL = re.compile(r"(?:,\s*(?:at\s+)?[\d\u2013\u2014\-, n.]*\d)?(?:\s*\([^()]*\))*")
# A full citation's pin cite and first parenthetical, read from the text right after it (eyecite's own misses an
# en-dash range, `311\u201312`, and then reads a later parenthetical).
_PIN = re.compile(r",\s*(?:at\s+)?(?P<pin>\*?\d+(?:\s*[-\u2010\u2013\u2014]\s*\d+)?)(?:\s*(?:&|and)?\s*nn?\.\s*\d+)?")
_PARENTHETICAL = re.compile(r"\s*\((?P<paren>[^()]{1,120})\)")
_YEAR = re.compile(r"\b(1[6-9]\d\d|20\d\d)\)?$")
_DATE_WORDS = re.compile(
    r"\b(?:Jan|Feb|Mar|Apr|May|June?|July?|Aug|Sept?|Oct|Nov|Dec)[a-z]*\.?\s*\d{0,2},?\s*|\b\d{4}\s*$|\s*\d{1,2},\s*$"
)
# A docket-number citation (`Hogarth v. Bell, No. 5:24-CV-481-FL (E.D.N.C. Mar. 28, 2025)`): in no reporter.
_DOCKET = re.compile(
    r"\bNos?\.\s?(?P<docket>[\w:.\-\u2013]*\d[\w:.\-\u2013]*(?:\s*(?:,|&|and)\s*[\w:.\-\u2013]*\d[\w:.\-\u2013]*)*)"
    r",?\s*(?:slip op\.[^()]{0,20})?\((?P<paren>[^()]{0,80}\b\d{4})\)"
)


def _name_word(word: str, *, before_suffix: bool = False) -> bool:
    if before_suffix:  # "Students for Fair Admissions, Inc.": that comma belongs to the name
        word = word.removesuffix(",")
    bare = word.strip("()[]\"'\u201c\u201d")
    if not bare or bare != word.strip(",") or bare.lower().rstrip(",") in _SIGNALS or ";" in bare or ":" in bare:
        return False
    if bare.lower() in _CONNECTORS:
        return True
    if not (bare[0].isupper() or bare[0].isdigit()):
        return False
    return not bare.endswith(".") or bool(_ABBREVIATION.match(bare))


def _trailing_name(text: str) -> str:
    """The capitalized name at the end of ``text`` (``The Court held in Fisher`` -> ``Fisher``)."""
    words = text.split()
    taken: list[str] = []
    for word in reversed(words):
        before_suffix = bool(taken) and taken[-1].lower().rstrip(",.") in _CORPORATE_SUFFIXES
        if not _name_word(word, before_suffix=before_suffix):
            # "(Fisher v. ...": an opening parenthesis, bracket or quotation mark starts the name
            opened = word.lstrip('(["\u201c')
            if opened != word and _name_word(opened, before_suffix=before_suffix):
                taken.append(opened)
            break
        taken.append(word)
    taken.reverse()
    while taken and taken[0].lower() in _CONNECTORS:
        taken.pop(0)
    return " ".join(taken)


def written_name_before(text: str, start: int, *, floor: int = 0, short_form: bool = False) -> str:
    """The case name written just before the citation at ``start`` (``Smith v. Jones, 570 U.S. 297`` ->
    ``Smith v. Jones``; for a short form, ``Fisher, 570 U.S., at 311`` -> ``Fisher``), read no further back
    than ``floor`` (the end of the previous citation); empty when the citation is not preceded by
    ``<name>,``."""
    window = text[max(floor, start - _NAME_WINDOW) : start].rstrip()
    if not window.endswith(","):
        return ""
    window = window[:-1].rstrip()
    if short_form:
        return _trailing_name(window)
    versus = list(_VERSUS.finditer(window))
    if not versus:
        single = _SINGLE_PARTY.search(window)
        return " ".join(single.group(0).split()) if single else _trailing_name(window)
    split = versus[-1]
    plaintiff = _trailing_name(window[: split.start()])
    pieces = window[split.end() :].split(",")
    defendant = pieces[0]
    for piece in pieces[1:]:
        if piece.strip().lower().rstrip(".") not in _CORPORATE_SUFFIXES:
            break
        defendant += "," + piece
    defendant = " ".join(_TRAILING_PARENTHETICAL.sub("", defendant).split())  # "... (Fisher I)"
    if not plaintiff:
        return defendant
    return f"{plaintiff} v. {defendant}" if defendant else plaintiff


def _case_name(metadata: Any) -> str:
    plaintiff = (getattr(metadata, "plaintiff", None) or "").strip()
    defendant = (getattr(metadata, "defendant", None) or "").strip()
    if plaintiff and defendant:
        return " ".join(f"{plaintiff} v. {defendant}".split())
    return " ".join((plaintiff or defendant).split())


def extract_citations(text: str) -> list[FoundCitation]:
    """Every citation eyecite finds in ``text``, in order, with short forms resolved (see the module)."""
    if not text.strip():
        return []
    original, text = text, _EMPHASIS.sub(lambda m: " " * len(m.group()), text)
    eyecite = _eyecite()
    from eyecite.models import (
        FullCaseCitation,
        FullLawCitation,
        IdCitation,
        ReferenceCitation,
        ShortCaseCitation,
        SupraCitation,
    )

    # In text order (eyecite may return overlapping ones out of it; resolution assumes it).
    citations = sorted(eyecite.get_citations(text, tokenizer=tokenizer()), key=lambda c: c.span())
    position = {id(citation): index for index, citation in enumerate(citations)}
    antecedents: dict[int, int] = {}
    for resource, resolved in eyecite.resolve_citations(citations).items():
        full = position.get(id(getattr(resource, "citation", None)))
        if full is None:
            continue
        for citation in resolved:
            if citation is not resource.citation and not isinstance(citation, FullCaseCitation):
                antecedents[position[id(citation)]] = full

    found: list[FoundCitation] = []
    floor = 0
    for index, citation in enumerate(citations):
        start, end = citation.span()
        short_form = not isinstance(citation, FullCaseCitation)
        written = written_name_before(text, start, floor=min(floor, start), short_form=short_form)
        # The next name is read after this citation's pin cite and parenthetical (eyecite's full span is no
        # guide: it can run over the following citations).
        tail = _PIN_AND_PARENTHETICAL.match(text, end)
        floor = max(floor, tail.end() if tail else end)
        common = {"start": start, "end": end, "text": original[start:end], "citation": citation.corrected_citation()}
        if isinstance(citation, FullCaseCitation):
            key = _key(citation)
            pin, year, court = _pin_and_parenthetical(text, end, citation.metadata)
            found.append(
                FoundCitation(
                    kind=Kind.FULL,
                    key=key,
                    case_name=written or _case_name(citation.metadata),
                    pin=pin,
                    year=year,
                    court=court,
                    **common | ({"citation": str(key)} if key else {}),
                )
            )
        elif isinstance(citation, ShortCaseCitation | SupraCitation):
            name = written or " ".join((citation.metadata.antecedent_guess or "").split())
            antecedent = antecedents.get(index, _named_antecedent(found, name))
            short = isinstance(citation, ShortCaseCitation)
            reporter = str(citation.corrected_reporter()) if isinstance(citation, ShortCaseCitation) else ""
            found.append(
                FoundCitation(
                    kind=Kind.SHORT if short else Kind.SUPRA,
                    case_name=name,
                    antecedent=_latest_same_case(found, antecedent),
                    # A short form's "page" is its pin cite (`412 F.3d at 880`).
                    pin=str(citation.groups.get("page") or citation.metadata.pin_cite or "") if short else "",
                    written_volume=str(citation.groups.get("volume") or "") if short else "",
                    written_reporter=reporter,
                    **common,
                )
            )
        elif isinstance(citation, IdCitation):
            # "Id." is the citation just before it (eyecite resolves it to the case's first citation).
            previous = found[-1] if found else None
            refers = previous is not None and (previous.key is not None or previous.antecedent is not None)
            pin = re.sub(r"^at\s+", "", str(citation.metadata.pin_cite or "")).strip()
            found.append(FoundCitation(kind=Kind.ID, antecedent=len(found) - 1 if refers else None, pin=pin, **common))
        elif isinstance(citation, ReferenceCitation):
            name = _case_name(citation.metadata)
            found.append(
                FoundCitation(
                    kind=Kind.REFERENCE,
                    case_name=name,
                    antecedent=antecedents.get(index, _named_antecedent(found, name)),
                    **common,
                )
            )
        elif isinstance(citation, FullLawCitation):
            found.append(FoundCitation(kind=Kind.STATUTE, **common))
        else:
            found.append(FoundCitation(kind=Kind.OTHER, **common))
    return _with_dockets(original, found)


def _pin_and_parenthetical(text: str, end: int, metadata: Any) -> tuple[str, str, str]:
    """The pin cite, the year and the court (courts-db id) written right after a full citation ending at
    ``end``: ``("311-12", "2013", "")`` for `570 U.S. 297, 311\u201312 (2013)`. The court is eyecite's
    reading (``metadata``) where eyecite read this parenthetical, else eyecite's lookup of it."""
    pin = ""
    at = end
    if (m := _PIN.match(text, at)) is not None:
        pin = re.sub(r"\s*[\u2010\u2013\u2014]\s*", "-", m.group("pin"))
        at = m.end()
    paren = _PARENTHETICAL.match(text, at)
    if paren is None:
        return pin, "", ""
    written = paren.group("paren").strip()
    year_match = _YEAR.search(written)
    year = year_match.group(1) if year_match else ""
    court_text = _DATE_WORDS.sub("", written).strip(" ,") if year else ""
    court = ""
    if court_text:
        same = str(getattr(metadata, "year", "") or "") == year
        court = (getattr(metadata, "court", None) or "") if same else _court_by_paren(court_text)
    return pin, year, court


@functools.lru_cache(maxsize=1024)
def _court_by_paren(court_text: str) -> str:
    """eyecite's court lookup (a scan of every court in courts-db), called once per distinct parenthetical."""
    from eyecite.helpers import get_court_by_paren

    return get_court_by_paren(court_text) or ""


def _with_dockets(text: str, found: list[FoundCitation]) -> list[FoundCitation]:
    """``found`` with the docket-number citations of ``text`` that eyecite does not read, in text order: each
    is listed, to be reported unchecked, never dropped."""
    spans = [(f.start, f.end) for f in found]
    dockets = [
        FoundCitation(
            start=m.start(),
            end=m.end(),
            kind=Kind.OTHER,
            text=m.group(),
            citation=" ".join(m.group().split()),
            case_name=written_name_before(text, m.start()),
            unresolvable="a docket-number citation: it names no reporter volume and page, so it cannot be looked up",
        )
        for m in _DOCKET.finditer(text)
        if not any(a < m.end() and m.start() < b for a, b in spans)
    ]
    if not dockets:
        return found
    order = sorted(range(len(found) + len(dockets)), key=lambda i: (found + dockets)[i].start)
    new_index = {old: new for new, old in enumerate(order)}
    merged = found + dockets
    result: list[FoundCitation] = []
    for old in order:
        citation = merged[old]
        antecedent = None if citation.antecedent is None else new_index[citation.antecedent]
        if citation.kind is Kind.ID and result and result[-1].unresolvable:
            antecedent = None  # "Id." after a docket number refers to that case, which cannot be looked up
        result.append(replace(citation, antecedent=antecedent))
    return result


def _latest_same_case(earlier: list[FoundCitation], antecedent: int | None) -> int | None:
    """The last full citation before with the same volume/reporter/page as ``antecedent`` (the same case
    cited again, perhaps under another name: a short form follows the nearest one)."""
    if antecedent is None:
        return None
    key = earlier[antecedent].key
    return max((i for i, c in enumerate(earlier) if c.kind is Kind.FULL and c.key == key), default=antecedent)


def _named_antecedent(earlier: list[FoundCitation], name: str) -> int | None:
    """The last full case citation before whose name ``name`` (of a ``supra`` or a reference) is part of:
    eyecite matches those by the names it reads itself, which it misses after words such as ``at``."""
    from chats.case_citations.names import names_match

    if not name:
        return None
    for index in range(len(earlier) - 1, -1, -1):
        candidate = earlier[index]
        if candidate.kind is Kind.FULL and names_match(name, [candidate.case_name], short_form=True):
            return index
    return None
