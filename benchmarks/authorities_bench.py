"""The authority library (``make bench`` item 17): loading a title, the memory it takes, and what a statute
quote's verification costs next to an opinion quote's.

Three measurements, each a ratio of two taken side by side in one run:

- loading 35 U.S.C. (OLRC's whole ``usc35.xml``, benchmarks/data) with the service ``manage.py load_authorities``
  calls (:func:`authorities.loading.load_uslm`: read, stored, committed), against a plain parse of the same file by
  the same parser (lxml's ``iterparse`` with the reader's options, every event of every element, nothing kept;
  goal: <= 3 x); the reader alone (``authorities.uslm.read_uslm``, nothing stored) is shown between the two;
- the peak of Python memory (tracemalloc) of that load, and of the reader alone, for 1 U.S.C. and for 35 U.S.C.,
  against the files' sizes (goal: the load's peak grows <= 2 x while the file grows 7.6 x); tracemalloc sees
  Python's allocations, not libxml2's own (the tree lxml builds, cleared section by section);
- a quote of 35 U.S.C. § 112(a) checked by :func:`authorities.selectors.verify_statute_quote` (the section read
  from the library, then :mod:`lqai_verify.verification`) against a quote of the same length of a real opinion
  (chats/data/opinions, 64 KB) checked by :func:`lqai_verify.verification.verify_quote_detailed` on its text
  (goal: the statute's <= 1 x the opinion's); and, for the record, the same two quotes with a word changed, which
  fail (the statute's after looking for the words in the title's other sections).

The paths are arguments, so that ``tests/test_bench_datasets.py`` runs every step on the trimmed fixtures.
"""

from __future__ import annotations

import re
import statistics
import time
import tracemalloc
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from lxml import etree

from authorities.loading import load_uslm
from authorities.models import AuthorityRelease, StatuteSection
from authorities.selectors import VERIFIED, find_statutes, resolve_statutes, verify_statute_quote
from authorities.uslm import read_uslm
from lqai_verify.verification import verify_quote_detailed

ROOT = Path(__file__).resolve().parent.parent
DATA = ROOT / "benchmarks" / "data"
SMALL_TITLE = DATA / "usc01.xml"  # 1 U.S.C., 241 KB
LARGE_TITLE = DATA / "usc35.xml"  # 35 U.S.C., 1.8 MB
OPINION = ROOT / "chats" / "data" / "opinions" / "democracy-nc-v-nc-board-of-elections-mdnc-2022.txt"
CITED = "35 U.S.C. § 112(a)"
QUOTE_CHARS = 200
LOAD_GOAL = 3.0
MEMORY_GOAL = 2.0
VERIFY_GOAL = 1.0
_WORD = re.compile(r"\S+")


@dataclass(frozen=True, slots=True)
class AuthoritiesResult:
    title_bytes: int
    sections: int
    plain_s: float  # lxml iterparse over the file, nothing kept
    read_s: float  # the reader: every section's text and subdivisions, nothing stored
    load_s: float  # load_uslm: read, stored, committed
    small_bytes: int
    large_bytes: int
    small_load_peak_mb: float
    large_load_peak_mb: float
    small_read_peak_mb: float
    large_read_peak_mb: float
    small_largest_section: int  # characters of the longest section's text
    large_largest_section: int
    statute_quote_chars: int
    opinion_quote_chars: int
    statute_verified_ms: float
    opinion_verified_ms: float
    statute_failed_ms: float
    opinion_failed_ms: float

    @property
    def load_ratio(self) -> float:
        return self.load_s / self.plain_s

    @property
    def memory_growth(self) -> float:
        return self.large_load_peak_mb / self.small_load_peak_mb

    @property
    def size_growth(self) -> float:
        return self.large_bytes / self.small_bytes

    @property
    def verify_ratio(self) -> float:
        return self.statute_verified_ms / self.opinion_verified_ms


def plain_parse(path: Path) -> int:
    """Every event of every element of ``path``, by lxml's ``iterparse`` with the reader's options; nothing kept
    but the count."""
    events = 0
    with path.open("rb") as handle:
        for _ in etree.iterparse(
            handle, events=("start", "end", "pi"), resolve_entities=False, no_network=True, remove_comments=True
        ):
            events += 1
    return events


def read_only(path: Path) -> list[int]:
    """The reader over ``path``, nothing stored: each section's length of text."""
    with path.open("rb") as handle:
        _, sections = read_uslm(handle)
        return [len(section.text) for section in sections]


def unload(path: Path) -> None:
    """Remove the release ``path`` holds from the library (the benchmark's own database), so it loads anew."""
    with path.open("rb") as handle:
        release, _ = read_uslm(handle)
    AuthorityRelease.objects.filter(
        code=release.code, title=release.title, release_point=release.release_point
    ).delete()


def _seconds(action: Callable[[], object]) -> float:
    started = time.perf_counter()
    action()
    return time.perf_counter() - started


def _load_seconds(path: Path) -> float:
    unload(path)
    return _seconds(lambda: load_uslm(path=path))


def _peak_mb(action: Callable[[], object]) -> float:
    """The peak of Python memory while ``action`` runs (tracemalloc slows it: never timed with it)."""
    tracemalloc.start()
    try:
        action()
        return tracemalloc.get_traced_memory()[1] / 1e6
    finally:
        tracemalloc.stop()


def _load_peak_mb(path: Path) -> float:
    unload(path)
    return _peak_mb(lambda: load_uslm(path=path))


def quote_of(text: str, *, chars: int) -> str:
    """Whole words of ``text``, on one line, from a quarter into the first line long enough, until ``chars``."""
    line = next((line for line in text.splitlines() if len(line) >= 2 * chars), "")
    if not line:
        raise ValueError(f"no line of {2 * chars} characters to quote")
    words = [m for m in _WORD.finditer(line) if m.start() >= len(line) // 4]
    last = next(m for m in words if m.end() - words[0].start() >= chars)
    return line[words[0].start() : last.end()]


def changed(quote: str) -> str:
    """``quote`` with its middle word replaced: a quote that must fail."""
    words = quote.split(" ")
    words[len(words) // 2] = "zebras"
    return " ".join(words)


def _ms_per_call(action: Callable[[], object], *, calls: int) -> float:
    return _seconds(lambda: [action() for _ in range(calls)]) * 1000 / calls


def run(
    *,
    small: Path = SMALL_TITLE,
    large: Path = LARGE_TITLE,
    opinion: Path = OPINION,
    repeats: int = 5,
    calls: int = 50,
    step: Callable[[str], None] = lambda message: None,
) -> AuthoritiesResult:
    """The measurements (see the module). Leaves ``large`` loaded; ``small`` is loaded and removed again."""
    step("17. warming: each title read and loaded once")
    for path in (small, large):
        plain_parse(path)
        read_only(path)
        _load_seconds(path)
    plain: list[float] = []
    read: list[float] = []
    load: list[float] = []
    for attempt in range(repeats):
        step(f"17. {large.name}: plain parse, reader, load, run {attempt + 1} of {repeats}")
        runs = [
            (plain, lambda: _seconds(lambda: plain_parse(large))),
            (read, lambda: _seconds(lambda: read_only(large))),
            (load, lambda: _load_seconds(large)),
        ]
        for times, measure in runs if attempt % 2 == 0 else reversed(runs):
            times.append(measure())
    step("17. peak memory of the reader and of the load, each title")
    small_lengths, large_lengths = read_only(small), read_only(large)
    small_read_peak, large_read_peak = _peak_mb(lambda: read_only(small)), _peak_mb(lambda: read_only(large))
    small_load_peak, large_load_peak = _load_peak_mb(small), _load_peak_mb(large)
    unload(small)

    step(f"17. a quote of {CITED} against one of an opinion of the same length")
    (check,) = resolve_statutes(find_statutes(CITED))
    if check.status != VERIFIED:
        raise RuntimeError(f"{CITED} is {check.status} in the library: {check.reason}")
    cited = check.citation
    section = StatuteSection.objects.get(
        release_id=check.release.id if check.release else None,
        identifier=f"/us/{cited.code}/t{cited.title}/s{cited.section}",
    )
    start, end = next((s["start"], s["end"]) for s in section.subdivisions if s["path"] == cited.pin)
    statute_quote = quote_of(section.text[start:end], chars=QUOTE_CHARS)
    opinion_text = opinion.read_text(encoding="utf-8")
    opinion_quote = quote_of(opinion_text, chars=len(statute_quote))
    outcomes = {
        "statute verified": verify_statute_quote(quote=statute_quote, check=check).status,
        "opinion verified": verify_quote_detailed(opinion_quote, opinion_text)[0] is not None,
        "statute failed": verify_statute_quote(quote=changed(statute_quote), check=check).status,
        "opinion failed": verify_quote_detailed(changed(opinion_quote), opinion_text)[0] is None,
    }
    if outcomes != {
        "statute verified": VERIFIED,
        "opinion verified": True,
        "statute failed": "failed",
        "opinion failed": True,
    }:
        raise RuntimeError(f"the quotes did not check as the benchmark expects: {outcomes}")
    timed: dict[str, list[float]] = {name: [] for name in outcomes}
    actions: dict[str, Callable[[], object]] = {
        "statute verified": lambda: verify_statute_quote(quote=statute_quote, check=check),
        "opinion verified": lambda: verify_quote_detailed(opinion_quote, opinion_text),
        "statute failed": lambda: verify_statute_quote(quote=changed(statute_quote), check=check),
        "opinion failed": lambda: verify_quote_detailed(changed(opinion_quote), opinion_text),
    }
    for attempt in range(repeats):
        order = list(actions) if attempt % 2 == 0 else list(reversed(actions))
        for name in order:
            timed[name].append(_ms_per_call(actions[name], calls=calls))
    median = {name: statistics.median(values) for name, values in timed.items()}
    return AuthoritiesResult(
        title_bytes=large.stat().st_size,
        sections=len(large_lengths),
        plain_s=statistics.median(plain),
        read_s=statistics.median(read),
        load_s=statistics.median(load),
        small_bytes=small.stat().st_size,
        large_bytes=large.stat().st_size,
        small_load_peak_mb=small_load_peak,
        large_load_peak_mb=large_load_peak,
        small_read_peak_mb=small_read_peak,
        large_read_peak_mb=large_read_peak,
        small_largest_section=max(small_lengths, default=0),
        large_largest_section=max(large_lengths, default=0),
        statute_quote_chars=len(statute_quote),
        opinion_quote_chars=len(opinion_quote),
        statute_verified_ms=median["statute verified"],
        opinion_verified_ms=median["opinion verified"],
        statute_failed_ms=median["statute failed"],
        opinion_failed_ms=median["opinion failed"],
    )
