"""``make bench``'s item 17 at tiny size: every step on the trimmed titles (authorities/data/uslm), nothing timed
against a goal here; and the rows it reports, judged on given numbers."""

from __future__ import annotations

import dataclasses
from pathlib import Path
from typing import Any

import pytest

from authorities.models import AuthorityRelease, StatuteSection
from benchmarks import authorities_bench as bench
from benchmarks.run import authorities_rows

FIXTURES = Path(__file__).resolve().parent.parent / "authorities" / "data" / "uslm"


@pytest.mark.django_db
def test_item_17_runs_every_step_on_the_trimmed_titles() -> None:
    result = bench.run(small=FIXTURES / "usc01.xml", large=FIXTURES / "usc35.xml", repeats=1, calls=1)

    # The trimmed 35 U.S.C. holds §§ 101, 102, 103 and 112, read by the reader and stored by the load
    assert result.sections == 4
    assert StatuteSection.objects.filter(release__title=35).count() == 4
    # 1 U.S.C. was loaded for its memory, then removed; 35 U.S.C. stays, for the quote
    assert list(AuthorityRelease.objects.values_list("title", flat=True)) == [35]
    assert result.small_bytes < result.large_bytes
    assert min(result.plain_s, result.read_s, result.load_s) > 0
    assert min(result.small_load_peak_mb, result.large_load_peak_mb) > 0
    assert min(result.small_largest_section, result.large_largest_section) > 0
    # Quotes of the same length, both sides timed verified and failed
    assert bench.QUOTE_CHARS <= result.statute_quote_chars <= result.opinion_quote_chars
    assert result.opinion_quote_chars - result.statute_quote_chars < 20
    assert all(ms > 0 for ms in (result.statute_verified_ms, result.opinion_verified_ms, result.statute_failed_ms))


def test_a_quote_is_whole_words_of_one_line_and_its_changed_form_differs_by_one_word() -> None:
    text = "short line\n" + " ".join(f"word{n}" for n in range(100)) + "\nlast"

    quote = bench.quote_of(text, chars=60)

    assert quote.startswith("word")
    assert quote in text
    assert "\n" not in quote
    assert 60 <= len(quote) < 70
    assert sum(a != b for a, b in zip(quote.split(" "), bench.changed(quote).split(" "), strict=True)) == 1
    with pytest.raises(ValueError, match="no line"):
        bench.quote_of("too short", chars=60)


def _result(**changes: Any) -> bench.AuthoritiesResult:
    measured = bench.AuthoritiesResult(
        title_bytes=1_823_605,
        sections=174,
        plain_s=0.020,
        read_s=0.050,
        load_s=0.058,
        small_bytes=240_953,
        large_bytes=1_823_605,
        small_load_peak_mb=1.3,
        large_load_peak_mb=2.1,
        small_read_peak_mb=0.07,
        large_read_peak_mb=0.17,
        small_largest_section=4023,
        large_largest_section=26168,
        statute_quote_chars=201,
        opinion_quote_chars=207,
        statute_verified_ms=0.6,
        opinion_verified_ms=0.7,
        statute_failed_ms=4.3,
        opinion_failed_ms=18.2,
    )
    return dataclasses.replace(measured, **changes)


def test_item_17_judges_each_goal_on_its_ratio() -> None:
    rows = authorities_rows(_result())

    assert [(row.item, row.verdict) for row in rows] == [
        ("17", "PASS"),
        ("17 detail", "-"),
        ("17", "PASS"),
        ("17 detail", "-"),
        ("17", "PASS"),
        ("17 detail", "-"),
    ]
    assert rows[0].value == "58 ms vs 20 ms = 2.90 x"
    assert rows[2].value == "1.30 MB -> 2.10 MB = 1.62 x"
    slow, growing, costly = _result(load_s=0.070), _result(large_load_peak_mb=2.7), _result(statute_verified_ms=0.8)
    assert authorities_rows(slow)[0].verdict == "FAIL"
    assert authorities_rows(growing)[2].verdict == "FAIL"
    assert authorities_rows(costly)[4].verdict == "FAIL"
