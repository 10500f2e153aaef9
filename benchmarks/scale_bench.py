"""The ledger at scale (``make bench`` item 9): random (version 4) against time-ordered (version 7) keys.

For each size, and for each kind of key, side by side in one run: a fresh dataset whose per-turn rows
(messages and the source tables) have that kind of key (:mod:`benchmarks.dataset`), with the ledger's
partitions of every month its turns span, as a deployment's nightly ``ledger_partitions`` keeps them; then
the raw-SQL limit of the ledger (:data:`benchmarks.ledger_bench.RAW_SQL_TEMPLATE`: one ``INSERT ... SELECT
... ON CONFLICT DO NOTHING`` over every source row, in the ledger's write order, ``created_at``) with the
ledger's own ids of that kind, timed, with the WAL it wrote (``pg_current_wal_lsn()`` before and after) and
what that WAL was made of (``pg_stat_wal``: records, one per heap row and index entry, and full-page images,
one per page first changed after a checkpoint); then, for version 7 keys, ``backfill_ledger`` of the same
rows into the emptied ledger, timed with its WAL. The two kinds alternate which goes first at each size.
The goal (issue 25): with version 7 keys, 10x the rows takes at most 12x the time, for the raw SQL and the
backfill alike, and the WAL per row stays flat; version 4 is shown beside it for the record.

Sizes: 100,000 and 1,000,000 source rows by default (a few minutes), and 10,000,000 with
``make bench BENCH_ARGS="--items scale --scale-10m"``: about an hour and tens of GB of WAL on a small
machine (issue 25 measured the version 4 insert alone at 1,153 s and 71 GB of WAL there), so run it on an
otherwise idle server with room on its disk. The dataset puts a turn a minute from January 2024, so the
sizes span 1, 6 and 58 months: each month's partition holds about as many entries at every size.
"""

from __future__ import annotations

import itertools
import time
from collections.abc import Callable
from dataclasses import dataclass
from datetime import date

from django.db import connection

from benchmarks import dataset
from benchmarks.ledger_bench import RAW_SQL_TEMPLATE, TIME_ORDER, BackfillRun, reset_ledger, wal_position
from citations import partitions

DEFAULT_SIZES = (100_000, 1_000_000)
LARGE_SIZE = 10_000_000
TIME_GROWTH_GOAL = 12.0  # for 10x the rows
WAL_FLATNESS_GOAL = 1.25  # WAL per row at the larger size / at the smaller
# The growth goals are judged from this size up (issue 25 states them for 1M -> 10M, both past memory).
JUDGED_FROM = 1_000_000


@dataclass(frozen=True, slots=True)
class WalCounters:
    """The server's WAL statistics (``pg_stat_wal``): records and full-page images written, and bytes."""

    records: int
    full_page_images: int
    bytes: int

    def __sub__(self, other: WalCounters) -> WalCounters:
        return WalCounters(
            self.records - other.records, self.full_page_images - other.full_page_images, self.bytes - other.bytes
        )


def wal_counters() -> WalCounters:
    """``pg_stat_wal`` now, after a flush of this backend's own counters (which it sends only every so often)."""
    with connection.cursor() as cursor:
        cursor.execute("SELECT pg_stat_force_next_flush()")
        cursor.execute("SELECT wal_records, wal_fpi, wal_bytes FROM pg_stat_wal")
        records, fpi, written = cursor.fetchone()
    return WalCounters(int(records), int(fpi), int(written))


def autovacuum_runs() -> tuple[int, int]:
    """How many times autovacuum has vacuumed and analyzed the ledger's partitions so far (``pg_stat_user_tables``,
    summed over the partition tree). A batch that commits lets autovacuum at the rows it wrote; one long
    statement, like the raw SQL, does not until it ends."""
    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT coalesce(sum(s.autovacuum_count), 0), coalesce(sum(s.autoanalyze_count), 0) "
            "FROM pg_partition_tree('citation_ledger_entry') t JOIN pg_stat_user_tables s ON s.relid = t.relid"
        )
        vacuums, analyzes = cursor.fetchone()
    return int(vacuums), int(analyzes)


@dataclass(frozen=True, slots=True)
class Backfilled:
    """``citations.backfill.backfill_ledger`` (what ``manage.py backfill_ledger`` runs) into an empty ledger:
    the timed run (seconds, each batch's, WAL bytes), what its WAL was made of, and autovacuum's vacuums and
    analyzes of the ledger's partitions meanwhile."""

    timed: BackfillRun
    wal: WalCounters
    autovacuums: tuple[int, int]


@dataclass(frozen=True, slots=True)
class ScaleRun:
    sizes: dataset.Sizes  # the dataset built
    keys: str
    seconds: float
    wal_bytes: int
    build_seconds: float
    index_bytes: int  # the ledger's indexes after the insert: against shared_buffers, what stays in memory
    # What the WAL was made of: records (one per heap row and index entry written) and full-page images (the
    # first change of a page after a checkpoint writes the whole page), whose number depends on the server's
    # checkpoint settings and on how many distinct pages the insert touches.
    wal: WalCounters
    # The backfill of the same rows into the emptied ledger (version 7 keys only).
    backfill: Backfilled | None = None

    @property
    def rows(self) -> int:
        return self.sizes.rows

    @property
    def months(self) -> int:
        """The ledger's monthly partitions the entries fall in."""
        return dataset.months(self.sizes)

    @property
    def us_per_row(self) -> float:
        return self.seconds / self.rows * 1e6

    @property
    def wal_per_row(self) -> float:
        return self.wal_bytes / self.rows


def reset_data() -> None:
    """No rows left in any table the dataset fills (truncating the parents cascades to every child)."""
    with connection.cursor() as cursor:
        cursor.execute("TRUNCATE auth_user, projects, caselaw_opinions CASCADE")


def build(sizes: dataset.Sizes, *, keys: str) -> float:
    """A fresh dataset of ``sizes`` with ``keys``; the seconds it took."""
    started = time.perf_counter()
    reset_data()
    dataset.generate(sizes, keys=keys)
    with connection.cursor() as cursor:
        dataset.vacuum_analyze(cursor)
    return time.perf_counter() - started


def partition_months(sizes: dataset.Sizes) -> list[str]:
    """The ledger's partitions of every month the dataset's turns span, as a deployment has them: its nightly
    ``manage.py ledger_partitions`` keeps the months ahead of the turns (``citations.partitions``), so no
    entry lands in the default partition. The names of those created."""
    first = date(2024, 1, 1)
    return partitions.ensure_partitions(ahead=dataset.months(sizes) - 1, today=first).created


def time_insert(*, keys: str, rows: int) -> tuple[float, int, int, WalCounters]:
    """The raw-SQL limit, in the ledger's write order (time), into an empty ledger with ``keys`` ids:
    seconds, WAL bytes, the size of the ledger's indexes afterwards, and what the WAL was made of."""
    reset_ledger()  # empty, and a checkpoint: the run starts with no dirty buffers
    wal, counters = wal_position(), wal_counters()
    started = time.perf_counter()
    with connection.cursor() as cursor:
        cursor.execute(RAW_SQL_TEMPLATE.format(new_id=dataset.source_id_sql(keys=keys), order_by=TIME_ORDER))
        written = cursor.rowcount
    seconds = time.perf_counter() - started
    wal_bytes, counters = wal_position() - wal, wal_counters() - counters
    assert written == rows, (written, rows)
    with connection.cursor() as cursor:
        # Partitioned (citations.0014): the indexes are the partitions'; a plain table is its own tree.
        cursor.execute("SELECT sum(pg_indexes_size(relid)) FROM pg_partition_tree('citation_ledger_entry')")
        index_bytes = int(cursor.fetchone()[0])
    return seconds, wal_bytes, index_bytes, counters


def run(
    *,
    sizes: tuple[int, ...],
    keys: tuple[str, ...] = dataset.KEYS,
    backfill: bool = True,
    step: Callable[[str], None] = print,
) -> list[ScaleRun]:
    """Every size, each kind of key of ``keys`` at each (alternating which goes first), smallest size first;
    with ``backfill``, the version 7 datasets backfilled too, after their raw-SQL insert."""
    from benchmarks.ledger_bench import time_backfill
    from citations.backfill import DEFAULT_BATCH_SIZE

    runs: list[ScaleRun] = []
    for n, rows in enumerate(sizes):
        order = keys if n % 2 == 0 else tuple(reversed(keys))
        for kind in order:
            step(f"9. {rows:,} source rows with {kind} keys: building")
            sizes_here = dataset.Sizes(rows)
            build_seconds = build(sizes_here, keys=kind)
            partition_months(sizes_here)
            step(f"9. {rows:,} source rows with {kind} keys: INSERT ... SELECT into the ledger")
            seconds, wal, index_bytes, counters = time_insert(keys=kind, rows=rows)
            backfilled = None
            if backfill and kind == "v7":
                step(f"9. {rows:,} source rows with {kind} keys: backfill_ledger into the emptied ledger")
                before, vacuumed = wal_counters(), autovacuum_runs()
                timed = time_backfill(batch_size=DEFAULT_BATCH_SIZE)
                vacuums, analyzes = (now - then for now, then in zip(autovacuum_runs(), vacuumed, strict=True))
                backfilled = Backfilled(timed, wal_counters() - before, (vacuums, analyzes))
                assert timed.result.total_created == rows, (timed.result.total_created, rows)
            runs.append(
                ScaleRun(
                    sizes=sizes_here,
                    keys=kind,
                    seconds=seconds,
                    wal_bytes=wal,
                    build_seconds=build_seconds,
                    index_bytes=index_bytes,
                    wal=counters,
                    backfill=backfilled,
                )
            )
    reset_data()
    return runs


def growth(runs: list[ScaleRun], *, keys: str) -> list[tuple[ScaleRun, ScaleRun]]:
    """Consecutive sizes of one kind of key: (smaller, larger) pairs."""
    mine = sorted((r for r in runs if r.keys == keys), key=lambda r: r.rows)
    return list(itertools.pairwise(mine))
