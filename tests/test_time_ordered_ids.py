"""Time-ordered keys (chats.ids): the rows a turn writes get version 7 UUIDs that order by creation time,
from the model default and from the SQL function ``uuid_generate_v7()`` alike; older rows keep theirs."""

from __future__ import annotations

import time
import uuid
from collections.abc import Callable
from datetime import UTC, datetime
from typing import Any

import pytest
from django.db import connection
from django.utils import timezone

from chats.ids import uuid7
from chats.models import Message
from tests import factories

pytestmark = pytest.mark.django_db

ROW_FACTORIES: dict[str, Callable[[], Any]] = {
    "message": lambda: factories.MessageFactory.create(),
    "kb quote": lambda: factories.DocumentQuoteFactory.create(),
    "caselaw quote": lambda: factories.OpinionQuoteFactory.create(),
    "tool source": lambda: factories.MessageToolSourceFactory.create(),
    "case citation": lambda: factories.CaseCitationFactory.create(),
    "ledger entry": lambda: factories.CitationLedgerEntryFactory.create(),
}


def unix_ms(value: uuid.UUID) -> int:
    """The creation time a version 7 UUID carries: its first 48 bits, in milliseconds since the epoch."""
    return value.int >> 80


def assert_version_7(value: uuid.UUID) -> None:
    assert value.version == 7, value
    assert value.variant == uuid.RFC_4122, value


def test_uuid7_is_version_7_and_increases_within_a_process() -> None:
    before = int(time.time() * 1000)
    ids = [uuid7() for _ in range(2000)]
    for value in ids:
        assert_version_7(value)
    assert ids == sorted(ids)
    assert len(set(ids)) == len(ids)
    assert unix_ms(ids[0]) >= before


@pytest.mark.parametrize("kind", ROW_FACTORIES)
def test_new_rows_get_time_ordered_version_7_ids(kind: str) -> None:
    # Given rows created one after another, a millisecond apart at least
    create = ROW_FACTORIES[kind]
    rows = []
    for _ in range(3):
        rows.append(create())
        time.sleep(0.002)
    # Then each id is a version 7 UUID carrying its creation time, and they sort as the rows were made
    for row in rows:
        assert_version_7(row.pk)
        created_ms = int(row.created_at.timestamp() * 1000)
        assert abs(unix_ms(row.pk) - created_ms) < 5_000, (row.pk, row.created_at)
    assert [row.pk for row in rows] == sorted(row.pk for row in rows)


def test_existing_rows_keep_their_ids() -> None:
    # A row stored with a version 4 id (before this change) is read and saved under that same id.
    old_id = uuid.uuid4()
    chat = factories.ChatFactory.create()
    Message.objects.create(id=old_id, chat=chat, role=Message.Role.USER, content="older question")
    message = Message.objects.get(pk=old_id)
    message.content = "older question, edited"
    message.save()
    assert Message.objects.filter(pk=old_id).count() == 1
    assert Message.objects.get(pk=old_id).id.version == 4


def _sql_ids(count: int) -> list[uuid.UUID]:
    """``count`` ids from ``uuid_generate_v7()`` made by one statement, in the order it made them."""
    with connection.cursor() as cursor:
        cursor.execute(
            "WITH RECURSIVE g(n) AS (SELECT 1 UNION ALL SELECT n + 1 FROM g WHERE n < %s) "
            "SELECT uuid_generate_v7(), n FROM g ORDER BY n",
            [count],
        )
        return [value if isinstance(value, uuid.UUID) else uuid.UUID(value) for value, _ in cursor.fetchall()]


def test_the_sql_function_gives_valid_version_7_ids_ordering_by_time() -> None:
    # Works on both backends: a migration creates it on PostgreSQL, each SQLite connection registers it.
    before = int(timezone.now().timestamp() * 1000)
    ids = _sql_ids(5000)
    after = int(datetime.now(tz=UTC).timestamp() * 1000)
    for value in ids:
        assert_version_7(value)
        assert before <= unix_ms(value) <= after, (value, before, after)
    assert len(set(ids)) == len(ids)
    # Time (the 48 bits of milliseconds, then the 12 bits of fraction on PostgreSQL) never decreases in the
    # order the ids were made; the random tail orders ids made within one tick of the clock.
    time_fields = [(value.int >> 80, (value.int >> 64) & 0xFFF) for value in ids]
    if connection.vendor == "postgresql":
        assert time_fields == sorted(time_fields)
    else:
        assert ids == sorted(ids)  # the library's own counter: strictly increasing


def test_the_sql_function_orders_across_statements() -> None:
    first = _sql_ids(1)[0]
    time.sleep(0.002)
    second = _sql_ids(1)[0]
    assert first < second


@pytest.mark.postgres
def test_the_sql_function_is_volatile_and_parallel_safe() -> None:
    # Volatile: called once per row of an INSERT ... SELECT (not folded into one value); parallel safe: it
    # does not stop the planner from scanning the sources in parallel.
    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT provolatile, proparallel FROM pg_proc WHERE proname = 'uuid_generate_v7' AND pronargs = 0"
        )
        assert cursor.fetchall() == [("v", "s")]


def test_ledger_entries_written_by_the_shared_statement_get_version_7_ids() -> None:
    # Given a turn whose entries the ledger's own INSERT ... SELECT writes (assemble, as finalize and the
    # backfill do)
    from citations import ledger
    from citations.models import CitationLedgerEntry

    message = factories.assembled_turn(kb=2, caselaw=1, tools=1)
    ledger.assemble(message)
    # Then every entry's id is a version 7 UUID of about now
    entries = list(CitationLedgerEntry.objects.filter(message=message))
    assert len(entries) == 4
    now_ms = int(time.time() * 1000)
    for entry in entries:
        assert_version_7(entry.pk)
        assert abs(unix_ms(entry.pk) - now_ms) < 60_000, entry.pk
