"""The ledger measurements of ``make bench`` (see :mod:`benchmarks.run`): the raw-SQL limit, the backfill,
its rerun, its peak memory, and the per-turn cost of the ledger receiver. Needs Django set up on the
benchmark's own PostgreSQL database."""

from __future__ import annotations

import logging
import os
import re
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from django.contrib.auth.models import User
from django.db import connection, transaction
from django.test.utils import CaptureQueriesContext, override_settings
from django.utils import timezone

from chats.models import Chat, Document, Message, Project
from chats.services import ClaimedCitation, finalize_turn, start_turn
from chats.signals import post_finalize
from citations import ledger
from citations.backfill import BackfillResult, backfill_ledger
from citations.models import CitationLedgerEntry
from citations.receivers import assemble_ledger_on_finalize
from citations.writer import writer

logger = logging.getLogger(__name__)
ROOT = Path(__file__).resolve().parent.parent
RECEIVER_UID = "citations.assemble_ledger_on_finalize"
# A real, memo-sized KB document (12 KB): small enough that the ledger's share of a turn is not hidden.
PER_TURN_DOCUMENT = ROOT / "chats" / "data" / "opinions" / "alabama-ago-2018-046.txt"

# The limit: everything in one hand-written statement, same schema and constraints, no batching, no
# counting, no anti-join. Written here on purpose, independently of citations/ledger.py.
RAW_SQL = """
INSERT INTO citation_ledger_entry (
    id, project_id, chat_id, message_id, source_kind,
    message_citation_id, message_caselaw_citation_id, message_tool_source_id,
    verification_status, confidence, provider, retrieved_at, treatment_id, created_at
)
SELECT gen_random_uuid(), c.project_id, m.chat_id, s.message_id, 'kb_document', s.id, NULL::uuid, NULL::uuid,
       s.verification_method, s.verification_confidence::double precision, NULL::varchar, NULL::timestamptz,
       NULL::uuid, now()
FROM message_citations s JOIN messages m ON m.id = s.message_id JOIN chats c ON c.id = m.chat_id
WHERE s.verification_method NOT IN ('', 'provenance') AND s.verification_confidence BETWEEN 0 AND 1
UNION ALL
SELECT gen_random_uuid(), c.project_id, m.chat_id, s.message_id, 'caselaw', NULL::uuid, s.id, NULL::uuid,
       s.verification_method, s.verification_confidence, o.provider, s.created_at, NULL, now()
FROM message_caselaw_citations s JOIN messages m ON m.id = s.message_id JOIN chats c ON c.id = m.chat_id
JOIN caselaw_opinions o ON o.id = s.opinion_id
WHERE s.verification_method NOT IN ('', 'provenance') AND s.verification_confidence BETWEEN 0 AND 1
UNION ALL
SELECT gen_random_uuid(), c.project_id, m.chat_id, s.message_id, s.source_kind, NULL::uuid, NULL::uuid, s.id,
       'provenance', NULL::double precision, s.provider, s.created_at, NULL::uuid, now()
FROM message_tool_sources s JOIN messages m ON m.id = s.message_id JOIN chats c ON c.id = m.chat_id
WHERE s.source_kind <> ''
ON CONFLICT DO NOTHING
"""

# Every column an entry copies from its source (not id, not created_at), hashed and summed: equal
# fingerprints mean the raw SQL and the backfill wrote the same entries.
FINGERPRINT_SQL = """
SELECT count(*), coalesce(sum(hashtext(concat_ws('|', project_id, chat_id, message_id, source_kind,
       message_citation_id, message_caselaw_citation_id, message_tool_source_id, verification_status,
       confidence, provider, retrieved_at, treatment_id))::bigint), 0)
FROM citation_ledger_entry
"""


def median(values: list[float]) -> float:
    return statistics.median(values)


def reset_ledger() -> None:
    """An empty ledger and no dirty buffers left from the previous measurement."""
    with connection.cursor() as cursor:
        cursor.execute("TRUNCATE citation_ledger_entry")
        cursor.execute("CHECKPOINT")


def fingerprint() -> tuple[int, int]:
    with connection.cursor() as cursor:
        cursor.execute(FINGERPRINT_SQL)
        count, digest = cursor.fetchone()
    return int(count), int(digest)


def wal_position() -> int:
    """The server's current write-ahead-log position, in bytes: the difference of two is the WAL written
    between them (by everything on the server; the benchmark runs alone)."""
    with connection.cursor() as cursor:
        cursor.execute("SELECT pg_wal_lsn_diff(pg_current_wal_lsn(), '0/0')::bigint")
        return int(cursor.fetchone()[0])


@dataclass(frozen=True, slots=True)
class RawRun:
    seconds: float
    wal_bytes: int


def time_raw_sql() -> RawRun:
    reset_ledger()
    wal = wal_position()
    started = time.perf_counter()
    with connection.cursor() as cursor:
        cursor.execute(RAW_SQL)
    return RawRun(time.perf_counter() - started, wal_position() - wal)


@dataclass(slots=True)
class BackfillRun:
    seconds: float
    result: BackfillResult
    batch_seconds: list[float] = field(default_factory=list)
    wal_bytes: int = 0

    @property
    def longest_batch(self) -> float:
        return max(self.batch_seconds, default=0.0)


def time_backfill(*, batch_size: int, reset: bool = True) -> BackfillRun:
    """The backfill service (what ``manage.py backfill_ledger`` runs), timed, with each batch's duration."""
    if reset:
        reset_ledger()
    batch_seconds: list[float] = []
    last = [time.perf_counter()]

    def on_batch(totals: BackfillResult, batch_rows: int) -> None:
        now = time.perf_counter()
        batch_seconds.append(now - last[0])
        last[0] = now

    wal = wal_position()
    started = time.perf_counter()
    result = backfill_ledger(batch_size=batch_size, on_batch=on_batch)
    return BackfillRun(time.perf_counter() - started, result, batch_seconds, wal_position() - wal)


def peak_rss_of_command(*, database_url: str, batch_size: int) -> tuple[float, str]:
    """Run ``manage.py backfill_ledger`` in a subprocess; its peak resident memory (MB) and summary line.

    ``os.wait4`` gives the child's own rusage (``ru_maxrss``, KB on Linux), like ``/usr/bin/time -v``.
    """
    env = {
        **os.environ,
        "DATABASE_URL": database_url,
        "DJANGO_SETTINGS_MODULE": "lqai.settings_test",
        "LOG_LEVEL": "WARNING",
    }
    with tempfile.TemporaryFile("w+") as out:
        process = subprocess.Popen(  # noqa: S603 - fixed arguments
            [sys.executable, "manage.py", "backfill_ledger", "--batch-size", str(batch_size)],
            cwd=ROOT,
            env=env,
            stdout=out,
            stderr=subprocess.STDOUT,
        )
        _, status, rusage = os.wait4(process.pid, 0)
        process.returncode = os.waitstatus_to_exitcode(status)
        out.seek(0)
        output = out.read()
    if process.returncode != 0:
        raise RuntimeError(f"backfill_ledger exited with {process.returncode}:\n{output}")
    return rusage.ru_maxrss / 1024, output.strip().splitlines()[-1]


# How the ledger's post_finalize receiver is wired during a measurement: off, or connected and writing as
# LQAI_LEDGER_WRITE says: "deferred" (as shipped on PostgreSQL: the ledger writer's thread, just after the
# turn) or "inline" (in the receiver, before finalize_turn returns).
RECEIVER_MODES = ("off", "deferred", "inline")
SHIPPED = "deferred"


@contextmanager
def ledger_receiver(mode: str) -> Iterator[None]:
    """The ledger's ``post_finalize`` receiver off or writing in ``mode``; as shipped afterwards."""
    post_finalize.disconnect(dispatch_uid=RECEIVER_UID, sender=Message)
    if mode != "off":
        post_finalize.connect(assemble_ledger_on_finalize, sender=Message, dispatch_uid=RECEIVER_UID)
    try:
        with override_settings(LQAI_LEDGER_WRITE=SHIPPED if mode == "off" else mode):
            yield
    finally:
        post_finalize.disconnect(dispatch_uid=RECEIVER_UID, sender=Message)
        post_finalize.connect(assemble_ledger_on_finalize, sender=Message, dispatch_uid=RECEIVER_UID)


@dataclass(slots=True)
class TurnCost:
    citations: int
    # Queries finalize_turn runs on its own connection, per mode (BEGIN and COMMIT included).
    queries: dict[str, int]
    # Median finalize_turn time per mode, s; a deferred turn's entries are waited for after its timing.
    medians: dict[str, float]
    # The inline receiver's own statements (BEGIN and COMMIT aside), each with its median duration in ms:
    # the statement the ledger writer runs per batch.
    receiver_queries: list[tuple[str, float]]
    # Bursts of turns back to back, until every entry is written (the writer's drain included): median
    # seconds per turn, per mode; and the turns the writer wrote per statement in those bursts.
    sustained: dict[str, float] = field(default_factory=dict)
    turns_per_statement: float = 0.0
    # Inside PostgreSQL, for the assemble statement on a fresh turn (EXPLAIN ANALYZE, foreign-key checks
    # included): median planning and execution time, ms.
    server_ms: tuple[float, float] = (0.0, 0.0)

    def added_queries(self, mode: str = SHIPPED) -> int:
        return self.queries[mode] - self.queries["off"]

    def added_fraction(self, mode: str = SHIPPED) -> float:
        return self.medians[mode] / self.medians["off"] - 1

    def added_ms(self, mode: str = SHIPPED) -> float:
        return (self.medians[mode] - self.medians["off"]) * 1000

    def sustained_fraction(self, mode: str = SHIPPED) -> float:
        return self.sustained[mode] / self.sustained["off"] - 1


class _QueryTimer:
    """A ``connection.execute_wrapper`` recording how long each query takes, in ms."""

    def __init__(self) -> None:
        self.durations: list[float] = []

    def __call__(self, execute: Any, sql: str, params: Any, many: bool, context: Any) -> Any:
        started = time.perf_counter()
        try:
            return execute(sql, params, many, context)
        finally:
            self.durations.append((time.perf_counter() - started) * 1000)


def _query_label(sql: str) -> str:
    if sql.startswith("WITH written AS (INSERT INTO citation_ledger_entry"):
        return "the assemble statement"
    if sql.startswith("INSERT INTO citation_ledger_entry"):
        source = re.search(r" FROM (\w+) s ", sql)
        return f"INSERT from {source.group(1) if source else '?'}"
    if sql.startswith("SELECT 'message_citations'"):
        return "invalid-rows check"
    return sql.split(None, 1)[0] if sql else "?"


@contextmanager
def _counting_writer_batches() -> Iterator[list[int]]:
    """The size of each batch the ledger writer writes meanwhile."""
    sizes: list[int] = []
    real = ledger.assemble_turns

    def counting(message_ids: Any) -> int:
        sizes.append(len(message_ids))
        return real(message_ids)

    ledger.assemble_turns = counting
    try:
        yield sizes
    finally:
        ledger.assemble_turns = real


def per_turn_cost(
    *, turns: int, citation_counts: tuple[int, ...] = (1, 50), captured_turns: int = 20, burst: int = 40
) -> list[TurnCost]:
    """``finalize_turn`` with the ledger receiver off, deferred (as shipped) and inline, interleaved turn by
    turn, each turn quoting ``n`` passages that verify exactly against a real KB document.

    Timed turns run without query capture (it slows every query down), and a deferred turn's entries are
    waited for after its timing, so that each turn is measured alone; ``captured_turns`` more per mode
    count the queries and time the inline receiver's own, and as many again time its statement inside
    PostgreSQL. Then bursts of ``burst`` turns back to back per mode, timed until every entry is written:
    what the writer's work costs when turns keep coming (it shares the machine with them).
    """
    text = PER_TURN_DOCUMENT.read_text(encoding="utf-8")
    owner = User.objects.create(username="per-turn-bench")
    project = Project.objects.create(name="Per-turn benchmark", owner=owner)
    chat = Chat.objects.create(project=project, owner=owner, title="per-turn")
    document = Document.objects.create(project=project, title="memo", content=text)
    words = text.split()
    step = max(1, (len(words) - 12) // max(citation_counts))
    passages = [" ".join(words[i * step : i * step + 12]) for i in range(max(citation_counts))]
    costs = []
    for count in citation_counts:
        claims = [ClaimedCitation(quote=p, document_id=document.id) for p in passages[:count]]

        def finalize(mode: str, claims: list[ClaimedCitation] = claims) -> float:
            _, message = start_turn(chat=chat, content="question")
            with ledger_receiver(mode):
                started = time.perf_counter()
                turn = finalize_turn(message=message, content="answer", status="complete", claimed_citations=claims)
                elapsed = time.perf_counter() - started
            assert writer.flush(timeout=60), "the ledger writer fell behind by a minute"
            assert len(turn.citations) == len(claims), "every benchmark quote must verify"
            expected_entries = 0 if mode == "off" else len(claims)
            assert CitationLedgerEntry.objects.filter(message=message).count() == expected_entries
            return elapsed

        def captured(mode: str, claims: list[ClaimedCitation] = claims) -> list[tuple[str, float]]:
            """The turn's queries (BEGIN and COMMIT included), each with its duration in ms."""
            _, message = start_turn(chat=chat, content="question")
            with ledger_receiver(mode), CaptureQueriesContext(connection) as queries:
                timer = _QueryTimer()
                with connection.execute_wrapper(timer):
                    finalize_turn(message=message, content="answer", status="complete", claimed_citations=claims)
            assert writer.flush(timeout=60)
            # CaptureQueriesContext sees BEGIN and COMMIT, which the execute wrapper does not.
            timings = iter(timer.durations)
            return [(q["sql"], 0.0 if q["sql"] in {"BEGIN", "COMMIT"} else next(timings)) for q in queries]

        def burst_of_turns(mode: str, claims: list[ClaimedCitation] = claims) -> tuple[float, list[int]]:
            """Seconds per turn for ``burst`` turns back to back until their entries are written; the
            writer's batch sizes."""
            messages = [start_turn(chat=chat, content="question")[1] for _ in range(burst)]
            with ledger_receiver(mode), _counting_writer_batches() as batches:
                started = time.perf_counter()
                for message in messages:
                    finalize_turn(message=message, content="answer", status="complete", claimed_citations=claims)
                assert writer.flush(timeout=120), "the ledger writer fell behind by two minutes"
                elapsed = time.perf_counter() - started
            expected_entries = 0 if mode == "off" else burst * len(claims)
            assert CitationLedgerEntry.objects.filter(message__in=messages).count() == expected_entries
            return elapsed / burst, batches

        queries = {mode: len(captured(mode)) for mode in RECEIVER_MODES}  # also the warm-up
        receiver_runs = [captured("inline")[queries["off"] :] for _ in range(captured_turns)]
        receiver_queries = [
            (_query_label(run[0][0]), median([ms for _, ms in run]))
            for run in zip(*receiver_runs, strict=True)
            if run[0][0] not in {"BEGIN", "COMMIT"}  # not timed: they are not executed through a cursor
        ]
        times: dict[str, list[float]] = {mode: [] for mode in RECEIVER_MODES}
        for index in range(turns):
            # Rotate the order so that no mode always runs first.
            shift = index % len(RECEIVER_MODES)
            for mode in RECEIVER_MODES[shift:] + RECEIVER_MODES[:shift]:
                times[mode].append(finalize(mode))
        bursts: dict[str, list[float]] = {mode: [] for mode in RECEIVER_MODES}
        batch_sizes: list[int] = []
        for index in range(max(3, turns // burst)):
            shift = index % len(RECEIVER_MODES)
            for mode in RECEIVER_MODES[shift:] + RECEIVER_MODES[:shift]:
                seconds, batches = burst_of_turns(mode)
                bursts[mode].append(seconds)
                if mode == "deferred":
                    batch_sizes += batches
        server = [_server_ms(claims, chat) for _ in range(captured_turns)]
        costs.append(
            TurnCost(
                count,
                queries,
                {mode: median(values) for mode, values in times.items()},
                receiver_queries,
                {mode: median(values) for mode, values in bursts.items()},
                sum(batch_sizes) / len(batch_sizes),
                (median([planning for planning, _ in server]), median([execution for _, execution in server])),
            )
        )
    return costs


def _server_ms(claims: list[ClaimedCitation], chat: Chat) -> tuple[float, float]:
    """Planning and execution time (ms) PostgreSQL reports for ``assemble()``'s statement on a fresh turn,
    with the ledger's deferred foreign-key checks made immediate so that they are counted; rolled back."""
    _, message = start_turn(chat=chat, content="question")
    with ledger_receiver("off"):
        finalize_turn(message=message, content="answer", status="complete", claimed_citations=claims)
    sql, params = ledger.assemble_statement([message.pk], connection.ops.adapt_datetimefield_value(timezone.now()))
    with transaction.atomic(), connection.cursor() as cursor:
        cursor.execute("SET CONSTRAINTS ALL IMMEDIATE")
        cursor.execute("EXPLAIN (ANALYZE, SUMMARY, TIMING OFF) " + sql, params)
        summary = {line.split(":")[0].strip(): line for (line,) in cursor.fetchall() if "Time:" in line}
        transaction.set_rollback(True)
    return _ms(summary["Planning Time"]), _ms(summary["Execution Time"])


def _ms(line: str) -> float:
    return float(line.split(":")[1].split()[0])
