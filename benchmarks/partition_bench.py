"""The ledger's partitioning migration at scale (``make bench`` item 14): ``citations.0014`` rebuilding a ledger
of ``rows`` entries as monthly partitions, and its reverse, each timed whole (the migration executor, as
``manage.py migrate`` runs it: copy, keys, indexes, foreign keys, triggers, counts, ANALYZE), and then
``ledger_partitions`` moving a month's entries out of the default partition.

The data: a fresh dataset (:mod:`benchmarks.dataset`, time-ordered keys) and its ledger (the raw-SQL limit,
each entry dated at its turn, a minute per turn from 2024-01-01, so the entries span months), written into
the partitioned ledger of the benchmark's database, then migrated back to the plain table (timed: the
reverse), then forward (timed: the migration an operator runs). For the move, one month's partition is
dropped below the application, its entries first written into the default partition again.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass
from datetime import date

from django.db import connection
from django.db.migrations.executor import MigrationExecutor

from benchmarks import dataset, scale_bench
from benchmarks.admin_bench import _DATED_AT_TURN
from benchmarks.ledger_bench import reset_ledger
from citations import partitions

PLAIN = ("citations", "0013_ledger_admin_indexes")
PARTITIONED = ("citations", "0014_ledger_partitions")


@dataclass(frozen=True, slots=True)
class PartitionRun:
    entries: int
    months: int
    forward_seconds: float
    backward_seconds: float
    moved: int
    move_seconds: float


def _migrate(target: tuple[str, str]) -> float:
    started = time.perf_counter()
    MigrationExecutor(connection).migrate([target])
    return time.perf_counter() - started


def _count(table: str) -> int:
    with connection.cursor() as cursor:
        cursor.execute(f"SELECT count(*) FROM {table}")
        return int(cursor.fetchone()[0])


def run(*, rows: int, step: Callable[[str], None] = print) -> PartitionRun:
    step(f"14. {rows:,} source rows: building the dataset and its ledger")
    scale_bench.build(dataset.Sizes(rows), keys="v7")
    reset_ledger()
    with connection.cursor() as cursor:
        cursor.execute(_DATED_AT_TURN.format(new_id=dataset.source_id_sql(keys="v7"), order_by=""))
        entries = cursor.rowcount
    step(f"14. {entries:,} entries: citations.0014 backwards (to the plain table)")
    backward = _migrate(PLAIN)
    with connection.cursor() as cursor:
        cursor.execute("CHECKPOINT")
    step(f"14. {entries:,} entries: citations.0014 forwards (to monthly partitions)")
    forward = _migrate(PARTITIONED)
    assert _count("citation_ledger_entry") == entries
    months = [p for p in partitions.partitions() if p.start is not None]
    # The move: the busiest month's entries back into the default partition, then the command's move.
    busiest = max(months, key=lambda p: _count(p.name))
    moved = _count(busiest.name)
    step(f"14. moving {moved:,} entries of {busiest.name} out of the default partition")
    with connection.cursor() as cursor:
        cursor.execute(f"ALTER TABLE citation_ledger_entry DETACH PARTITION {busiest.name}")
        cursor.execute(f"INSERT INTO citation_ledger_entry SELECT * FROM {busiest.name}")
        cursor.execute(f"DROP TABLE {busiest.name}")
        cursor.execute("CHECKPOINT")
    assert busiest.start is not None
    started = time.perf_counter()
    result = partitions.ensure_partitions(ahead=0, today=date(busiest.start.year, busiest.start.month, 1))
    move_seconds = time.perf_counter() - started
    assert result.moved == {busiest.name: moved}, result
    scale_bench.reset_data()
    return PartitionRun(
        entries=entries,
        months=len(months),
        forward_seconds=forward,
        backward_seconds=backward,
        moved=moved,
        move_seconds=move_seconds,
    )
