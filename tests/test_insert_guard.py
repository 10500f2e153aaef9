"""A turn's rows are added only by the transaction that finalizes it (``chats.0032``): a row for a turn finalized
in an earlier transaction is refused, by the ORM and by raw SQL, on both databases; a finalize, a resumed
turn's next finalize and a message not finalized yet still get their rows.

Each test commits (``transaction=True``), so that "an earlier transaction" is a real one.
"""

from __future__ import annotations

import uuid
from collections.abc import Callable
from typing import Any

import pytest
from django.db import IntegrityError, connection, transaction
from django.utils import timezone

from chats.models import CaseCitation, Chat, DocumentQuote, Message, MessageToolSource, OpinionQuote
from chats.record import AppendOnlyError
from chats.services import ClaimedCitation, ConsultedSource, finalize_turn, reopen_interrupted_turn, start_turn
from tests import factories

pytestmark = pytest.mark.django_db(transaction=True)

QUESTION = "Must the reviewing court be satisfied that no workable race-neutral alternative exists?"
ROW_FACTORIES: dict[str, Callable[..., Any]] = {
    "message_citations": factories.DocumentQuoteFactory.create,
    "message_caselaw_citations": factories.OpinionQuoteFactory.create,
    "message_tool_sources": factories.MessageToolSourceFactory.create,
    "message_case_citations": factories.CaseCitationFactory.create,
}
ROW_MODELS = (DocumentQuote, OpinionQuote, MessageToolSource, CaseCitation)


def _db_id(value: uuid.UUID) -> Any:
    return value if connection.vendor == "postgresql" else value.hex


def _insert_tool_source(message: Message) -> None:
    """A consulted source added in SQL, as a client below the application would add it."""
    with transaction.atomic(), connection.cursor() as cursor:
        cursor.execute(
            "INSERT INTO message_tool_sources (id, message_id, source_kind, tool, provider, label, subtitle, url, "
            "external_ref, position, created_at) VALUES (%(id)s, %(message)s, 'mcp', 'docket_lookup', NULL, "
            "'Planted docket entry', '', '', 'planted', 0, %(now)s)",
            {
                "id": _db_id(uuid.uuid4()),
                "message": _db_id(message.pk),
                "now": connection.ops.adapt_datetimefield_value(timezone.now()),
            },
        )


@pytest.fixture
def finalized_turn() -> Message:
    """A turn finalized (and committed) in a transaction of its own, with a row in each per-turn table."""
    with transaction.atomic():
        message = factories.assembled_turn(kb=1, caselaw=1, tools=1)
        factories.CaseCitationFactory.create(message=message)
    return message


# --- refused -------------------------------------------------------------------------------------------------


@pytest.mark.parametrize("table", ROW_FACTORIES)
def test_the_orm_refuses_a_row_for_a_turn_finalized_in_an_earlier_transaction(
    table: str, finalized_turn: Message
) -> None:
    with pytest.raises(AppendOnlyError) as refused:
        ROW_FACTORIES[table](message=finalized_turn)

    assert str(refused.value) == (
        f"lqai_append_only: {table} rows cannot be added to message {finalized_turn.pk}: "
        "it was finalized in an earlier transaction"
    )
    assert sum(model.objects.filter(message=finalized_turn).count() for model in ROW_MODELS) == 4


def test_the_orm_refuses_late_rows_added_in_bulk(finalized_turn: Message) -> None:
    late = MessageToolSource(
        message=finalized_turn, source_kind="mcp", tool="docket_lookup", label="Late docket entry", position=1
    )

    with pytest.raises(
        AppendOnlyError, match=f"message_tool_sources rows cannot be added to message {finalized_turn.pk}"
    ):
        MessageToolSource.objects.bulk_create([late])


def test_raw_sql_cannot_add_a_row_to_a_turn_finalized_in_an_earlier_transaction(finalized_turn: Message) -> None:
    with pytest.raises(
        IntegrityError, match="lqai_append_only: message_tool_sources rows cannot be added to"
    ) as refused:
        _insert_tool_source(finalized_turn)

    assert "finalized in an earlier transaction" in str(refused.value)
    assert finalized_turn.tool_sources.count() == 1


@pytest.mark.postgres
def test_on_postgresql_the_refusal_names_the_message_and_the_stamp_cannot_be_forged(finalized_turn: Message) -> None:
    # Given a client rewriting the message's stamp to its own transaction (and its finalized_at unchanged)
    def forge_then_insert() -> None:
        with transaction.atomic(), connection.cursor() as cursor:
            cursor.execute(
                "UPDATE messages SET finalized_xact = pg_current_xact_id() WHERE id = %(id)s",
                {"id": finalized_turn.pk},
            )
            cursor.execute(
                "INSERT INTO message_tool_sources (id, message_id, source_kind, tool, label, subtitle, url, "
                "external_ref, position, created_at) VALUES (gen_random_uuid(), %(id)s, 'mcp', 'docket_lookup', "
                "'Planted', '', '', 'planted', 0, now())",
                {"id": finalized_turn.pk},
            )

    with pytest.raises(IntegrityError) as refused:
        forge_then_insert()

    # Then the stamp kept the finalize's transaction, and the row is refused naming both
    assert f"message_tool_sources rows cannot be added to message {finalized_turn.pk}" in str(refused.value)


def test_a_savepoint_of_a_later_transaction_cannot_add_a_row_either(finalized_turn: Message) -> None:
    # When a later transaction adds a row from inside a savepoint of its own
    with pytest.raises(AppendOnlyError), transaction.atomic(), transaction.atomic():
        factories.MessageToolSourceFactory.create(message=finalized_turn)

    assert finalized_turn.tool_sources.count() == 1


# --- still allowed -------------------------------------------------------------------------------------------


def test_a_finalize_writes_its_rows(committed_matter_chat: tuple[Any, Chat]) -> None:
    _, chat = committed_matter_chat
    _, answer = start_turn(chat=chat, content=QUESTION)
    document = chat.project.documents.get()  # type: ignore[union-attr]

    turn = finalize_turn(
        message=answer,
        content="Yes: the court must ultimately be satisfied.",
        status=Message.Status.COMPLETE,
        claimed_citations=[ClaimedCitation("must ultimately be satisfied", document_id=document.pk)],
        tool_sources=[ConsultedSource(source_kind="mcp", tool="docket_lookup", label="Docket entry 1")],
    )

    assert len(turn.citations) == 1
    assert answer.citations.count() == 1
    assert answer.tool_sources.count() == 1


def test_a_resumed_turns_next_finalize_adds_its_rows(committed_matter_chat: tuple[Any, Chat]) -> None:
    # Given a turn interrupted after one quote and one consulted source, committed
    _, chat = committed_matter_chat
    document = chat.project.documents.get()  # type: ignore[union-attr]
    claim = ClaimedCitation("must ultimately be satisfied", document_id=document.pk)
    _, answer = start_turn(chat=chat, content=QUESTION)
    finalize_turn(
        message=answer,
        content="Partial",
        status=Message.Status.INTERRUPTED,
        claimed_citations=[claim],
        tool_sources=[ConsultedSource(source_kind="mcp", tool="docket_lookup", label="Docket entry 1")],
    )
    first_finalized_at = Message.objects.get(pk=answer.pk).finalized_at

    # When it is resumed and finalized again, in later transactions
    assert reopen_interrupted_turn(message=answer)
    answer.refresh_from_db()
    finalize_turn(
        message=answer,
        content="Partial, then whole",
        status=Message.Status.COMPLETE,
        claimed_citations=[claim],
        tool_sources=[ConsultedSource(source_kind="mcp", tool="docket_lookup", label="Docket entry 2")],
        attempt=answer.attempt,
    )

    # Then its second finalize's rows were added beside the first's, and the turn is closed again
    answer.refresh_from_db()
    assert answer.finalized_at is not None
    assert first_finalized_at is not None
    assert answer.finalized_at > first_finalized_at
    assert answer.citations.count() == 2
    assert [source.label for source in answer.tool_sources.order_by("position")] == ["Docket entry 1", "Docket entry 2"]
    with pytest.raises(AppendOnlyError):
        factories.MessageToolSourceFactory.create(message=answer)


@pytest.mark.parametrize("table", ROW_FACTORIES)
def test_a_message_not_finalized_yet_takes_rows(table: str, committed_matter_chat: tuple[Any, Chat]) -> None:
    _, chat = committed_matter_chat
    _, answer = start_turn(chat=chat, content=QUESTION, assistant_status=Message.Status.STREAMING)

    ROW_FACTORIES[table](message=answer)
    _insert_tool_source(answer)

    assert answer.tool_sources.count() == (2 if table == "message_tool_sources" else 1)


def test_a_message_inserted_finalized_takes_its_rows_in_the_same_transaction() -> None:
    with transaction.atomic():
        message = factories.MessageFactory.create()
        factories.DocumentQuoteFactory.create(message=message)
        with transaction.atomic():  # a savepoint: still the transaction that finalized it
            _insert_tool_source(message)

    assert message.citations.count() == 1
    assert message.tool_sources.count() == 1


def test_a_finalize_rolled_back_leaves_the_message_open_to_its_next_finalize(
    committed_matter_chat: tuple[Any, Chat],
) -> None:
    # Given a finalize whose transaction rolled back after writing the message and its rows
    _, chat = committed_matter_chat
    _, answer = start_turn(chat=chat, content=QUESTION)

    def finalize_then_fail() -> None:
        with transaction.atomic():
            finalize_turn(message=answer, content="Lost", status=Message.Status.COMPLETE)
            raise RuntimeError("the transaction failed after the finalize")

    with pytest.raises(RuntimeError):
        finalize_then_fail()

    # Then the message is not finalized, and takes rows (a retried finalize's)
    answer.refresh_from_db()
    assert answer.finalized_at is None
    factories.MessageToolSourceFactory.create(message=answer)
    assert answer.tool_sources.count() == 1
