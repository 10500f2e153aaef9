"""Where each claimed quote stands in the answer text, so that a client can put a marker where a claim
is made: the span ``answer[start:end]`` of the quote's words, or no span and the reason.

The quote is searched in the answer as the verifier searches a source (``lqai_verify.verification``: exact,
else tolerant of formatting only), so a quote the answer reflows or writes with other quote marks is
still placed. A quote the answer uses several times is placed at its first use after the previous
claim of the same words, so that repeated claims take successive uses.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

from lqai_verify.verification import NormalizedSource

if TYPE_CHECKING:
    from chats.models import ClaimedQuote

NOT_IN_ANSWER = "the quote is not in the answer text"
NO_QUOTE = "the claim has no quote text"


@dataclass(frozen=True, slots=True)
class AnswerSpan:
    """A claim's place in the answer: ``start``/``end``, or both None and ``reason``."""

    start: int | None
    end: int | None
    reason: str = ""


def place_quotes(answer: str, quotes: Sequence[str]) -> list[AnswerSpan]:
    """The span in ``answer`` of each of ``quotes``, in order (see the module)."""
    normalized: NormalizedSource | None = None
    searched_from: dict[str, int] = {}
    spans = []
    for quote in quotes:
        needle = quote.strip()
        if not needle:
            spans.append(AnswerSpan(None, None, NO_QUOTE))
            continue
        start = answer.find(needle, searched_from.get(needle, 0))
        if start < 0 and needle in searched_from:
            start = answer.find(needle)  # claimed more often than written: its first use
        if start >= 0:
            searched_from[needle] = start + len(needle)
            spans.append(AnswerSpan(start, start + len(needle)))
            continue
        if normalized is None:
            normalized = NormalizedSource.build(answer)
        match, _ = normalized.verify_detailed(needle)
        spans.append(AnswerSpan(match.start, match.end) if match is not None else AnswerSpan(None, None, NOT_IN_ANSWER))
    return spans


def place_claims(rows: Sequence[ClaimedQuote], answer: str) -> None:
    """Set each quote row's answer span (or its reason), the rows taken in claim order (``position``)."""
    ordered = sorted(rows, key=lambda row: row.position)
    for row, span in zip(ordered, place_quotes(answer, [row.quote for row in ordered]), strict=True):
        row.answer_offset_start, row.answer_offset_end = span.start, span.end
        row.answer_unplaced_reason = span.reason
