"""Statuses and verdicts in words: the one place that says what a claim's status means to a reader.

A quote row's ``verification_method``, a case citation's ``status`` and a ledger entry's
``verification_status`` all come through :func:`status_in_words`; a turn's verdict through
:func:`verdict_in_words`. The trace pages, the admin and the export report show these words, never the
codes alone. A status this module does not know yet (a new check's outcome) is shown by its code, as
needing review: nothing unknown passes as fine.

``tone`` names a style (``ok``, ``review``, ``fail``, ``info``) and ``symbol`` a glyph shown beside the
words, so that a status is never told by colour alone.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any


@dataclass(frozen=True, slots=True)
class StatusInWords:
    code: str
    words: str
    symbol: str
    tone: str
    needs_review: bool

    def __str__(self) -> str:
        return self.words


OK, REVIEW, FAIL, INFO = "ok", "review", "fail", "info"

# code: (words, symbol, tone, needs review). Quote statuses first, then case-citation checks, then provenance.
_STATUSES: dict[str, tuple[str, str, str, bool]] = {
    "exact_match": ("verified exactly", "\u2713", OK, False),
    "tolerant_match": ("verified, formatting only", "\u2713", OK, False),
    "altered": ("altered: review", "!", REVIEW, True),
    "unverified": ("not found in the source", "\u2717", FAIL, True),
    "verified": ("case verified: the citation is this case", "\u2713", OK, False),
    "name_mismatch": ("cited under another case's name", "\u2717", FAIL, True),
    "not_found": ("no case at this citation", "\u2717", FAIL, True),
    "ambiguous": ("several cases at this citation: review", "?", REVIEW, True),
    "unchecked": ("not checked", "?", REVIEW, True),
    "provenance": ("consulted, not quoted", "\u00b7", INFO, False),
}


def status_in_words(code: str, *, alterations: Sequence[Any] = ()) -> StatusInWords:
    """What ``code`` means to a reader. A tolerant match that lists alterations (brackets, omissions) says so:
    the reader must see that the quote is not word for word. Unknown codes need review."""
    known = _STATUSES.get(code)
    if known is None:
        return StatusInWords(code, f"{code.replace('_', ' ')}: review (a status not described yet)", "?", REVIEW, True)
    words, symbol, tone, needs_review = known
    if code == "tolerant_match" and alterations:
        words = "verified, with marked alterations"
    return StatusInWords(code, words, symbol, tone, needs_review)


def needs_review(code: str) -> bool:
    """Whether a claim with status ``code`` is one a reviewer must look at ("only what needs review")."""
    return status_in_words(code).needs_review


@dataclass(frozen=True, slots=True)
class VerdictInWords:
    code: str
    title: str
    explanation: str
    symbol: str
    tone: str


_VERDICTS: dict[str, tuple[str, str, str, str]] = {
    "pass": ("Pass", "every quote verified exactly, and no case cited was found wrong", "\u2713", OK),
    "supported": ("Supported", "every quote verified, some with formatting differences or alterations", "\u2713", OK),
    "fail": ("Fail", "a claim did not verify, or a cited case does not exist or has another name", "\u2717", FAIL),
    "none": ("No claims", "the answer claims no quote to verify", "\u00b7", INFO),
}


def verdict_in_words(code: str | None, *, status: str = "complete") -> VerdictInWords:
    """A turn's verdict in words; a turn not finalized has none yet (``status`` says why)."""
    if not code and status == "complete":
        return VerdictInWords("", "No verdict recorded", "the turn was finalized before verdicts were", "\u00b7", INFO)
    if not code:
        return VerdictInWords("", "No verdict yet", f"the turn is {status}", "\u2026", INFO)
    known = _VERDICTS.get(code)
    if known is None:
        return VerdictInWords(code, code.capitalize(), "a verdict not described yet: review", "?", REVIEW)
    title, explanation, symbol, tone = known
    return VerdictInWords(code, title, explanation, symbol, tone)
