"""The project's benchmark suite: ``make bench`` (``BENCH_ARGS="--rows 1000000"`` for the full run).

On PostgreSQL only. It creates its own database (``lqai_bench_<pid>``) on the server of ``DATABASE_URL``
(default ``postgres://root@127.0.0.1:5432/postgres``), migrates it, generates ``--rows`` source rows with
``generate_series`` (:mod:`benchmarks.dataset`), measures, prints a table with PASS/FAIL per goal, appends
it to ``benchmarks/RESULTS.md``, and drops the database, whatever happens. It never touches another
database.

The machine is shared and small, so every goal is a ratio of two measurements taken side by side in
one run, on the same data; the timed runs alternate and the median of ``--repeats`` is kept.

1. the raw-SQL limit: one hand-written ``INSERT ... SELECT ... ON CONFLICT DO NOTHING`` over the source
   tables the dataset fills (quotes and tool sources; it has no case citations);
2. ``backfill_ledger`` on the same data (goal: <= 1.25 x the limit);
3. its rerun on complete data (goal: writes nothing, <= 0.1 x the first run);
4. the command's peak memory, in a subprocess, at a tenth of the rows and at all of them (goal: flat,
   well under 200 MB);
5. the ledger's share of whole single-shot API turns (the receiver connected against disconnected,
   interleaved; a matter of real opinions of 20-100 KB), with the default backend (goal: <= 5%) and with
   50 citations per turn (scripted backend), and the queries it adds (goal: the same at both);
6. quote verification throughput on a 1 MB source (``benchmarks.verification_bench``), for the record;
7. the OpenAI-compatible backend's own cost per turn (``benchmarks.model_backend_bench``): a turn of
   50 streamed chunks and 5 tool calls against a fake server answering at once, minus the raw HTTP
   replay of the same requests, in CPU time of the benchmark's process, and its share of a turn a user
   waits for (a 1,000-token answer at a model's 40 tokens a second; goal: <= 1%; wall time for the record);
8. the case-citation check of a 20 KB answer citing 50 times, local store only
   (``benchmarks.case_citations_bench``), against that turn's ``finalize_turn``, for the record (the goal
   against ``finalize_turn`` alone was withdrawn for item 9's, measured on a whole streamed turn); also
   eyecite's tokenization apart from the rest of the extraction, and the check's share of a whole
   API turn answering that text;
9. the case-citation check in a turn streamed at a model's pace (``benchmarks.case_citation_turn_bench``):
   its share of the whole turn (goal: <= 3%) and its growth of the time from the last token to ``done``
   (goal: <= +50%); how the check grows with the answer's size up to its bound; what the pin-cite and
   short-form volume checks add to the check (goal: <= 10%);

plus ``--tune`` runs of the backfill at other batch sizes (messages per batch), next to
``citations.backfill.DEFAULT_BATCH_SIZE``;

9. the ledger at scale (``benchmarks.scale_bench``): the raw-SQL limit into the ledger with random
   (version 4) against time-ordered (version 7) keys, at 100,000 and 1,000,000 source rows (and
   10,000,000 with ``--scale-10m``), time and WAL per row (goal, version 7: <= 12 x the time for 10 x the
   rows, WAL per row flat);
10. a turn's retrieval in a matter of 10,000 documents against one of 10 (``benchmarks.retrieval_bench``;
   goal: <= 2 x).

11. the seal timed inside whole single-shot API turns (``benchmarks.seal_bench``; goal: <= 10% of the turn);
12. ``verify_ledger``'s check of the whole record against a plain ``SELECT`` of the same columns (for the record),
    after ``seal_turns`` sealed the dataset's turns late (on the ledger items' data, or ``--rows`` of its own).

13. the ledger admin's changelist reads (``benchmarks.admin_bench``: first page, a status filter, a status with
    no rows, search by an old message's id, the date hierarchy's year, search by a document title) and the
    trace API's (the newest turn, its chat) at 100,000
    and 1,000,000 entries (and 10,000,000 with ``--scale-10m``; goal: each <= 2 x from one size to the next),
    a turn a minute (more months at each size) or, with ``--admin-months N``, the same N months at every size.

14. the ledger's partitioning migration (``benchmarks.partition_bench``): ``citations.0014`` forwards and
    backwards on a ledger of ``--rows`` entries spread over months, in seconds per million entries, and
    ``ledger_partitions`` moving a month's entries out of the default partition (for the record).

15. a bulk import (``benchmarks.bulk_import_bench``): 1,000 documents added one by one and in one transaction
    (goal: the 10th hundred <= 1.5 x the first), 300 in one transaction against the same one by one (goal:
    <= 1.5 x), and retrieval in a matter of 2,000 documents against one of 10 (goal: <= 2 x).

16. checking a brief (``benchmarks.draft_check_bench``): a 40-page brief with 150 citations and 60 quotations
    read, checked and recorded as a turn with the library local (goal: <= 20 s), and one twice as long (goal:
    <= 2.2 x); the peak of memory of each, per page, for the record.

17. the authority library (``benchmarks.authorities_bench``): loading 35 U.S.C. with ``load_authorities``' service
    against a plain parse of the same file by the same parser (goal: <= 3 x); the load's peak of Python memory from
    1 to 35 U.S.C. (goal: <= 2 x for a file 7.6 x larger); a statute quote's verification against an opinion
    quote's of the same length (goal: <= 1 x).

18. review at matter scale (``benchmarks.review_bench``): recording a decision, issuing a certificate and reading
    the first and a deep page of the "needs review" queue in a matter of 100 turns and of 10,000 (goal: the same
    number of queries at both sizes; the times for the record).

``--items`` picks some of them: ``ledger`` (1-8), ``scale`` (9), ``retrieval`` (10), ``seal`` (11-12),
``admin`` (13), ``partitions`` (14), ``bulk`` (15), ``drafts`` (16), ``authorities`` (17), ``review`` (18); e.g.
``make bench BENCH_ARGS="--items scale,retrieval"``.
"""

from __future__ import annotations

import argparse
import os
import platform
import signal
import sys
from collections.abc import Callable
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from types import FrameType
from typing import TYPE_CHECKING, Any
from urllib.parse import urlsplit, urlunsplit

if TYPE_CHECKING:
    from benchmarks.scale_bench import WalCounters

ROOT = Path(__file__).resolve().parent.parent
if str(ROOT) not in sys.path:  # run as a script (python benchmarks/run.py) as well as a module
    sys.path.insert(0, str(ROOT))

RESULTS = ROOT / "benchmarks" / "RESULTS.md"
DEFAULT_SERVER_URL = "postgres://root@127.0.0.1:5432/postgres"
BACKFILL_GOAL = 1.25
RERUN_GOAL = 0.10
MEMORY_LIMIT_MB = 200.0
MEMORY_FLATNESS = 1.25  # peak at all rows / peak at a tenth
TURN_SHARE_GOAL = 0.05
ITEMS = ("ledger", "seal", "scale", "retrieval", "admin", "partitions", "bulk", "drafts", "authorities", "review")


@dataclass(frozen=True, slots=True)
class Row:
    item: str
    measure: str
    value: str
    goal: str
    verdict: str  # PASS, FAIL, or "-" (for the record)


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(prog="make bench", description=__doc__.split("\n\n")[0])
    parser.add_argument("--rows", type=int, default=100_000, help="source rows to generate (default 100000)")
    parser.add_argument("--repeats", type=int, default=3, help="timed runs per measurement; the median is kept")
    parser.add_argument(
        "--batch-size", type=int, default=None, help="the backfill's messages per batch (default: its own)"
    )
    parser.add_argument("--tune", default="1000,20000", help="batch sizes to compare, comma-separated ('' to skip)")
    parser.add_argument("--turns", type=int, default=100, help="turns per configuration for the per-turn share")
    parser.add_argument("--no-record", action="store_true", help=f"do not append the table to {RESULTS.name}")
    parser.add_argument(
        "--items",
        default=",".join(ITEMS),
        help=f"which measurements, comma-separated, of {', '.join(ITEMS)} (default: all)",
    )
    parser.add_argument(
        "--scale-10m",
        action="store_true",
        help="items 9 and 13 at 10,000,000 source rows too (over an hour and 100 GB of WAL: an idle server only)",
    )
    parser.add_argument(
        "--admin-months",
        type=int,
        default=None,
        help="item 13's turns spread over this many months at every size (default: a turn a minute from "
        "2024-01-01, so 1, 6 and 58 months at 100k, 1M and 10M)",
    )
    parser.add_argument(
        "--scale-keys",
        default="v4,v7",
        help="item 9's kinds of key, comma-separated, of v4 and v7 (default both; v7 alone halves a --scale-10m run)",
    )
    args = parser.parse_args(argv)
    args.scale_keys = tuple(key.strip() for key in args.scale_keys.split(",") if key.strip())
    if not args.scale_keys or set(args.scale_keys) - {"v4", "v7"}:
        parser.error("--scale-keys: choose v4, v7 or both (v4,v7)")
    if args.admin_months is not None and args.admin_months < 1:
        parser.error("--admin-months must be at least 1")
    if args.rows < 1_000 or args.repeats < 1 or args.turns < 1:
        parser.error("--rows must be at least 1000, --repeats and --turns at least 1")
    items = [item.strip() for item in args.items.split(",") if item.strip()]
    unknown = sorted(set(items) - set(ITEMS))
    if unknown or not items:
        parser.error(f"--items: unknown {', '.join(unknown) or '(none given)'}; choose from {', '.join(ITEMS)}")
    args.items = items
    return args


def database_url(server_url: str, name: str) -> str:
    parts = urlsplit(server_url)
    return urlunsplit(parts._replace(path=f"/{name}"))


def _admin(server_url: str, sql: str) -> None:
    import psycopg

    with psycopg.connect(database_url(server_url, urlsplit(server_url).path.lstrip("/") or "postgres")) as conn:
        conn.autocommit = True
        conn.execute(sql)  # DDL on the one name this module builds: lqai_bench_<pid>


def _raise_on_sigterm(signum: int, frame: FrameType | None) -> None:
    raise SystemExit(128 + signum)  # so that the finally clause drops the database


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    server_url = os.environ.get("DATABASE_URL") or DEFAULT_SERVER_URL
    if urlsplit(server_url).scheme not in {"postgres", "postgresql", "pgsql"}:
        print(f"make bench needs PostgreSQL; DATABASE_URL is {urlsplit(server_url).scheme}://...", file=sys.stderr)
        return 2
    name = f"lqai_bench_{os.getpid()}"
    bench_url = database_url(server_url, name)
    signal.signal(signal.SIGTERM, _raise_on_sigterm)
    _admin(server_url, f'CREATE DATABASE "{name}"')
    print(f"benchmark database {name} created", flush=True)
    try:
        os.environ["DATABASE_URL"] = bench_url
        os.environ["DJANGO_SETTINGS_MODULE"] = "lqai.settings_test"
        import django

        django.setup()
        from django.core.management import call_command

        call_command("migrate", verbosity=0)
        rows, context = run_suite(args, bench_url)
    finally:
        try:
            from django.db import connections

            connections.close_all()
        finally:
            _admin(server_url, f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')
            print(f"benchmark database {name} dropped", flush=True)
    table = render(rows)
    print()
    print(context["title"])
    print(context["machine"])
    print()
    print(table)
    for note in context["notes"]:
        print(f"- {note}")
    if not args.no_record:
        record(table, context)
        print(f"\nappended to {RESULTS.relative_to(ROOT)}")
    return 1 if any(row.verdict == "FAIL" for row in rows) else 0


def step(message: str) -> None:
    print(f"[{datetime.now(tz=UTC):%H:%M:%S}] {message}", flush=True)


def run_suite(args: argparse.Namespace, bench_url: str) -> tuple[list[Row], dict[str, Any]]:
    """The items ``args.items`` asks for, in order, in one table."""
    from django.db import connection

    with connection.cursor() as cursor:
        cursor.execute("SHOW server_version")
        server_version = cursor.fetchone()[0]

    def seal_suite() -> tuple[list[Row], list[str]]:
        from benchmarks import seal_bench

        return seal_bench.suite(args, step=step)

    # In this order: the seal items run on the ledger items' data, before the scale item replaces it.
    suites: tuple[tuple[str, str, Callable[[], tuple[list[Row], list[str]]]], ...] = (
        ("ledger", f"{args.rows:,} source rows", lambda: ledger_suite(args, bench_url)),
        ("seal", "the sealed record", seal_suite),
        ("scale", "the ledger at scale", lambda: scale_suite(args)),
        ("retrieval", "retrieval at matter scale", lambda: retrieval_suite(args)),
        ("admin", "the ledger admin at scale", lambda: admin_suite(args)),
        ("partitions", "the ledger's partitioning migration", lambda: partitions_suite(args)),
        ("bulk", "a bulk import", lambda: bulk_import_suite(args)),
        ("drafts", "checking a brief", lambda: drafts_suite(args)),
        ("authorities", "the authority library", lambda: authorities_suite(args)),
        ("review", "review at matter scale", lambda: review_suite(args)),
    )
    rows: list[Row] = []
    notes: list[str] = []
    title = []
    for item, name, suite in suites:
        if item in args.items:
            item_rows, item_notes = suite()
            rows += item_rows
            notes += item_notes
            title.append(name)
    now = datetime.now(tz=UTC)
    context = {
        "title": f"## {now:%Y-%m-%d %H:%M} UTC: {', '.join(title)}",
        "machine": (
            f"Machine: {os.cpu_count()} cores, {_ram_gb():.0f} GB RAM, PostgreSQL {server_version}, "
            f"Python {platform.python_version()}; shared with other test runs (noisy: goals are ratios). "
            + (
                f"Median of {args.repeats} alternating runs; {args.turns} turns per per-turn configuration. "
                if "ledger" in args.items
                else ""
            )
            + f'Command: `make bench BENCH_ARGS="{" ".join(sys.argv[1:])}"`.'
        ),
        "notes": notes,
    }
    return rows, context


def ledger_suite(args: argparse.Namespace, bench_url: str) -> tuple[list[Row], list[str]]:
    """Items 1-8."""
    from django.db import connection

    from benchmarks import dataset, ledger_bench, scale_bench
    from citations.backfill import DEFAULT_BATCH_SIZE

    sizes = dataset.Sizes(args.rows)
    batch_size = args.batch_size or DEFAULT_BATCH_SIZE
    tenth = dataset.Sizes(args.rows // 10)
    step(f"generating {sizes.rows:,} source rows ({tenth.rows:,} first, for the memory comparison)")
    dataset.generate(sizes, fraction=(0.0, 0.1))
    with connection.cursor() as cursor:
        dataset.vacuum_analyze(cursor)
    step("4. peak memory of the command at a tenth of the rows")
    rss_tenth, _ = ledger_bench.peak_rss_of_command(database_url=bench_url, batch_size=batch_size)
    # The other rows belong to turns finalized with the first tenth's, which take no rows afterwards
    # (chats.0032): the whole dataset is made again, in one transaction.
    scale_bench.reset_data()
    ledger_bench.reset_ledger()
    dataset.generate(sizes)
    with connection.cursor() as cursor:
        dataset.vacuum_analyze(cursor)
        cursor.execute(
            "SELECT (SELECT count(*) FROM message_citations) + (SELECT count(*) FROM "
            "message_caselaw_citations) + (SELECT count(*) FROM message_tool_sources)"
        )
        generated = int(cursor.fetchone()[0])
    assert generated == sizes.rows, (generated, sizes.rows)
    step("4. peak memory of the command at all the rows")
    rss_full, command_summary = ledger_bench.peak_rss_of_command(database_url=bench_url, batch_size=batch_size)

    raw_runs: list[ledger_bench.RawRun] = []
    backfill_runs: list[ledger_bench.BackfillRun] = []
    reruns: list[ledger_bench.BackfillRun] = []
    for repeat in range(args.repeats):
        # Alternate which goes first, so that neither always runs on the warmer cache.
        order = ("raw", "backfill") if repeat % 2 == 0 else ("backfill", "raw")
        for what in order:
            if what == "raw":
                step(f"1. raw SQL limit, run {repeat + 1}/{args.repeats}")
                raw_runs.append(ledger_bench.time_raw_sql())
                raw_fingerprint = ledger_bench.fingerprint()
            else:
                step(f"2. backfill_ledger --batch-size {batch_size}, run {repeat + 1}/{args.repeats}")
                backfill_runs.append(ledger_bench.time_backfill(batch_size=batch_size))
                backfill_fingerprint = ledger_bench.fingerprint()
                step(f"3. rerun on complete data, run {repeat + 1}/{args.repeats}")
                reruns.append(ledger_bench.time_backfill(batch_size=batch_size, reset=False))
    assert raw_fingerprint == backfill_fingerprint, "the backfill and the raw SQL wrote different entries"
    assert raw_fingerprint[0] == sizes.valid, (raw_fingerprint, sizes.valid)

    tuning: list[tuple[int, ledger_bench.BackfillRun]] = []
    for size in [int(s) for s in args.tune.split(",") if s.strip()]:
        step(f"tuning: backfill_ledger --batch-size {size}")
        tuning.append((size, ledger_bench.time_backfill(batch_size=size)))

    step(f"5. the ledger's share of whole turns ({args.turns} turns per configuration)")
    shares = ledger_bench.turn_share(turns=args.turns)

    step("6. quote verification on a 1 MB source")
    try:
        from benchmarks import verification_bench
    except ImportError as exc:
        verification: dict[str, float] | None = None
        verification_skip = f"skipped: benchmarks.verification_bench is not available ({exc})"
    else:
        verification = verification_bench.run(quotes=1000, source_bytes=1_000_000)
        verification_skip = ""

    step("7. the OpenAI-compatible backend's own cost per turn")
    from benchmarks import model_backend_bench

    model_backend = model_backend_bench.run(turns=args.turns)

    step("8. case-citation check of a 20 KB answer with 50 citations")
    from benchmarks import case_citations_bench

    case_citations = case_citations_bench.run()

    step("9. the case-citation check in a streamed turn at a model's pace")
    from benchmarks import case_citation_turn_bench

    paced = case_citation_turn_bench.run()

    raw = ledger_bench.median([r.seconds for r in raw_runs])
    raw_wal = ledger_bench.median([r.wal_bytes for r in raw_runs]) / 1e6
    backfill_wal = ledger_bench.median([r.wal_bytes for r in backfill_runs]) / 1e6
    first = ledger_bench.median([r.seconds for r in backfill_runs])
    rerun = ledger_bench.median([r.seconds for r in reruns])
    rerun_written = max(r.result.total_created for r in reruns)
    last = backfill_runs[-1].result
    rows = [
        Row("1", "raw SQL limit: one INSERT ... SELECT, all rows", f"{raw:.2f} s", "(the limit)", "-"),
        Row(
            "2",
            f"backfill_ledger, batch {batch_size:,} ({backfill_runs[-1].result.batches} batches, "
            f"longest {backfill_runs[-1].longest_batch:.2f} s)",
            f"{first:.2f} s = {first / raw:.2f} x raw",
            f"<= {BACKFILL_GOAL} x raw",
            _verdict(first / raw <= BACKFILL_GOAL),
        ),
        Row(
            "2 detail",
            "WAL written (median): backfill vs raw SQL",
            f"{backfill_wal:,.0f} MB vs {raw_wal:,.0f} MB = {backfill_wal / raw_wal:.2f} x",
            "",
            "-",
        ),
        Row(
            "3",
            "rerun on complete data",
            f"{rerun_written} written, {rerun:.2f} s = {rerun / first:.3f} x first run",
            f"0 written, <= {RERUN_GOAL} x",
            _verdict(rerun_written == 0 and rerun / first <= RERUN_GOAL),
        ),
        Row(
            "4",
            "peak RSS of `manage.py backfill_ledger` (subprocess)",
            f"{rss_tenth:.0f} MB at {tenth.rows:,} rows, {rss_full:.0f} MB at {sizes.rows:,} "
            f"({rss_full / rss_tenth:.2f} x)",
            f"flat (<= {MEMORY_FLATNESS} x), < {MEMORY_LIMIT_MB:.0f} MB",
            _verdict(rss_full <= rss_tenth * MEMORY_FLATNESS and rss_full < MEMORY_LIMIT_MB),
        ),
    ]
    rows.append(
        Row(
            "5",
            "queries the ledger adds to a turn (savepoint, time bound, one statement per source table, release)",
            ", ".join(f"+{share.added_queries} at {share.citations} citation(s)" for share in shares),
            "constant",
            _verdict(len({share.added_queries for share in shares}) == 1),
        )
    )
    for share in shares:
        rows.append(
            Row(
                "5",
                f"ledger's share of a whole single-shot API turn, {share.label} ({share.citations} citation(s))",
                f"+{share.share:.1%} (+{(share.on - share.off) * 1000:.2f} ms on {share.off * 1000:.1f} ms)",
                f"<= {TURN_SHARE_GOAL:.0%}" if share.label == "default backend" else "(for the record)",
                _verdict(share.share <= TURN_SHARE_GOAL) if share.label == "default backend" else "-",
            )
        )
    if verification is None:
        rows.append(Row("6", "quote verification, 1 MB source", verification_skip, "(for the record)", "-"))
    else:
        rows.append(
            Row(
                "6",
                "quote verification, 1 MB source",
                f"exact {verification['exact_qps']:,.0f} quotes/s, tolerant {verification['tolerant_qps']:,.0f} "
                f"quotes/s; normalize once {verification['normalize_s']:.2f} s",
                "(for the record)",
                "-",
            )
        )
    rows.append(
        Row(
            "7",
            f"OpenAI-compatible backend, own cost per turn ({model_backend_bench.CHUNKS} streamed chunks, "
            f"{model_backend_bench.TOOL_CALLS} tool calls, 3 requests; fake server in another process answering "
            "at once): CPU time of this process, turn minus raw HTTP replay",
            f"{model_backend['overhead_cpu_ms']:.2f} ms (turn {model_backend['turn_cpu_ms']:.2f} - replay "
            f"{model_backend['raw_cpu_ms']:.2f}); wall {model_backend['overhead_ms']:.2f} ms "
            f"(turn {model_backend['turn_ms']:.2f} - replay {model_backend['raw_ms']:.2f})",
            f"<= {model_backend_bench.GOAL_SHARE:.0%} of a {model_backend_bench.PACED_TURN_S:.0f} s model-paced turn "
            f"({model_backend['overhead_cpu_ms'] / 1000 / model_backend_bench.PACED_TURN_S:.3%})",
            _verdict(
                model_backend["overhead_cpu_ms"] / 1000
                <= model_backend_bench.GOAL_SHARE * model_backend_bench.PACED_TURN_S
            ),
        )
    )
    rows.append(
        Row(
            "8",
            f"case-citation check (eyecite + local store), {case_citations['answer_chars'] / 1000:.0f} KB answer, "
            f"{case_citations['citations']:.0f} citations, vs that turn's finalize_turn",
            f"{case_citations['check_s'] * 1000:.1f} ms (extraction {case_citations['extract_s'] * 1000:.1f} ms) "
            f"on {case_citations['finalize_s'] * 1000:.1f} ms = {case_citations['ratio']:.0%}; a process's first "
            f"check: +{case_citations['first_call_s'] * 1000:.0f} ms (imports eyecite)",
            "(for the record: the goal is item 9's, a whole turn)",
            "-",
        )
    )
    rows.append(
        Row(
            "8 detail",
            "what the goal cannot reach with eyecite: its tokenization alone, and the rest of the extraction "
            "(eyecite building and resolving the citations, the names read here) with a free tokenizer",
            f"tokenization {case_citations['tokenize_s'] * 1000:.1f} ms; the rest "
            f"{(case_citations['extract_s'] - case_citations['tokenize_s']) * 1000:.1f} ms = "
            f"{(case_citations['extract_s'] - case_citations['tokenize_s']) / case_citations['finalize_s']:.0%} "
            "of finalize",
            "",
            "-",
        )
    )
    rows.append(
        Row(
            "8 detail",
            "the check's share of a whole single-shot API turn answering that 20 KB answer (scripted backend, "
            "no model time: the worst case), check on vs off, ledger on",
            f"+{case_citations['turn_share']:.0%} (+"
            f"{(case_citations['turn_on_s'] - case_citations['turn_off_s']) * 1000:.1f} ms on "
            f"{case_citations['turn_off_s'] * 1000:.1f} ms)",
            "(for the record)",
            "-",
        )
    )
    rows.append(
        Row(
            "9",
            f"the check's share of a whole streamed turn (OpenAI-compatible backend, fake server, "
            f"{paced['tokens']} tokens at {paced['tokens_per_second']:.0f}/s citing "
            f"{case_citation_turn_bench.CITED_CASES} cases), check on vs off",
            f"+{paced['turn_share']:.1%} ({paced['turn_on_s']:.2f} s vs {paced['turn_off_s']:.2f} s)",
            f"<= {case_citation_turn_bench.TURN_SHARE_GOAL:.0%}",
            "PASS" if paced["turn_share"] <= case_citation_turn_bench.TURN_SHARE_GOAL else "FAIL",
        )
    )
    rows.append(
        Row(
            "9",
            "last token to the end of finalize (the done event), check on vs off",
            f"+{paced['tail_growth']:.0%} ({paced['tail_on_s'] * 1000:.0f} ms vs {paced['tail_off_s'] * 1000:.0f} ms)",
            f"<= +{case_citation_turn_bench.TAIL_GROWTH_GOAL:.0%}",
            "PASS" if paced["tail_growth"] <= case_citation_turn_bench.TAIL_GROWTH_GOAL else "FAIL",
        )
    )
    rows.append(
        Row(
            "9 detail",
            "the check by answer size, 25 cases (whole text; bound LQAI_CASE_CITATION_MAX_CHARS)",
            "; ".join(f"{kb} KB {seconds * 1000:.0f} ms" for kb, seconds in paced["growth_s"].items()),
            "(for the record)",
            "-",
        )
    )
    rows.append(
        Row(
            "9 detail",
            "the same, read while it streams: between the deltas / at finalize",
            "; ".join(
                f"{kb} KB {fed * 1000:.0f} / {rest * 1000:.0f} ms"
                for kb, (fed, rest) in paced["streamed_growth_s"].items()
            ),
            "(for the record)",
            "-",
        )
    )
    rows.append(
        Row(
            "9 detail",
            "pin-cite and short-form volume checks, share of the check of a 20 KB answer citing 50 times",
            f"{paced['pin_volume_share']:+.1%}",
            "<= +10%",
            "PASS" if paced["pin_volume_share"] <= 0.10 else "FAIL",
        )
    )
    for size, run in tuning:
        rows.append(
            Row(
                "tune",
                f"backfill_ledger --batch-size {size:,} ({run.result.batches} batches)",
                f"{run.seconds:.2f} s = {run.seconds / raw:.2f} x raw; longest batch {run.longest_batch:.2f} s",
                "",
                "-",
            )
        )
    notes = [
        f"Data: {sizes.kb:,} KB quotes, {sizes.caselaw:,} caselaw "
        f"quotes, {sizes.tool:,} tool sources, {sizes.assistant_messages:,} turns in {sizes.chats:,} chats; "
        f"{sizes.valid:,} entries. Raw SQL and backfill wrote identical entries (fingerprint of every "
        "column but id and created_at).",
        f"Default --batch-size: {DEFAULT_BATCH_SIZE:,} messages (citations.backfill.DEFAULT_BATCH_SIZE). "
        f"Backfill: {last.total_created:,} created for {last.messages:,} messages, "
        f"{last.total_skipped:,} skipped. Command (subprocess): `{command_summary}`.",
        "Per-turn: POST /api/chats/{id}/messages/ in-process (authentication, retrieval, the backend, "
        "verification, finalize with the ledger written in the turn's transaction, the response), each turn "
        "in a fresh chat of a matter whose KB documents are the real opinions of 20-100 KB ("
        + ", ".join(f"{p.stat().st_size // 1024} KB" for p in ledger_bench.TURN_DOCUMENTS)
        + "); medians of turns interleaved receiver on / off; every turn's entries checked.",
        CASE_CITATIONS_NOTE,
    ]
    return rows, notes


def retrieval_suite(args: argparse.Namespace) -> tuple[list[Row], list[str]]:
    """Item 10: a turn's retrieval in a matter of 10,000 documents against one of 10."""
    from benchmarks import retrieval_bench

    result = retrieval_bench.run(step=step)
    rows = [
        Row(
            "10",
            f"a turn's KB retrieval, matter of {result.large_documents:,} documents vs of {retrieval_bench.SMALL}",
            f"{result.large_s * 1000:.1f} ms vs {result.small_s * 1000:.1f} ms = {result.ratio:.2f} x",
            f"<= {retrieval_bench.GOAL:.0f} x",
            _verdict(result.ratio <= retrieval_bench.GOAL),
        ),
        Row(
            "10 detail",
            "for the record: the retrieval that split the best documents on every turn (before stored passages), "
            "once per matter",
            f"{result.before_large_s * 1000:,.0f} ms at {result.large_documents:,} documents, "
            f"{result.before_small_s * 1000:.0f} ms at {retrieval_bench.SMALL}",
            "(for the record)",
            "-",
        ),
        Row(
            "10 detail",
            "making the passages of the large matter once (documents inserted in bulk, made on first use)",
            f"{result.make_passages_s:.0f} s for {result.large_documents:,} documents, "
            f"{result.large_megabytes:.0f} MB, {result.passages:,} passages",
            "(for the record)",
            "-",
        ),
    ]
    notes = [
        f"Retrieval (10): documents of 2-8 KB cut from the real opinions of chats/data/opinions (the large matter "
        f"is the small one and 9,990 more of the kind); {retrieval_bench.QUESTIONS} questions made of its words, "
        "5 rounds, the two "
        "matters alternating; the timed call is chats.assistant.extractive.matter_passages (the backends' "
        "retrieval), medians kept.",
    ]
    return rows, notes


def bulk_import_suite(args: argparse.Namespace) -> tuple[list[Row], list[str]]:
    """Item 15: a bulk import stays linear, and retrieval in a matter of 2,000 documents."""
    from benchmarks import bulk_import_bench as bench

    result = bench.run(step=step)
    goal = f"<= {bench.GOAL} x"

    def hundreds(values: list[float]) -> str:
        growth = bench.BulkImportResult.growth(values)
        return (
            f"{values[-1]:.2f} s vs {values[0]:.2f} s = {growth:.2f} x (each: {', '.join(f'{v:.1f}' for v in values)})"
        )

    one_transaction = result.batch_one_transaction_s / result.batch_one_by_one_s
    before = result.batch_counted_each_s / result.batch_one_by_one_s
    retrieval = result.retrieval
    rows = [
        Row(
            "15",
            "the 10th hundred documents added to a matter vs the first, each committed",
            hundreds(result.one_by_one_hundreds_s),
            goal,
            _verdict(bench.BulkImportResult.growth(result.one_by_one_hundreds_s) <= bench.GOAL),
        ),
        Row(
            "15",
            "the 10th hundred documents vs the first, 1,000 added in one transaction (then its commit, counting "
            f"their words: {result.one_transaction_commit_s:.2f} s)",
            hundreds(result.one_transaction_hundreds_s),
            goal,
            _verdict(bench.BulkImportResult.growth(result.one_transaction_hundreds_s) <= bench.GOAL),
        ),
        Row(
            "15",
            f"{result.batch} documents in one transaction vs the same committed one by one",
            f"{result.batch_one_transaction_s:.2f} s vs {result.batch_one_by_one_s:.2f} s = {one_transaction:.2f} x",
            goal,
            _verdict(one_transaction <= bench.GOAL),
        ),
        Row(
            "15 detail",
            f"as before: {result.batch} documents in one transaction, each one's words counted as it is added",
            f"{result.batch_counted_each_s:.2f} s = {before:.2f} x the same one by one",
            "(for the record)",
            "-",
        ),
        Row(
            "15",
            f"a turn's KB retrieval, matter of {retrieval.large_documents:,} documents vs of 10",
            f"{retrieval.large_s * 1000:.1f} ms vs {retrieval.small_s * 1000:.1f} ms = {retrieval.ratio:.2f} x",
            f"<= {bench.RETRIEVAL_GOAL:.0f} x",
            _verdict(retrieval.ratio <= bench.RETRIEVAL_GOAL),
        ),
    ]
    notes = [
        "Bulk import (15): documents of 2-8 KB cut from the real opinions of chats/data/opinions, each added "
        "through chats.documents.add_document (passages made; the matter's word counts after the commit); "
        f"the {result.batch}-document runs alternate, medians of 2; 'as before' counts each document's words as "
        "it is added (chats.passages.count_terms after each), as every addition did before the counts were kept "
        "once per batch.",
    ]
    return rows, notes


def drafts_suite(args: argparse.Namespace) -> tuple[list[Row], list[str]]:
    """Item 16: a 40-page brief checked, and one twice as long."""
    from benchmarks import draft_check_bench as bench

    result = bench.run(step=step, repeats=max(args.repeats, 3))
    rows = [
        Row(
            "16",
            f"a {result.pages}-page brief ({result.citations} citations, {result.quotes} quotations) read, checked "
            "and recorded as a turn, library local",
            f"{result.seconds:.2f} s",
            f"<= {bench.TIME_GOAL_S:.0f} s",
            _verdict(result.seconds <= bench.TIME_GOAL_S),
        ),
        Row(
            "16",
            f"a {result.double_pages}-page brief vs the {result.pages}-page one, read, checked and recorded",
            f"{result.double_seconds:.2f} s vs {result.seconds:.2f} s = {result.growth:.2f} x",
            f"<= {bench.GROWTH_GOAL} x",
            _verdict(result.growth <= bench.GROWTH_GOAL),
        ),
        Row(
            "16 detail",
            "peak Python memory while a brief is checked and recorded (tracemalloc), each brief, and per page",
            f"{result.peak_mb:.1f} MB at {result.pages} pages ({1000 * result.peak_mb / result.pages:.0f} KB a page), "
            f"{result.double_peak_mb:.1f} MB at {result.double_pages} "
            f"({1000 * result.double_peak_mb / result.double_pages:.0f} KB a page)",
            "(for the record)",
            "-",
        ),
        Row(
            "16 detail",
            "the check alone (check_draft --no-record), each brief",
            f"{result.check_seconds:.2f} s at {result.pages} pages, {result.double_check_seconds:.2f} s at "
            f"{result.double_pages}",
            "(for the record)",
            "-",
        ),
    ]
    notes = [
        "Drafts (16): Word briefs made by benchmarks.draft_check_bench from the sentences of Fisher, Patel and "
        "Democracy North Carolina (local opinions) and 9 and 35 U.S.C. (the library), each case cited in full "
        "once then by short form, id., and a fabricated case per two pages; nearly all the time is eyecite's "
        "two readings of the text (the case citations, the authority library's statute finder), whose search for "
        "references by name after each full citation grows with the citations times the text.",
    ]
    return rows, notes


def review_suite(args: argparse.Namespace) -> tuple[list[Row], list[str]]:
    """Item 18: a decision, a certificate and the review queue in a matter of 100 turns and of 10,000."""
    from benchmarks import review_bench as bench

    result = bench.run(step=step, repeats=max(args.repeats, 5))
    small, large = result.small, result.large
    rows = [
        Row(
            "18",
            f"{what}: queries at {small.turns:,} turns vs {large.turns:,} (median time at each)",
            f"{small.queries[what]} vs {large.queries[what]} ({small.median_ms[what]:.1f} ms vs "
            f"{large.median_ms[what]:.1f} ms)",
            "the same number",
            _verdict(small.queries[what] == large.queries[what]),
        )
        for what in small.queries
    ]
    notes = [
        "Review (18): one matter, one chat, grown in SQL to 10,000 turns whose one quote failed (verdict fail: "
        "every turn is in the queue); a turn of the middle decided on (removed) and certified; the queue's "
        "page is 25 turns, a deep page the one after the 30th turn from the end.",
    ]
    return rows, notes


def authorities_suite(args: argparse.Namespace) -> tuple[list[Row], list[str]]:
    """Item 17: loading a title against a plain parse, its memory from 1 to 35 U.S.C., a statute quote's check."""
    from benchmarks import authorities_bench as bench

    result = bench.run(step=step, repeats=max(args.repeats, 5))
    return authorities_rows(result), [AUTHORITIES_NOTE]


def authorities_rows(result: Any) -> list[Row]:
    """Item 17's rows from a :class:`benchmarks.authorities_bench.AuthoritiesResult`."""
    from benchmarks import authorities_bench as bench

    mb = result.title_bytes / 1e6
    return [
        Row(
            "17",
            f"loading 35 U.S.C. ({mb:.1f} MB, {result.sections} sections) with load_authorities' service vs a plain "
            "lxml iterparse of the same file",
            f"{result.load_s * 1000:.0f} ms vs {result.plain_s * 1000:.0f} ms = {result.load_ratio:.2f} x",
            f"<= {bench.LOAD_GOAL:.0f} x",
            _verdict(result.load_ratio <= bench.LOAD_GOAL),
        ),
        Row(
            "17 detail",
            "of which the reader (every section's text and subdivisions, nothing stored) vs the plain parse",
            f"{result.read_s * 1000:.0f} ms = {result.read_s / result.plain_s:.2f} x; storing and committing the "
            f"rest ({(result.load_s - result.read_s) * 1000:.0f} ms)",
            "(for the record)",
            "-",
        ),
        Row(
            "17",
            f"peak Python memory of the load (tracemalloc), 1 U.S.C. ({result.small_bytes / 1e3:.0f} KB) -> "
            f"35 U.S.C. ({mb:.1f} MB, {result.size_growth:.1f} x the file)",
            f"{result.small_load_peak_mb:.2f} MB -> {result.large_load_peak_mb:.2f} MB = {result.memory_growth:.2f} x",
            f"<= {bench.MEMORY_GOAL:.0f} x",
            _verdict(result.memory_growth <= bench.MEMORY_GOAL),
        ),
        Row(
            "17 detail",
            "peak Python memory of the reader alone, each title, and each title's longest section",
            f"{result.small_read_peak_mb * 1000:.0f} KB -> {result.large_read_peak_mb * 1000:.0f} KB = "
            f"{result.large_read_peak_mb / result.small_read_peak_mb:.2f} x; longest section "
            f"{result.small_largest_section:,} -> {result.large_largest_section:,} characters",
            "(for the record)",
            "-",
        ),
        Row(
            "17",
            f"a {result.statute_quote_chars}-character quote of {bench.CITED} (verify_statute_quote: the section "
            f"read, then the verifier) vs a {result.opinion_quote_chars}-character quote of a 64 KB opinion "
            "(the verifier on its text), both verified",
            f"{result.statute_verified_ms:.2f} ms vs {result.opinion_verified_ms:.2f} ms = {result.verify_ratio:.2f} x",
            f"<= {bench.VERIFY_GOAL:.0f} x",
            _verdict(result.verify_ratio <= bench.VERIFY_GOAL),
        ),
        Row(
            "17 detail",
            "the same quotes with a word changed: both fail (the statute's after its words are looked for in the "
            "title's other sections)",
            f"{result.statute_failed_ms:.2f} ms vs {result.opinion_failed_ms:.2f} ms = "
            f"{result.statute_failed_ms / result.opinion_failed_ms:.2f} x",
            "(for the record)",
            "-",
        ),
    ]


AUTHORITIES_NOTE = (
    "Authorities (17): OLRC's whole usc01.xml and usc35.xml (Online@117-80, benchmarks/data); each title removed "
    "from the library before each load, so every load reads, stores and commits every section; the plain parse "
    "is lxml's iterparse with the reader's options (start, end and processing-instruction events), every event "
    "read, nothing kept; plain parse, reader and load alternate, medians kept. Memory: tracemalloc's peak, which "
    "counts Python's allocations and not libxml2's (the tree, cleared section by section). Quotes: medians of "
    "alternating rounds of 50 calls each; the opinion is chats/data/opinions/democracy-nc-v-nc-board-of-elections-"
    "mdnc-2022.txt."
)


def _wal_made_of(wal: WalCounters, rows: int) -> str:
    return f"{wal.records / rows:.1f} records and {wal.full_page_images / rows:.2f} full-page images per row"


def _per_row_growth(smaller: float, smaller_rows: int, larger: float, larger_rows: int) -> float:
    """How much a count per row grew from the smaller run to the larger."""
    return (larger / larger_rows) / (smaller / smaller_rows) if smaller else float("inf")


def scale_suite(args: argparse.Namespace) -> tuple[list[Row], list[str]]:
    """Item 9: the raw-SQL limit with version 4 against version 7 keys, and the backfill, at each size."""
    from django.db import connection

    from benchmarks import scale_bench

    sizes = (*scale_bench.DEFAULT_SIZES, *((scale_bench.LARGE_SIZE,) if args.scale_10m else ()))
    with connection.cursor() as cursor:
        cursor.execute("SHOW shared_buffers")
        shared_buffers = cursor.fetchone()[0]
    runs = scale_bench.run(sizes=sizes, keys=args.scale_keys, step=step)
    rows = []
    for run in sorted(runs, key=lambda r: (r.rows, r.keys)):
        rows.append(
            Row(
                "9",
                f"raw SQL into the ledger, {run.rows:,} source rows, {run.keys} keys",
                f"{run.seconds:.1f} s = {run.us_per_row:.1f} us/row; WAL {run.wal_bytes / 1e6:,.0f} MB = "
                f"{run.wal_per_row:,.0f} B/row ({_wal_made_of(run.wal, run.rows)}); ledger indexes "
                f"{run.index_bytes / 1e6:,.0f} MB",
                "(for the record)",
                "-",
            )
        )
        if run.backfill is not None:
            timed = run.backfill.timed
            rows.append(
                Row(
                    "9",
                    f"backfill_ledger into the emptied ledger, {run.rows:,} source rows, {run.keys} keys",
                    f"{timed.seconds:.1f} s = {timed.seconds / run.seconds:.2f} x the raw SQL; WAL "
                    f"{timed.wal_bytes / 1e6:,.0f} MB = {timed.wal_bytes / run.rows:,.0f} B/row "
                    f"({_wal_made_of(run.backfill.wal, run.rows)}); {len(timed.batch_seconds):,} batches "
                    f"in {sum(timed.batch_seconds):.1f} s (median of the first tenth "
                    f"{timed.tenth_median_ms(0):.0f} ms, of the last {timed.tenth_median_ms(-1):.0f} ms), "
                    f"then {timed.after_batches_seconds:.1f} s (ANALYZE); meanwhile autovacuum vacuumed "
                    f"the ledger's partitions {run.backfill.autovacuums[0]} times and analyzed them "
                    f"{run.backfill.autovacuums[1]} times",
                    "(for the record)",
                    "-",
                )
            )
    for keys in ("v4", "v7"):
        for smaller, larger in scale_bench.growth(runs, keys=keys):
            factor = larger.rows / smaller.rows
            time_goal = scale_bench.TIME_GROWTH_GOAL * factor / 10
            time_growth = larger.seconds / smaller.seconds
            wal_growth = larger.wal_per_row / smaller.wal_per_row
            # The goal is stated from 1M to 10M, both past memory; from 100k (in shared_buffers) to 1M (not)
            # the step into eviction dominates: shown, not judged.
            judged = keys == "v7" and smaller.rows >= scale_bench.JUDGED_FROM
            records = _per_row_growth(smaller.wal.records, smaller.rows, larger.wal.records, larger.rows)
            images = _per_row_growth(
                smaller.wal.full_page_images, smaller.rows, larger.wal.full_page_images, larger.rows
            )
            rows.append(
                Row(
                    "9",
                    f"{keys} keys, {smaller.rows:,} -> {larger.rows:,} rows ({factor:.0f} x): time, WAL per row",
                    f"time {time_growth:.1f} x; WAL per row {wal_growth:.2f} x (records per row {records:.2f} x, "
                    f"full-page images per row {images:.2f} x)",
                    f"<= {time_goal:.0f} x; <= {scale_bench.WAL_FLATNESS_GOAL} x"
                    if judged
                    else "(for the record: the goal is from 1M to 10M, --scale-10m)"
                    if keys == "v7"
                    else "(for the record)",
                    _verdict(time_growth <= time_goal and wal_growth <= scale_bench.WAL_FLATNESS_GOAL)
                    if judged
                    else "-",
                )
            )
            if smaller.backfill is not None and larger.backfill is not None:
                before, after = smaller.backfill.timed, larger.backfill.timed
                backfill_growth = after.seconds / before.seconds
                backfill_wal_growth = _per_row_growth(before.wal_bytes, smaller.rows, after.wal_bytes, larger.rows)
                rows.append(
                    Row(
                        "9",
                        f"backfill_ledger, {keys} keys, {smaller.rows:,} -> {larger.rows:,} rows: time, WAL per row",
                        f"time {backfill_growth:.1f} x; WAL per row {backfill_wal_growth:.2f} x",
                        f"<= {time_goal:.0f} x" if judged else "(for the record)",
                        _verdict(backfill_growth <= time_goal) if judged else "-",
                    )
                )
    for rows_at in sizes if len(args.scale_keys) == 2 else ():
        v4 = next(r for r in runs if r.rows == rows_at and r.keys == "v4")
        v7 = next(r for r in runs if r.rows == rows_at and r.keys == "v7")
        rows.append(
            Row(
                "9",
                f"v7 against v4 at {rows_at:,} rows: time, WAL",
                f"time {v7.seconds / v4.seconds:.2f} x; WAL {v7.wal_bytes / v4.wal_bytes:.2f} x",
                "(for the record)",
                "-",
            )
        )
    notes = [
        "Scale (9): for each size and kind of key a fresh dataset (benchmarks.dataset: 40% KB quotes, 30% "
        "caselaw quotes, 30% tool sources, about 4 per turn, 20 per chat, 1,000 per matter) whose messages and "
        "source rows have that kind of key, the ledger's partitions of every month its turns span (as the "
        "nightly ledger_partitions keeps them), then one INSERT ... SELECT ... ORDER BY created_at ON CONFLICT "
        "DO NOTHING of every entry into an empty ledger (after a CHECKPOINT) with ids of that kind: "
        "gen_random_uuid() or uuid_generate_v7(); then, for version 7, backfill_ledger of the same rows into "
        "the emptied ledger. One run per size and kind, the kinds alternating which goes first; the server's "
        f"shared_buffers: {shared_buffers}; build times: "
        + ", ".join(f"{r.rows:,} {r.keys} {r.build_seconds:.0f} s ({r.months} months)" for r in runs)
        + ".",
    ]
    return rows, notes


def admin_suite(args: argparse.Namespace) -> tuple[list[Row], list[str]]:
    """Item 13: the ledger changelist's reads at each size, and their growth."""
    import itertools

    from benchmarks import admin_bench

    sizes = (*admin_bench.DEFAULT_SIZES, *((admin_bench.LARGE_SIZE,) if args.scale_10m else ()))
    runs = admin_bench.run(sizes=sizes, repeats=args.repeats, months=args.admin_months, step=step)
    rows = [
        Row(
            "13",
            f"{name}, {run.entries:,} entries in {run.months} months",
            f"{ms:.0f} ms",
            "(for the record)",
            "-",
        )
        for run in runs
        for name, ms in run.median_ms.items()
    ]
    for smaller, larger in itertools.pairwise(runs):
        for name, ms in larger.median_ms.items():
            growth = ms / smaller.median_ms[name]
            rows.append(
                Row(
                    "13",
                    f"{name}, {larger.entries:,} / {smaller.entries:,} entries "
                    f"({larger.months} / {smaller.months} months)",
                    f"{growth:.2f} x",
                    f"<= {admin_bench.GROWTH_GOAL:.0f} x",
                    _verdict(growth <= admin_bench.GROWTH_GOAL),
                )
            )
    notes = [
        "Admin (13): for each size a fresh dataset with time-ordered keys and its ledger (the raw-SQL limit, each "
        "entry dated at its turn: "
        + (
            "a minute per turn from 2024-01-01"
            if args.admin_months is None
            else f"the turns spread evenly over {args.admin_months} months from 2024-01-01 at every size"
        )
        + ", written in that order into the partitions of "
        "every month it spans, as the nightly ledger_partitions keeps them), VACUUM ANALYZE, then each read "
        "through the "
        "Django test client (the whole response: the changelist as a superuser, the trace API as the owner of "
        "the newest turn's chat, whose turns span every month of the dataset), warmed once, then alternating, "
        f"median of {args.repeats}; each size needs its own dataset, so the sizes are timed one after the other "
        "(other work on the machine at each shows in the ratio); build times: "
        + ", ".join(f"{r.rows:,} rows {r.build_seconds:.0f} s" for r in runs)
        + ".",
    ]
    return rows, notes


def partitions_suite(args: argparse.Namespace) -> tuple[list[Row], list[str]]:
    """Item 14: the partitioning migration, forwards and backwards, and a move out of the default partition."""
    from benchmarks import partition_bench

    run = partition_bench.run(rows=args.rows, step=step)
    per_million = 1_000_000 / max(1, run.entries)
    rows = [
        Row(
            "14",
            f"citations.0014 forwards (plain -> {run.months} monthly partitions), {run.entries:,} entries",
            f"{run.forward_seconds:.1f} s = {run.forward_seconds * per_million:.1f} s per million entries",
            "(for the record)",
            "-",
        ),
        Row(
            "14",
            f"citations.0014 backwards (partitions -> plain), {run.entries:,} entries",
            f"{run.backward_seconds:.1f} s = {run.backward_seconds * per_million:.1f} s per million entries",
            "(for the record)",
            "-",
        ),
        Row(
            "14",
            f"ledger_partitions: a month's {run.moved:,} entries moved out of the default partition",
            f"{run.move_seconds:.1f} s = {run.move_seconds * 1_000_000 / max(1, run.moved):.1f} s per million",
            "(for the record)",
            "-",
        ),
    ]
    notes = [
        "Partitions (14): a fresh dataset with time-ordered keys and its ledger (the raw-SQL limit, each entry "
        "dated at its turn: a minute per turn from 2024-01-01), migrated back to the plain table, then forwards, "
        "each timed whole through the migration executor (copy, keys, indexes, foreign keys, triggers, counts, "
        "ANALYZE), in one transaction holding the ledger's lock throughout; then one month's entries put back in "
        "the default partition and moved by `ledger_partitions` (count and digest checked before and after).",
    ]
    return rows, notes


CASE_CITATIONS_NOTE = (
    "Case citations (8): a 20 KB answer citing 25 cases of the local store in full, each followed by a short "
    "form or id.; checked against the local store only, next to finalize_turn of that turn without the check "
    "and without post_finalize receivers. Nearly all of the check is eyecite's extraction (pure Python: ~160 "
    "reporter regexes over the text, then case-name scans); the local lookup is one query. 10% of finalize "
    "(under 1 ms) is out of reach of eyecite in-process; the check runs before finalize's transaction, so it "
    "lengthens the turn, not the transaction."
)


def _verdict(ok: bool) -> str:
    return "PASS" if ok else "FAIL"


def _ram_gb() -> float:
    try:
        with open("/proc/meminfo", encoding="ascii") as meminfo:
            for line in meminfo:
                if line.startswith("MemTotal:"):
                    return int(line.split()[1]) / 1024 / 1024
    except OSError:
        pass
    return 0.0


def render(rows: list[Row]) -> str:
    header = Row("#", "measure", "value", "goal", "result")
    lines = [_render_row(header), "|---|---|---|---|---|"]
    lines += [_render_row(row) for row in rows]
    return "\n".join(lines)


def _render_row(row: Row) -> str:
    return f"| {row.item} | {row.measure} | {row.value} | {row.goal} | {row.verdict} |"


def record(table: str, context: dict[str, Any]) -> None:
    if not RESULTS.exists():
        RESULTS.write_text(
            "# Benchmark results\n\nAppended by `make bench` (`benchmarks/run.py`); newest last.\n",
            encoding="utf-8",
        )
    notes = "\n".join(f"- {note}" for note in context["notes"])
    with RESULTS.open("a", encoding="utf-8") as results:
        results.write(f"\n{context['title']}\n\n{context['machine']}\n\n{table}\n\n{notes}\n")


if __name__ == "__main__":
    sys.exit(main())
