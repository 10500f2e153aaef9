"""The ledger measurements of ``make bench`` (see :mod:`benchmarks.run`): the raw-SQL limit, the backfill,
its rerun, its peak memory, and the ledger's share of whole chat turns. Needs Django set up on the
benchmark's own PostgreSQL database."""

from __future__ import annotations

import logging
import os
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Collection, Iterator, Mapping
from contextlib import AbstractContextManager, ExitStack, contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from django.contrib.auth.models import User
from django.db import connection
from django.test.utils import CaptureQueriesContext, override_settings
from rest_framework.test import APIClient

from chats.assistant import FinalAnswer, ScriptedBackend, TextDelta
from chats.documents import add_document
from chats.models import Chat, Document, Message, Project
from chats.services import ClaimedCitation
from chats.signals import post_finalize
from citations.backfill import BackfillResult, backfill_ledger
from citations.models import CitationLedgerEntry
from citations.receivers import POST_FINALIZE_RECEIVERS

logger = logging.getLogger(__name__)
ROOT = Path(__file__).resolve().parent.parent
RECEIVER_UID = "citations.assemble_ledger_on_finalize"
# The per-turn measure's matter: the real court opinions of 20-100 KB, as KB documents.
TURN_DOCUMENTS = sorted(
    path for path in (ROOT / "chats" / "data" / "opinions").glob("*.txt") if 20_000 <= path.stat().st_size <= 100_000
)
DEFAULT_BACKEND = "chats.assistant.ExtractiveBackend"
SCRIPTED = "chats.assistant.ScriptedBackend"
# What a benchmark client needs from the settings (the test client's host name); nothing else changes.
TURN_SETTINGS: dict[str, Any] = {"ALLOWED_HOSTS": ["testserver"]}

# The limit: everything in one hand-written statement, same schema and constraints, no batching, no
# counting, no anti-join. Written here on purpose, independently of citations/ledger.py; {new_id} is the SQL
# that makes each entry's id, {order_by} empty (each source table's entries in turn) or TIME_ORDER. Each entry
# is dated at its row's time, as the ledger dates it.
RAW_SQL_TEMPLATE = """
INSERT INTO citation_ledger_entry (
    id, project_id, chat_id, message_id, source_kind,
    message_citation_id, message_caselaw_citation_id, message_tool_source_id,
    verification_status, confidence, provider, retrieved_at, treatment_id, created_at
)
SELECT {new_id}, c.project_id, m.chat_id, s.message_id, 'kb_document', s.id, NULL::uuid, NULL::uuid,
       s.verification_method, s.verification_confidence::double precision, NULL::varchar, NULL::timestamptz,
       NULL::uuid, s.created_at
FROM message_citations s JOIN messages m ON m.id = s.message_id JOIN chats c ON c.id = m.chat_id
WHERE s.verification_method NOT IN ('', 'provenance') AND s.verification_confidence BETWEEN 0 AND 1
UNION ALL
SELECT {new_id}, c.project_id, m.chat_id, s.message_id, 'caselaw', NULL::uuid, s.id, NULL::uuid,
       s.verification_method, s.verification_confidence, o.provider, s.created_at, NULL, s.created_at
FROM message_caselaw_citations s JOIN messages m ON m.id = s.message_id JOIN chats c ON c.id = m.chat_id
JOIN caselaw_opinions o ON o.id = s.opinion_id
WHERE s.verification_method NOT IN ('', 'provenance') AND s.verification_confidence BETWEEN 0 AND 1
UNION ALL
SELECT {new_id}, c.project_id, m.chat_id, s.message_id, s.source_kind, NULL::uuid, NULL::uuid, s.id,
       'provenance', NULL::double precision, s.provider, s.created_at, NULL::uuid, s.created_at
FROM message_tool_sources s JOIN messages m ON m.id = s.message_id JOIN chats c ON c.id = m.chat_id
WHERE s.source_kind <> ''
{order_by}
ON CONFLICT DO NOTHING
"""
# As the ledger writes its ids (random, version 4); benchmarks.scale_bench compares version 7.
RAW_SQL = RAW_SQL_TEMPLATE.format(new_id="gen_random_uuid()", order_by="")
# The order the product writes the ledger in: a turn's entries at a time, and the backfill batch by batch in
# creation order. Without it the statement writes one table's entries over the whole dataset's time, then
# the next's between them, in every index ordered by time.
TIME_ORDER = "ORDER BY created_at"

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

    @property
    def after_batches_seconds(self) -> float:
        """What the run spent after its last batch: the ``ANALYZE`` of the ledger a run that wrote ends with."""
        return self.seconds - sum(self.batch_seconds)

    def tenth_median_ms(self, which: int) -> float:
        """The median batch of the first (``0``) or the last (``-1``) tenth of the run's batches, in ms: a
        batch that costs more late in the run than early is paying for the ledger's size."""
        tenth = max(1, len(self.batch_seconds) // 10)
        batches = self.batch_seconds[:tenth] if which == 0 else self.batch_seconds[-tenth:]
        return median(batches) * 1000 if batches else 0.0


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


@contextmanager
def post_finalize_receivers(
    *, without: Collection[str] = (), timed: Mapping[str, list[float]] | None = None
) -> Iterator[None]:
    """``post_finalize``'s shipped receivers (``citations.receivers.POST_FINALIZE_RECEIVERS``) inside the block,
    less those whose ``dispatch_uid`` is in ``without``, in their shipped order; afterwards all of them again, in
    exactly that order (a receiver connected again alone would run after the others). A receiver whose
    ``dispatch_uid`` is a key of ``timed`` runs as shipped inside the block, and the seconds of each of its calls
    are appended to that key's list."""
    unknown = (set(without) | set(timed or ())) - {uid for uid, _ in POST_FINALIZE_RECEIVERS}
    if unknown:
        raise ValueError(f"not a post_finalize receiver: {', '.join(sorted(unknown))}")
    _connect_in_order(without=without, timed=timed or {})
    try:
        yield
    finally:
        _connect_in_order(without=(), timed={})


def _connect_in_order(*, without: Collection[str], timed: Mapping[str, list[float]]) -> None:
    for dispatch_uid, _ in POST_FINALIZE_RECEIVERS:
        post_finalize.disconnect(dispatch_uid=dispatch_uid, sender=Message)
    for dispatch_uid, receiver in POST_FINALIZE_RECEIVERS:
        if dispatch_uid in without:
            continue
        if dispatch_uid in timed:
            receiver = _timed(receiver, timed[dispatch_uid])
        # weak=False: a timing wrapper is referenced from nowhere else (the shipped receivers are module functions)
        post_finalize.connect(receiver, sender=Message, dispatch_uid=dispatch_uid, weak=False)


def _timed(receiver: Callable[..., None], seconds: list[float]) -> Callable[..., None]:
    """``receiver``, appending the seconds of each call to ``seconds``."""

    def timed_receiver(sender: Any, **kwargs: Any) -> None:
        started = time.perf_counter()
        try:
            receiver(sender, **kwargs)
        finally:
            seconds.append(time.perf_counter() - started)

    return timed_receiver


def receiver_connected(
    dispatch_uid: str, *, connected: bool, seconds: list[float] | None = None
) -> AbstractContextManager[None]:
    """The ``post_finalize`` receiver ``dispatch_uid`` connected (as shipped) or not inside the block, the others
    as shipped; everything as shipped afterwards. Connected with ``seconds``, each of its calls is timed there."""
    timed = {dispatch_uid: seconds} if connected and seconds is not None else None
    return post_finalize_receivers(without=() if connected else (dispatch_uid,), timed=timed)


def ledger_receiver(*, connected: bool) -> AbstractContextManager[None]:
    """The ledger's ``post_finalize`` receiver connected (as shipped) or not; as shipped afterwards."""
    return receiver_connected(RECEIVER_UID, connected=connected)


@dataclass(slots=True)
class TurnShare:
    """The ledger's share of whole single-shot API turns: the receiver connected against disconnected."""

    label: str
    citations: int
    # Median seconds of a whole turn (the HTTP request through the response), receiver on and off.
    on: float
    off: float
    # Queries of one turn, receiver on and off.
    queries_on: int
    queries_off: int

    @property
    def share(self) -> float:
        return self.on / self.off - 1

    @property
    def added_queries(self) -> int:
        return self.queries_on - self.queries_off


def _matter(owner: User) -> Chat:
    """A fresh chat in a matter whose KB documents are the real opinions of 20-100 KB."""
    project = Project.objects.create(name="Per-turn benchmark", owner=owner)
    for path in TURN_DOCUMENTS:
        add_document(project=project, title=path.stem, text=path.read_text(encoding="utf-8"))
    return Chat.objects.create(project=project, owner=owner, title="per-turn")


def _fifty_claims(chat: Chat) -> tuple[Any, ...]:
    """The scripted answer of a 50-citation turn: 50 passages of the matter's largest document, each verifying."""
    document = max(Document.objects.filter(project=chat.project), key=lambda d: len(d.content))
    words = document.content.split()
    step = (len(words) - 12) // 50
    quotes = [" ".join(words[i * step : i * step + 12]) for i in range(50)]
    return (TextDelta("Fifty quotes."), FinalAnswer(tuple(ClaimedCitation(q, document_id=document.pk) for q in quotes)))


def alternating(measure: Callable[[bool], float], *, rounds: int) -> dict[bool, list[float]]:
    """``measure(True)`` and ``measure(False)`` once each per round, in alternating order (on, off; off, on;
    ...), so that a drift of the machine weighs on both arms alike: the measures of each arm."""
    times: dict[bool, list[float]] = {True: [], False: []}
    for index in range(rounds):
        for arm in (True, False) if index % 2 == 0 else (False, True):
            times[arm].append(measure(arm))
    return times


def turn_share(*, turns: int) -> list[TurnShare]:
    """Whole single-shot turns through the API (request to response, in-process), with the ledger receiver
    connected and disconnected, interleaved turn by turn in alternating order; each turn in a fresh chat of
    a matter holding real opinions of 20-100 KB. With the default (extractive) backend, and with the
    scripted backend claiming 50 quotes that all verify. Every turn's entries are checked afterwards."""
    owner = User.objects.create(username=f"per-turn-bench-{time.monotonic_ns()}")
    client = APIClient()
    client.force_authenticate(user=owner)
    question = "Must the reviewing court be satisfied that no workable race-neutral alternative exists?"
    results = []
    for label, backend, script in (
        ("default backend", DEFAULT_BACKEND, None),
        ("scripted, 50 citations", SCRIPTED, 50),
    ):

        def one_turn(
            connected: bool, *, capture: bool = False, backend: str = backend, script: int | None = script
        ) -> tuple[float, int, int]:
            chat = _matter(owner)
            steps = _fifty_claims(chat) if script else ()
            with ExitStack() as stack:
                stack.enter_context(ledger_receiver(connected=connected))
                stack.enter_context(override_settings(LQAI_ASSISTANT_BACKEND=backend, **TURN_SETTINGS))
                stack.enter_context(ScriptedBackend.scripted(*steps))
                # Queries are counted only when asked: capturing them slows every query down.
                queries = stack.enter_context(CaptureQueriesContext(connection)) if capture else None
                started = time.perf_counter()
                response = client.post(f"/api/chats/{chat.pk}/messages/", {"content": question}, format="json")
                elapsed = time.perf_counter() - started
            assert response.status_code == 201, response.content
            body = response.json()
            cited = len(body["message"]["citations"])
            assert body["message"]["unverified_citations"] == [], body["message"]["unverified_citations"]
            rows = cited + len(body["message"]["case_citations"])  # the quotes, and the cases their text cites
            entries = CitationLedgerEntry.objects.filter(message_id=body["message"]["id"]).count()
            assert entries == (rows if connected else 0), (entries, rows, connected)
            return elapsed, len(queries) if queries is not None else 0, cited

        _, queries_on, cited = one_turn(True, capture=True)  # also the warm-up
        _, queries_off, _ = one_turn(False, capture=True)
        times = alternating(lambda connected: one_turn(connected)[0], rounds=turns)
        results.append(TurnShare(label, cited, median(times[True]), median(times[False]), queries_on, queries_off))
    return results
