"""Where each claim sits in the answer text, and the answer cut at those places for its markers.

Case citations carry their span of the answer (``answer_offset_start``/``answer_offset_end``). Quote rows
do not record one yet: :func:`quote_span` finds the quote in the answer (white space and the answer's
line-wrapping aside). It is the one place that places a quote, so that a stored span replaces it there.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Generic, TypeVar

T = TypeVar("T")

# A quote mark closing the quotation right after the quote: the marker goes after it.
_CLOSING = "\"'\u201d\u2019"


def quote_span(answer: str, quote: str, *, taken: set[int] | None = None) -> tuple[int, int] | None:
    """The span of ``answer`` that writes ``quote``, its words in order with any white space between them
    (the answer may rewrap a quote's lines); ``None`` if the answer does not write it. ``taken`` holds the
    starts already given to an earlier claim of the same text, so that two claims of it get two places."""
    words = quote.split()
    if not words:
        return None
    pattern = re.compile(r"\s+".join(re.escape(word) for word in words))
    for match in pattern.finditer(answer):
        if taken is None or match.start() not in taken:
            if taken is not None:
                taken.add(match.start())
            return match.start(), match.end()
    return None


def marker_offset(answer: str, end: int) -> int:
    """Where a claim ending at ``end`` gets its marker: after it, and after a quote mark closing it."""
    while end < len(answer) and answer[end] in _CLOSING:
        end += 1
    return end


@dataclass(frozen=True, slots=True)
class Part(Generic[T]):
    """A piece of the answer: its text, or (``claim`` set) the marker of one claim."""

    text: str = ""
    claim: T | None = None


def with_markers(answer: str, placed: list[tuple[int, T]]) -> list[Part[T]]:
    """``answer`` cut into text and markers, each marker at its offset (``placed`` in order of offset)."""
    parts: list[Part[T]] = []
    at = 0
    for offset, claim in placed:
        if offset > at:
            parts.append(Part(text=answer[at:offset]))
            at = offset
        parts.append(Part(claim=claim))
    if at < len(answer):
        parts.append(Part(text=answer[at:]))
    return parts
