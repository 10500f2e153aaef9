"""``make bench``'s item 11 on a few turns: whole API turns with the seal receiver on and off, and the seal
receiver's own time in the "on" turns, one measure per sealed turn (PostgreSQL: the seal locks its chain's
head as shipped there)."""

from __future__ import annotations

import pytest

from benchmarks import seal_bench
from benchmarks.run import Row
from citations.models import TurnSeal

pytestmark = [pytest.mark.postgres, pytest.mark.django_db(transaction=True), pytest.mark.timeout(300)]


def test_item_11_times_the_seal_itself_in_each_sealed_turn() -> None:
    share = seal_bench.sealing_share(turns=3)

    # One seal per "on" turn (the warm-up's and 3 measured), none in the "off" turns; each one timed
    assert TurnSeal.objects.count() == 4
    assert len(share.seal) == 3
    assert all(0 < seconds < share.on * 10 for seconds in share.seal)
    # The seal's own time is part of the turn it was timed in, and sealing adds its queries
    assert share.seal_median < max(share.on, share.off)
    assert share.seal_median <= share.seal_p90
    assert share.queries_on > share.queries_off


def test_item_11_reports_the_seal_itself_beside_the_share() -> None:
    share = seal_bench.SealShare(on=0.1, off=0.097, queries_on=40, queries_off=35, seal=[0.003, 0.0031, 0.0042])
    matter = seal_bench.MatterRun(turns=10, verify=0.5, export=0.2, offline=0.1)
    run = seal_bench.VerifyRun(
        verify=60, select=33, seal_all=180, seals=250, entries=1000, rows_selected=2500, matter=matter
    )

    rows: list[Row] = seal_bench.rows_for(share, run)

    item, detail = rows[0], rows[1]
    # The receiver on against off is for the record; the goal is the seal's own share and its statements
    assert (item.item, item.verdict) == ("11", "-")
    assert item.value.startswith("+3.1% (+3.00 ms on 97.0 ms); +5 queries")
    assert (detail.item, detail.verdict) == ("11 detail", "PASS")
    assert detail.value.startswith("3.10 ms, ")
    assert "3.1% of 100.0 ms" in detail.value
    assert "<= 10% of the turn, <= 14 statements" in detail.goal
    slow = seal_bench.SealShare(on=0.1, off=0.08, queries_on=40, queries_off=35, seal=[0.011, 0.012, 0.013])
    assert seal_bench.rows_for(slow, run)[1].verdict == "FAIL"
    chatty = seal_bench.SealShare(on=0.1, off=0.097, queries_on=50, queries_off=35, seal=[0.003, 0.0031, 0.0042])
    assert seal_bench.rows_for(chatty, run)[1].verdict == "FAIL"
