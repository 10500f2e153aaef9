"""The verdict's one rule (``lqai_verify.verdict``): one meaning per colour, never green over a claim to review."""

from __future__ import annotations

import pytest

from chats.models import CaseCitation, Verdict, VerificationMethod
from lqai_verify import verdict
from lqai_verify.statuses import review_count, status_in_words, verdict_in_words


@pytest.mark.parametrize(
    ("methods", "case_statuses", "expected"),
    [
        ((), (), "none"),
        (("exact_match",), (), "pass"),
        (("tolerant_match",), (), "pass"),  # one tolerant match and nothing else to review
        (("exact_match", "tolerant_match"), ("verified",), "pass"),
        ((), ("verified",), "pass"),
        (("altered",), (), "review"),  # the demo's altered-only turn
        (("exact_match",), ("unchecked",), "review"),
        (("exact_match",), ("ambiguous",), "review"),
        (("exact_match",), ("a_check_not_known_yet",), "review"),  # nothing unknown passes as fine
        (("a_method_not_known_yet",), (), "review"),
        (("altered", "unverified"), (), "fail"),
        (("exact_match",), ("pin_mismatch",), "fail"),
        ((), ("name_mismatch", "unchecked"), "fail"),
        ((), ("not_found",), "fail"),
    ],
)
def test_the_rule(methods: tuple[str, ...], case_statuses: tuple[str, ...], expected: str) -> None:
    assert verdict.verdict_of(methods=methods, case_statuses=case_statuses) == expected


def test_a_claim_the_verdict_sends_to_review_is_one_the_pages_count_to_review() -> None:
    # Every status that makes a turn review or fail is one a person must check, and the others none
    for code in (*VerificationMethod.values, *CaseCitation.Status.values):
        is_quote = code in VerificationMethod.values
        alone = verdict.verdict_of(methods=[code] if is_quote else [], case_statuses=[] if is_quote else [code])
        assert (alone in ("review", "fail")) == status_in_words(code).needs_review, code
    assert review_count(["exact_match", "altered", "unverified", "verified", "unchecked"]) == 3


def test_a_verified_case_whose_pin_cite_nothing_could_check_needs_review() -> None:
    unchecked_pin = verdict.case_claim_status("verified", "unchecked")
    assert verdict.verdict_of(methods=["exact_match"], case_statuses=[unchecked_pin]) == "review"
    assert status_in_words(unchecked_pin).needs_review
    assert "pin cite could not be checked" in status_in_words(unchecked_pin).words
    assert verdict.case_claim_status("verified", "within") == "verified"
    assert verdict.case_claim_status("verified", "") == "verified"
    assert verdict.case_claim_status("pin_mismatch", "outside") == "pin_mismatch"
    assert review_count([verdict.case_claim_status("verified", "unchecked"), "verified"]) == 1


def test_a_review_is_never_green_and_the_vocabulary_is_the_model_s() -> None:
    assert verdict_in_words("review").tone == "review"
    assert verdict_in_words("pass").tone == "ok"
    assert set(Verdict.values) == {*verdict.VERDICTS, verdict.SUPPORTED}
    assert Verdict.worst("supported", "review") == "review"
    assert Verdict.worst("pass", "supported") == "supported"
    assert Verdict.worst("review", "fail", "none") == "fail"
    assert Verdict.worst() == "none"


def test_the_earlier_rules_are_kept_only_to_read_verdicts_of_their_time() -> None:
    assert verdict.verdict_of(methods=["tolerant_match"], earlier_rules=True) == "supported"
    assert verdict.verdict_of(methods=["altered"], earlier_rules=True) == "supported"
    assert verdict.verdict_of(methods=["exact_match"], case_statuses=["unchecked"], earlier_rules=True) == "pass"
    assert verdict.sealed_under_earlier_rules("supported", claims="review")
    assert not verdict.sealed_under_earlier_rules("review", claims="review")
    assert not verdict.sealed_under_earlier_rules(None, claims="pass")
    earlier = verdict_in_words("supported", claims="review")
    assert (earlier.code, earlier.tone) == ("review", "review")
    assert earlier.earlier == "sealed as \u2018supported\u2019 under earlier rules; its claims read: review"
