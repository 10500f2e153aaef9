"""Everything a draft cites and quotes, found and tied together: the findings and the table of authorities.

:func:`find_in_draft` lists, in text order, each case citation (eyecite, through
:func:`chats.case_citations.extraction.extract_citations`: full, short form, ``id.``, ``supra``, with its pin
cite and parentheticals), each statute and regulation citation (the authority library's
:func:`authorities.selectors.find_statutes`) and each quotation (:mod:`drafts.quotations`). Every citation
names its authority, an entry of the table of authorities (a short form, ``id.`` and ``supra`` their full
citation's); each quotation names the citation that supports it (see :func:`_supporting`) and so its authority,
or none: a quotation without a citation. Checked by :mod:`drafts.checking`. Pure reading: no writes.
"""

from __future__ import annotations

import bisect
import re
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from typing import Literal

from authorities.selectors import FoundStatute, find_statutes
from chats.case_citations.extraction import FoundCitation, Kind, extract_citations
from drafts.quotations import Quotation, find_quotations
from drafts.text import Block, DraftText

# The steps of find_in_draft, in order, as its on_step names them.
STEPS = ("case citations", "statute and regulation citations", "quotations")
FindingKind = Literal["case_citation", "statute_citation", "quote"]
AuthorityKind = Literal["case", "statute", "regulation", "other"]

# The pin cite written after a citation (`, 311`, `, at 311-12`, `, 311 n.4`), then its parentheticals.
_PIN = re.compile(r",\s*(?:at\s+)?\*?\d+(?:\s*[-\u2010\u2013\u2014]\s*\d+)?(?:\s*(?:&|and)?\s*nn?\.\s*\d+)?")
_SUPRA_PIN = re.compile(r"supra,?\s*(?:note\s+\d+,\s*)?at\s+(?P<pin>\*?\d+(?:\s*[-\u2010\u2013\u2014]\s*\d+)?)")
_PARENTHETICAL_GAP = re.compile(r"\s*\(")
_MAX_PARENTHETICAL = 1200
# A sentence ends at . ? or ! after a lowercase word of three letters or more, a number or a parenthesis,
# before a capital (a reporter's `U.S.` or `v.` does not end one), and after `Id.`; a blank line ends one too.
_SENTENCE_END = re.compile(
    r"(?:(?<=[a-z]{3})|(?<=\d)|(?<=\))|(?<=\b[Ii]d))[.?!][\"'\u201d\u2019)\]]*\s+(?=[\"\u201c(\[]?[A-Z])|\n\s*\n"
)


@dataclass(frozen=True, slots=True)
class Finding:
    """One thing the draft cites or quotes: ``text`` is ``draft.text[start:end]`` exactly (a quotation without
    its marks; a citation with the case name, pin cite and parentheticals written with it). ``page`` is the
    draft's page (``None`` without pages). ``authority`` indexes :attr:`DraftFindings.authorities` (``None``: a
    short form with no full citation before it, or a quotation no citation supports). ``form`` says which form
    (``full``, ``short``, ``id``, ``supra``, ``reference``; a statute's finder form; ``inline`` or ``block``).
    A quotation's ``cited_by`` is the index of the citation finding that supports it."""

    kind: FindingKind
    text: str
    start: int
    end: int
    page: str | None
    authority: int | None
    form: str
    pin: str = ""
    parentheticals: tuple[str, ...] = ()
    cited_by: int | None = None
    footnote: str = ""


@dataclass(slots=True)
class Authority:
    """An entry of the table of authorities: a case (``cite`` its volume, reporter and first page) or a
    statute or regulation section, with the name first written and every page of the draft citing it."""

    kind: AuthorityKind
    cite: str
    name: str = ""
    pages: list[str] = field(default_factory=list)


@dataclass(frozen=True, slots=True)
class DraftFindings:
    """The findings in text order and the table of authorities; and what the readers found, for the checks
    (:mod:`drafts.checking`) to take without reading the text again: the draft's text, eyecite's case citations,
    in its order, and the authority library's statute citations."""

    findings: list[Finding]
    authorities: list[Authority]
    text: str
    case_citations: list[FoundCitation] = field(default_factory=list)
    statutes: list[FoundStatute] = field(default_factory=list)


class _Table:
    """The table of authorities as it is built: one entry per key, in order of first citation."""

    def __init__(self) -> None:
        self.entries: list[Authority] = []
        self._index: dict[tuple[str, ...], int] = {}

    def entry(self, key: tuple[str, ...], *, kind: AuthorityKind, cite: str, name: str = "") -> int:
        if key not in self._index:
            self._index[key] = len(self.entries)
            self.entries.append(Authority(kind=kind, cite=cite, name=name))
        return self._index[key]

    def cited_on(self, index: int | None, page: str | None) -> None:
        if index is not None and page is not None and page not in self.entries[index].pages:
            self.entries[index].pages.append(page)


def _page_order(label: str) -> tuple[int, str]:
    return (int(label), "") if label.isdigit() else (10**9, label)


def _tail(text: str, end: int) -> tuple[int, str, tuple[str, ...]]:
    """Where a citation ending at ``end`` ends with its pin cite and parentheticals, the pin cite as written
    (``311-12``, empty without one) and the parentheticals."""
    at = end
    pin_cite = ""
    if (pin := _PIN.match(text, at)) is not None:
        at = pin.end()
        pin_cite = pin.group().lstrip(", ").removeprefix("at").strip()
    parentheticals: list[str] = []
    while (gap := _PARENTHETICAL_GAP.match(text, at)) is not None:
        depth, cursor = 1, gap.end()
        limit = min(len(text), cursor + _MAX_PARENTHETICAL)
        while cursor < limit and depth:
            depth += {"(": 1, ")": -1}.get(text[cursor], 0)
            cursor += 1
        if depth:
            break
        parentheticals.append(text[gap.end() : cursor - 1])
        at = cursor
    return at, pin_cite, tuple(parentheticals)


def _name_start(text: str, citation: FoundCitation) -> int:
    """Where the case name written before a citation starts (the citation's own start without one)."""
    name = citation.case_name
    if not name:
        return citation.start
    found = text.rfind(name, max(0, citation.start - len(name) - 12), citation.start)
    if found < 0 or text[found + len(name) : citation.start].strip(" ,*_\n") != "":
        return citation.start
    return found


_CASE_FORMS = {Kind.FULL: "full", Kind.SHORT: "short", Kind.ID: "id", Kind.SUPRA: "supra", Kind.REFERENCE: "reference"}


def _case_findings(
    draft: DraftText, table: _Table, statutes: list[FoundStatute], found: list[FoundCitation]
) -> list[Finding]:
    text = draft.text
    authority_of: dict[int, int | None] = {}
    findings: list[Finding] = []
    statute_spans = [(s.start, s.end) for s in statutes]
    for index, citation in enumerate(found):
        docket = citation.kind is Kind.OTHER and bool(citation.unresolvable)
        if citation.kind not in _CASE_FORMS and not docket:
            continue
        if any(a < citation.end and citation.start < b for a, b in statute_spans):
            continue  # `Id. § 3` after a statute: the statute's
        if citation.kind is Kind.FULL or docket:
            key = ("case", str(citation.key) if citation.key else " ".join(citation.citation.split()))
            authority: int | None = table.entry(key, kind="case", cite=key[1], name=citation.case_name)
        else:
            authority = authority_of.get(citation.antecedent) if citation.antecedent is not None else None
        authority_of[index] = authority
        start = _name_start(text, citation) if citation.kind is not Kind.ID else citation.start
        end, pin, parentheticals = _tail(text, citation.end)
        form = "full" if docket else _CASE_FORMS[citation.kind]
        if citation.kind is Kind.SUPRA and (supra_pin := _SUPRA_PIN.search(text, citation.start, end)):
            pin = supra_pin.group("pin")  # eyecite's result keeps no pin of a supra (`Patel, supra, at 416`)
        pin = citation.pin or pin
        findings.append(_finding(draft, "case_citation", start, end, authority, form, pin, parentheticals))
    return findings


def _statute_cite(statute: FoundStatute) -> tuple[tuple[str, ...], AuthorityKind, str]:
    if not statute.code:
        written = " ".join(statute.written.split())
        return ("other_law", written), "other", written
    if statute.code == "cfr":
        part = statute.form == "part"
        cite = f"{statute.title} C.F.R. {'pt.' if part else '§'} {statute.section}"
        return ("cfr", str(statute.title), statute.section), "regulation", cite
    return ("usc", str(statute.title), statute.section), "statute", f"{statute.title} U.S.C. § {statute.section}"


def _statute_findings(draft: DraftText, table: _Table, statutes: list[FoundStatute]) -> list[Finding]:
    findings = []
    for statute in statutes:
        key, kind, cite = _statute_cite(statute)
        authority = table.entry(key, kind=kind, cite=cite)
        end, _, parentheticals = _tail(draft.text, statute.end)
        findings.append(
            _finding(
                draft, "statute_citation", statute.start, end, authority, statute.form, statute.pin, parentheticals
            )
        )
    return findings


def _finding(
    draft: DraftText,
    kind: FindingKind,
    start: int,
    end: int,
    authority: int | None,
    form: str,
    pin: str = "",
    parentheticals: tuple[str, ...] = (),
    cited_by: int | None = None,
) -> Finding:
    block = draft.block_at(start)
    return Finding(
        kind=kind,
        text=draft.text[start:end],
        start=start,
        end=end,
        page=draft.page_at(start),
        authority=authority,
        form=form,
        pin=pin,
        parentheticals=parentheticals,
        cited_by=cited_by,
        footnote=block.footnote if block is not None else "",
    )


class _Sentences:
    """Where the draft's sentences end (see ``_SENTENCE_END``)."""

    def __init__(self, text: str) -> None:
        self.ends = [match.end() for match in _SENTENCE_END.finditer(text)]

    def end_after(self, offset: int) -> int:
        index = bisect.bisect_right(self.ends, offset)
        return self.ends[index] if index < len(self.ends) else 1 << 62


def _supporting(
    draft: DraftText, quote: Quotation, citations: list[Finding], quotes: list[Quotation], sentences: _Sentences
) -> int | None:
    """The index in ``citations`` of the citation supporting ``quote``: the citation whose parenthetical holds
    it; else the first citation after it in the same sentence or the next (the citation sentence; for a block
    quote, the first sentence of the paragraph after it), with no other quotation between; else one in the
    footnote whose mark follows it in its sentence; else the nearest citation before it in its sentence."""
    starts = [c.start for c in citations]
    for index, citation in enumerate(citations):
        if citation.start < quote.start and quote.end <= citation.end and citation.parentheticals:
            return index
    block = draft.block_at(quote.start)
    if quote.block:
        following = [b for b in draft.blocks if b.start >= quote.end and b.kind != "footnote"][:1]
        window_start = following[0].start if following else len(draft.text)
        while window_start < len(draft.text) and draft.text[window_start].isspace():
            window_start += 1  # the sentence starts at its first word: the end found is the sentence's own
        window_end = min(sentences.end_after(window_start), following[0].end) if following else window_start
    else:
        window_start = quote.end
        window_end = sentences.end_after(sentences.end_after(quote.end))
        window_end = min(window_end, block.end if block is not None else len(draft.text))
    next_quote = min((q.start for q in quotes if q.start >= quote.end), default=1 << 62)
    index = bisect.bisect_left(starts, window_start)
    if index < len(citations) and citations[index].start < min(window_end, next_quote):
        return index
    if (in_note := _in_footnote(draft, quote, citations, sentences)) is not None:
        return in_note
    own_sentence_start = max((e for e in sentences.ends if e <= quote.start), default=block.start if block else 0)
    before = [
        i
        for i, c in enumerate(citations)
        if max(own_sentence_start, block.start if block else 0) <= c.start and c.end <= quote.start
    ]
    return before[-1] if before else None


def _in_footnote(draft: DraftText, quote: Quotation, citations: list[Finding], sentences: _Sentences) -> int | None:
    sentence_end = sentences.end_after(quote.end)
    notes: list[Block] = [b for b in draft.blocks if b.anchor is not None and quote.end <= b.anchor <= sentence_end]
    for note in notes:
        for index, citation in enumerate(citations):
            if note.start <= citation.start < note.end:
                return index
    return None


def find_in_draft(draft: DraftText, *, on_step: Callable[[str], None] | None = None) -> DraftFindings:
    """The findings of ``draft`` in text order and its table of authorities (see the module). ``on_step`` is
    called with the name of each of the three steps (:data:`STEPS`) as it ends: a caller's progress."""
    done = on_step or (lambda step: None)
    table = _Table()
    statutes = sorted(find_statutes(draft.text), key=lambda s: (s.start, s.end))
    case_citations = extract_citations(draft.text)
    citations = _case_findings(draft, table, statutes, case_citations)
    done(STEPS[0])
    citations += _statute_findings(draft, table, statutes)
    done(STEPS[1])
    citations.sort(key=lambda f: (f.start, f.end))
    citations = _ids_to_the_one_before(citations)
    quotes = find_quotations(draft)
    sentences = _Sentences(draft.text)
    findings = list(citations)
    for quote in quotes:
        supporting = _supporting(draft, quote, citations, quotes, sentences)
        authority = citations[supporting].authority if supporting is not None else None
        findings.append(
            _finding(
                draft,
                "quote",
                quote.start,
                quote.end,
                authority,
                "block" if quote.block else "inline",
                cited_by=supporting,
            )
        )
    findings.sort(key=lambda f: (f.start, f.end))
    # cited_by indexed the citations; renumber it into the final list
    position = {id(c): i for i, c in enumerate(findings)}
    findings = [f if f.cited_by is None else replace(f, cited_by=position[id(citations[f.cited_by])]) for f in findings]
    for finding in findings:
        if finding.kind != "quote":
            table.cited_on(finding.authority, finding.page)
    for entry in table.entries:
        entry.pages.sort(key=_page_order)
    done(STEPS[2])
    return DraftFindings(
        findings=findings,
        authorities=table.entries,
        text=draft.text,
        case_citations=case_citations,
        statutes=statutes,
    )


def _ids_to_the_one_before(citations: list[Finding]) -> list[Finding]:
    """A case ``id.`` refers to the citation right before it, whatever it cites (a statute eyecite does not read,
    such as ``50 U.S.C. 1701``, or a docket number, comes between eyecite's own citations); none before: none."""
    tied: list[Finding] = []
    for citation in citations:
        if citation.kind == "case_citation" and citation.form == "id":
            citation = replace(citation, authority=tied[-1].authority if tied else None)
        tied.append(citation)
    return tied
