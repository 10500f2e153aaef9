"""Throughput and linearity of quote verification (``lqai_verify.verification``) on ~1 MB of real court text.

Not a test: run ``.venv/bin/python -m benchmarks.verification_bench`` to print a table (wall-clock figures, then the
``cpu_`` figures of :func:`cpu_run`, the ones to compare between builds). Standard library only.

``--against TREE`` compares this build with another checkout of the project (e.g. ``git worktree add /tmp/vold
d5621fc``): rounds of one process per build, alternating, each running :func:`cpu_run` with that build's
``lqai_verify.verification`` on this build's corpus (the same source and the same quotes for both), then the medians and
their ratios. Both modes also run :func:`adversarial`: the misquotes of the project's tests, none of which may verify.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import re
import statistics
import subprocess
import sys
import time
from pathlib import Path

from lqai_verify.verification import EXACT_MATCH, TOLERANT_MATCH, NormalizedSource

CORPUS_DIR = Path(__file__).resolve().parent.parent / "chats" / "data" / "opinions"
DATA_DIR = CORPUS_DIR.parent
# Misquotes of the project's tests (tests/test_verification_altered.py, tests/test_verification_rules4.py), each on
# the text it misquotes: none may verify as exact or tolerant. Then quotes written the way briefs write them, which
# must verify without a flag.
ADVERSARIAL = (
    (
        "opinions/hogarth-v-bell-edn-c-2025.txt",
        "Freeman . . . no injury is traceable to her because of her declaration",
    ),
    ("opinions/hogarth-v-bell-edn-c-2025.txt", ". . . no injury is traceable to her because of her declaration"),
    (
        "opinions/hogarth-v-bell-edn-c-2025.txt",
        "Freeman asserts that no injury is traceable to her because of her declaration. . . . As district attorney, "
        "Freeman has the exclusive power to initiate criminal prosecutions",
    ),
    ("statutes/42-usc-1981-1988.txt", "All persons . . . shall have the same right"),
    ("statutes/42-usc-1981-1988.txt", "Every person who . . . subjects, or causes to be subjected"),
    ("opinions/alabama-ago-2018-046.txt", "only candidates . . . are to be placed on the primary"),
    (
        "opinions/democracy-nc-v-nc-board-of-elections-mdnc-2022.txt",
        ". . . for any voter to permit another person to assist the voter in marking that voter's absentee ballot",
    ),
    (
        "opinions/in-re-sjs-134-sw3d-673-mo-ct-app-2004.txt",
        "Father admitted that from October 1996 on, he had no contact with S.J.S. and did not pay child "
        "support . . . .",
    ),
    (
        "opinions/hogarth-v-bell-edn-c-2025.txt",
        "[The State Bureau of Investigation] also bears the duty, jointly with district attorneys",
    ),
    ("opinions/in-re-sjs-134-sw3d-673-mo-ct-app-2004.txt", "[Stepfather] did, however, provide medical insurance"),
    (
        "opinions/fisher-v-university-of-texas-2013-slip.txt",
        "[The University] contends that the University\u2019s use of race in the admissions process violated",
    ),
    (
        "opinions/hogarth-v-bell-edn-c-2025.txt",
        "[The plaintiff] also seeks fees and costs under 42 U.S.C. \u00a7 1988",
    ),
    (
        "opinions/fisher-v-university-of-texas-2013-slip.txt",
        "[The University] considers race as one of various factors",
    ),
    (
        "opinions/fisher-v-university-of-texas-2013-slip.txt",
        "[The University], who is Caucasian, was rejected for admission",
    ),
    ("opinions/in-re-sjs-134-sw3d-673-mo-ct-app-2004.txt", "He . . . owed back child support of over $88,800.00"),
    (
        "opinions/in-re-sjs-134-sw3d-673-mo-ct-app-2004.txt",
        "approving or ordering transfer of custody. . . . In enacting section 453.110.1, the purpose of the "
        "legislature was to prohibit the indiscriminate transfer of children",
    ),
    (
        "opinions/in-re-sjs-134-sw3d-673-mo-ct-app-2004.txt",
        "the custody of a child could not be transferred at the whim of the individual in charge of the child . . . .",
    ),
    (
        "opinions/in-re-sjs-134-sw3d-673-mo-ct-app-2004.txt",
        "the policy considerations which prompt the application of section 453.110.1 do not arise in the situation",
    ),
)
LEGITIMATE = (
    (
        "opinions/fisher-v-university-of-texas-2013-slip.txt",
        "it asserts that it is a temporary necessity because of the enduring race consciousness of our society. . . . "
        "Yet again, the University echoes the hollow justifications advanced by the segregationists.",
    ),
    (
        "opinions/kentucky-oag-18-011-2018.txt",
        "Electioneering shall include the displaying of signs, the distribution of campaign literature, . . . "
        "but shall not include exit polling",
    ),
    (
        "opinions/democracy-nc-v-nc-board-of-elections-mdnc-2022.txt",
        "Plaintiff Hutchins also challenges Sections 163-231(b)(1) and 163-226.3(a)(5), . . . both of which concern",
    ),
    (
        "opinions/hogarth-v-bell-edn-c-2025.txt",
        "[The State Board] also bears the duty, jointly with district attorneys, to investigate violations",
    ),
    ("opinions/in-re-sjs-134-sw3d-673-mo-ct-app-2004.txt", "[Father] did, however, provide medical insurance"),
)
QUOTE_CHARS = (80, 400)  # quote lengths, like real quoted sentences or short passages
_WORD = re.compile(r"\S+")
_CURLY = str.maketrans({"\u2019": "'", "\u2018": "'", "\u201c": '"', "\u201d": '"', "\u2014": "--", "\u2013": "-"})


def build_source(source_bytes: int) -> str:
    """About ``source_bytes`` of UTF-8 by concatenating the corpus opinions, repeated as needed."""
    texts = [path.read_text(encoding="utf-8") for path in sorted(CORPUS_DIR.glob("*.txt"))]
    parts: list[str] = []
    size = 0
    while size < source_bytes:
        for text in texts:
            parts.append(text)
            size += len(text.encode("utf-8"))
            if size >= source_bytes:
                break
    return "\n\n".join(parts)


def _perturb(passage: str) -> str:
    """Formatting-only changes a model makes when it re-types a quote: straight quotes, one-line whitespace,
    ASCII dashes and de-hyphenated line breaks."""
    passage = re.sub(r"(?<=[a-z])-\n\s*(?=[a-z])", "", passage)
    return " ".join(passage.translate(_CURLY).split())


def pick_quotes(source: str, count: int, rng: random.Random) -> tuple[list[str], list[str]]:
    """``count`` word-aligned passages of ``source``: half verbatim, half perturbed so they need the tolerant tier."""
    starts = [m.start() for m in _WORD.finditer(source)]
    verbatim: list[str] = []
    perturbed: list[str] = []
    while len(verbatim) + len(perturbed) < count:
        start = rng.choice(starts)
        end = source.find(" ", start + rng.randint(*QUOTE_CHARS))
        if end == -1:
            continue
        passage = source[start:end].strip()
        if len(verbatim) <= len(perturbed):
            verbatim.append(passage)
            continue
        quote = _perturb(passage)
        if quote != passage and quote not in source:
            perturbed.append(quote)
    return verbatim, perturbed


def adversarial() -> dict[str, float]:
    """How many of :data:`ADVERSARIAL` verify as exact or tolerant (must be 0), and how many of :data:`LEGITIMATE`
    do not (a false alarm), with this build's rules."""
    sources: dict[str, NormalizedSource] = {}

    def clean(name: str, quote: str) -> bool:
        if name not in sources:
            sources[name] = NormalizedSource.build((DATA_DIR / name).read_text(encoding="utf-8"))
        match = sources[name].verify(quote)
        return match is not None and match.method in (EXACT_MATCH, TOLERANT_MATCH)

    return {
        "misquotes": float(len(ADVERSARIAL)),
        "misquotes_verified": float(sum(clean(name, quote) for name, quote in ADVERSARIAL)),
        "legitimate": float(len(LEGITIMATE)),
        "legitimate_flagged": float(sum(not clean(name, quote) for name, quote in LEGITIMATE)),
    }


def elide(passages: list[str], rng: random.Random) -> list[str]:
    """Each passage with a few words of its middle omitted by an ellipsis (`. . .`), the way briefs shorten a
    quote: the omission rules (and, from rules version 4, their reading of what was omitted) run on every one."""
    quotes = []
    for passage in passages:
        words = passage.split()
        if len(words) < 10:  # room for an omission between kept words
            continue
        i = rng.randint(3, len(words) - 6)
        quotes.append(" ".join([*words[:i], ". . .", *words[i + rng.randint(1, 4) :]]))
    return quotes


def _linearity(full: str, half: str, repeats: int = 7) -> tuple[float, float]:
    """Normalize time at full size / at half size: wall clock and CPU time, best of ``repeats`` each.

    Runs are interleaved so that load from other processes hits both sizes alike; the CPU-time ratio is the steadier
    one on a busy machine.
    """
    wall = {"full": float("inf"), "half": float("inf")}
    cpu = dict(wall)
    for _ in range(repeats):
        for size, text in (("half", half), ("full", full)):
            w0, c0 = time.perf_counter(), time.process_time()
            NormalizedSource.build(text)
            wall[size] = min(wall[size], time.perf_counter() - w0)
            cpu[size] = min(cpu[size], time.process_time() - c0)
    return wall["full"] / wall["half"], cpu["full"] / cpu["half"]


def run(quotes: int = 1000, source_bytes: int = 1_000_000) -> dict[str, float]:
    """Measure normalize-once time, exact and tolerant quotes/sec, and the normalization linearity ratio."""
    rng = random.Random(20130624)  # fixed seed: comparable runs
    source = build_source(source_bytes)
    half = build_source(source_bytes // 2)
    verbatim, perturbed = pick_quotes(source, quotes, rng)

    t0 = time.perf_counter()
    normalized = NormalizedSource.build(source)
    normalize_s = time.perf_counter() - t0

    t0 = time.perf_counter()
    exact = [normalized.verify(q) for q in verbatim]
    exact_s = time.perf_counter() - t0

    # The first pass pays, once per source, for the lazily built variant with nothing skipped (needed by quotes that
    # copied running-head text along with the passage); the second pass shows the steady state.
    t0 = time.perf_counter()
    tolerant = [normalized.verify(q) for q in perturbed]
    tolerant_s = time.perf_counter() - t0
    t0 = time.perf_counter()
    for q in perturbed:
        normalized.verify(q)
    tolerant_warm_s = time.perf_counter() - t0

    linearity_wall, linearity_cpu = _linearity(source, half)
    return {
        "source_chars": float(len(source)),
        "quotes": float(len(verbatim) + len(perturbed)),
        "normalize_s": normalize_s,
        "exact_qps": len(verbatim) / exact_s,
        "tolerant_qps": len(perturbed) / tolerant_s,
        "tolerant_qps_warm": len(perturbed) / tolerant_warm_s,
        "exact_hit_rate": sum(m is not None and m.method == EXACT_MATCH for m in exact) / len(exact),
        "tolerant_hit_rate": sum(m is not None and m.method == TOLERANT_MATCH for m in tolerant) / len(tolerant),
        "linearity_ratio": linearity_wall,  # ~2 means linear (the half source is half the size)
        "linearity_ratio_cpu": linearity_cpu,
        "total_s": normalize_s + exact_s + tolerant_s,
    }


def cpu_run(quotes: int = 1000, source_bytes: int = 1_000_000, passes: int = 3) -> dict[str, float]:
    """The same phases timed in CPU time (``time.process_time``), best of ``passes``: steadier than wall-clock time on
    a shared machine, and what to compare between two builds (run each build alternately, in its own process)."""
    rng = random.Random(20130624)
    source = build_source(source_bytes)
    verbatim, perturbed = pick_quotes(source, quotes, rng)
    elided = elide(verbatim, rng)
    best = {
        "normalize_s": float("inf"),
        "exact_qps": 0.0,
        "tolerant_qps": 0.0,
        "tolerant_qps_warm": 0.0,
        "elided_qps": 0.0,
    }
    for _ in range(passes):
        c0 = time.process_time()
        normalized = NormalizedSource.build(source)
        c1 = time.process_time()
        for q in verbatim:
            normalized.verify(q)
        c2 = time.process_time()
        for q in perturbed:
            normalized.verify(q)
        c3 = time.process_time()
        for q in perturbed:
            normalized.verify(q)
        c4 = time.process_time()
        for q in elided:
            normalized.verify(q)
        c5 = time.process_time()
        best["normalize_s"] = min(best["normalize_s"], c1 - c0)
        best["elided_qps"] = max(best["elided_qps"], len(elided) / (c5 - c4))
        best["exact_qps"] = max(best["exact_qps"], len(verbatim) / (c2 - c1))
        best["tolerant_qps"] = max(best["tolerant_qps"], len(perturbed) / (c3 - c2))
        best["tolerant_qps_warm"] = max(best["tolerant_qps_warm"], len(perturbed) / (c4 - c3))
    return best


def compare(against: Path, rounds: int, quotes: int, source_bytes: int) -> dict[str, dict[str, float]]:
    """Medians of ``rounds`` alternating :func:`cpu_run` processes of this build and of the checkout ``against``, on
    the same source and quotes, and each figure's ratio this build / the other."""
    here = Path(__file__).resolve().parent.parent
    runs: dict[str, list[dict[str, float]]] = {"this": [], "other": []}
    for i in range(rounds):
        order = (("this", here), ("other", against)) if i % 2 == 0 else (("other", against), ("this", here))
        for name, tree in order:
            # The script runs as a file, so ``chats`` comes from PYTHONPATH (that build) and the corpus from here.
            env = {**os.environ, "PYTHONPATH": str(tree)}
            out = subprocess.run(  # noqa: S603 - this interpreter, this script, fixed arguments
                [sys.executable, __file__, "--cpu-json", "--quotes", str(quotes), "--source-bytes", str(source_bytes)],
                env=env,
                check=True,
                capture_output=True,
                text=True,
            ).stdout
            runs[name].append(json.loads(out))
    medians = {name: {k: statistics.median(r[k] for r in rs) for k in rs[0]} for name, rs in runs.items()}
    ratio = {k: medians["this"][k] / medians["other"][k] for k in medians["this"]}
    return {**medians, "ratio": ratio}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--against", type=Path, help="another checkout of the project to compare with")
    parser.add_argument("--rounds", type=int, default=7)
    parser.add_argument("--quotes", type=int, default=1000)
    parser.add_argument("--source-bytes", type=int, default=1_000_000)
    parser.add_argument("--cpu-json", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.cpu_json:
        print(json.dumps(cpu_run(quotes=args.quotes, source_bytes=args.source_bytes)))
        return
    if args.against is not None:
        checks = adversarial()
        print("  ".join(f"{name}={value:.0f}" for name, value in checks.items()))
        table = compare(args.against.resolve(), args.rounds, args.quotes, args.source_bytes)
        print(f"{'metric':<18}  {'this':>12}  {'other':>12}  {'ratio':>6}")
        for name in table["this"]:
            this, other, ratio = table["this"][name], table["other"][name], table["ratio"][name]
            this_shown, other_shown = (f"{v:,.0f}" if v >= 1000 else f"{v:,.4f}" for v in (this, other))
            print(f"{name:<18}  {this_shown:>12}  {other_shown:>12}  {ratio:>6.3f}")
        return
    results = run()
    results.update({f"cpu_{name}": value for name, value in cpu_run().items()})
    results.update(adversarial())
    width = max(len(name) for name in results)
    print(f"{'metric':<{width}}  value")
    print(f"{'-' * width}  {'-' * 14}")
    for name, value in results.items():
        shown = f"{value:,.0f}" if value >= 1000 else f"{value:,.4f}"
        print(f"{name:<{width}}  {shown:>14}")


if __name__ == "__main__":
    main()
