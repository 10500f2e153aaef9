"""The authority library's one entry for the rest of the project: a text's statute citations and quotes checked,
and a citation's words looked up (:mod:`authorities.lookup`, for the assistant's ``statute_lookup`` tool).

``chats`` imports this module and nothing else of ``authorities`` (tests/test_architecture.py).
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass

from authorities.finder import FoundStatute, find_statutes
from authorities.lookup import StatuteText, library_holds_a_title, look_up_statutes
from authorities.resolver import (
    ALTERED_QUOTE,
    FAILED,
    FOUND_ELSEWHERE,
    NOT_FOUND,
    UNCHECKED,
    VERIFIED,
    ReleaseRef,
    StatuteCitationCheck,
    StatuteQuoteCheck,
    TitleKey,
    resolve_statutes,
    verify_statute_quote,
)

# A quotation in an answer: curly or straight double quotes, on one paragraph.
_QUOTATION = re.compile(r"“(?P<curly>[^”\n]{2,}?)”|\"(?P<straight>[^\"\n]{2,}?)\"")
# A citation after a quotation belongs to it if it starts this close after the quotation's end.
_FOLLOWING = 120
# What may stand between a citation and the quotation that is its parenthetical or follows it.
_ADJACENT = re.compile(r"[\s,:]*[(\[]?\s*")
# American usage puts a sentence's period or comma inside the closing quotation mark: not the source's.
_INSIDE_PUNCTUATION = ".,;"


@dataclass(frozen=True, slots=True)
class StatuteChecks:
    """Every statute citation of a text checked, and every quotation attributed to one of them."""

    citations: list[StatuteCitationCheck]
    quotes: list[StatuteQuoteCheck]


def _paragraph(text: str, start: int, end: int) -> bool:
    return "\n\n" not in text[start:end]


def _attributed(text: str, start: int, end: int, checks: list[StatuteCitationCheck]) -> StatuteCitationCheck | None:
    """The citation a quotation at ``text[start:end]`` is attributed to, in this order: the citation right
    before it (``35 U.S.C. § 112(a) ("The specification ...")``); the first that follows it closely with no
    other quotation between (``"... enforceable," 9 U.S.C. § 2``); the nearest before it in the paragraph
    (``Under 9 U.S.C. § 2, an agreement is "valid ..."``)."""
    before = [c for c in checks if c.citation.end <= start and _paragraph(text, c.citation.end, start)]
    nearest_before = max(before, key=lambda c: c.citation.end) if before else None
    if nearest_before is not None and _ADJACENT.fullmatch(text[nearest_before.citation.end : start]):
        return nearest_before
    after = [
        c
        for c in checks
        if end <= c.citation.start <= end + _FOLLOWING
        and _paragraph(text, end, c.citation.start)
        and not _QUOTATION.search(text[end : c.citation.start])
    ]
    if after:
        return min(after, key=lambda c: c.citation.start)
    return nearest_before


def check_statutes(*, text: str, release_points: Mapping[TitleKey, str] | None = None) -> StatuteChecks:
    """The statute and regulation citations of ``text`` resolved against the library, and each quotation next
    to one verified against the cited text. ``release_points`` names the release checked per title
    (``{("usc", 9): "Online@117-80"}``); by default the latest loaded. A range cites several sections at one
    span: a quotation is attributed to the first of them."""
    checks = resolve_statutes(find_statutes(text), release_points=release_points)
    quotes = []
    for match in _QUOTATION.finditer(text):
        check = _attributed(text, match.start(), match.end(), checks)
        if check is not None:
            quote = (match["curly"] or match["straight"]).strip().rstrip(_INSIDE_PUNCTUATION)
            quotes.append(verify_statute_quote(quote=quote, check=check))
    return StatuteChecks(citations=checks, quotes=quotes)


__all__ = [
    "ALTERED_QUOTE",
    "FAILED",
    "FOUND_ELSEWHERE",
    "NOT_FOUND",
    "UNCHECKED",
    "VERIFIED",
    "FoundStatute",
    "ReleaseRef",
    "StatuteChecks",
    "StatuteCitationCheck",
    "StatuteQuoteCheck",
    "StatuteText",
    "check_statutes",
    "find_statutes",
    "library_holds_a_title",
    "look_up_statutes",
    "resolve_statutes",
    "verify_statute_quote",
]
