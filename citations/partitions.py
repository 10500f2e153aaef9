"""The ledger's monthly partitions on PostgreSQL: the service behind ``manage.py ledger_partitions``.

:func:`ensure_partitions` creates the partitions of this month and the next ``ahead`` months (and of every
month with entries in the default partition), moving each month's entries out of the default partition in
the same transaction, checked by count and digest; idempotent, safe from cron. :func:`drop_months_before`
detaches (and drops, unless kept) whole months before a month, refused under legal hold
(:class:`chats.record.LegalHoldError`), leaving one tombstone per month. Locks are taken parent first, then
partition, each waiting at most ``lock_timeout``. The layout, the move and the lock order:
docs/operations.md.
"""

from __future__ import annotations

import re
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import UTC, date, datetime
from typing import Any

from django.db import connection, transaction
from django.db.backends.utils import CursorWrapper
from django.utils import timezone

from chats.models import Chat, Project
from chats.record import LegalHoldError
from citations.models import CitationLedgerEntry, LedgerPartitionDrop

LEDGER = CitationLedgerEntry._meta.db_table
DEFAULT_PARTITION = f"{LEDGER}_default"
# The transaction-local setting under which the append-only trigger lets rows leave the default partition.
MOVE_SETTING = "lqai.ledger_move"
# Entries moved per statement: a progress step, and a bound on each statement's memory.
MOVE_CHUNK = 50_000
DEFAULT_LOCK_TIMEOUT = 10.0

_BOUNDS = re.compile(r"FOR VALUES FROM \('([^']+)'\) TO \('([^']+)'\)")


class PartitionError(Exception):
    """A partition operation refused or undone; nothing was changed."""


@dataclass(frozen=True, slots=True)
class Partition:
    name: str
    # None for the default partition.
    start: datetime | None
    end: datetime | None
    estimated_rows: int


@dataclass(slots=True)
class EnsureResult:
    created: list[str] = field(default_factory=list)
    # Entries moved out of the default partition, by new partition.
    moved: dict[str, int] = field(default_factory=dict)


# Called with (partition, entries moved so far, entries to move).
MoveProgress = Callable[[str, int, int], None]


def partition_name(month: date) -> str:
    return f"{LEDGER}_y{month.year:04d}m{month.month:02d}"


def month_start(month: date) -> datetime:
    return datetime(month.year, month.month, 1, tzinfo=UTC)


def next_month(month: date) -> date:
    return date(month.year + month.month // 12, month.month % 12 + 1, 1)


def is_partitioned() -> bool:
    """Whether the ledger is a partitioned table here (PostgreSQL after ``citations.0014``)."""
    if connection.vendor != "postgresql":
        return False
    with connection.cursor() as cursor:
        cursor.execute("SELECT relkind FROM pg_class WHERE oid = to_regclass(%s)", [LEDGER])
        row = cursor.fetchone()
    return row is not None and row[0] == "p"


def _require_partitioned() -> None:
    if not is_partitioned():
        raise PartitionError(
            "The ledger is partitioned on PostgreSQL only; here it is a plain table, with nothing to do."
        )


def partitions() -> list[Partition]:
    """The ledger's partitions, months in order, the default partition last."""
    _require_partitioned()
    with connection.cursor() as cursor:
        cursor.execute(
            """
            SELECT c.relname, pg_get_expr(c.relpartbound, c.oid), GREATEST(c.reltuples, 0)::bigint
            FROM pg_inherits i JOIN pg_class c ON c.oid = i.inhrelid
            WHERE i.inhparent = %s::regclass
            """,
            [LEDGER],
        )
        rows = cursor.fetchall()
    found = []
    for name, bound, estimate in rows:
        match = _BOUNDS.search(bound or "")
        start, end = (_parse(match.group(1)), _parse(match.group(2))) if match else (None, None)
        found.append(Partition(name=name, start=start, end=end, estimated_rows=int(estimate)))
    return sorted(found, key=lambda p: (p.start is None, p.start or datetime.min.replace(tzinfo=UTC)))


# The months change once a month (the nightly ``ledger_partitions``), so a process reads them at most once a
# minute for the admin's walks (``citations.selectors.time_chunks``). A stale list still tiles all time: a
# month created since falls in the span after the last month listed, a month dropped since is an empty span.
# It can make a walk take a query more, never miss an entry.
MONTHS_TTL_SECONDS = 60.0
_months_read: tuple[float, list[tuple[datetime, datetime]]] | None = None


def months() -> list[tuple[datetime, datetime]]:
    """The ``[start, end)`` of each monthly partition, in time order (none when the ledger is not partitioned),
    as read at most ``MONTHS_TTL_SECONDS`` ago in this process, or since this module last changed them."""
    global _months_read
    now = time.monotonic()
    if _months_read is None or now - _months_read[0] > MONTHS_TTL_SECONDS:
        found = []
        if is_partitioned():
            found = [(p.start, p.end) for p in partitions() if p.start is not None and p.end is not None]
        _months_read = (now, found)
    return _months_read[1]


def forget_months() -> None:
    """Read the months afresh at the next call of :func:`months`."""
    global _months_read
    _months_read = None


def _parse(bound: str) -> datetime:
    return datetime.fromisoformat(bound).astimezone(UTC)


def _limit_lock_waits(cursor: CursorWrapper, lock_timeout: float) -> None:
    cursor.execute("SELECT set_config('lock_timeout', %s, true)", [f"{max(1, round(lock_timeout * 1000))}ms"])


def ensure_partitions(
    *,
    ahead: int,
    today: date | None = None,
    lock_timeout: float = DEFAULT_LOCK_TIMEOUT,
    progress: MoveProgress | None = None,
) -> EnsureResult:
    """Create the partitions of this month (UTC), of the ``ahead`` months after it and of every month with
    entries in the default partition (moving those entries), each in a transaction of its own. A month that
    has a partition is left alone, so a rerun does nothing; a dropped month (its tombstone) is never created
    again."""
    if ahead < 0:
        raise ValueError("ahead must not be negative")
    _require_partitioned()
    month = (today or timezone.now().date()).replace(day=1)
    wanted = {month}
    for _ in range(ahead):
        month = next_month(month)
        wanted.add(month)
    with connection.cursor() as cursor:
        cursor.execute(
            f"SELECT DISTINCT CAST(date_trunc('month', created_at AT TIME ZONE 'UTC') AS date) FROM {DEFAULT_PARTITION}"  # noqa: S608
        )
        wanted |= {row[0] for row in cursor.fetchall()}
    existing = {p.start for p in partitions() if p.start is not None}
    dropped = set(LedgerPartitionDrop.objects.values_list("range_start", flat=True))
    result = EnsureResult()
    for month in sorted(wanted):
        if month_start(month) in existing or month_start(month) in dropped:
            continue
        moved = _create_month(month, lock_timeout=lock_timeout, progress=progress)
        result.created.append(partition_name(month))
        if moved:
            result.moved[partition_name(month)] = moved
    forget_months()
    return result


# Count and an order-independent digest of a set of ledger rows, over the rows' whole text.
_DIGEST_SQL = "SELECT count(*), COALESCE(sum(hashtextextended(CAST(t AS text), 0)::numeric), 0) FROM {table} t"
_IN_MONTH = "created_at >= %(start)s AND created_at < %(end)s"
_MOVE_SQL = """
WITH batch AS (
    SELECT id, created_at FROM {default} WHERE {in_month} ORDER BY id LIMIT %(chunk)s
), moved AS (
    DELETE FROM {default} d USING batch b WHERE d.id = b.id AND d.created_at = b.created_at RETURNING d.*
)
INSERT INTO {partition} ({columns}) SELECT {columns} FROM moved
"""


def _create_month(month: date, *, lock_timeout: float, progress: MoveProgress | None) -> int:
    """Create ``month``'s partition, moving its entries out of the default partition; how many moved."""
    name = partition_name(month)
    bounds = {"start": month_start(month), "end": month_start(next_month(month))}
    with transaction.atomic(), connection.cursor() as cursor:
        _limit_lock_waits(cursor, lock_timeout)
        cursor.execute(f"LOCK TABLE ONLY {LEDGER} IN SHARE UPDATE EXCLUSIVE MODE")
        cursor.execute(f"LOCK TABLE ONLY {DEFAULT_PARTITION} IN ACCESS EXCLUSIVE MODE")
        cursor.execute(f"CREATE TABLE {name} (LIKE {LEDGER} INCLUDING DEFAULTS INCLUDING CONSTRAINTS)")
        cursor.execute(_DIGEST_SQL.format(table=DEFAULT_PARTITION) + f" WHERE {_IN_MONTH}", bounds)
        before = cursor.fetchone()
        total = int(before[0])
        if total:
            columns = _columns(cursor)
            cursor.execute("SELECT set_config(%s, 'on', true)", [MOVE_SETTING])
            sql = _MOVE_SQL.format(default=DEFAULT_PARTITION, in_month=_IN_MONTH, partition=name, columns=columns)
            done = 0
            while done < total:
                cursor.execute(sql, {**bounds, "chunk": MOVE_CHUNK})
                if cursor.rowcount == 0:
                    break
                done += cursor.rowcount
                if progress is not None:
                    progress(name, done, total)
            cursor.execute("SELECT set_config(%s, '', true)", [MOVE_SETTING])
            cursor.execute(_DIGEST_SQL.format(table=name))
            after = cursor.fetchone()
            if done != total or tuple(after) != tuple(before):
                raise PartitionError(
                    f"{name}: moving {total} entries out of {DEFAULT_PARTITION} would have changed them "
                    f"(moved {done}; before {before}, after {after}); nothing was changed."
                )
        cursor.execute(
            f"ALTER TABLE {LEDGER} ATTACH PARTITION {name} "
            f"FOR VALUES FROM ('{bounds['start'].isoformat()}') TO ('{bounds['end'].isoformat()}')"
        )
        name_indexes_after_the_ledgers(cursor, name)
        refuse_truncate(cursor, name)
    return total


def refuse_truncate(cursor: CursorWrapper, table: str) -> None:
    """Give a month of the ledger the ledger's TRUNCATE guard (``citations.0016``): a statement trigger is
    not cloned onto a partition as a row trigger is, and a partition can be truncated on its own."""
    cursor.execute(
        f"CREATE TRIGGER {LEDGER}_no_truncate BEFORE TRUNCATE ON {table} "
        "FOR EACH STATEMENT EXECUTE FUNCTION lqai_refuse_truncate()"
    )


# A partition's indexes, each with the ledger's index it belongs to.
_PARTITION_INDEXES_SQL = """
SELECT child.relname, parent.relname
FROM pg_inherits i
JOIN pg_class child ON child.oid = i.inhrelid
JOIN pg_class parent ON parent.oid = i.inhparent
JOIN pg_index x ON x.indexrelid = child.oid
WHERE parent.relkind = 'I' AND x.indrelid = %s::regclass
"""


def name_indexes_after_the_ledgers(cursor: CursorWrapper, partition: str) -> None:
    """Name each index of ``partition`` after the ledger's index it belongs to, ``<index>_<month>``
    (``ledger_status_created_idx_y2026m12``), as ``citations.0014`` names them, so that a query plan names the
    ledger's index whichever partition it reads."""
    suffix = partition.removeprefix(f"{LEDGER}_")
    cursor.execute(_PARTITION_INDEXES_SQL, [partition])
    for child, parent in cursor.fetchall():
        if child != f"{parent}_{suffix}":
            cursor.execute(f"ALTER INDEX {child} RENAME TO {parent}_{suffix}")


def _columns(cursor: CursorWrapper) -> str:
    cursor.execute(
        "SELECT string_agg(quote_ident(attname), ', ' ORDER BY attnum) FROM pg_attribute "
        "WHERE attrelid = %s::regclass AND attnum > 0 AND NOT attisdropped",
        [LEDGER],
    )
    return str(cursor.fetchone()[0])


@dataclass(frozen=True, slots=True)
class DropPlan:
    """The months a drop before ``before`` would remove: each partition with its exact entry count."""

    before: date
    months: list[tuple[Partition, int]]

    @property
    def entries(self) -> int:
        return sum(count for _, count in self.months)


# The matters whose entries a partition holds (the entry's own matter, or its chat's), locked against a
# change of their hold until the drop commits, in id order (one lock order, as a purge takes them).
_MATTERS_SQL = """
SELECT p.id, p.name, p.legal_hold FROM {projects} p
WHERE p.id IN (SELECT e.project_id FROM {partition} e WHERE e.project_id IS NOT NULL
               UNION SELECT c.project_id FROM {partition} e JOIN {chats} c ON c.id = e.chat_id
                     WHERE c.project_id IS NOT NULL)
ORDER BY p.id
FOR SHARE OF p
"""


def drop_plan(*, before: date, today: date | None = None) -> DropPlan:
    """What :func:`drop_months_before` would remove; writes nothing. ``before`` is a month (its first
    day); only whole months before it go, never this month (UTC) or a later one."""
    _require_partitioned()
    if before.day != 1:
        raise PartitionError(f"{before} is not the first day of a month.")
    current = (today or timezone.now().date()).replace(day=1)
    if before > current:
        raise PartitionError(
            f"Only months before the current one ({current:%Y-%m}) can be dropped; {before:%Y-%m} would drop "
            "this month's entries."
        )
    months = [p for p in partitions() if p.end is not None and p.end <= month_start(before)]
    with connection.cursor() as cursor:
        cursor.execute(
            f"SELECT count(*) FROM {DEFAULT_PARTITION} WHERE created_at < %s",  # noqa: S608
            [month_start(before)],
        )
        (stray,) = cursor.fetchone()
        if stray:
            raise PartitionError(
                f"The default partition holds {stray} entries of months before {before:%Y-%m}: run "
                "`manage.py ledger_partitions --ahead 0` first to give them their months' partitions."
            )
        counted = []
        for partition in months:
            cursor.execute(f"SELECT count(*) FROM {partition.name}")  # noqa: S608
            counted.append((partition, int(cursor.fetchone()[0])))
    return DropPlan(before=before, months=counted)


def drop_months_before(
    *,
    before: date,
    dropped_by: str,
    keep_detached: bool = False,
    today: date | None = None,
    lock_timeout: float = DEFAULT_LOCK_TIMEOUT,
) -> list[LedgerPartitionDrop]:
    """Detach the partitions of the months before ``before`` (and drop them unless ``keep_detached``),
    leaving a tombstone per month, in one transaction: all of them go, or none.

    Refused with :class:`chats.record.LegalHoldError`, changing nothing, if any of their entries belongs to a
    matter under legal hold (the matters are locked ``FOR SHARE`` first, so no hold can be set meanwhile);
    with :class:`PartitionError` for a month that is not before this one. Detaching is DDL: no row trigger
    fires, which is why the hold is checked here, and why the application's database role must not own the
    ledger (it could then drop a partition itself)."""
    with transaction.atomic(), connection.cursor() as cursor:
        _limit_lock_waits(cursor, lock_timeout)
        cursor.execute(f"LOCK TABLE ONLY {LEDGER} IN SHARE UPDATE EXCLUSIVE MODE")
        plan = drop_plan(before=before, today=today)
        held: list[tuple[Any, str]] = []
        for partition, _ in plan.months:
            cursor.execute(f"LOCK TABLE ONLY {partition.name} IN SHARE MODE")
            cursor.execute(
                _MATTERS_SQL.format(
                    projects=Project._meta.db_table, partition=partition.name, chats=Chat._meta.db_table
                )
            )
            held += [(matter_id, name) for matter_id, name, on_hold in cursor.fetchall() if on_hold]
        if held:
            named = ", ".join(f"{matter_id} ({name})" for matter_id, name in dict(held).items())
            raise LegalHoldError(f"entries of matters on legal hold are in those months: {named}")
        tombstones = []
        for partition, count in plan.months:
            if partition.start is None or partition.end is None:  # the default partition is never in a plan
                continue
            tombstones.append(
                LedgerPartitionDrop.objects.create(
                    range_start=partition.start,
                    range_end=partition.end,
                    partition=partition.name,
                    disposal=LedgerPartitionDrop.Disposal.DETACHED
                    if keep_detached
                    else LedgerPartitionDrop.Disposal.DROPPED,
                    ledger_entries=count,
                    dropped_by=dropped_by[:150],
                )
            )
            cursor.execute(f"ALTER TABLE {LEDGER} DETACH PARTITION {partition.name}")
            if keep_detached:
                # Detaching drops the triggers cloned from the ledger: the kept month stays append-only.
                cursor.execute(
                    f"CREATE TRIGGER {LEDGER}_append_only BEFORE UPDATE OR DELETE ON {partition.name} "
                    f"FOR EACH ROW EXECUTE FUNCTION {LEDGER}_append_only()"
                )
            else:
                cursor.execute(f"DROP TABLE {partition.name}")
    forget_months()
    return tombstones


def dropped_ranges() -> list[tuple[datetime, datetime]]:
    """The ``[start, end)`` of every dropped month (empty where nothing was, SQLite included)."""
    return list(LedgerPartitionDrop.objects.order_by("range_start").values_list("range_start", "range_end"))
