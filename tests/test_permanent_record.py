"""The permanent record (``chats.record``): what a finalized turn wrote is never updated, and leaves only with
a matter purge; a matter on legal hold is never deleted; users are deactivated, never deleted with a record.

Tests marked ``postgres`` are the database's guarantees (triggers refusing raw SQL as the application's own
database user); the others hold on every database, through the model layer.
"""

from __future__ import annotations

import io
import threading
import uuid
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import pytest
from django.contrib.auth.models import User
from django.core.management import call_command
from django.core.management.base import CommandError
from django.db import IntegrityError, connection, transaction
from django.db.models import F, ProtectedError
from django.test import Client
from django.urls import reverse
from django.utils import timezone
from rest_framework.test import APIClient

from chats.models import (
    CaseCitation,
    Chat,
    Document,
    DocumentQuote,
    Message,
    MessageToolSource,
    OpinionQuote,
    Project,
    StatuteCitation,
)
from chats.record import AppendOnlyError, LegalHoldError, message_change_refusal, purging
from citations import ledger, seals
from citations.models import CitationLedgerEntry, MatterPurge, TurnSeal
from citations.purge import purge_matter
from tests import factories

pytestmark = pytest.mark.django_db

TURN_TABLES = (
    "message_citations",
    "message_caselaw_citations",
    "message_case_citations",
    "message_tool_sources",
    "message_statute_citations",
)
GUARDED_TABLES = (*TURN_TABLES, "citation_ledger_entry")
# A column of each guarded table that an update might rewrite, and a value to write into it.
REWRITES = {
    "message_citations": "verification_confidence = 1.0",
    "message_caselaw_citations": "quote = 'rewritten'",
    "message_case_citations": "status = 'verified'",
    "message_tool_sources": "label = 'rewritten'",
    "message_statute_citations": "status = 'verified'",
    "citation_ledger_entry": "verification_status = 'exact_match', confidence = 1.0",
}


@pytest.fixture
def turn() -> Message:
    """A finalized turn with a row in each per-turn table and their ledger entries (as finalize writes them)."""
    message = factories.assembled_turn(kb=1, caselaw=1, tools=1, altered=True)
    factories.CaseCitationFactory.create(message=message)
    StatuteCitation.objects.create(
        message=message,
        kind=StatuteCitation.Kind.CITATION,
        citation="42 U.S.C. § 1983",
        answer_offset_start=0,
        answer_offset_end=16,
        status=StatuteCitation.Status.UNCHECKED,
        reason="title 42 of the U.S. Code is not loaded: load OLRC's usc42.xml",
    )
    ledger.assemble(message)
    return message


def _row_id(table: str, message: Message) -> uuid.UUID:
    with connection.cursor() as cursor:
        cursor.execute(f"SELECT id FROM {table} WHERE message_id = %s LIMIT 1", [message.pk])
        row = cursor.fetchone()
    assert row is not None, table
    return uuid.UUID(str(row[0]))


def _raw(sql: str, params: list[Any]) -> None:
    with transaction.atomic(), connection.cursor() as cursor:
        cursor.execute(sql, params)


# --- below the application (PostgreSQL) -----------------------------------------------------------------------------


@pytest.mark.postgres
@pytest.mark.parametrize("table", GUARDED_TABLES)
def test_a_raw_update_of_a_guarded_row_is_refused_naming_the_rule(table: str, turn: Message) -> None:
    row = _row_id(table, turn)

    with pytest.raises(IntegrityError, match=f"lqai_append_only: {table} rows cannot be updated"):
        _raw(f"UPDATE {table} SET {REWRITES[table]} WHERE id = %s", [row])


@pytest.mark.postgres
@pytest.mark.parametrize("table", GUARDED_TABLES)
def test_a_raw_delete_of_a_guarded_row_is_refused_naming_the_rule(table: str, turn: Message) -> None:
    row = _row_id(table, turn)

    with pytest.raises(IntegrityError, match=f"lqai_append_only: {table} rows cannot be deleted"):
        _raw(f"DELETE FROM {table} WHERE id = %s", [row])


@pytest.mark.postgres
def test_a_raw_update_or_delete_of_a_seal_is_refused_naming_the_rule(turn: Message) -> None:
    seal = seals.seal_turn(message_id=turn.pk)

    with pytest.raises(IntegrityError, match="lqai_append_only: turn_seals rows cannot be updated"):
        _raw("UPDATE turn_seals SET facts_sha256 = %s WHERE id = %s", ["0" * 64, seal.pk])
    with pytest.raises(IntegrityError, match="lqai_append_only: turn_seals rows cannot be deleted"):
        _raw("DELETE FROM turn_seals WHERE id = %s", [seal.pk])
    assert TurnSeal.objects.get(pk=seal.pk).facts_sha256 == seal.facts_sha256


def test_the_orm_refuses_to_update_or_delete_a_seal(turn: Message) -> None:
    seal = seals.seal_turn(message_id=turn.pk)
    seal.facts_sha256 = "0" * 64

    with pytest.raises(AppendOnlyError, match="turn_seals rows cannot be updated"):
        seal.save()
    with pytest.raises(AppendOnlyError, match="cannot be updated"):
        TurnSeal.objects.filter(pk=seal.pk).update(facts_sha256="0" * 64)
    with pytest.raises(AppendOnlyError, match="cannot be deleted"):
        TurnSeal.objects.filter(pk=seal.pk).delete()
    assert TurnSeal.objects.filter(pk=seal.pk).exists()


@pytest.mark.postgres
def test_a_tolerant_match_cannot_be_turned_into_an_exact_one(turn: Message) -> None:
    entry = CitationLedgerEntry.objects.get(
        message=turn, verification_status="tolerant_match", source_kind="kb_document"
    )

    with pytest.raises(IntegrityError, match="lqai_append_only"):
        _raw(
            "UPDATE citation_ledger_entry SET verification_status = 'exact_match', confidence = 1.0 WHERE id = %s",
            [entry.pk],
        )

    entry.refresh_from_db()
    assert entry.verification_status == "tolerant_match"


@pytest.mark.postgres
def test_treatment_id_is_set_once_from_null_and_only_alone(turn: Message) -> None:
    entry = CitationLedgerEntry.objects.filter(message=turn).first()
    assert entry is not None
    first, second = uuid.uuid4(), uuid.uuid4()

    with pytest.raises(IntegrityError, match="lqai_append_only"):  # not together with another column
        _raw(
            "UPDATE citation_ledger_entry SET treatment_id = %s, retrieved_at = now() WHERE id = %s", [first, entry.pk]
        )
    _raw("UPDATE citation_ledger_entry SET treatment_id = %s WHERE id = %s", [first, entry.pk])
    with pytest.raises(IntegrityError, match="only treatment_id, once, from NULL"):
        _raw("UPDATE citation_ledger_entry SET treatment_id = %s WHERE id = %s", [second, entry.pk])
    with pytest.raises(IntegrityError, match="lqai_append_only"):
        _raw("UPDATE citation_ledger_entry SET treatment_id = NULL WHERE id = %s", [entry.pk])

    entry.refresh_from_db()
    assert entry.treatment_id == first


@pytest.mark.postgres
@pytest.mark.parametrize(
    "change",
    [
        "content = 'rewritten'",
        "status = 'failed'",
        "verdict = 'pass'",
        "author_id = NULL",
        "reply_to_id = NULL",
        "prompt_tokens = 1",
        "model_name = 'another'",
    ],
)
def test_a_raw_update_of_a_finalized_message_is_refused(change: str, matter_chat: Chat) -> None:
    question = factories.UserMessageFactory.create(chat=matter_chat, author=matter_chat.owner)
    answer = factories.MessageFactory.create(
        chat=matter_chat, reply_to=question, author=matter_chat.owner, verdict="fail", prompt_tokens=10
    )

    with pytest.raises(IntegrityError, match=f"lqai_append_only: message {answer.pk} is complete"):
        _raw(f"UPDATE messages SET {change} WHERE id = %s", [answer.pk])
    with pytest.raises(IntegrityError, match="lqai_append_only: messages rows cannot be deleted"):
        _raw("DELETE FROM messages WHERE id = %s", [answer.pk])


@pytest.mark.postgres
def test_an_interrupted_message_may_be_resumed_and_continued_but_not_rewritten(matter_chat: Chat) -> None:
    # interrupted -> streaming -> final: the resume's path; its past stays
    answer = factories.MessageFactory.create(
        chat=matter_chat, status="interrupted", content="Half an", verdict="supported", prompt_tokens=10
    )
    for refused in (
        "content = 'Another'",
        "verdict = 'pass'",
        "prompt_tokens = 5",
        "status = 'pending'",
        "finalized_at = NULL",
        f"author_id = {matter_chat.owner.pk}",
    ):
        with pytest.raises(IntegrityError, match=f"lqai_append_only: message {answer.pk} is finalized"):
            _raw(f"UPDATE messages SET {refused} WHERE id = %s", [answer.pk])

    _raw("UPDATE messages SET status = 'streaming', attempt = attempt + 1 WHERE id = %s", [answer.pk])
    _raw(
        "UPDATE messages SET status = 'complete', content = 'Half an answer.', verdict = 'fail', "
        "prompt_tokens = 30 WHERE id = %s",
        [answer.pk],
    )
    answer.refresh_from_db()
    assert (answer.status, answer.content, answer.verdict, answer.prompt_tokens) == (
        "complete",
        "Half an answer.",
        "fail",
        30,
    )


@pytest.mark.postgres
def test_a_cited_documents_matter_cannot_change_below_the_application(turn: Message) -> None:
    document = DocumentQuote.objects.get(message=turn).document
    assert document is not None
    other = factories.ProjectFactory.create()

    with pytest.raises(IntegrityError, match=r"lqai_append_only: documents row .* is cited: its matter cannot change"):
        _raw("UPDATE documents SET project_id = %s WHERE id = %s", [other.pk, document.pk])


@pytest.mark.postgres
@pytest.mark.parametrize("move", ["to another matter", "out of its matter", "into a matter"])
def test_a_chat_holding_turns_keeps_its_matter_below_the_application(move: str, turn: Message) -> None:
    """A turn's matter is one of its sealed facts, and its seal is in its matter's chain (or its chat's): moving
    its chat would break the seal, and hand the turn to the other matter's members."""
    chat = turn.chat
    if move == "into a matter":
        chat = factories.ChatFactory.create(project=None)
        factories.assembled_turn(chat=chat, kb=0)
    target = None if move == "out of its matter" else factories.ProjectFactory.create().pk

    with pytest.raises(IntegrityError, match=r"lqai_append_only: chats row .* holds turns: its matter cannot change"):
        _raw("UPDATE chats SET project_id = %s WHERE id = %s", [target, chat.pk])
    _raw("UPDATE chats SET title = 'Renamed' WHERE id = %s", [chat.pk])  # the rest of the chat is not the record
    empty = factories.ChatFactory.create()
    _raw("UPDATE chats SET project_id = %s WHERE id = %s", [target, empty.pk])  # nor is a chat without turns


@pytest.mark.postgres
def test_a_purge_of_another_matter_does_not_open_this_ones_rows(turn: Message) -> None:
    other = factories.ProjectFactory.create()
    entry = CitationLedgerEntry.objects.filter(message=turn).first()
    assert entry is not None

    rule = "lqai_append_only: citation_ledger_entry rows cannot be deleted"
    with transaction.atomic(), purging(other.pk), pytest.raises(IntegrityError, match=rule):
        _raw("DELETE FROM citation_ledger_entry WHERE id = %s", [entry.pk])
    rule = "lqai_append_only: messages rows cannot be deleted"
    with transaction.atomic(), purging(other.pk), pytest.raises(IntegrityError, match=rule):
        _raw("DELETE FROM messages WHERE id = %s", [turn.pk])


@pytest.mark.postgres
def test_the_purge_setting_ends_with_its_transaction(turn: Message) -> None:
    with transaction.atomic():
        with purging(turn.chat.project_id):
            pass
        with pytest.raises(IntegrityError, match="lqai_append_only"):
            _raw("DELETE FROM message_tool_sources WHERE message_id = %s", [turn.pk])


@pytest.mark.postgres
def test_a_tombstone_cannot_be_updated_or_deleted_below_the_application(turn: Message) -> None:
    project_id = turn.chat.project_id
    assert project_id is not None
    tombstone = purge_matter(project_id=project_id, purged_by="ops")

    with pytest.raises(IntegrityError, match="lqai_append_only: matter_purges rows cannot be updated"):
        _raw("UPDATE matter_purges SET ledger_entries = 0 WHERE id = %s", [tombstone.pk])
    with pytest.raises(IntegrityError, match="lqai_append_only: matter_purges rows cannot be deleted"):
        _raw("DELETE FROM matter_purges WHERE id = %s", [tombstone.pk])


RECORD_TABLES = (
    "messages",
    *GUARDED_TABLES,
    "turn_seals",
    "seal_chain_heads",
    "matter_purges",
    "ledger_partition_drops",
    "citation_ledger_entry_default",
)


def _truncate(sql: str) -> None:
    """``sql`` (a TRUNCATE) in a transaction of a session that has not allowed it, as a deployment's (the
    test's deferred foreign-key checks run first: PostgreSQL truncates no table with checks pending)."""
    with transaction.atomic(), connection.cursor() as cursor:
        cursor.execute("SET CONSTRAINTS ALL IMMEDIATE")
        cursor.execute("SET LOCAL lqai.allow_truncate = 'off'")
        cursor.execute(sql)


@pytest.mark.postgres
@pytest.mark.parametrize("table", RECORD_TABLES)
def test_a_truncate_of_the_record_is_refused_naming_the_rule(table: str, turn: Message) -> None:
    seals.seal_turn(message_id=turn.pk)

    with pytest.raises(IntegrityError, match=f"lqai_append_only: {table} cannot be truncated"):
        _truncate(f"TRUNCATE {table} CASCADE")
    assert Message.objects.filter(pk=turn.pk).exists()


@pytest.mark.postgres
@pytest.mark.parametrize("table", ["projects", "chats", "documents", "caselaw_opinions"])
def test_a_truncate_that_would_cascade_into_the_record_is_refused(table: str, turn: Message) -> None:
    with pytest.raises(IntegrityError, match=r"lqai_append_only: \w+ cannot be truncated"):
        _truncate(f"TRUNCATE {table} CASCADE")
    assert CitationLedgerEntry.objects.filter(message=turn).count() == 5


@pytest.mark.postgres
def test_each_month_of_the_ledger_refuses_a_truncate_of_its_own(turn: Message) -> None:
    from citations import partitions

    # Given the ledger's months from two years ago on, the oldest then dropped and kept detached
    today = timezone.now().date()
    partitions.ensure_partitions(ahead=1, today=today.replace(year=today.year - 2, day=1))
    partitions.ensure_partitions(ahead=1)
    oldest, *_ = (p for p in partitions.partitions() if p.start is not None)
    assert oldest.start is not None
    assert oldest.end is not None
    (tombstone,) = partitions.drop_months_before(before=oldest.end.date(), dropped_by="ops", keep_detached=True)
    assert tombstone.disposal == "detached"
    newest = partitions.partitions()[-1].name

    # Then each of them, attached or detached, refuses a truncate of its own
    for month in (oldest.name, newest):
        with pytest.raises(IntegrityError, match=f"lqai_append_only: {month} cannot be truncated"):
            _truncate(f"TRUNCATE {month}")


@pytest.mark.postgres
def test_manage_py_flush_is_refused_on_a_deployments_database(turn: Message) -> None:
    with transaction.atomic(), connection.cursor() as cursor:
        cursor.execute("SET CONSTRAINTS ALL IMMEDIATE")
        cursor.execute("SET LOCAL lqai.allow_truncate = 'off'")
        with pytest.raises(CommandError, match="couldn't be flushed"):
            call_command("flush", interactive=False, verbosity=0)
    assert Message.objects.filter(pk=turn.pk).exists()


@pytest.mark.postgres
@pytest.mark.parametrize("table", ["projects", "chats", "messages"])
def test_a_held_matter_its_chats_and_messages_cannot_be_deleted_in_sql(table: str, turn: Message) -> None:
    chat = turn.chat
    Project.objects.filter(chats=chat).update(legal_hold=True)
    target = {"projects": chat.project_id, "chats": chat.pk, "messages": turn.pk}[table]

    # even inside the matter's purge
    with (
        pytest.raises(IntegrityError, match=r"lqai_legal_hold: matter .* is on legal hold"),
        transaction.atomic(),
        purging(chat.project_id),
        connection.cursor() as cursor,
    ):
        cursor.execute(f"DELETE FROM {table} WHERE id = %s", [target])


# --- the model layer (every database) -----------------------------------------------------------------------------


ROW_MODELS = (DocumentQuote, OpinionQuote, CaseCitation, MessageToolSource, StatuteCitation, CitationLedgerEntry)


@pytest.mark.parametrize("model", ROW_MODELS, ids=lambda m: m._meta.db_table)
def test_the_orm_refuses_to_update_or_delete_a_guarded_row(model: type[DocumentQuote], turn: Message) -> None:
    row = model.objects.filter(message=turn).first()
    assert row is not None
    row.created_at = timezone.now()  # any change

    with pytest.raises(AppendOnlyError, match=f"lqai_append_only: {model._meta.db_table} rows cannot be updated"):
        row.save()
    with pytest.raises(AppendOnlyError, match="cannot be updated"):
        model.objects.filter(pk=row.pk).update(created_at=timezone.now())
    with pytest.raises(AppendOnlyError, match="cannot be deleted"):
        row.delete()
    with pytest.raises(AppendOnlyError, match="cannot be deleted"):
        model.objects.filter(pk=row.pk).delete()
    assert model.objects.filter(pk=row.pk).exists()


def test_the_orm_sets_treatment_id_once(turn: Message) -> None:
    entry, other = CitationLedgerEntry.objects.filter(message=turn)[:2]
    entry.treatment_id = uuid.uuid4()
    entry.save(update_fields=["treatment_id"])
    entry.treatment_id = uuid.uuid4()
    with pytest.raises(AppendOnlyError, match="only treatment_id may be set once"):
        entry.save(update_fields=["treatment_id"])

    assert CitationLedgerEntry.objects.filter(pk=other.pk).update(treatment_id=uuid.uuid4()) == 1
    with pytest.raises(AppendOnlyError, match="set once only"):
        CitationLedgerEntry.objects.filter(pk=other.pk).update(treatment_id=uuid.uuid4())


@pytest.mark.parametrize(
    ("field", "value"),
    [("content", "rewritten"), ("status", "failed"), ("verdict", "pass"), ("author", None), ("prompt_tokens", 1)],
)
def test_the_orm_refuses_to_rewrite_a_finalized_message(field: str, value: object, matter_chat: Chat) -> None:
    answer = factories.MessageFactory.create(
        chat=matter_chat, author=matter_chat.owner, verdict="fail", prompt_tokens=10
    )

    setattr(answer, field, value)
    # The database refuses the save (its trigger); the error names the message and its state
    with pytest.raises(AppendOnlyError, match=f"message {answer.pk} is complete"), transaction.atomic():
        answer.save()
    with pytest.raises(AppendOnlyError, match=f"message {answer.pk} is complete"):
        Message.objects.filter(pk=answer.pk).update(**{field: value})
    with pytest.raises(AppendOnlyError, match="holds chat turns, which are permanent"):
        answer.delete()


def test_the_orm_refuses_an_expression_rewriting_a_complete_message(matter_chat: Chat) -> None:
    answer = factories.MessageFactory.create(chat=matter_chat, author=matter_chat.owner, prompt_tokens=10)

    with pytest.raises(AppendOnlyError, match=f"message {answer.pk} is complete: its prompt_tokens cannot change"):
        Message.objects.filter(pk=answer.pk).update(prompt_tokens=F("prompt_tokens") + 1)
    assert Message.objects.get(pk=answer.pk).prompt_tokens == 10


def test_the_orm_lets_an_interrupted_message_go_on_but_not_be_rewritten(matter_chat: Chat) -> None:
    answer = factories.MessageFactory.create(chat=matter_chat, status="interrupted", content="Half an", verdict="fail")

    with pytest.raises(AppendOnlyError, match="can only be continued"):
        Message.objects.filter(pk=answer.pk).update(content="Other")
    with pytest.raises(AppendOnlyError, match="verdict can only get worse"):
        Message.objects.filter(pk=answer.pk).update(verdict="pass")
    Message.objects.filter(pk=answer.pk).update(status="streaming")
    Message.objects.filter(pk=answer.pk).update(content="Half an answer.", status="complete")
    assert Message.objects.get(pk=answer.pk).content == "Half an answer."


@pytest.mark.parametrize(
    ("change", "why"),
    [
        ({"author": None}, "its author_id cannot change"),
        ({"finalized_at": None}, "it cannot become unfinalized"),
        ({"status": "pending"}, "it cannot go back to pending"),
        ({"verdict": None}, "its verdict can only get worse"),
        ({"prompt_tokens": 5}, "its prompt_tokens can only accumulate"),
    ],
)
def test_the_orm_refuses_to_undo_an_interrupted_message(change: dict[str, Any], why: str, matter_chat: Chat) -> None:
    # The model layer's statement of the rule the messages trigger holds on PostgreSQL (the raw SQL test above)
    answer = factories.MessageFactory.create(
        chat=matter_chat, author=matter_chat.owner, status="interrupted", verdict="supported", prompt_tokens=10
    )

    with pytest.raises(AppendOnlyError, match=f"message {answer.pk} is finalized: {why}"):
        Message.objects.filter(pk=answer.pk).update(**change)

    stored = Message.objects.get(pk=answer.pk)
    assert (stored.author_id, stored.status, stored.verdict, stored.prompt_tokens) == (
        matter_chat.owner.pk,
        "interrupted",
        "supported",
        10,
    )
    assert stored.finalized_at is not None


@pytest.mark.postgres
def test_the_trigger_orders_review_between_supported_and_fail_and_writes_no_new_supported(matter_chat: Chat) -> None:
    # Given an interrupted turn to review, and one still pending
    review = factories.MessageFactory.create(chat=matter_chat, status="interrupted", content="Half", verdict="review")
    pending = factories.MessageFactory.create(chat=matter_chat, status="pending", finalized_at=None, verdict=None)
    # Then its verdict cannot get better (pass, or supported of the earlier rules) ...
    for better in ("pass", "supported"):
        with pytest.raises(IntegrityError, match=f"lqai_append_only: message {review.pk}"):
            _raw("UPDATE messages SET verdict = %s WHERE id = %s", [better, review.pk])
    # ... nor does a finalize write "supported" any more; it may get worse
    with pytest.raises(IntegrityError, match="'supported' is a verdict of earlier rules"):
        _raw(
            "UPDATE messages SET status = 'complete', finalized_at = now(), verdict = 'supported' WHERE id = %s",
            [pending.pk],
        )
    _raw("UPDATE messages SET verdict = 'fail' WHERE id = %s", [review.pk])
    review.refresh_from_db()
    assert review.verdict == "fail"


def test_the_orm_writes_no_new_supported_verdict_and_keeps_review_from_getting_better(matter_chat: Chat) -> None:
    review = factories.MessageFactory.create(chat=matter_chat, status="interrupted", content="Half", verdict="review")

    with pytest.raises(AppendOnlyError, match="'supported' is a verdict of earlier rules"):
        Message.objects.filter(pk=review.pk).update(verdict="supported")
    with pytest.raises(AppendOnlyError, match="its verdict can only get worse"):
        Message.objects.filter(pk=review.pk).update(verdict="pass")
    Message.objects.filter(pk=review.pk).update(verdict="fail")

    assert Message.objects.get(pk=review.pk).verdict == "fail"


def test_a_finalized_message_saved_unchanged_is_not_refused(matter_chat: Chat) -> None:
    answer = factories.MessageFactory.create(chat=matter_chat, author=matter_chat.owner, verdict="fail")

    answer.save()
    Message.objects.filter(pk=answer.pk).update(content=answer.content, verdict="fail")

    assert Message.objects.get(pk=answer.pk).content == answer.content


def test_saving_a_message_is_its_update_alone(matter_chat: Chat, django_assert_num_queries: Any) -> None:
    # The database holds the rule: a save reads nothing first
    answer = factories.MessageFactory.create(chat=matter_chat, author=matter_chat.owner, verdict="fail")

    with django_assert_num_queries(1):
        answer.save()


@pytest.mark.parametrize(("field", "value"), [("content", "rewritten"), ("verdict", "pass")])
def test_the_database_refuses_rewriting_a_finalized_message(field: str, value: str, matter_chat: Chat) -> None:
    answer = factories.MessageFactory.create(chat=matter_chat, author=matter_chat.owner, verdict="fail")

    # A raw UPDATE, below the model layer, is refused on either database (SQLite: chats.0034)
    with pytest.raises(IntegrityError, match="lqai_append_only"):
        _raw(f"UPDATE messages SET {field} = %s WHERE id = %s", [value, answer.pk.hex])
    # and a save's refusal names the message, its state and what cannot change
    setattr(answer, field, value)
    with pytest.raises(AppendOnlyError, match=f"message {answer.pk} is complete: its .*{field}"), transaction.atomic():
        answer.save()
    assert getattr(Message.objects.get(pk=answer.pk), field) != value


def test_the_rule_leaves_a_message_not_yet_finalized_to_its_run() -> None:
    streaming = {"id": "m1", "status": "streaming", "finalized_at": None, "content": "Hal", "author_id": 1}

    assert message_change_refusal(streaming, {"content": "Rewritten", "author_id": None, "status": "pending"}) is None


def test_saving_a_stored_record_row_unchanged_is_refused(turn: Message) -> None:
    quote = DocumentQuote.objects.filter(message=turn).get()

    with pytest.raises(AppendOnlyError, match="message_citations rows cannot be updated"):
        quote.save()


def test_a_matter_or_chat_with_turns_is_deleted_only_by_its_purge(turn: Message) -> None:
    chat = turn.chat
    with pytest.raises(AppendOnlyError, match=r"only `manage\.py purge_matter` removes"):
        chat.delete()
    with pytest.raises(AppendOnlyError, match=r"only `manage\.py purge_matter` removes"):
        Project.objects.filter(chats=chat).delete()
    with pytest.raises(AppendOnlyError):
        Chat.objects.filter(pk=chat.pk).delete()
    assert CitationLedgerEntry.objects.filter(message=turn).count() == 5


def test_the_orm_and_the_admin_keep_the_matter_of_a_chat_holding_turns(admin_client: Client, turn: Message) -> None:
    chat, other = turn.chat, factories.ProjectFactory.create()
    change = reverse("admin:chats_chat_change", args=[chat.pk])

    chat.project = other
    with pytest.raises(AppendOnlyError, match="holds turns: its matter cannot change"):
        chat.save()
    with pytest.raises(AppendOnlyError, match="holds turns: its matter cannot change"):
        Chat.objects.filter(pk=chat.pk).update(project=other)
    with pytest.raises(AppendOnlyError, match="holds turns: its matter cannot change"):
        Chat.objects.filter(pk=chat.pk).update(project_id=None)
    page = admin_client.get(change).content.decode()
    admin_client.post(change, {"project": str(other.pk), "owner": str(chat.owner_id), "title": "Renamed"})

    assert 'name="project"' not in page  # shown, not editable
    chat.refresh_from_db()
    assert (chat.project_id, chat.title) == (turn.chat.project_id, "Renamed")
    Chat.objects.filter(pk=chat.pk).update(title="Renamed again")  # the rest of the chat is not the record
    empty = factories.ChatFactory.create()
    empty.project = other
    empty.save()
    Chat.objects.filter(pk=empty.pk).update(project=None)
    assert 'name="project"' in admin_client.get(reverse("admin:chats_chat_change", args=[empty.pk])).content.decode()


def test_a_matter_without_turns_can_still_be_deleted() -> None:
    project = factories.ProjectFactory.create()
    factories.DocumentFactory.create(project=project)
    factories.ChatFactory.create(project=project)
    other = factories.ProjectFactory.create()

    project.delete()
    Project.objects.filter(pk=other.pk).delete()  # and in bulk, through the queryset

    assert not Project.objects.filter(pk__in=[project.pk, other.pk]).exists()


def test_a_held_matter_its_chats_and_messages_cannot_be_deleted_by_the_orm(turn: Message) -> None:
    chat = turn.chat
    project = Project.objects.get(chats=chat)
    project.legal_hold = True
    project.save()

    for doomed in (project, chat, turn):
        with (
            pytest.raises(LegalHoldError, match=f"lqai_legal_hold: matter {project.pk} is on legal hold"),
            transaction.atomic(),
            purging(project.pk),
        ):
            doomed.delete()
    with pytest.raises(LegalHoldError):
        Project.objects.filter(pk=project.pk).delete()
    with pytest.raises(LegalHoldError):
        purge_matter(project_id=project.pk, purged_by="ops")
    assert CitationLedgerEntry.objects.filter(message=turn).count() == 5


# --- users --------------------------------------------------------------------------------------------------------


def test_deleting_a_user_removes_no_matter_chat_message_or_entry(turn: Message) -> None:
    owner = turn.chat.owner
    asker = factories.UserFactory.create()
    Project.objects.get(chats=turn.chat).members.add(asker)
    factories.UserMessageFactory.create(chat=turn.chat, author=asker)
    counts = (
        Project.objects.count(),
        Chat.objects.count(),
        Message.objects.count(),
        CitationLedgerEntry.objects.count(),
    )

    for user in (owner, asker):
        with pytest.raises(ProtectedError), transaction.atomic():
            user.delete()
        # deactivation is the way: the account stops working, the record stays
        user.is_active = False
        user.save()

    counts_after = (
        Project.objects.count(),
        Chat.objects.count(),
        Message.objects.count(),
        CitationLedgerEntry.objects.count(),
    )
    assert counts_after == counts


def test_the_admin_refuses_to_delete_a_user_with_a_record_and_says_to_deactivate(
    admin_client: Client, turn: Message
) -> None:
    owner = turn.chat.owner
    delete = reverse("admin:auth_user_delete", args=[owner.pk])

    page = admin_client.get(delete).content.decode()
    admin_client.post(delete, {"post": "yes"})

    assert "Deactivate the account instead (untick Active)" in page
    assert User.objects.filter(pk=owner.pk).exists()
    assert Message.objects.filter(pk=turn.pk).exists()


# --- purge_matter ---------------------------------------------------------------------------------------------------


def _purge(*args: str) -> str:
    out = io.StringIO()
    call_command("purge_matter", *args, "--no-progress", stdout=out, stderr=io.StringIO())
    return out.getvalue()


@pytest.fixture
def two_matters(turn: Message) -> tuple[Project, Project]:
    kept = factories.assembled_turn()
    return Project.objects.get(chats=turn.chat), Project.objects.get(chats=kept.chat)


def test_purge_matter_without_confirm_says_what_would_go_and_writes_nothing(
    two_matters: tuple[Project, Project],
) -> None:
    doomed, _ = two_matters

    out = _purge(str(doomed.pk))

    assert f"Would purge matter {doomed.pk} ({doomed.name}): 1 chats, 1 messages, 5 ledger entries" in out
    assert "Nothing was written" in out
    assert Project.objects.filter(pk=doomed.pk).exists()
    assert not MatterPurge.objects.exists()


def test_purge_matter_deletes_the_matter_and_leaves_its_tombstone(two_matters: tuple[Project, Project]) -> None:
    doomed, kept = two_matters
    kept_entries = CitationLedgerEntry.objects.filter(chat__project=kept).count()

    out = _purge(str(doomed.pk), "--confirm", "--by", "records-officer")

    assert f"Purged matter {doomed.pk}" in out
    assert not Project.objects.filter(pk=doomed.pk).exists()
    assert not Chat.objects.filter(project_id=doomed.pk).exists()
    assert not Document.objects.filter(project_id=doomed.pk).exists()
    assert not CitationLedgerEntry.objects.filter(project_id=doomed.pk).exists()
    tombstone = MatterPurge.objects.get()
    assert (tombstone.project_id, tombstone.project_name, tombstone.purged_by) == (
        doomed.pk,
        doomed.name,
        "records-officer",
    )
    assert (tombstone.chats, tombstone.messages, tombstone.ledger_entries, tombstone.documents) == (1, 1, 5, 1)
    assert tombstone.purged_at is not None
    # the other matter is untouched
    assert CitationLedgerEntry.objects.filter(chat__project=kept).count() == kept_entries
    # and the tombstone is itself append-only
    tombstone.chats = 0
    with pytest.raises(AppendOnlyError):
        tombstone.save()
    with pytest.raises(AppendOnlyError):
        tombstone.delete()
    with pytest.raises(AppendOnlyError):
        MatterPurge.objects.all().delete()


@pytest.mark.postgres
def test_purge_matter_takes_its_rows_off_the_ledgers_off_time_list(two_matters: tuple[Project, Project]) -> None:
    # Given one row of each matter on the off-time list (an entry not at its row's time, as before citations.0014)
    doomed, kept = two_matters
    listed = {
        matter.pk: CitationLedgerEntry.objects.filter(project=matter, message_tool_source__isnull=False).values_list(
            "message_tool_source_id", flat=True
        )[0]
        for matter in (doomed, kept)
    }
    with connection.cursor() as cursor:
        for source_id in listed.values():
            cursor.execute(
                "INSERT INTO citation_ledger_off_time (source_id, source_column) VALUES (%s, 'message_tool_source_id')",
                [source_id],
            )

    _purge(str(doomed.pk), "--confirm")

    # Then only the other matter's row is still listed
    with connection.cursor() as cursor:
        cursor.execute("SELECT source_id FROM citation_ledger_off_time")
        assert [uuid.UUID(str(row)) for (row,) in cursor.fetchall()] == [listed[kept.pk]]


def test_purge_matter_records_the_os_user_by_default(two_matters: tuple[Project, Project]) -> None:
    import getpass

    doomed, _ = two_matters
    _purge(str(doomed.pk), "--confirm")
    assert MatterPurge.objects.get().purged_by == getpass.getuser()


def test_purge_matter_reports_its_progress_per_batch_of_chats(monkeypatch: pytest.MonkeyPatch) -> None:
    from citations import purge

    monkeypatch.setattr(purge, "CHATS_PER_BATCH", 2)
    project = factories.ProjectFactory.create()
    for _ in range(5):
        factories.assembled_turn(factories.ChatFactory.create(project=project), kb=0, caselaw=0, tools=1)
    progress: list[tuple[int, int]] = []

    tombstone = purge_matter(
        project_id=project.pk, purged_by="ops", progress=lambda done, total: progress.append((done, total))
    )

    assert progress == [(2, 5), (4, 5), (5, 5)]
    assert (tombstone.chats, tombstone.messages, tombstone.ledger_entries) == (5, 5, 5)


@pytest.mark.parametrize(
    ("argument", "error"),
    [("not-a-uuid", "is not a matter id"), (str(uuid.uuid4()), "No matter")],
)
def test_purge_matter_refuses_what_is_not_a_matter(argument: str, error: str) -> None:
    with pytest.raises(CommandError, match=error):
        _purge(argument, "--confirm")


def test_purge_matter_refuses_a_held_matter(two_matters: tuple[Project, Project]) -> None:
    doomed, _ = two_matters
    Project.objects.filter(pk=doomed.pk).update(legal_hold=True)

    with pytest.raises(CommandError, match="is on legal hold: it cannot be purged"):
        _purge(str(doomed.pk), "--confirm")
    assert Project.objects.filter(pk=doomed.pk).exists()
    assert not MatterPurge.objects.exists()


def _meanwhile(monkeypatch: pytest.MonkeyPatch, change: Any) -> None:
    """``change(project)`` made by someone else between purge_matter's checks and its purge."""
    from citations.management.commands import purge_matter as command

    plan = command.purge_plan

    def plan_then_change(*, project: Project) -> Any:
        planned = plan(project=project)
        change(project)
        return planned

    monkeypatch.setattr(command, "purge_plan", plan_then_change)


def test_purge_matter_refuses_a_matter_put_on_hold_meanwhile(
    two_matters: tuple[Project, Project], monkeypatch: pytest.MonkeyPatch
) -> None:
    doomed, _ = two_matters
    _meanwhile(monkeypatch, lambda project: Project.objects.filter(pk=project.pk).update(legal_hold=True))

    with pytest.raises(CommandError, match=f"Matter {doomed.pk} was put on legal hold meanwhile: it cannot be purged"):
        _purge(str(doomed.pk), "--confirm")
    assert Chat.objects.filter(project=doomed).exists()
    assert not MatterPurge.objects.exists()


def test_purge_matter_says_so_when_the_matter_was_deleted_meanwhile(monkeypatch: pytest.MonkeyPatch) -> None:
    empty = factories.ProjectFactory.create()  # no turns: an operator may delete it
    _meanwhile(monkeypatch, lambda project: Project.objects.filter(pk=project.pk).delete())

    with pytest.raises(CommandError, match=f"Matter {empty.pk} was deleted meanwhile. Nothing more was deleted."):
        _purge(str(empty.pk), "--confirm")
    assert not MatterPurge.objects.exists()


# --- legal hold: the API and the admin -------------------------------------------------------------------------------


def _hold_url(project: Project) -> str:
    return reverse("chats:project-legal-hold", kwargs={"project_id": project.pk})


def test_the_owner_sets_and_lifts_a_legal_hold_through_the_api(user: User, other_user: User) -> None:
    project = factories.ProjectFactory.create(owner=user, members=[other_user])
    owner, member, stranger = APIClient(), APIClient(), APIClient()
    owner.force_authenticate(user=user)
    member.force_authenticate(user=other_user)
    stranger.force_authenticate(user=factories.UserFactory.create())

    held = owner.put(_hold_url(project), {"legal_hold": True}, format="json")
    assert held.status_code == 200, held.content
    assert held.json() == {"project_id": str(project.pk), "legal_hold": True}
    assert Project.objects.get(pk=project.pk).legal_hold
    assert member.get(_hold_url(project)).json()["legal_hold"] is True

    refused = member.patch(_hold_url(project), {"legal_hold": False}, format="json")
    assert refused.status_code == 403
    assert stranger.patch(_hold_url(project), {"legal_hold": False}, format="json").status_code == 404
    assert stranger.get(_hold_url(project)).status_code == 404
    bad = owner.patch(_hold_url(project), {"legal_hold": "maybe"}, format="json")
    assert bad.status_code == 400
    assert "legal_hold" in bad.json()
    assert owner.patch(_hold_url(project), {}, format="json").status_code == 400
    assert Project.objects.get(pk=project.pk).legal_hold

    lifted = owner.patch(_hold_url(project), {"legal_hold": False}, format="json")
    assert lifted.status_code == 200
    assert not Project.objects.get(pk=project.pk).legal_hold


def test_an_operator_holds_a_matter_in_the_admin_and_its_delete_page_refuses(
    admin_client: Client, turn: Message
) -> None:
    project = Project.objects.get(chats=turn.chat)
    change = reverse("admin:chats_project_change", args=[project.pk])
    form = {"name": project.name, "owner": project.owner_id, "legal_hold": "on"}

    assert admin_client.post(change, form).status_code == 302
    assert Project.objects.get(pk=project.pk).legal_hold

    delete = reverse("admin:chats_project_delete", args=[project.pk])
    page = admin_client.get(delete).content.decode()
    assert "on legal hold (lift the hold first)" in page
    admin_client.post(delete, {"post": "yes"})
    assert Project.objects.filter(pk=project.pk).exists()

    # lifted, the matter still holds turns: its delete page points at the purge instead
    Project.objects.filter(pk=project.pk).update(legal_hold=False)
    page = admin_client.get(delete).content.decode()
    assert f"manage.py purge_matter {project.pk} --confirm" in page
    admin_client.post(delete, {"post": "yes"})
    assert Project.objects.filter(pk=project.pk).exists()


def test_a_chats_delete_page_says_why_it_refuses_and_an_empty_chat_is_deleted(
    admin_client: Client, turn: Message
) -> None:
    chat = turn.chat
    matter = Project.objects.filter(chats=chat)
    delete = reverse("admin:chats_chat_delete", args=[chat.pk])

    # A chat with turns: a permanent record
    page = admin_client.get(delete).content.decode()
    assert "its turns are a permanent record (only a matter purge removes them)." in page
    admin_client.post(delete, {"post": "yes"})
    assert Chat.objects.filter(pk=chat.pk).exists()

    # A chat of a matter on legal hold: the hold is the reason given
    matter.update(legal_hold=True)
    page = admin_client.get(delete).content.decode()
    assert "its matter is on legal hold." in page
    admin_client.post(delete, {"post": "yes"})
    assert Chat.objects.filter(pk=chat.pk).exists()

    # A chat without turns, its matter not held: deleted as usual
    matter.update(legal_hold=False)
    empty = factories.ChatFactory.create(project=chat.project, owner=chat.owner)
    assert admin_client.post(reverse("admin:chats_chat_delete", args=[empty.pk]), {"post": "yes"}).status_code == 302
    assert not Chat.objects.filter(pk=empty.pk).exists()


@pytest.mark.postgres
@pytest.mark.django_db(transaction=True)
@pytest.mark.timeout(60)
def test_a_chat_move_waits_for_a_turn_starting_in_it_and_is_then_refused() -> None:
    """A first turn inserted into an empty chat while it is being moved: the move must see it, not pass the
    check before the turn commits (and leave the turn sealed under the matter it no longer has)."""
    chat, other = factories.ChatFactory.create(), factories.ProjectFactory.create()
    inserted, commit = threading.Event(), threading.Event()

    def start_a_turn() -> None:
        try:
            with transaction.atomic():
                factories.MessageFactory.create(chat=chat, role=Message.Role.USER)
                inserted.set()
                assert commit.wait(timeout=30), "the test never let the turn commit"
        finally:
            connection.close()

    def move() -> str:
        try:
            with transaction.atomic(), connection.cursor() as cursor:
                cursor.execute("UPDATE chats SET project_id = %s WHERE id = %s", [other.pk, chat.pk])
            return "moved"
        except IntegrityError as refused:
            return str(refused)
        finally:
            connection.close()

    with ThreadPoolExecutor(max_workers=2) as pool:
        turn = pool.submit(start_a_turn)
        assert inserted.wait(timeout=20), "the turn never started"
        moving = pool.submit(move)
        done_early = moving.done() or _finished_within(moving, seconds=1.0)
        commit.set()
        turn.result(timeout=30)
        outcome = moving.result(timeout=30)

    assert not done_early, "the move did not wait for the turn being inserted"
    assert "holds turns: its matter cannot change" in outcome
    chat.refresh_from_db()
    assert chat.project_id != other.pk


def _finished_within(future: Any, *, seconds: float) -> bool:
    try:
        future.result(timeout=seconds)
    except TimeoutError:
        return False
    return True
