"""Backfilling the citation ledger: the service behind ``manage.py backfill_ledger``.

Turns finalized before the ledger existed, and turns whose ledger write failed (a ledger failure is
logged, never fatal), have source rows without entries; this is the repair path. It writes exactly the
entries :func:`citations.ledger.assemble` would, because it executes the same mapping
(:data:`~citations.ledger.SOURCE_MAPPINGS` through :func:`~citations.ledger.insert_sql`), set-based and in
batches, so that it can run on tables of tens of millions of rows next to live traffic.

How it walks: keyset pagination over messages in ``(created_at, id)`` order (the index
``messages_created_idx``), never OFFSET. A batch is the window ``(lo, hi]`` of the next *k* messages
(in scope) and holds all their source rows: always whole messages, so no batch holds half a turn, the
scope filters (project, chat, the message's ``created_at``) are per message, and the messages of each
batch add up to the exact number of messages that got entries, with memory bounded by one batch.
*k* is chosen so that a batch holds about ``batch_size`` source rows: for the first batch from the rows
per message of the first thousand messages, then from those of the previous batch (growing at most
twofold per batch); so a batch exceeds ``batch_size`` only by a change of rows per message between two
batches, or by a single message's rows.

Why creation order: turns are written in that order, so a batch's messages and their source rows sit
together on disk, and each batch reads (and, through the ledger's foreign-key checks at commit, locks)
a few contiguous pages of each table. Walking message ids instead (random UUIDs) scattered every batch
over every page: each page was read and re-locked by many batches, writing more WAL and taking longer
than the raw SQL limit (measured in ``benchmarks/RESULTS.md``). Far beyond memory the difference is
between reading each page once and reading it once per batch.

Each batch is one transaction with a statement timeout (``set_config(..., is_local => true)``, i.e.
``SET LOCAL``, on PostgreSQL) that takes one of two paths:

- **First pass** (PostgreSQL, writing, and the previous batch found no entry, as on a first run): per
  table, in the mapping order, one statement (:func:`ledger.counted_insert_sql`) reads the batch's rows
  once into a materialized CTE, feeds those the ledger can hold to the shared mapping's
  ``INSERT ... ORDER BY s.id ON CONFLICT DO NOTHING`` and counts what it read and wrote. A row that was
  not written already had its entry (``already present``); if there was one, the next batch counts first.
- **Count first** (otherwise: the first batch, a batch after one that found entries, and always in a dry
  run or on SQLite):

  1. one read that counts, per table, the batch's rows the ledger can hold, those it cannot
     (``SourceMapping.valid``: skipped and counted, never fatal), and the ledger's entries for the same
     messages (an entry carries its source row's message). Where the two counts meet the table has no
     gap in the batch: on a rerun that is every batch, which therefore only reads;
  2. for each table with a gap, in the mapping order, the shared
     ``INSERT ... SELECT ... ORDER BY s.id ON CONFLICT DO NOTHING`` restricted to the batch and, by an
     anti-join probing the ledger's unique index row by row, to rows with no entry yet (the anti-join is
     left out when the batch had no entry at all). A batch without any entry sends the next one back to
     the first pass.

On PostgreSQL the batch also pins its plan shape (``SET LOCAL``): every statement is right as "index
range scan of the batch's messages, then index lookups", while the planner, with a ledger growing under
stale statistics, may pick a plan that reads whole tables per batch (a sequential scan or a hash join
built from a whole table) or starts parallel workers. So sequential scans, hash and merge joins,
parallel workers and JIT are switched off for the batch's transaction only; so are bitmap scans, which
the planner picks for the per-message ledger lookups from the same stale statistics (thousands of rows
expected, two or three found), where plain index scans are faster (``benchmarks/RESULTS.md``).

The counts rely on source rows not being edited once their entry exists (nothing edits them: a turn's
rows are written once, by ``finalize_turn``); an entry kept for a row later made invalid could offset one
missing row of the same table and batch. ``ON CONFLICT`` keeps the writes exact regardless.

Concurrency: every writer (this, another backfill, live ``assemble()``) inserts in the same order
(mapping order, then source id), so waits on the per-row unique indexes cannot form a cycle: no
deadlock. Those unique constraints, not a read-then-write check, decide who writes an entry: two
writers never both create one, and ``ON CONFLICT DO NOTHING`` makes the loser skip it.

Resumable without a checkpoint table, on purpose: every batch commits on its own and the insert is
idempotent, so after a kill (even SIGKILL mid-batch: the open batch rolls back) a plain rerun completes
the job exactly, and a rerun over rows that already have entries only reads (``benchmarks/RESULTS.md``
measures it at a few percent of a first run). A checkpoint would not even be right: rows whose ledger
write fails later land anywhere in the id space, behind any checkpoint, and a checkpoint would have to be
keyed by scope and shared by concurrent runs. Only a full pass finds every gap.
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
from django.utils import timezone

from citations.ledger import (
    LEDGER_TABLE,
    SOURCE_MAPPINGS,
    SourceMapping,
    counted_insert_sql,
    db_value,
    insert_sql,
    source_from_sql,
)

logger = logging.getLogger(__name__)

# Source rows per batch, chosen with `make bench` (benchmarks/RESULTS.md): from 10k to 50k rows a run
# takes about the same time (per-batch overhead is a few percent; 5k is measurably slower), while a
# batch's transaction, and so how long it holds its locks, grows with its size: 10k keeps it within
# about a second on the (slow, shared) benchmark machine, a fraction of that on a production server.
DEFAULT_BATCH_SIZE = 10_000
# A window of messages holds at most this many messages per source row of the batch size: a stretch of
# messages without source rows (user messages, turns without sources) is still walked in bounded batches.
MAX_MESSAGES_PER_ROW = 10
# The first window's size comes from the rows per message of this many first messages in scope.
FIRST_WINDOW_SAMPLE = 1_000
# A safety net, not a pace: a batch statement that runs this long is holding its locks too long.
DEFAULT_STATEMENT_TIMEOUT = 30.0


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


@dataclass(frozen=True, slots=True)
class _ScopeSQL:
    """A scope as SQL: the messages ``m`` a walk reads (with their chat ``c`` when the scope filters on the
    project) and the predicate over them, with its parameters."""

    messages: str
    predicate: str
    params: list[Any]

    def window(self, lower: tuple[Any, Any] | None, upper: tuple[Any, Any] | None) -> tuple[str, list[Any]]:
        """Messages after ``lower`` and up to ``upper`` in ``(created_at, id)`` order (either may be open),
        within the scope: one range of the ``messages_created_idx`` index."""
        clauses: list[str] = []
        params: list[Any] = []
        if lower is not None:
            clauses.append("(m.created_at, m.id) > (%s, %s)")
            params += lower
        if upper is not None:
            clauses.append("(m.created_at, m.id) <= (%s, %s)")
            params += upper
        clauses.append(f"({self.predicate})")
        return " AND ".join(clauses), [*params, *self.params]


@dataclass(frozen=True, slots=True)
class _Batch:
    """One batch: the in-scope source rows of the messages whose ``(created_at, id)`` is in ``(lower, upper]``
    (``lower`` None: from the first message)."""

    lower: tuple[Any, Any] | None
    upper: tuple[Any, Any]
    scope: _ScopeSQL

    def where(self) -> tuple[str, list[Any]]:
        """The batch as a SQL predicate over the message ``m`` (and chat ``c``) of a row, and its parameters."""
        return self.scope.window(self.lower, self.upper)


@dataclass(slots=True)
class _TableTally:
    valid: int = 0
    invalid: int = 0
    entries: int = 0


def backfill_ledger(
    *,
    scope: BackfillScope | None = None,
    batch_size: int = DEFAULT_BATCH_SIZE,
    dry_run: bool = False,
    sleep: float = 0.0,
    statement_timeout: float = DEFAULT_STATEMENT_TIMEOUT,
    on_batch: ProgressCallback | None = None,
) -> BackfillResult:
    """Write the ledger entries missing for the source rows in ``scope`` (everything by default).

    With ``dry_run`` nothing is written and the result counts what would be. ``sleep`` seconds pass
    between batches (a throttle); ``statement_timeout`` seconds bound every statement (PostgreSQL).
    Idempotent, safe next to live turns and other backfills, and resumable by running it again.
    """
    if batch_size < 1:
        raise ValueError("batch_size must be at least 1")
    if sleep < 0:
        raise ValueError("sleep must not be negative")
    if statement_timeout <= 0:
        raise ValueError("statement_timeout must be positive")
    scope_sql = _scope_sql(scope or BackfillScope())
    result = BackfillResult(dry_run=dry_run)
    started = time.monotonic()
    with transaction.atomic(), connection.cursor() as cursor:
        _begin_batch(cursor, statement_timeout)
        messages = _first_window(cursor, batch_size, scope_sql)
        bound = _window_end(cursor, None, messages, scope_sql)
    lower: tuple[Any, Any] | None = None
    fresh = False  # the first batch counts first: on a rerun it then only reads; a first run switches after it
    while bound is not None:
        upper, window = bound
        with transaction.atomic(), connection.cursor() as cursor:
            _begin_batch(cursor, statement_timeout)
            batch_rows, fresh = _run_batch(cursor, _Batch(lower, upper, scope_sql), result=result, fresh=fresh)
            # The next window, looked up now so that no pause follows the last batch; a window of fewer
            # messages than asked for ran out of messages: this was the last batch.
            if window < messages:
                bound = None
            else:
                messages = _next_window(messages, batch_rows, batch_size)
                bound = _window_end(cursor, upper, messages, scope_sql)
        lower = upper
        result.batches += 1
        result.rows_scanned += batch_rows
        result.seconds = time.monotonic() - started
        if on_batch is not None:
            on_batch(result, batch_rows)
        if bound is not None and sleep:
            time.sleep(sleep)
    result.seconds = time.monotonic() - started
    return result


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


def _scope_sql(scope: BackfillScope) -> _ScopeSQL:
    """The scope as SQL over a source row's message ``m`` and chat ``c``."""
    clauses: list[str] = []
    params: list[Any] = []
    for value, clause in (
        (scope.project_id, "c.project_id = %s"),
        (scope.chat_id, "m.chat_id = %s"),
        (scope.since, "m.created_at >= %s"),
        (scope.until, "m.created_at < %s"),
    ):
        if value is not None:
            clauses.append(clause)
            params.append(db_value(value))
    messages = "messages m JOIN chats c ON c.id = m.chat_id" if scope.project_id is not None else "messages m"
    return _ScopeSQL(messages=messages, predicate=" AND ".join(clauses) or "1 = 1", params=params)


def _begin_batch(cursor: CursorWrapper, statement_timeout: float) -> None:
    """Set the batch's transaction up: on PostgreSQL its statement timeout and planner settings (see the
    module docstring); ``is_local``, like ``SET LOCAL``, ends each setting with the transaction."""
    if connection.vendor == "postgresql":
        cursor.execute(
            "SELECT set_config('statement_timeout', %s, true), set_config('enable_seqscan', 'off', true), "
            "set_config('enable_bitmapscan', 'off', true), "
            "set_config('enable_hashjoin', 'off', true), set_config('enable_mergejoin', 'off', true), "
            "set_config('max_parallel_workers_per_gather', '0', true), set_config('jit', 'off', true)",
            [str(max(1, round(statement_timeout * 1000)))],
        )


def _first_window(cursor: CursorWrapper, batch_size: int, scope: _ScopeSQL) -> int:
    """Messages in the first window: as many as hold about ``batch_size`` source rows at the density of the
    first ``FIRST_WINDOW_SAMPLE`` messages in scope (counted through the tables' ``message_id`` indexes)."""
    rows = " + ".join(
        f"(SELECT count(*) FROM w JOIN {m.table} s ON s.message_id = w.id)"  # noqa: S608
        for m in SOURCE_MAPPINGS
    )
    cursor.execute(
        f"WITH w AS (SELECT m.id FROM {scope.messages} WHERE {scope.predicate} "  # noqa: S608
        f"ORDER BY m.created_at, m.id LIMIT %s) SELECT (SELECT count(*) FROM w), {rows}",
        [*scope.params, FIRST_WINDOW_SAMPLE],
    )
    messages, sample_rows = cursor.fetchone()
    return _messages_for(batch_size, messages=int(messages), rows=int(sample_rows or 0))


def _next_window(messages: int, rows: int, batch_size: int) -> int:
    """Messages in the next window, after a window of ``messages`` messages held ``rows`` source rows: as
    many as hold ``batch_size`` rows at that density, but at most twice as many as before (twice as many
    after a window without rows)."""
    return min(2 * messages, _messages_for(batch_size, messages=messages, rows=rows))


def _messages_for(batch_size: int, *, messages: int, rows: int) -> int:
    """How many messages hold about ``batch_size`` source rows at ``rows`` per ``messages``: at least one,
    at most ``MAX_MESSAGES_PER_ROW`` per row of the batch (a stretch of messages without rows is still
    walked in bounded batches)."""
    cap = MAX_MESSAGES_PER_ROW * batch_size
    if rows <= 0:
        return cap
    return max(1, min(cap, messages * batch_size // rows))


def _window_end(
    cursor: CursorWrapper, lower: tuple[Any, Any] | None, messages: int, scope: _ScopeSQL
) -> tuple[tuple[Any, Any], int] | None:
    """The ``(created_at, id)`` of the last of the next ``messages`` messages in scope after ``lower``, and
    how many there are (fewer than ``messages``: the last window); ``None`` when no message is left.
    One index range scan of ``messages_created_idx`` (joined to the chat when the scope needs it)."""
    where, where_params = scope.window(lower, None)
    cursor.execute(
        f"SELECT created_at, id, count(*) OVER () FROM (SELECT m.created_at, m.id FROM {scope.messages} "  # noqa: S608
        f"WHERE {where} ORDER BY m.created_at, m.id LIMIT %s) AS w "
        "ORDER BY created_at DESC, id DESC LIMIT 1",
        [*where_params, messages],
    )
    row = cursor.fetchone()
    return None if row is None else ((row[0], row[1]), int(row[2]))


def _no_flattening() -> str:
    """``OFFSET 0`` on PostgreSQL: a subquery the planner must run as written, per outer row."""
    return " OFFSET 0" if connection.vendor == "postgresql" else ""


def _entries_join() -> str:
    """The ledger entries ``e`` of each message ``m``, looked up per message through the ledger's
    ``message_id`` index. On PostgreSQL a ``LATERAL ... OFFSET 0`` subquery: the ledger grows during a run,
    so its statistics are stale, and a planner believing it empty would walk the whole ledger and probe
    the messages instead (a batch would cost as much as the ledger is large)."""
    fk_columns = ", ".join(f"e.{m.fk_column}" for m in SOURCE_MAPPINGS)
    if connection.vendor == "postgresql":
        return (
            f"CROSS JOIN LATERAL (SELECT {fk_columns} FROM {LEDGER_TABLE} e "  # noqa: S608
            "WHERE e.message_id = m.id OFFSET 0) AS e"
        )
    return f"JOIN {LEDGER_TABLE} e ON e.message_id = m.id"


def _entry_probe(mapping: SourceMapping) -> str:
    """The ledger entry of source row ``s``, looked up by its unique index (for ``[NOT] EXISTS``).

    ``OFFSET 0`` keeps PostgreSQL from turning ``[NOT] EXISTS`` into a join: the ledger grows during a
    run, so its statistics are always stale and a hash or merge join would read the whole ledger per
    batch (quadratic over a run). A probe per row keeps a batch's cost proportional to its size.
    """
    return f"(SELECT 1 FROM {LEDGER_TABLE} e WHERE e.{mapping.fk_column} = s.id{_no_flattening()})"  # noqa: S608


def _tally(cursor: CursorWrapper, batch: _Batch) -> dict[str, _TableTally]:
    """One read over the batch: per table, its rows the ledger can and cannot hold, and their entries.

    Each count walks the batch's messages and looks their rows up by ``message_id`` (the source tables'
    and the ledger's indexes), so that a batch with no gap (every batch of a rerun) costs index lookups
    only: an entry carries its source row's message (the mapping copies it), so both counts cover the same
    rows. The chat is joined only when the scope needs it: a source row's message, chat and opinion are
    NOT NULL foreign keys, so the insert's other inner joins drop no row.
    """
    where, where_params = batch.where()
    messages = batch.scope.messages
    parts = [
        f"SELECT '{m.table}', CASE WHEN ({m.valid}) THEN 1 ELSE 0 END, count(*) "  # noqa: S608
        f"FROM {messages} JOIN {m.table} s ON s.message_id = m.id WHERE {where} GROUP BY 2"
        for m in SOURCE_MAPPINGS
    ]
    table_of_entry = " ".join(f"WHEN e.{m.fk_column} IS NOT NULL THEN '{m.table}'" for m in SOURCE_MAPPINGS)
    parts.append(
        f"SELECT CASE {table_of_entry} END, 2, count(*) FROM {messages} {_entries_join()} "  # noqa: S608
        f"WHERE {where} GROUP BY 1"
    )
    cursor.execute(" UNION ALL ".join(parts), where_params * len(parts))
    tallies = {m.table: _TableTally() for m in SOURCE_MAPPINGS}
    for table, what, rows in cursor.fetchall():
        tally = tallies[table]
        if what == 2:
            tally.entries += rows
        elif what == 1:
            tally.valid += rows
        else:
            tally.invalid += rows
    return tallies


def _missing_where(mapping: SourceMapping, batch: _Batch, *, any_entries: bool) -> tuple[str, list[Any]]:
    """The batch's rows of ``mapping`` without an entry. When the batch had no entry at all (a first run),
    the anti-join is left out: it would find nothing, and a race is still settled by ON CONFLICT."""
    where, params = batch.where()
    return (f"{where} AND NOT EXISTS {_entry_probe(mapping)}" if any_entries else where), params


def _insert(
    cursor: CursorWrapper, mapping: SourceMapping, batch: _Batch, *, any_entries: bool
) -> tuple[Counter[str], set[Any]]:
    """Write the batch's missing entries of one table; returns how many by kind, and for which messages."""
    where, params = _missing_where(mapping, batch, any_entries=any_entries)
    sql = insert_sql(
        mapping,
        vendor=connection.vendor,
        where=where,
        returning=True,
        returning_columns=("source_kind", "message_id"),
    )
    if connection.vendor == "postgresql":
        # Aggregate in the database: one row per (kind, message) comes back, not one per entry.
        sql = f"WITH ins AS ({sql}) SELECT source_kind, message_id, count(*) FROM ins GROUP BY 1, 2"  # noqa: S608
    cursor.execute(sql, [db_value(timezone.now()), *params])
    return _by_kind_and_message(cursor.fetchall())


def _missing(
    cursor: CursorWrapper, mapping: SourceMapping, batch: _Batch, *, any_entries: bool
) -> tuple[Counter[str], set[Any]]:
    """What :func:`_insert` would write (dry run): the rows it selects, by kind, and their messages."""
    where, params = _missing_where(mapping, batch, any_entries=any_entries)
    cursor.execute(
        f"SELECT {mapping.source_kind}, s.message_id, count(*) FROM {source_from_sql(mapping)} "  # noqa: S608
        f"WHERE ({mapping.valid}) AND {where} GROUP BY 1, 2",
        params,
    )
    return _by_kind_and_message(cursor.fetchall())


def _by_kind_and_message(rows: list[Any]) -> tuple[Counter[str], set[Any]]:
    """Rows of (kind, message[, count]) as entries by kind and the set of messages."""
    by_kind: Counter[str] = Counter()
    messages: set[Any] = set()
    for row in rows:
        by_kind[row[0]] += row[2] if len(row) > 2 else 1
        messages.add(row[1])
    return by_kind, messages


def _run_batch(cursor: CursorWrapper, batch: _Batch, *, result: BackfillResult, fresh: bool) -> tuple[int, bool]:
    """Fill (unless dry run) and count the batch's gaps, table by table; returns the rows scanned, and
    whether the batch found no entry at all (the next batch then takes the first-pass path).

    ``fresh`` (on PostgreSQL, writing): the previous batch found no entry, as on a first run, so this one
    most likely has none either: each table's rows are read once by :func:`ledger.counted_insert_sql`,
    which writes and counts. Otherwise the batch is counted first (:func:`_tally`) and only tables with a
    gap are written: a rerun only reads."""
    if fresh and not result.dry_run and connection.vendor == "postgresql":
        return _first_pass(cursor, batch, result=result)
    tallies = _tally(cursor, batch)
    messages: set[Any] = set()
    for mapping in SOURCE_MAPPINGS:
        tally = tallies[mapping.table]
        result.skipped[mapping.table] += tally.invalid
        if tally.entries == tally.valid:
            result.already_present += tally.valid  # no gap: nothing to write
            continue
        write = _missing if result.dry_run else _insert
        created, created_for = write(cursor, mapping, batch, any_entries=tally.entries > 0)
        result.created.update(created)
        messages |= created_for
        # The insert reads a later snapshot than the count: rows that appeared in between may add to it.
        result.already_present += max(0, tally.valid - sum(created.values()))
    result.messages += len(messages)
    return sum(t.valid + t.invalid for t in tallies.values()), not any(t.entries for t in tallies.values())


def _first_pass(cursor: CursorWrapper, batch: _Batch, *, result: BackfillResult) -> tuple[int, bool]:
    """The batch written and counted in one read per table (PostgreSQL): see :func:`_run_batch`."""
    where, params = batch.where()
    messages: set[Any] = set()
    scanned = 0
    none_present = True
    for mapping in SOURCE_MAPPINGS:
        cursor.execute(counted_insert_sql(mapping, where=where), [db_value(timezone.now()), *params])
        valid = created = 0
        for kind, message_id, count, invalid in cursor.fetchall():
            if kind is None:
                valid = count
                result.skipped[mapping.table] += invalid
                scanned += count + invalid
            else:
                result.created[kind] += count
                created += count
                messages.add(message_id)
        # A row the ledger can hold that was not written already had its entry.
        result.already_present += valid - created
        none_present = none_present and valid == created
    result.messages += len(messages)
    return scanned, none_present
