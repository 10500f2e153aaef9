"""A turn's verdict over its claims: the one rule, applied by the server as it finalizes a turn
(``chats.services.turn_verdict``) and by the report and the trace pages to read a turn sealed under earlier rules.

``pass``: every quote verified exactly or with formatting-only differences, and every case, statute and regulation
cited (and quoted) verified;
``review``: nothing failed, but at least one claim needs a person (an ``altered`` quote, a case citation not
checked or ambiguous, a quotation nothing could check (an ``unchecked`` quote row), or any status this rule does
not know); ``fail``: a claim failed (a quote not in its
source, a case that does not exist, is cited under another name or to a page it does not have, a statute section
not in the release checked, a statute quote not in the section cited); ``none``:
nothing claimed. ``supported`` is the verdict earlier rules gave a turn with a tolerant or altered quote: turns
sealed with it keep it, and no finalize writes it any more.
"""

from __future__ import annotations

from collections.abc import Collection

from lqai_verify.verification.results import ALTERED, EXACT_MATCH, TOLERANT_MATCH

NONE, PASS, REVIEW, FAIL = "none", "pass", "review", "fail"
#: The verdict earlier rules gave a turn with a tolerant or altered quote (still valid on the rows it is on).
SUPPORTED = "supported"
#: What a finalize writes today.
VERDICTS = (NONE, PASS, REVIEW, FAIL)
#: Every verdict a stored turn may carry, from best to worst: a resumed turn keeps the worst of its runs'.
ORDER = (NONE, PASS, SUPPORTED, REVIEW, FAIL)

#: A quote row's method for a claim that did not hold.
UNVERIFIED = "unverified"
#: A quote row's method for a quotation nothing could check (no citation, or a case nothing resolved): review.
UNCHECKED = "unchecked"
#: How a case citation verified whose pin cite nothing could check counts: a person must look at the page.
PIN_UNCHECKED = "pin_unchecked"
_PASSING_METHODS = frozenset({EXACT_MATCH, TOLERANT_MATCH})
_PASSING_CASE_STATUSES = frozenset({"verified"})
_FAILING_CASE_STATUSES = frozenset({"not_found", "name_mismatch", "pin_mismatch"})
#: A statute row's claim status (:func:`statute_claim_status`): a citation's ``statute_<status>``, a quote's
#: ``statute_quote_<status>``. Verified passes; altered and unchecked need review; a citation not found, a quote
#: not found or found only in another section fails.
STATUTE_PASSING = frozenset({"statute_verified", "statute_quote_verified"})
STATUTE_FAILING = frozenset({"statute_not_found", "statute_quote_failed", "statute_quote_found_elsewhere"})


def statute_claim_status(kind: str, status: str) -> str:
    """The claim status of a statute row of ``kind`` (``citation``, ``quote``) with ``status`` (the library's:
    verified, not_found, unchecked; altered, found_elsewhere, failed): ``statute_verified``,
    ``statute_quote_failed``. Its own codes, so that it never reads as a case citation's or a quote's."""
    return f"statute_{status}" if kind == "citation" else f"statute_quote_{status}"


def verdict_of(*, methods: Collection[str], case_statuses: Collection[str] = (), earlier_rules: bool = False) -> str:
    """The verdict of a turn whose quote rows have ``methods`` and whose case citations and statute rows have
    ``case_statuses`` (a statute row's by :func:`statute_claim_status`).
    Only a known good status passes: an ``unchecked`` quote, and a status this rule does not know (a new check's
    outcome), need review.
    ``earlier_rules``: the verdict the rules before ``review`` gave (``supported`` for a tolerant or altered
    quote, a case citation counting only when it failed), to check a stored verdict of that time."""
    methods, statuses = frozenset(methods), frozenset(case_statuses)
    if UNVERIFIED in methods or statuses & (_FAILING_CASE_STATUSES | STATUTE_FAILING):
        return FAIL
    if earlier_rules:
        if UNCHECKED in methods:  # no earlier rule knew it: never read as passing
            return REVIEW
        if {TOLERANT_MATCH, ALTERED} & methods:
            return SUPPORTED
        return PASS if methods else NONE
    if not methods and not statuses:
        return NONE
    if methods <= _PASSING_METHODS and statuses <= (_PASSING_CASE_STATUSES | STATUTE_PASSING):
        return PASS
    return REVIEW


def case_claim_status(status: str, pin_status: str | None = "") -> str:
    """The status a case citation counts with in the verdict, the review count and the words a reader sees: its
    own, except that a verified case whose pin cite could not be checked (``pin_status`` ``unchecked``) is
    :data:`PIN_UNCHECKED`, which needs review."""
    return PIN_UNCHECKED if status == "verified" and pin_status == "unchecked" else status


def worst(*verdicts: str | None) -> str:
    """The worst of ``verdicts`` (``none`` if there is none); an unknown verdict counts as ``review``."""
    known = [v if v in ORDER else REVIEW for v in verdicts if v]
    return max(known, key=ORDER.index, default=NONE)


def sealed_under_earlier_rules(stored: str | None, *, claims: str) -> bool:
    """Whether a turn's ``stored`` verdict is not what its claims read today (``claims``, :func:`verdict_of`): a
    verdict finalized under earlier rules, which the turn keeps (its seal covers it) and a reader is told of."""
    return bool(stored) and stored != claims
