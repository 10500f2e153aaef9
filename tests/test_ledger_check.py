"""``backfill_ledger --check`` checks agreement, not only presence (``citations.agreement``): an entry whose
status or confidence differs from its source row, a turn whose verdict disagrees with its rows, two rows of
one turn at the same position. Each is planted below the application, as a raw SQL change would make it,
and must be reported with its message id and exit status 1."""

from __future__ import annotations

from io import StringIO
from typing import Any

import pytest
from django.core.management import call_command
from django.db import connection, transaction

from chats.models import Message, Verdict
from citations import ledger
from citations.models import CitationLedgerEntry
from tests import factories
from tests.conftest import triggers_off

pytestmark = pytest.mark.django_db


def check(*args: str) -> tuple[int, str]:
    """``manage.py backfill_ledger --check *args``: its exit status and stdout."""
    out = StringIO()
    try:
        call_command("backfill_ledger", "--check", *args, stdout=out, stderr=StringIO())
    except SystemExit as exited:
        return int(exited.code or 0), out.getvalue()
    return 0, out.getvalue()


def plant(sql: str, params: list[Any]) -> None:
    """Change rows below the application, as a superuser could: on PostgreSQL with the tables' triggers
    (append-only rules) off for this one statement's transaction."""
    with transaction.atomic(), connection.cursor() as cursor, triggers_off(cursor):
        cursor.execute(sql, params)


def db_id(value: Any) -> Any:
    return ledger.db_value(value)


@pytest.fixture
def turn() -> Message:
    """A finalized turn whose verdict agrees with its rows (an exact and a tolerant quote, a verified case: pass),
    one tool source and one checked case citation, with its ledger entries."""
    message = factories.MessageFactory.create(verdict=Verdict.PASS)
    factories.DocumentQuoteFactory.create(message=message)
    factories.OpinionQuoteFactory.create(message=message, altered=True)
    factories.MessageToolSourceFactory.create(message=message)
    factories.CaseCitationFactory.create(message=message)
    assert ledger.assemble(message) == 4
    return message


def test_a_turn_that_agrees_with_its_entries_passes(turn: Message) -> None:
    status, out = check()
    assert status == 0, out
    assert "agree with the turns" in out


@pytest.mark.parametrize(
    ("source", "change", "reported"),
    [
        # the tolerant caselaw quote's entry turned into an exact match
        (
            "message_caselaw_citation",
            "verification_status = 'exact_match', confidence = 1.0",
            "status exact_match, confidence 1.0 where the row gives tolerant_match",
        ),
        # the exact KB quote's entry given a lower confidence
        ("message_citation", "confidence = 0.5", "confidence 0.5 where the row gives exact_match, 1.0"),
        # the verified case citation's entry turned ambiguous
        (
            "message_case_citation",
            "verification_status = 'ambiguous'",
            "status ambiguous, confidence None where the row gives verified",
        ),
    ],
)
def test_an_entry_that_differs_from_its_row_is_reported(turn: Message, source: str, change: str, reported: str) -> None:
    # Given one of the turn's entries changed below the application
    entry = CitationLedgerEntry.objects.get(**{f"{source}__isnull": False})
    plant(f"UPDATE citation_ledger_entry SET {change} WHERE id = %s", [db_id(entry.pk)])
    status, out = check()
    # Then --check names the message and the entry, says how they differ, and exits 1
    assert status == 1
    assert f"message {turn.pk}: entry {entry.pk}" in out
    assert reported in out
    assert "1 disagreements" in out


def test_a_verdict_that_disagrees_with_the_rows_is_reported(turn: Message) -> None:
    # Given the passing turn's verdict turned into a review below the application
    plant("UPDATE messages SET verdict = 'review' WHERE id = %s", [db_id(turn.pk)])
    status, out = check()
    assert status == 1
    assert "verdict review where its rows give pass" in out
    assert f"message {turn.pk}: " in out


def test_a_verdict_of_the_earlier_rules_agrees_with_its_rows(turn: Message) -> None:
    # Given the turn stored as the rules before "review" gave it (supported: a tolerant or altered quote), and
    # an exact quote with a case citation not checked stored as they gave it (pass; today: review)
    plant("UPDATE messages SET verdict = 'supported' WHERE id = %s", [db_id(turn.pk)])
    unchecked = factories.MessageFactory.create(verdict=Verdict.PASS)
    factories.DocumentQuoteFactory.create(message=unchecked)
    factories.CaseCitationFactory.create(message=unchecked, status="unchecked", opinion=None)
    ledger.assemble(unchecked)
    status, out = check()
    # Then --check accepts both: each is what its rows gave when it was finalized
    assert status == 0, out


def test_a_passing_verdict_over_a_failed_claim_or_a_wrong_case_is_reported() -> None:
    # Given a turn with a failed claim and one citing a case under another name, both stored as "pass"
    failed = factories.MessageFactory.create(verdict=Verdict.PASS)
    factories.DocumentQuoteFactory.create(message=failed, failed=True)
    wrong_case = factories.MessageFactory.create(verdict=Verdict.PASS)
    factories.DocumentQuoteFactory.create(message=wrong_case)
    factories.CaseCitationFactory.create(message=wrong_case, status="name_mismatch")
    factories.MessageFactory.create(verdict=Verdict.NONE)  # no rows: none, as it should be
    for message in (failed, wrong_case):
        ledger.assemble(message)
    status, out = check()
    assert status == 1
    assert out.count("verdict pass where its rows give fail") == 2


def test_two_quotes_of_a_turn_at_one_position_are_reported(turn: Message) -> None:
    # Given the turn's caselaw quote moved to its KB quote's position (as two finalizers of one turn made it)
    kb = turn.citations.get()
    plant("UPDATE message_caselaw_citations SET position = %s WHERE message_id = %s", [kb.position, db_id(turn.pk)])
    status, out = check()
    assert status == 1
    assert f"2 of its quotes at position {kb.position}" in out
    assert f"message {turn.pk}: " in out


def test_two_tool_sources_of_a_turn_at_one_position_are_reported(turn: Message) -> None:
    first = turn.tool_sources.get()
    factories.MessageToolSourceFactory.create(message=turn, position=first.position)
    ledger.assemble(turn)
    status, out = check()
    assert status == 1
    assert f"2 of its tool sources at position {first.position}" in out


def test_a_filtered_check_reports_only_its_scope(turn: Message) -> None:
    # Given a disagreement in the turn's chat and none in another chat
    other = factories.MessageFactory.create(verdict=Verdict.NONE)
    plant("UPDATE messages SET verdict = 'fail' WHERE id = %s", [db_id(turn.pk)])
    assert check("--chat", str(other.chat_id))[0] == 0
    assert check("--chat", str(turn.chat_id))[0] == 1


@pytest.mark.parametrize("batch_size", ["1", "1000"])
def test_each_disagreement_is_reported_once_whatever_the_batch_size(turn: Message, batch_size: str) -> None:
    factories.MessageFactory.create_batch(3, verdict=Verdict.NONE)
    plant("UPDATE messages SET verdict = 'fail' WHERE id = %s", [db_id(turn.pk)])
    status, out = check("--batch-size", batch_size)
    assert status == 1
    assert out.count("where its rows give") == 1
