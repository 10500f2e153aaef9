"""A case citation's pin cite checked against the pages of the passage quoted with it.

The answer's quotes are verified in the turn's transaction, after the citations were checked against the case's
pages (``checker``): :func:`check_pins_against_quoted_passages` then compares each pin with the pages (the
opinion's page map, ``chats.pages``) of the passages of that case quoted with the citation. A pin on the
passage's page is ``within``; off it, a ``pin_mismatch`` naming both pages; one nothing can check (no passage
quoted with it, a passage whose reporter page is not known) stays ``unchecked``, never verified.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass

from chats.case_citations.checker import PIN_OUTSIDE, PIN_UNCHECKED, PIN_WITHIN, pin_pages
from chats.models import UNVERIFIED, CaseCitation, CaseCitationStatus, CaselawOpinion, OpinionQuote, fit
from chats.pages import pages_of_span
from lqai_verify.verification.page_breaks import SLIP, reporter_citation
from lqai_verify.verification.page_cites import pin_cite


@dataclass(frozen=True, slots=True)
class _PassagePages:
    """The pages of one quoted passage: ``certain`` pages, and ``possible`` ones (a page known only to lie in a
    range, ``673-674``); ``cite`` is its pin cite as the trace writes it, or a description."""

    certain: frozenset[int]
    possible: frozenset[int]
    cite: str


def check_pins_against_quoted_passages(
    *, citations: Sequence[CaseCitation], quotes: Sequence[OpinionQuote], answer: str
) -> None:
    """Compare the pin of each of ``citations`` (unsaved rows of one answer, placed in it) with the pages of the
    passages of its case that ``quotes`` (the answer's opinion quotes, placed) quote with it: those between the
    previous citation and it in its paragraph, else those after it up to the next citation. Sets ``status``,
    ``pin_status`` and ``detail`` on the rows it decides: ``within`` when every such passage is on a page the pin
    names; a ``pin_mismatch`` (``outside``) naming both pages when one is off it. A pin already outside the
    case's pages keeps its status; one with no passage quoted with it keeps its ``unchecked``."""
    placed = sorted(citations, key=lambda row: row.answer_offset_start)
    for index, citation in enumerate(placed):
        opinion = citation.opinion
        if not citation.pin or opinion is None or citation.pin_status == PIN_OUTSIDE:
            continue
        previous_end = placed[index - 1].answer_offset_end if index else 0
        next_start = placed[index + 1].answer_offset_start if index + 1 < len(placed) else len(answer)
        quoted = _quoted_with(citation, quotes, answer=answer, window=(previous_end, next_start))
        if quoted:
            _decide(citation, opinion, quoted)


def _quoted_with(
    citation: CaseCitation, quotes: Sequence[OpinionQuote], *, answer: str, window: tuple[int, int]
) -> list[OpinionQuote]:
    """The verified quotes of the citation's case quoted with it (see :func:`check_pins_against_quoted_passages`)."""
    start, end = citation.answer_offset_start, citation.answer_offset_end
    spans = [
        (quote, quote.answer_offset_start, quote.answer_offset_end)
        for quote in quotes
        if quote.opinion_id == citation.opinion_id
        and quote.verification_method != UNVERIFIED
        and quote.source_offset_start is not None
    ]
    placed = [(quote, first, last) for quote, first, last in spans if first is not None and last is not None]
    before = [
        quote
        for quote, first, last in placed
        if window[0] <= first and last <= start and "\n\n" not in answer[last:start]
    ]
    if before:
        return before
    return [
        quote for quote, first, last in placed if end <= first and last <= window[1] and "\n\n" not in answer[end:first]
    ]


def _decide(citation: CaseCitation, opinion: CaselawOpinion, quoted: list[OpinionQuote]) -> None:
    """Set the citation's pin status from the pages of the passages ``quoted`` with it (see the module)."""
    pin = pin_pages(citation.pin)
    if pin is None:
        return
    written, held = reporter_citation(citation.citation), reporter_citation(opinion.citation)
    pinned = frozenset(range(pin[0], pin[1] + 1))
    passages = [_passage_pages(opinion.pages, quote, citation=opinion.citation) for quote in quoted]
    same_reporter = written is not None and held is not None and _squeezed(written[:2]) == _squeezed(held[:2])
    off = [p for p in passages if same_reporter and (p.certain or p.possible) and not (p.certain | p.possible) & pinned]
    if off:
        why = (
            f"pin cite {citation.pin} is off the page of the passage quoted with it: the passage is at "
            f"{off[0].cite}, the pin cite names page {_pages_written(pin)}"
        )
        status = CaseCitationStatus.PIN_MISMATCH if citation.status == CaseCitationStatus.VERIFIED else citation.status
        _set(citation, status=status, pin_status=PIN_OUTSIDE, why=why)
    elif same_reporter and all(p.certain & pinned for p in passages):
        cites = "; ".join(dict.fromkeys(p.cite for p in passages))
        _set(
            citation,
            status=citation.status,
            pin_status=PIN_WITHIN,
            why=f"pin cite {citation.pin} is the page of the passage quoted with it ({cites})",
        )
    else:
        where = "; ".join(dict.fromkeys(p.cite for p in passages))
        _set(
            citation,
            status=citation.status,
            pin_status=PIN_UNCHECKED,
            why=f"pin cite {citation.pin} not checked: the page in {_reporter_written(written)} of the passage quoted "
            f"with it is not known (it is at {where})",
        )


def _passage_pages(pages: list[list[int | str | None]], quote: OpinionQuote, *, citation: str) -> _PassagePages:
    labels = pages_of_span(pages, quote.source_offset_start, quote.source_offset_end) or []
    certain: set[int] = set()
    possible: set[int] = set()
    for label in labels:
        if label.isdigit():
            certain.add(int(label))
        elif (found := re.fullmatch(r"(\d+)-(\d+)", label)) is not None:
            possible.update(range(int(found.group(1)), int(found.group(2)) + 1))
    held = reporter_citation(citation)
    if (
        held is None
        or any(label.startswith(SLIP) for label in labels)
        or min(certain | possible, default=held[2]) < held[2]
    ):
        # No reporter's pages: a slip opinion's own, or a map stored before reporter pages were read.
        certain, possible = set(), set()
    span = "\u2013".join(dict.fromkeys((labels[0], labels[-1]))) if labels else ""
    cite = pin_cite(labels, citation=citation) or (f"page {span} of the opinion's text" if span else "a page not known")
    return _PassagePages(certain=frozenset(certain), possible=frozenset(possible), cite=cite)


def _squeezed(parts: tuple[str, str] | tuple[str, str, int]) -> str:
    return re.sub(r"[\s.]", "", " ".join(str(part) for part in parts[:2])).lower()


def _reporter_written(written: tuple[str, str, int] | None) -> str:
    return f"{written[0]} {written[1]}" if written else "the reporter cited"


def _pages_written(pin: tuple[int, int]) -> str:
    return str(pin[0]) if pin[0] == pin[1] else f"{pin[0]}\u2013{pin[1]}"


def _set(citation: CaseCitation, *, status: str, pin_status: str, why: str) -> None:
    citation.status = status
    citation.pin_status = pin_status
    citation.detail = fit(CaseCitation, "detail", f"{_without_pin_note(citation.detail)}; {why}")


def _without_pin_note(detail: str) -> str:
    """The citation's detail without the note of its pin the case-pages check wrote (``pin cite ...``)."""
    return re.sub(r"; pin cite [^;]*$", "", detail)
