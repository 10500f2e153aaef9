"""Statuses and verdicts in words: the one place that says what a claim's status means to a reader.

A quote row's ``verification_method``, a case citation's ``status`` and a ledger entry's
``verification_status`` all come through :func:`status_in_words`; a turn's verdict through
:func:`verdict_in_words`. The trace pages, the admin and the export report (rendered again by the offline
verifier, hence pure) show these words, never the codes alone. A status this module does not know yet (a
new check's outcome) is shown by its code, as needing review: nothing unknown passes as fine.

``tone`` names a style (``ok``, ``review``, ``fail``, ``info``) and ``symbol`` a glyph shown beside the
words, so that a status is never told by colour alone.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Any

from lqai_verify import verdict


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
    "pin_mismatch": (
        "the page cited is wrong (pin cite): not in the case, or not the page of the passage quoted",
        "\u2717",
        FAIL,
        True,
    ),
    "not_found": ("no case at this citation", "\u2717", FAIL, True),
    verdict.PIN_UNCHECKED: ("case verified; its pin cite could not be checked: review", "?", REVIEW, True),
    "ambiguous": ("several cases at this citation: review", "?", REVIEW, True),
    # A case citation nothing could check, or a quotation nothing could check (a quote row's ``unchecked``).
    verdict.UNCHECKED: ("not checked", "?", REVIEW, True),
    "provenance": ("consulted, not quoted", "\u00b7", INFO, False),
    # Statute and regulation rows (lqai_verify.verdict.statute_claim_status): a citation, then a quote of one.
    "statute_verified": ("section verified in the release checked", "\u2713", OK, False),
    "statute_not_found": (
        "no such section in the release checked: the citation may be fabricated",
        "\u2717",
        FAIL,
        True,
    ),
    "statute_unchecked": ("not checked: the title is not loaded", "?", REVIEW, True),
    "statute_quote_verified": ("quote verified in the section's text, in the release checked", "\u2713", OK, False),
    "statute_quote_altered": ("quote altered: review", "!", REVIEW, True),
    "statute_quote_found_elsewhere": ("quote found in another section, not the one cited", "\u2717", FAIL, True),
    "statute_quote_failed": ("quote not found in the section cited", "\u2717", FAIL, True),
    "statute_quote_unchecked": ("quote not checked: its citation is not verified", "?", REVIEW, True),
}


def status_in_words(code: str, *, alterations: Sequence[Any] = (), reason: str = "") -> StatusInWords:
    """What ``code`` means to a reader. A tolerant match that lists alterations (brackets, omissions) says so:
    the reader must see that the quote is not word for word. Something not checked says why when ``reason`` is
    given (a quote nothing could check: "not checked: no citation supports this quotation"). Unknown codes need
    review."""
    known = _STATUSES.get(code)
    if known is None:
        return StatusInWords(code, f"{code.replace('_', ' ')}: review (a status not described yet)", "?", REVIEW, True)
    words, symbol, tone, needs_review = known
    if code == "tolerant_match" and alterations:
        words = "verified, with marked alterations"
    if code == verdict.UNCHECKED and reason:
        words = f"{words}: {reason}"
    return StatusInWords(code, words, symbol, tone, needs_review)


def needs_review(code: str) -> bool:
    """Whether a claim with status ``code`` is one a reviewer must look at ("only what needs review")."""
    return status_in_words(code).needs_review


def review_count(codes: Iterable[str]) -> int:
    """How many of the claims whose statuses are ``codes`` (one per claim) a person must look at: the count of
    claims to review the trace pages, the report and the API give."""
    return sum(needs_review(code) for code in codes)


@dataclass(frozen=True, slots=True)
class VerdictInWords:
    code: str
    title: str
    explanation: str
    symbol: str
    tone: str
    #: For a turn whose stored verdict is not what its claims read today: what it was sealed as, in words.
    earlier: str = ""


_VERDICTS: dict[str, tuple[str, str, str, str]] = {
    verdict.PASS: (
        "Pass",
        "every quote verified exactly or with formatting-only differences, and every case cited verified",
        "\u2713",
        OK,
    ),
    verdict.REVIEW: ("Review", "nothing failed, but a claim needs a person to check it", "!", REVIEW),
    verdict.FAIL: (
        "Fail",
        "a claim failed: a quote not in its source, or a case that does not exist, has another name or lacks "
        "the page cited",
        "\u2717",
        FAIL,
    ),
    verdict.NONE: ("No claims", "the answer claims no quote or case to verify", "\u00b7", INFO),
    verdict.SUPPORTED: (
        "Supported (earlier rules)",
        "every quote verified, some with formatting differences or alterations: review what it marks",
        "!",
        REVIEW,
    ),
}


def verdict_in_words(code: str | None, *, status: str = "complete", claims: str | None = None) -> VerdictInWords:
    """A turn's verdict in words; a turn not finalized has none yet (``status`` says why). ``claims``: the
    verdict its claims read today (:func:`lqai_verify.verdict.verdict_of`); when the stored verdict differs (a
    turn finalized under earlier rules), the turn reads by its claims, and ``earlier`` says what it was sealed
    as."""
    if not code and status == "complete":
        return VerdictInWords("", "No verdict recorded", "the turn was finalized before verdicts were", "\u00b7", INFO)
    if not code:
        return VerdictInWords("", "No verdict yet", f"the turn is {status}", "\u2026", INFO)
    if claims is not None and verdict.sealed_under_earlier_rules(code, claims=claims):
        read = verdict_in_words(claims, status=status)
        earlier = f"sealed as \u2018{code}\u2019 under earlier rules; its claims read: {claims}"
        return VerdictInWords(read.code, read.title, read.explanation, read.symbol, read.tone, earlier)
    known = _VERDICTS.get(code)
    if known is None:
        return VerdictInWords(code, code.capitalize(), "a verdict not described yet: review", "?", REVIEW)
    title, explanation, symbol, tone = known
    return VerdictInWords(code, title, explanation, symbol, tone)
