"""Backfilling the citation ledger: the service behind ``manage.py backfill_ledger``.

Turns finalized before the ledger existed, and turns whose ledger write failed, have source rows without
entries; this writes exactly the entries :func:`citations.ledger.assemble` would, by the same statements
(:func:`citations.ledger.write_entries`), over batches of messages in ``(created_at, id)`` keyset order, each
batch in a transaction of its own. Idempotent and resumable without a checkpoint: a row that has its entry is
skipped by the ledger's unique constraint, so a rerun completes a killed run and writes nothing over complete
data; ``dry_run`` counts what a run would write and keeps nothing. The walk, the counting and the concurrent
writers: docs/operations.md.
"""

from __future__ import annotations

import logging
import time
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any
from uuid import UUID

from django.db import connection, transaction
from django.db.backends.utils import CursorWrapper

from chats.models import Chat, Message
from citations.agreement import Disagreement, disagreements
from citations.ledger import SOURCE_MAPPINGS, db_value, write_entries
from citations.models import CitationLedgerEntry

logger = logging.getLogger(__name__)

# Messages per batch (a turn is two messages: the question and the answer with its rows).
DEFAULT_BATCH_SIZE = 5_000
# A safety net, not a pace: a batch statement that runs this long is holding its locks too long.
DEFAULT_STATEMENT_TIMEOUT = 30.0

# The last message of the next batch (the batch_size-th in scope after the previous batch), and the first of
# the one after it, if there is one.
_BATCH_END_TEMPLATE = """
SELECT m.created_at, m.id FROM {messages} m
WHERE ({after}) AND ({scope})
ORDER BY m.created_at, m.id
LIMIT 2 OFFSET %(last)s
"""
# A batch's source rows, per table, and the entries of its messages (an entry carries its row's message, so
# as many entries as rows means that every row has its entry). Each count goes through a message_id index; the
# entries are counted per message by a subquery, which PostgreSQL runs as an index lookup per message whatever
# it believes of the ledger's size (a ledger growing during a run has stale statistics).
_TOTALS_TEMPLATE = "SELECT {row_counts}, {entries}"
_ENTRY_COUNT_TEMPLATE = """(
    SELECT coalesce(sum((SELECT count(*) FROM {ledger} e WHERE e.message_id = m.id)), 0)
    FROM {messages} m WHERE {which_messages}
)"""
_ROW_COUNT_TEMPLATE = (
    "(SELECT count(*) FROM {source} s JOIN {messages} m ON m.id = s.message_id WHERE {which_messages})"
)
# For a batch whose rows are partly in the ledger: per table, its rows and those with their entry, each
# entry looked up by the ledger's unique index on the row's column.
_PER_TABLE_TEMPLATE = """
SELECT '{table}', count(*), count(e.{column})
FROM {source} s JOIN {messages} m ON m.id = s.message_id LEFT JOIN {ledger} e ON e.{column} = s.id
WHERE {which_messages}
"""
# Keyset bounds. Each also bounds created_at alone: PostgreSQL estimates a row comparison's selectivity poorly
# (many times the batch), enough to plan hash joins over whole tables; a plain range it estimates from the
# column's histogram, so every batch is planned as the index range scan it is.
_AFTER = "m.created_at >= %(after_created_at)s AND (m.created_at, m.id) > (%(after_created_at)s, %(after_id)s)"
_UP_TO = "m.created_at <= %(up_to_created_at)s AND (m.created_at, m.id) <= (%(up_to_created_at)s, %(up_to_id)s)"


@dataclass(frozen=True, slots=True)
class BackfillScope:
    """Which source rows to backfill: those of messages matching every filter set (``None``: no filter).

    ``since`` is inclusive and ``until`` exclusive, both on the message's ``created_at``.
    """

    project_id: UUID | None = None
    chat_id: UUID | None = None
    since: datetime | None = None
    until: datetime | None = None

    @property
    def is_everything(self) -> bool:
        return self.project_id is None and self.chat_id is None and self.since is None and self.until is None

    def sql(self) -> tuple[str, dict[str, Any]]:
        """The scope as a predicate over the message ``m``, and its parameters."""
        filters = {
            "project_id": (
                self.project_id,
                f"m.chat_id IN (SELECT id FROM {Chat._meta.db_table} WHERE project_id = %(project_id)s)",  # noqa: S608
            ),
            "chat_id": (self.chat_id, "m.chat_id = %(chat_id)s"),
            "since": (self.since, "m.created_at >= %(since)s"),
            "until": (self.until, "m.created_at < %(until)s"),
        }
        clauses = [clause for value, clause in filters.values() if value is not None]
        params = {name: db_value(value) for name, (value, _) in filters.items() if value is not None}
        return " AND ".join(clauses) or "1 = 1", params


@dataclass(slots=True)
class BackfillResult:
    """What a run did (or, with ``dry_run``, would do); running totals while it runs."""

    dry_run: bool
    # Entries created (or that would be), by ledger source_kind.
    created: Counter[str] = field(default_factory=Counter)
    # Distinct messages that got at least one entry.
    messages: int = 0
    # Source rows in scope that already had their entry.
    already_present: int = 0
    # Source rows in scope the ledger cannot hold, by source table.
    skipped: Counter[str] = field(default_factory=Counter)
    # With ``check``: where the ledger and the turns disagree (citations.agreement).
    disagreements: list[Disagreement] = field(default_factory=list)
    batches: int = 0
    rows_scanned: int = 0
    seconds: float = 0.0

    @property
    def total_created(self) -> int:
        return sum(self.created.values())

    @property
    def total_skipped(self) -> int:
        return sum(self.skipped.values())


# Called after each batch with the running totals and the number of source rows the batch scanned.
ProgressCallback = Callable[[BackfillResult, int], None]


class _DryRunRollback(Exception):
    """Raised to roll a dry run's batch back."""


def backfill_ledger(
    *,
    scope: BackfillScope | None = None,
    batch_size: int = DEFAULT_BATCH_SIZE,
    dry_run: bool = False,
    check: bool = False,
    sleep: float = 0.0,
    statement_timeout: float = DEFAULT_STATEMENT_TIMEOUT,
    on_batch: ProgressCallback | None = None,
) -> BackfillResult:
    """Write the ledger entries missing for the source rows in ``scope`` (everything by default), in
    batches of ``batch_size`` messages.

    With ``dry_run`` nothing is kept and the result counts what would be written; ``check`` is a dry run
    that also lists where the ledger and the turns disagree (:mod:`citations.agreement`). ``sleep`` seconds pass
    between batches (a throttle); ``statement_timeout`` seconds bound every statement (PostgreSQL).
    Idempotent, safe next to live turns and other backfills, and resumable by running it again.
    """
    if batch_size < 1:
        raise ValueError("batch_size must be at least 1")
    if sleep < 0:
        raise ValueError("sleep must not be negative")
    if statement_timeout <= 0:
        raise ValueError("statement_timeout must be positive")
    scope_sql, scope_params = (scope or BackfillScope()).sql()
    dry_run = dry_run or check
    result = BackfillResult(dry_run=dry_run)
    started = time.monotonic()
    after: tuple[Any, Any] | None = None
    write_first = False  # the first batch counts first: a rerun then only counts
    while True:
        try:
            with transaction.atomic(), connection.cursor() as cursor:
                if connection.vendor == "postgresql":
                    timeout_ms = str(max(1, round(statement_timeout * 1000)))
                    cursor.execute("SELECT set_config('statement_timeout', %s, true)", [timeout_ms])
                up_to = _batch_end(cursor, after, batch_size, scope_sql, scope_params)
                which, params = _batch_sql(after, up_to, scope_sql, scope_params)
                rows, write_first = _run_batch(cursor, which, params, result, write_first=write_first)
                if check:
                    result.disagreements += disagreements(cursor, which_messages=which, params=params)
                if dry_run:
                    raise _DryRunRollback
        except _DryRunRollback:
            pass
        result.batches += 1
        result.rows_scanned += rows
        result.seconds = time.monotonic() - started
        if on_batch is not None:
            on_batch(result, rows)
        if up_to is None:  # no more than batch_size messages were left: that was the last batch
            if result.total_created and not dry_run and connection.vendor == "postgresql":
                # After a bulk write, fresh statistics (as after any bulk load): the next run's per-message
                # entry lookups are then planned as the few-row index scans they are.
                with connection.cursor() as cursor:
                    cursor.execute(f"ANALYZE {CitationLedgerEntry._meta.db_table}")
            return result
        after = up_to
        if sleep:
            time.sleep(sleep)


def _batch_end(
    cursor: CursorWrapper, after: tuple[Any, Any] | None, batch_size: int, scope: str, params: dict[str, Any]
) -> tuple[Any, Any] | None:
    """The ``(created_at, id)`` of the last message of the batch after ``after``; ``None`` if no more than
    ``batch_size`` messages are left (the batch then runs to the end)."""
    sql = _BATCH_END_TEMPLATE.format(messages=Message._meta.db_table, after=_AFTER if after else "1 = 1", scope=scope)
    cursor.execute(sql, {**params, **_bound("after", after), "last": batch_size - 1})
    rows = cursor.fetchall()
    return (rows[0][0], rows[0][1]) if len(rows) == 2 else None


def _bound(name: str, bound: tuple[Any, Any] | None) -> dict[str, Any]:
    return {} if bound is None else {f"{name}_created_at": bound[0], f"{name}_id": bound[1]}


def _batch_sql(
    after: tuple[Any, Any] | None, up_to: tuple[Any, Any] | None, scope: str, scope_params: dict[str, Any]
) -> tuple[str, dict[str, Any]]:
    """The batch's messages (after ``after``, up to ``up_to``, in scope) as a predicate over ``m``, and its
    parameters."""
    which = " AND ".join([*([_AFTER] if after else []), *([_UP_TO] if up_to else []), f"({scope})"])
    return which, {**scope_params, **_bound("after", after), **_bound("up_to", up_to)}


def _run_batch(
    cursor: CursorWrapper, which: str, params: dict[str, Any], result: BackfillResult, *, write_first: bool
) -> tuple[int, bool]:
    """Write the entries missing for the batch's rows and count them into ``result``; the rows scanned, and
    whether this batch wrote every one of its rows.

    ``write_first`` (the previous batch wrote all of its rows, as on a first run): the inserts run at once and
    the rows are counted after them. Otherwise the batch is counted first and only the tables with a gap are
    written: a batch whose rows all have their entry (every batch of a rerun) only counts.
    """
    if write_first:
        created = write_entries(cursor, which_messages=which, params=params)
        rows, entries = _totals(cursor, which, params, with_entries=False)
    else:
        rows, entries = _totals(cursor, which, params)
        if entries == sum(rows.values()):
            result.already_present += entries
            return entries, False
        if entries == 0:
            gaps = [mapping for mapping in SOURCE_MAPPINGS if rows[mapping.table]]
        else:
            with_entry = _per_table(cursor, which, params)
            gaps = [mapping for mapping in SOURCE_MAPPINGS if with_entry[mapping.table] < rows[mapping.table]]
        created = write_entries(cursor, which_messages=which, params=params, mappings=gaps)
    total = sum(rows.values())
    for new in created.values():
        result.created.update(kind for kind, _ in new)
    result.messages += len({message_id for new in created.values() for _, message_id in new})
    written = sum(len(new) for new in created.values())
    if entries + written < total:
        # Some rows were not written: counted again, so that rows another writer filled meanwhile count as
        # present; what is still missing are rows the ledger cannot hold (from before the source tables'
        # constraints), counted per table.
        _, after = _totals(cursor, which, params)
        entries = after - written
        if after < total:
            with_entry = _per_table(cursor, which, params)
            for table, count in rows.items():
                result.skipped[table] += count - with_entry[table]
    result.already_present += entries
    return total, written == total


def _totals(
    cursor: CursorWrapper, which: str, params: dict[str, Any], *, with_entries: bool = True
) -> tuple[dict[str, int], int]:
    """The batch's rows, per table, and the entries of its messages (0 without ``with_entries``)."""
    messages, ledger_table = Message._meta.db_table, CitationLedgerEntry._meta.db_table
    row_counts = ", ".join(
        _ROW_COUNT_TEMPLATE.format(source=mapping.table, messages=messages, which_messages=which)
        for mapping in SOURCE_MAPPINGS
    )
    sql = _TOTALS_TEMPLATE.format(
        row_counts=row_counts,
        entries=_ENTRY_COUNT_TEMPLATE.format(ledger=ledger_table, messages=messages, which_messages=which)
        if with_entries
        else "0",
    )
    cursor.execute(sql, params)
    *rows, entries = cursor.fetchone()
    return {mapping.table: int(count) for mapping, count in zip(SOURCE_MAPPINGS, rows, strict=True)}, int(entries)


def _per_table(cursor: CursorWrapper, which: str, params: dict[str, Any]) -> dict[str, int]:
    """Per table: how many of the batch's rows have their entry."""
    sql = " UNION ALL ".join(
        _PER_TABLE_TEMPLATE.format(
            table=mapping.table,
            source=mapping.table,
            column=mapping.column,
            ledger=CitationLedgerEntry._meta.db_table,
            messages=Message._meta.db_table,
            which_messages=which,
        )
        for mapping in SOURCE_MAPPINGS
    )
    cursor.execute(sql, params)
    return {table: int(with_entry) for table, _, with_entry in cursor.fetchall()}


def estimated_source_rows(scope: BackfillScope | None = None) -> int | None:
    """How many source rows a run will scan, for a progress bar: the planner's estimate on PostgreSQL
    (instant on any size), an exact count elsewhere; ``None`` (unknown) when the scope is filtered."""
    if scope is not None and not scope.is_everything:
        return None
    tables = [m.table for m in SOURCE_MAPPINGS]
    with connection.cursor() as cursor:
        if connection.vendor == "postgresql":
            cursor.execute(
                "SELECT coalesce(sum(greatest(reltuples, 0)), 0)::bigint FROM pg_class WHERE relname = ANY(%s)",
                [tables],
            )
        else:
            cursor.execute("SELECT " + " + ".join(f"(SELECT count(*) FROM {t})" for t in tables))  # noqa: S608
        row = cursor.fetchone()
    return int(row[0]) if row and row[0] else None


class LogProgress:
    """A progress callback for runs without a terminal: one log line every ``every_seconds`` seconds
    or ``every_batches`` batches, whichever comes first."""

    def __init__(self, *, every_seconds: float = 10.0, every_batches: int = 100) -> None:
        self.every_seconds = every_seconds
        self.every_batches = every_batches
        self._last_time = time.monotonic()
        self._last_batch = 0

    def __call__(self, totals: BackfillResult, batch_rows: int) -> None:
        now = time.monotonic()
        if now - self._last_time < self.every_seconds and totals.batches - self._last_batch < self.every_batches:
            return
        self._last_time, self._last_batch = now, totals.batches
        logger.info(
            "backfill_ledger: %d batches, %d source rows scanned, %s %d entries, %d already present, "
            "%.0f rows/s, %.1f s",
            totals.batches,
            totals.rows_scanned,
            "would create" if totals.dry_run else "created",
            totals.total_created,
            totals.already_present,
            totals.rows_scanned / totals.seconds if totals.seconds else 0.0,
            totals.seconds,
        )
