"""Checking a brief (``make bench`` item 16): a 40-page brief with 150 citations and 60 quotations, read, checked and
recorded as a turn as a lawyer's upload is (``drafts.recording.record_draft``: what she waits for before the draft's
page opens), with the library local (CourtListener not asked), and a brief twice as long; the check alone (``manage.py
check_draft --no-record``) beside it.

The briefs are Word documents made here from the project's own texts: their filler and their quotations are
sentences of the real opinions of chats/data/opinions (Fisher, Patel, Democracy North Carolina, seeded as local
opinions), each cited in full the first time and by short form after (as the Bluebook has it), by ``id.``, and
cases nobody holds (one for every two pages, so a longer brief cites more authorities), and 9 and 35 U.S.C.
(authorities/data/uslm, loaded into the library) with quotations of their sections. Timed: reading the
DOCX, finding everything, checking everything and recording it (the turn, its rows, ledger entries and seal; goal:
<= 20 s for 40 pages; twice the pages <= 2.2 x the time), medians of alternating runs; each brief's peak of Python
memory while it is checked and recorded (tracemalloc, in a run of its own) is for the record: the draft's text, its
findings and eyecite's tokens of it are held whole, so memory follows the brief's length (per page, about the same
at 40 and 80 pages) and is bounded by ``LQAI_MAX_DOCUMENT_CHARS``.
"""

from __future__ import annotations

import random
import re
import statistics
import time
import tracemalloc
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from django.contrib.auth import get_user_model

from authorities.loading import load_uslm
from chats.models import CaselawOpinion, Project
from drafts.checking import check_draft
from drafts.finding import find_in_draft
from drafts.reading import read_draft
from drafts.recording import record_draft
from tests.docx_fixture import make_docx

ROOT = Path(__file__).resolve().parent.parent
OPINIONS = ROOT / "chats" / "data" / "opinions"
AUTHORITIES = ROOT / "authorities" / "data" / "uslm"
PAGES, CITATIONS, QUOTES = 40, 150, 60
TIME_GOAL_S = 20.0
GROWTH_GOAL = 2.2
WORDS_PER_PAGE = 450
# (file, case name, citation as the local store holds it, first page, last page)
CASES = (
    ("fisher-v-university-of-texas-2013-slip.txt", "Fisher v. University of Texas at Austin", "570 U.S. 297", 297, 315),
    ("los-angeles-v-patel-2015-slip.txt", "City of Los Angeles v. Patel", "576 U.S. 409", 409, 428),
    (
        "democracy-nc-v-nc-board-of-elections-mdnc-2022.txt",
        "Democracy North Carolina v. North Carolina State Board of Elections",
        "590 F. Supp. 3d 850",
        850,
        872,
    ),
)
STATUTE_QUOTES = (
    ("9 U.S.C. § 2", "shall be valid, irrevocable, and enforceable"),
    ("35 U.S.C. § 112(a)", "The specification shall contain a written description of the invention"),
)
_SENTENCE = re.compile(r"(?<=[a-z]{3}[.])\s+(?=[A-Z])")


@dataclass(frozen=True, slots=True)
class DraftCheckResult:
    pages: int
    citations: int
    quotes: int
    seconds: float
    peak_mb: float
    double_pages: int
    double_seconds: float
    double_peak_mb: float
    # The check alone, without recording (``check_draft --no-record``).
    check_seconds: float
    double_check_seconds: float

    @property
    def growth(self) -> float:
        return self.double_seconds / self.seconds


def _sentences(text: str) -> list[str]:
    """Plain sentences of 8-30 words of ``text``, on one line, with no quotation marks."""
    out = []
    for raw in _SENTENCE.split(" ".join(text.split())):
        words = raw.split()
        if 8 <= len(words) <= 30 and not re.search(r"[\"\u201c\u201d\u2018\u2019\[\]*\u00a7]|\d{3}|\bId\b|\bv\.", raw):
            out.append(raw)
    return out


def _cite(rng: random.Random, case: tuple[str, str, str, int, int], seen: set[str]) -> str:
    """A citation of ``case`` as a brief writes it: in full the first time, then by its short form."""
    _, name, citation, first, last = case
    pin = rng.randint(first, last)
    volume, reporter = citation.split(" ")[0], " ".join(citation.split(" ")[1:-1])
    if citation in seen:
        return f"{name.split(' v. ')[0].split()[-1]}, {volume} {reporter} at {pin}."
    seen.add(citation)
    return f"{name}, {citation}, {pin} (20{rng.randint(10, 22)})."


def _fabricated(pages: int) -> list[tuple[str, str, str, int, int]]:
    """Cases nobody holds, one for every two pages (a longer brief cites more authorities)."""
    return [
        ("", f"Roe{n} v. Doe{n}", f"{700 + n} F.3d {100 + 3 * n}", 100 + 3 * n, 110 + 3 * n) for n in range(pages // 2)
    ]


def brief(pages: int, *, seed: int = 51) -> bytes:
    """A Word brief of ``pages`` pages with ``CITATIONS`` and ``QUOTES`` per 40 pages (see the module)."""
    rng = random.Random(seed)
    texts = {case[0]: _sentences((OPINIONS / case[0]).read_text(encoding="utf-8")) for case in CASES}
    citations, quotes = CITATIONS * pages // PAGES, QUOTES * pages // PAGES
    per_page_citations = [citations // pages + (1 if p < citations % pages else 0) for p in range(pages)]
    per_page_quotes = [quotes // pages + (1 if p < quotes % pages else 0) for p in range(pages)]
    seen: set[str] = set()
    fabricated = _fabricated(pages)
    paragraphs: list[str] = []
    for page in range(pages):
        parts: list[str] = []
        cited = 0
        for _ in range(per_page_quotes[page]):
            if rng.random() < 0.2:
                statute, words = rng.choice(STATUTE_QUOTES)
                parts.append(f'The statute provides that an agreement "{words}." {statute}.')
            else:
                case = rng.choice(CASES)
                parts.append(f'The court said: "{rng.choice(texts[case[0]])}" {_cite(rng, case, seen)}')
            cited += 1
        while cited < per_page_citations[page]:
            roll = rng.random()
            if roll < 0.1:
                parts.append(f"See also {_cite(rng, rng.choice(fabricated), seen)}")
            elif roll < 0.25 and parts:
                parts.append(f"Id. at {rng.randint(300, 420)}.")
            elif roll < 0.35:
                parts.append(rng.choice(("9 U.S.C. § 3.", "35 U.S.C. § 101.", "9 U.S.C. § 4.")))
            else:
                case = rng.choice(CASES)
                parts.append(f"{rng.choice(texts[case[0]])} {_cite(rng, case, seen)}")
            cited += 1
        filler: list[str] = []
        while sum(len(p.split()) for p in parts + filler) < WORDS_PER_PAGE:
            filler.append(rng.choice(texts[rng.choice(CASES)[0]]))
        text = " ".join(filler[: len(filler) // 2] + parts + filler[len(filler) // 2 :])
        paragraphs.append(("\f" if page else "") + text)
    return make_docx(paragraphs)


def seed_library() -> None:
    """The three opinions as local opinions and 9 and 35 U.S.C. in the authority library (idempotent)."""
    for file, name, citation, _, _ in CASES:
        CaselawOpinion.objects.get_or_create(
            provider="local",
            opinion_id=f"bench-{file}",
            defaults={
                "case_name": name,
                "citation": citation,
                "text": (OPINIONS / file).read_text(encoding="utf-8"),
                "cluster_id": f"bench-{file}",
            },
        )
    for title in ("usc09.xml", "usc35.xml"):
        load_uslm(path=AUTHORITIES / title)


def _check(data: bytes) -> tuple[int, int]:
    """Read, find and check ``data`` as ``manage.py check_draft`` does; how many citations and quotations."""
    draft = read_draft(data=data, name="brief.docx")
    found = find_in_draft(draft)
    check_draft(found=found, use_courtlistener=False)
    return sum(f.kind != "quote" for f in found.findings), sum(f.kind == "quote" for f in found.findings)


def bench_matter() -> Project:
    """The matter the bench's briefs are recorded in (idempotent): each run of a brief is a revision of it."""
    owner, _ = get_user_model().objects.get_or_create(username="bench-drafts")
    matter, _ = Project.objects.get_or_create(name="Bench: drafts", owner=owner)
    return matter


def _record(data: bytes, matter: Project, *, pages: int) -> None:
    """Read, check and record ``data`` as a lawyer's upload is (a revision of the brief of ``pages`` pages)."""
    record_draft(matter=matter, author=matter.owner, data=data, name=f"brief-{pages}.docx")


def _seconds(work: Callable[[], object]) -> float:
    started = time.perf_counter()
    work()
    return time.perf_counter() - started


def _peak_mb(work: Callable[[], object]) -> float:
    """The peak of Python memory while ``work`` runs (tracemalloc, which slows the run: never timed with it)."""
    tracemalloc.start()
    try:
        work()
        return tracemalloc.get_traced_memory()[1] / 1e6
    finally:
        tracemalloc.stop()


def run(*, step: Callable[[str], None] = lambda message: None, repeats: int = 5) -> DraftCheckResult:
    """Seed, build both briefs, time each one's check and its check and record ``repeats`` times, alternating
    (medians kept), then measure each one's peak memory while it is checked and recorded, once."""
    step("drafts: seeding the opinions and the library")
    seed_library()
    matter = bench_matter()
    small, large = brief(PAGES), brief(2 * PAGES)
    citations, quotes = _check(small)  # warm: eyecite's and the reporters' tables load once per process
    times: dict[str, list[float]] = {"small": [], "large": [], "small_check": [], "large_check": []}
    for attempt in range(repeats):
        step(f"drafts: checking and recording the briefs, run {attempt + 1} of {repeats}")
        times["small"].append(_seconds(lambda: _record(small, matter, pages=PAGES)))
        times["large"].append(_seconds(lambda: _record(large, matter, pages=2 * PAGES)))
        times["small_check"].append(_seconds(lambda: _check(small)))
        times["large_check"].append(_seconds(lambda: _check(large)))
    return DraftCheckResult(
        pages=PAGES,
        citations=citations,
        quotes=quotes,
        seconds=statistics.median(times["small"]),
        peak_mb=_peak_mb(lambda: _record(small, matter, pages=PAGES)),
        double_pages=2 * PAGES,
        double_seconds=statistics.median(times["large"]),
        double_peak_mb=_peak_mb(lambda: _record(large, matter, pages=2 * PAGES)),
        check_seconds=statistics.median(times["small_check"]),
        double_check_seconds=statistics.median(times["large_check"]),
    )
