"""The shapes ``make bench`` builds its scale datasets in (no database: the arithmetic and the options)."""

from __future__ import annotations

import pytest

from benchmarks import admin_bench, dataset, run


@pytest.mark.parametrize("months", [1, 6, 12, 58])
def test_a_dataset_spanning_months_spans_them_at_every_size(months: int) -> None:
    for rows in (*admin_bench.DEFAULT_SIZES, admin_bench.LARGE_SIZE):
        sizes = dataset.spanning(rows, months=months)

        assert dataset.months(sizes) == months, rows
        assert sizes.rows == rows


def test_by_default_a_turn_a_minute_puts_more_months_at_each_size() -> None:
    spans = [dataset.months(admin_bench.sizes_of(rows)) for rows in (100_000, 1_000_000, 10_000_000)]

    assert spans == [1, 6, 58]


def test_the_admin_months_option_is_checked() -> None:
    assert run.parse_args(["--admin-months", "58"]).admin_months == 58
    assert run.parse_args([]).admin_months is None
    with pytest.raises(SystemExit):
        run.parse_args(["--admin-months", "0"])
    with pytest.raises(ValueError, match="at least 1"):
        dataset.spanning(1_000, months=0)
