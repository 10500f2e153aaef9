"""The citations written in an answer, found by eyecite (Free Law Project).

:func:`extract_citations` returns one :class:`FoundCitation` per citation span eyecite finds, in the order
of the text: full case citations with their normalized volume/reporter/page (``570 U. S. 297`` and
``570 U.S. 297`` give the same :class:`CitationKey`) and the case name as written; short forms, ``id.``,
``supra`` and references by name linked to the full citation eyecite resolves them to; statutes and
anything else as what they are, so that the caller can list them as unchecked.

eyecite is imported on first use, not at start-up, and used through its public API as published:
``get_citations`` with its default tokenizer.
"""

from __future__ import annotations

import functools
import logging
import re
from dataclasses import dataclass, replace
from typing import Any, NamedTuple

from chats.models import CaseCitationKind

logger = logging.getLogger(__name__)

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
# A number followed by a reporter's name is the volume of a parallel citation (`297, 133 S. Ct. 2411`), not a pin.
_PIN = re.compile(
    r",\s*(?:at\s+)?(?P<pin>\*?\d+(?:\s*[-\u2010\u2013\u2014]\s*\d+)?)(?![\d\u2010\u2013\u2014-])(?!\s+[A-Z])"
    r"(?:\s*(?:&|and)?\s*nn?\.\s*\d+)?"
)
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
    blanked = _blank_emphasis(text)
    return _found_citations(text, blanked, [(citation, 0) for citation in _eyecite_citations(blanked)])


def _blank_emphasis(text: str) -> str:
    return _EMPHASIS.sub(lambda m: " " * len(m.group()), text)


def _eyecite_citations(text: str) -> list[Any]:
    """eyecite's citations of ``text`` (emphasis blanked), in text order (eyecite may return overlapping ones
    out of it; resolution assumes it)."""
    return sorted(_eyecite().get_citations(text), key=lambda c: c.span())


def _resolved_antecedents(eyecite: Any, citations: list[Any]) -> dict[int, int]:
    """For each short form, ``supra`` or reference among ``citations`` that eyecite's ``resolve_citations``
    resolves, the index of the full citation it resolves to."""
    from eyecite.models import FullCaseCitation

    position = {id(citation): index for index, citation in enumerate(citations)}
    antecedents: dict[int, int] = {}
    for resource, resolved in eyecite.resolve_citations(citations).items():
        full = position.get(id(getattr(resource, "citation", None)))
        if full is None:
            continue
        for citation in resolved:
            if citation is not resource.citation and not isinstance(citation, FullCaseCitation):
                antecedents[position[id(citation)]] = full
    return antecedents


def _found_citations(original: str, text: str, placed: list[tuple[Any, int]]) -> list[FoundCitation]:
    """The :class:`FoundCitation` of each eyecite citation of ``placed``, in text order; each comes with the
    offset in ``original`` of the text eyecite read it from (0 for the whole text, a paragraph's start for a
    paragraph). ``text`` is ``original`` with emphasis blanked. Short forms, ``id.``, ``supra`` and references
    are resolved here, once, over all of them (eyecite's ``resolve_citations``)."""
    eyecite = _eyecite()
    from eyecite.models import (
        FullCaseCitation,
        FullLawCitation,
        IdCitation,
        ReferenceCitation,
        ShortCaseCitation,
        SupraCitation,
    )

    placed = sorted(placed, key=lambda item: (item[0].span()[0] + item[1], item[0].span()[1] + item[1]))
    antecedents = _resolved_antecedents(eyecite, [citation for citation, _ in placed])
    found: list[FoundCitation] = []
    floor = 0
    for index, (citation, offset) in enumerate(placed):
        start, end = (at + offset for at in citation.span())
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
                    pin=_short_form_pin(citation, text, end) if short else "",
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


# A short form's page and the rest of its range, read from the text (eyecite's span may stop before the page,
# `570 U.S., at `, and it misses an en-dash range, `311\u2013312`).
_SHORT_FORM_PAGES = re.compile(r"(?P<page>\d+)?\s*(?:[-\u2010\u2013\u2014]\s*(?P<last>\d+)\b)?")


def _short_form_pin(citation: Any, text: str, end: int) -> str:
    """A short form's pin cite: its "page" (`412 F.3d at 880`) with the range written after it (`880\u201381`)."""
    page = str(citation.groups.get("page") or "")
    if written := citation.metadata.pin_cite:
        return re.sub(r"\s*[\u2010\u2013\u2014]\s*", "-", re.sub(r"^at\s+", "", str(written)).strip())
    found = _SHORT_FORM_PAGES.match(text, end)
    if not page or found is None or found.group("page") not in (None, page) or not found.group("last"):
        return page
    return f"{page}-{found.group('last')}"


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


# Where a streamed answer is cut into paragraphs (each read by eyecite on its own, see StreamedCitations): at
# a blank line after a sentence's end (a name that ends a paragraph with a comma, or a page number, may belong
# to a citation after the blank line); and, in a paragraph grown past PARAGRAPH_CHARS, after the last sentence
# that ends with a plain lowercase word or a citation's year parenthetical and is followed by a capitalized word.
# A citation never holds such a boundary (its reporter abbreviations are capitalized or short: `F. Supp.`, `v.`).
_BLANK_LINE = re.compile(r"[.?!][\"'\u201d)\]]*[ \t]*\n[ \t]*\n\s*")
_SENTENCE_END = re.compile(r"(?:\b(?P<word>[a-z]{3,})|\b\d{4}\))[.?!][\"'\u201d)]*[ \t\n]+(?=[A-Z][a-z]+\b)")
# Lowercase abbreviations that a capitalized word may follow inside a citation (`U.S. Const. art. III`).
_LOWERCASE_ABBREVIATIONS = frozenset(
    {"art", "sec", "para", "supp", "cert", "reh", "app", "rev", "cir", "ann", "stat", "amend", "subch", "subd"}
    | {"div", "ord", "reg", "seq", "comp", "pet", "cls", "pts", "tit", "vol", "nos", "dist", "bankr", "cong", "rel"}
)
PARAGRAPH_CHARS = 200
_SENTENCE_SEARCH_STEP = 40  # how often (in characters) a long paragraph is searched for a sentence end


@dataclass(frozen=True, slots=True)
class _Paragraph:
    start: int  # in the answer
    text: str  # emphasis blanked
    citations: list[tuple[Any, int]]  # eyecite's, each with the offset of the text it was read from


class StreamedCitations:
    """The citations of an answer read while it streams: :meth:`feed` it the answer's text as it arrives; each
    paragraph is read by eyecite as soon as it is complete (a blank line, or a sentence end once it is longer
    than ``paragraph_chars``), in the caller's thread; :meth:`citations` then reads only the unfinished rest and
    resolves short forms, ``id.``, ``supra`` and references once over all paragraphs' citations.

    The result is :func:`extract_citations` of the whole text, as long as no citation's case name or parenthetical
    crosses a paragraph break. A reference by name and pin (`Grutter at 330`) to a case cited in an earlier
    paragraph, which eyecite finds by searching the text after each full citation for its parties' names, is
    searched for in each new paragraph with eyecite's own search (``extract_pincited_reference_citations``).

    The check never fails a turn: if reading a paragraph raises, the error is logged, and :meth:`citations`
    reads the whole text with :func:`extract_citations` instead.
    """

    def __init__(self, *, paragraph_chars: int = PARAGRAPH_CHARS, max_chars: int | None = None) -> None:
        """``max_chars``: no paragraph starting past it is read as it streams (the check reads no further)."""
        self.paragraph_chars = paragraph_chars
        self.max_chars = max_chars
        self._fed: list[str] = []
        self._pending: list[str] = []  # the text after the last complete paragraph
        self._pending_chars = 0
        self._pending_checked = 0  # how much of the pending text was searched for a sentence end
        self._read = 0  # where the pending text starts in the answer
        self._paragraphs: list[_Paragraph] = []
        self.broken = False

    def feed(self, text: str) -> None:
        """Take the next piece of the answer; read the paragraphs it completes. Never raises (see the class)."""
        if not text:
            return
        self._fed.append(text)
        if self.broken or (self.max_chars is not None and self._read >= self.max_chars):
            return
        try:
            self._take(text)
        except Exception:
            logger.exception("reading the answer's case citations as it streams failed; the whole text is read")
            self.broken = True

    def _take(self, text: str) -> None:
        self._pending.append(text)
        self._pending_chars += len(text)
        blank_line = "\n" in text
        long = (
            self._pending_chars >= self.paragraph_chars
            and self._pending_chars - self._pending_checked >= _SENTENCE_SEARCH_STEP
        )
        if not (blank_line or long):
            return
        pending = "".join(self._pending)
        self._pending = [pending]
        cut = self._cut(pending, by_sentence=long)
        if cut is None:
            return
        self._read_paragraph(pending[:cut])
        self._read += cut
        self._pending = [pending[cut:]]
        self._pending_chars = len(pending) - cut
        self._pending_checked = 0

    def _cut(self, pending: str, *, by_sentence: bool) -> int | None:
        """Where the complete paragraphs of ``pending`` end: after its last blank line, else (``by_sentence``)
        after its last sentence end; ``None`` if it holds neither."""
        last = None
        for match in _BLANK_LINE.finditer(pending):
            if match.end() < len(pending):  # the whitespace after a blank line may go on
                last = match.end()
        if last is not None or not by_sentence:
            return last
        self._pending_checked = len(pending)
        for match in _SENTENCE_END.finditer(pending):
            if match.group("word") not in _LOWERCASE_ABBREVIATIONS:
                last = match.end()
        return last

    def _read_paragraph(self, paragraph: str) -> None:
        start = self._read
        blanked = _blank_emphasis(paragraph)
        own = [(citation, start) for citation in _eyecite_citations(blanked)] if paragraph.strip() else []
        references = self._earlier_references(start, blanked, own)
        self._paragraphs.append(_Paragraph(start=start, text=blanked, citations=own + references))

    def _earlier_references(self, start: int, blanked: str, own: list[tuple[Any, int]]) -> list[tuple[Any, int]]:
        """The references by name and pin in the paragraph at ``start`` to the full citations of earlier
        paragraphs, as eyecite finds them after each full citation (and drops where they overlap another
        citation: ``filter_citations``)."""
        from eyecite.find import extract_pincited_reference_citations
        from eyecite.models import FullCaseCitation

        if not self._paragraphs or not blanked.strip():
            return []
        # eyecite searches the text after the full citation's end: the citation's paragraph up to there, then
        # the new paragraph after the whitespace that precedes it.
        separator = self._paragraphs[-1].text[-1:]
        by_span: dict[tuple[int, int], tuple[Any, int]] = {}
        for paragraph in self._paragraphs:
            for citation, offset in paragraph.citations:
                if not isinstance(citation, FullCaseCitation) or offset != paragraph.start:
                    continue
                end = citation.span()[1]
                searched = paragraph.text[:end] + separator + blanked
                shift = start - len(separator) - end
                for reference in extract_pincited_reference_citations(citation, searched):
                    span = tuple(at + shift for at in reference.span())
                    by_span[span] = (reference, shift)  # eyecite keeps the last one of a span
        taken = [tuple(at + offset for at in citation.full_span()) for citation, offset in own]
        return [
            (reference, shift)
            for (a, b), (reference, shift) in sorted(by_span.items())
            if not any(a < y and x < b for x, y in taken)
        ]

    def citations(self, text: str) -> list[FoundCitation]:
        """The citations of ``text``, which must be the text fed, or the start of it (the check may read only
        so far): as :func:`extract_citations` gives them, see the class."""
        fed = "".join(self._fed)
        if self.broken or not fed.startswith(text):
            if not self.broken:
                logger.warning("the case-citation stream was fed another text; the whole text is read")
            return extract_citations(text)
        if not text.strip():
            return []
        kept = [paragraph for paragraph in self._paragraphs if paragraph.start + len(paragraph.text) <= len(text)]
        read = kept[-1].start + len(kept[-1].text) if kept else 0
        paragraphs, self._paragraphs = self._paragraphs, kept
        try:
            saved_read, self._read = self._read, read
            if read < len(text):
                self._read_paragraph(text[read:])
            placed = [item for paragraph in self._paragraphs for item in paragraph.citations]
        finally:
            self._paragraphs, self._read = paragraphs, saved_read
        return _found_citations(text, _blank_emphasis(text), placed)
