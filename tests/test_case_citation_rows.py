"""``message_case_citations``: the case citations of an answer, checked and stored by ``finalize_turn``, and the
table's rules (each constraint twice: ``full_clean()`` and a direct insert)."""

from __future__ import annotations

from typing import Any

import pytest
from django.conf import LazySettings
from django.core.exceptions import ValidationError
from django.db import IntegrityError, transaction
from django.db.models import RestrictedError

from chats import services
from chats.case_citations import Status
from chats.models import CaseCitation, CaselawOpinion, Message
from chats.record import purging
from chats.services import finalize_turn
from tests import factories

pytestmark = pytest.mark.django_db

ANSWER = (
    "Strict scrutiny applies: Fisher v. University of Texas at Austin, 570 U. S. 297, 310 (2013). "
    "Id., at 311. But Smith v. Jones, 570 U.S. 297 (2013), is not a case, nor is Doe v. Roe, 999 U.S. 999 "
    "(2031). See also 42 U.S.C. § 1983."
)


@pytest.fixture(autouse=True)
def _no_courtlistener(settings: LazySettings) -> None:
    settings.COURTLISTENER_API_TOKEN = ""


@pytest.fixture
def fisher(db: None) -> CaselawOpinion:
    return factories.CaselawOpinionFactory.create(
        provider="local", case_name="Fisher v. University of Texas at Austin", citation="570 U.S. 297 (2013)"
    )


def _assistant_message() -> Message:
    return factories.MessageFactory.create(status=Message.Status.STREAMING, content="", finalized_at=None)


def test_finalize_stores_one_checked_row_per_citation_span(fisher: CaselawOpinion) -> None:
    message = _assistant_message()

    turn = finalize_turn(message=message, content=ANSWER, status=Message.Status.COMPLETE)

    rows = list(CaseCitation.objects.filter(message=message).order_by("answer_offset_start"))
    assert rows == turn.case_citations
    assert [(r.kind, r.status, r.citation) for r in rows] == [
        ("full", "verified", "570 U.S. 297"),
        ("id", "verified", "570 U.S. 297"),
        ("full", "name_mismatch", "570 U.S. 297"),
        ("full", "unchecked", "999 U.S. 999"),  # not in the local store; no CourtListener here
    ]
    assert [ANSWER[r.answer_offset_start : r.answer_offset_end] for r in rows] == [
        "570 U. S. 297",
        "Id., at 311",
        "570 U.S. 297",
        "999 U.S. 999",
    ]
    # The statute is the authority library's to check: a statute row, unchecked (title 42 is not loaded).
    [statute] = turn.statute_citations
    assert (statute.citation, statute.status) == ("42 U.S.C. § 1983", "unchecked")
    assert [r.opinion for r in rows] == [fisher, fisher, fisher, None]
    assert rows[2].case_name == "Smith v. Jones"
    assert "Fisher v. University of Texas at Austin" in rows[2].detail
    assert {r.provider for r in rows[:4]} == {"local"}


def test_an_answer_without_citations_stores_none() -> None:
    message = _assistant_message()

    turn = finalize_turn(message=message, content="No authority needed.", status=Message.Status.COMPLETE)

    assert turn.case_citations == []
    assert not CaseCitation.objects.exists()


def test_a_failing_check_never_fails_the_turn(
    monkeypatch: pytest.MonkeyPatch,
    caplog: pytest.LogCaptureFixture,
) -> None:
    def broken(answer_text: str, **kwargs: Any) -> list[Any]:
        raise RuntimeError("eyecite choked")

    monkeypatch.setattr(services, "check_case_citations", broken)
    message = _assistant_message()

    turn = finalize_turn(message=message, content=ANSWER, status=Message.Status.COMPLETE)

    message.refresh_from_db()
    assert message.status == Message.Status.COMPLETE
    assert turn.case_citations == []
    assert "the case-citation check failed" in caplog.text


def test_a_resumed_turn_adds_only_the_citations_it_had_not_written(fisher: CaselawOpinion) -> None:
    message = _assistant_message()
    first = ANSWER[: ANSWER.index(" But")]
    finalize_turn(message=message, content=first, status=Message.Status.INTERRUPTED)
    assert CaseCitation.objects.filter(message=message).count() == 2

    turn = finalize_turn(message=message, content=ANSWER, status=Message.Status.COMPLETE)

    added = [ANSWER.index("570 U.S."), ANSWER.index("999")]
    assert [r.answer_offset_start for r in turn.case_citations] == added
    assert CaseCitation.objects.filter(message=message).count() == 4
    assert [r.answer_offset_start for r in turn.statute_citations] == [ANSWER.index("42 U.S.C.")]


def test_the_case_citations_are_written_in_the_turns_transaction(
    fisher: CaselawOpinion, monkeypatch: pytest.MonkeyPatch
) -> None:
    message = _assistant_message()

    def refuse(*args: Any, **kwargs: Any) -> None:
        raise IntegrityError("refused")

    monkeypatch.setattr(CaseCitation.objects, "bulk_create", refuse)
    with pytest.raises(IntegrityError):
        finalize_turn(message=message, content=ANSWER, status=Message.Status.COMPLETE)

    message.refresh_from_db()
    assert message.status == Message.Status.STREAMING  # the turn rolled back with its rows
    assert message.content == ""


def test_a_cited_opinion_cannot_be_deleted_on_its_own(fisher: CaselawOpinion) -> None:
    factories.CaseCitationFactory.create(opinion=fisher)

    with pytest.raises(RestrictedError):
        fisher.delete()


def test_deleting_the_message_deletes_its_case_citations() -> None:
    row = factories.CaseCitationFactory.create()

    with purging(row.message.chat.project_id):  # messages leave only with their matter's purge
        row.message.delete()

    assert not CaseCitation.objects.exists()


def test_the_models_choices_are_the_checkers() -> None:
    from chats.case_citations import Kind

    assert set(CaseCitation.Status.values) == {s.value for s in Status}
    assert set(CaseCitation.Kind.values) == {k.value for k in Kind}


# --- constraints: full_clean() and a direct insert -------------------------------------------------------------

INVALID: dict[str, tuple[dict[str, Any], str]] = {
    "status": ({"status": "probably_fine", "opinion": None}, "message_case_citations_status_valid"),
    "kind": ({"kind": "vibes"}, "message_case_citations_kind_valid"),
    "negative start": ({"answer_offset_start": -1, "answer_offset_end": 5}, "message_case_citations_offset_start"),
    "empty span": ({"answer_offset_start": 5, "answer_offset_end": 5}, "message_case_citations_offsets_ordered"),
    "verified without opinion": ({"opinion": None}, "message_case_citations_opinion_iff_resolved"),
    "not found with opinion": ({"status": "not_found"}, "message_case_citations_opinion_iff_resolved"),
}


@pytest.mark.parametrize("case", INVALID, ids=list(INVALID))
def test_each_rule_is_refused_by_full_clean(case: str) -> None:
    changes, _ = INVALID[case]
    row = factories.CaseCitationFactory.build(
        message=factories.MessageFactory.create(), opinion=factories.CaselawOpinionFactory.create()
    )
    for name, value in changes.items():
        setattr(row, name, value)

    with pytest.raises(ValidationError):
        row.full_clean()


@pytest.mark.parametrize("case", INVALID, ids=list(INVALID))
def test_each_rule_is_refused_by_the_database(case: str) -> None:
    changes, constraint = INVALID[case]
    row = factories.CaseCitationFactory.build(
        message=factories.MessageFactory.create(), opinion=factories.CaselawOpinionFactory.create()
    )
    for name, value in changes.items():
        setattr(row, name, value)

    with transaction.atomic(), pytest.raises(IntegrityError, match=constraint):
        CaseCitation.objects.bulk_create([row])


def test_one_row_per_span_of_a_message() -> None:
    row = factories.CaseCitationFactory.create()
    again = factories.CaseCitationFactory.build(
        message=row.message, opinion=row.opinion, answer_offset_start=row.answer_offset_start
    )

    with pytest.raises(ValidationError):
        again.full_clean()
    with transaction.atomic(), pytest.raises(IntegrityError):
        CaseCitation.objects.bulk_create([again])


@pytest.mark.parametrize(
    ("answer", "verdict"),
    [
        ("See Fisher v. University of Texas at Austin, 570 U.S. 297 (2013).", "pass"),
        ("See Smith v. Jones, 570 U.S. 297 (2013).", "fail"),
        ("See 42 U.S.C. § 1983.", "review"),  # a statute is not checked: a person must
    ],
)
def test_a_case_cited_under_another_name_fails_the_turn(fisher: CaselawOpinion, answer: str, verdict: str) -> None:
    message = _assistant_message()

    finalize_turn(message=message, content=answer, status=Message.Status.COMPLETE)

    message.refresh_from_db()
    assert message.verdict == verdict


@pytest.mark.parametrize(
    ("status", "verdict"),
    [
        ("verified", "pass"),
        ("name_mismatch", "fail"),
        ("pin_mismatch", "fail"),
        ("not_found", "fail"),
        ("ambiguous", "review"),
        ("unchecked", "review"),
        ("a_status_not_known_yet", "review"),
    ],
)
def test_the_gate_fails_on_a_case_that_does_not_exist_or_has_another_name(status: str, verdict: str) -> None:
    case = CaseCitation(status=status)

    assert services.turn_verdict(methods=set(), case_statuses={case.status}) == verdict
