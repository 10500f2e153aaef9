"""``make bench``'s scale item (9) on a small dataset: the raw-SQL insert and the backfill of the same rows,
with what the WAL was made of, and the rows it reports (PostgreSQL: the item reads ``pg_stat_wal``)."""

from __future__ import annotations

import argparse

import pytest

from benchmarks import run, scale_bench

pytestmark = [pytest.mark.postgres, pytest.mark.django_db(transaction=True), pytest.mark.timeout(300)]


def test_the_scale_item_times_the_raw_insert_and_the_backfill_of_each_size(monkeypatch: pytest.MonkeyPatch) -> None:
    # Given two small sizes, judged like 1M -> 10M
    monkeypatch.setattr(scale_bench, "DEFAULT_SIZES", (400, 4_000))
    monkeypatch.setattr(scale_bench, "JUDGED_FROM", 400)
    monkeypatch.setattr(run, "step", lambda message: None)

    rows, notes = run.scale_suite(argparse.Namespace(scale_10m=False, scale_keys=("v7",)))

    measures = {row.measure: row for row in rows}
    for size in ("400", "4,000"):
        raw = measures[f"raw SQL into the ledger, {size} source rows, v7 keys"]
        assert "records and" in raw.value, raw
        assert "full-page images per row" in raw.value, raw
        backfill = measures[f"backfill_ledger into the emptied ledger, {size} source rows, v7 keys"]
        assert "x the raw SQL" in backfill.value, backfill
        assert "full-page images per row" in backfill.value, backfill
        assert "batches in" in backfill.value, backfill
        assert "(ANALYZE)" in backfill.value, backfill
        assert "autovacuum vacuumed" in backfill.value, backfill
    growth = measures["backfill_ledger, v7 keys, 400 -> 4,000 rows: time, WAL per row"]
    assert growth.verdict in ("PASS", "FAIL")
    assert "records per row" in measures["v7 keys, 400 -> 4,000 rows (10 x): time, WAL per row"].value
    assert notes


def test_wal_counters_count_what_this_session_wrote() -> None:
    from django.db import connection

    before = scale_bench.wal_counters()
    with connection.cursor() as cursor:
        cursor.execute("CREATE TABLE wal_probe_logged AS SELECT g FROM generate_series(1, 1000) g")
        cursor.execute("DROP TABLE wal_probe_logged")
    written = scale_bench.wal_counters() - before

    assert written.records > 0
    assert written.bytes > 0
