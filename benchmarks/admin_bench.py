"""The ledger admin at scale (``make bench`` item 13): each changelist read a user waits for, at 100,000 and
1,000,000 ledger entries (and 10,000,000 with ``--scale-10m``), and its growth between sizes.

For each size a fresh dataset (:mod:`benchmarks.dataset`, time-ordered keys, as production writes them) and
its ledger (the raw-SQL limit of :mod:`benchmarks.ledger_bench`, each entry dated at its turn, as
``assemble()`` dates it, so that the date hierarchy and an old message's search see a ledger spread over time;
written in that order, as the product writes it, into the partitions of every month it spans, as a
deployment's nightly ``ledger_partitions`` keeps them: a turn a minute, so 1, 6 and 58 months at the three
sizes, or the same ``months`` at every size), then the reads of issue 25 through the Django test client as a
superuser, the whole response (the changelist view with its template): the first page, a status filter, a
status with no rows, a search by an old message's id, the date hierarchy's year, and a search by words of a
document title; and the trace API (``GET /api/chats/{id}/ledger/``) as the chat's owner, of the newest turn
(``?message=``) and of its whole chat (whose turns, in this dataset, span every month), once the build's
writes are on disk (a CHECKPOINT and a sync). Each read is warmed once, then the reads alternate for
``repeats`` rounds and each keeps its median. The goal (issue 25): each read at the larger size <= 2 x its
time at the smaller.
"""

from __future__ import annotations

import os
import statistics
import time
from collections.abc import Callable
from dataclasses import dataclass

from django.db import connection
from django.test import Client
from django.test.utils import override_settings
from django.urls import reverse

from benchmarks import dataset, scale_bench
from benchmarks.ledger_bench import RAW_SQL_TEMPLATE, TIME_ORDER, reset_ledger
from chats.models import Message

DEFAULT_SIZES = scale_bench.DEFAULT_SIZES
LARGE_SIZE = scale_bench.LARGE_SIZE
GROWTH_GOAL = 2.0
# The raw-SQL limit dates each entry at its row's time, which in the dataset is its turn's (the message's).
_DATED_AT_TURN = RAW_SQL_TEMPLATE
assert "now()" not in RAW_SQL_TEMPLATE  # every entry at its row's time, none at the time it is written


@dataclass(frozen=True, slots=True)
class Read:
    """One read a user waits for: its name, its path and its query string."""

    name: str
    path: str
    query: dict[str, str]


@dataclass(frozen=True, slots=True)
class AdminRun:
    rows: int
    entries: int
    months: int
    build_seconds: float
    median_ms: dict[str, float]


def reads(*, old_message_id: str) -> tuple[Read, ...]:
    """The changelist's reads, as a superuser."""
    path = reverse("admin:citations_citationledgerentry_changelist")
    return (
        Read("first page", path, {}),
        Read("status filter (exact match)", path, {"verification_status": "exact_match"}),
        Read("a status with no rows (ambiguous)", path, {"verification_status": "ambiguous"}),
        Read("search by an old message's id", path, {"q": old_message_id}),
        Read("the date hierarchy's year", path, {"created_at__year": "2024"}),
        Read("search by words of a document title", path, {"q": "Memo 7"}),
    )


def trace_reads(*, newest: Message) -> tuple[Read, ...]:
    """The trace API's reads, as the owner of the newest turn's chat."""
    path = reverse("citations:chat-ledger", kwargs={"chat_id": newest.chat_id})
    return (
        Read("the newest turn", path, {"message": str(newest.pk)}),
        Read("the newest turn's chat", path, {}),
    )


def sizes_of(rows: int, *, months: int | None = None) -> dataset.Sizes:
    """A turn a minute from January 2024 (so more months at each larger size), or the same ``months`` at
    every size."""
    return dataset.Sizes(rows) if months is None else dataset.spanning(rows, months=months)


def build(sizes: dataset.Sizes) -> tuple[int, float]:
    """A fresh dataset of ``sizes`` and its ledger, dated at each turn: the entries and seconds."""
    started = time.perf_counter()
    scale_bench.build(sizes, keys="v7")
    scale_bench.partition_months(sizes)
    reset_ledger()
    with connection.cursor() as cursor:
        cursor.execute(_DATED_AT_TURN.format(new_id=dataset.source_id_sql(keys="v7"), order_by=TIME_ORDER))
        entries = cursor.rowcount
        cursor.execute("VACUUM ANALYZE citation_ledger_entry")
        # The build's writes reach the disk before the reads are timed, not while they are.
        cursor.execute("CHECKPOINT")
    os.sync()
    return entries, time.perf_counter() - started


def time_reads(*, repeats: int) -> dict[str, float]:
    """The median milliseconds of each read (``"admin: <read>"``, ``"trace API: <read>"``), the reads
    alternating: the changelist's as a superuser, the trace API's as the chat's owner."""
    from django.contrib.auth import get_user_model

    user, _ = get_user_model().objects.get_or_create(
        username="bench-admin", defaults={"is_staff": True, "is_superuser": True}
    )
    admin = Client()
    admin.force_login(user)
    with connection.cursor() as cursor:
        cursor.execute("SELECT message_id FROM citation_ledger_entry ORDER BY created_at LIMIT 1")
        old_message_id = str(cursor.fetchone()[0])
    newest = Message.objects.filter(role=Message.Role.ASSISTANT).select_related("chat").latest("created_at")
    owner = Client()
    owner.force_login(newest.chat.owner)
    # (who reads, the read's name in the results, the read)
    chosen = [(admin, f"admin: {read.name}", read) for read in reads(old_message_id=old_message_id)]
    chosen += [(owner, f"trace API: {read.name}", read) for read in trace_reads(newest=newest)]
    times: dict[str, list[float]] = {name: [] for _, name, _ in chosen}
    with override_settings(ALLOWED_HOSTS=["testserver"]):
        for client, name, read in chosen:  # warm: caches, the session, the templates
            response = client.get(read.path, read.query)
            assert response.status_code == 200, (name, response.status_code)
        for _ in range(repeats):
            for client, name, read in chosen:
                started = time.perf_counter()
                response = client.get(read.path, read.query)
                times[name].append(time.perf_counter() - started)
                assert response.status_code == 200
    return {name: statistics.median(seconds) * 1000 for name, seconds in times.items()}


def run(
    *, sizes: tuple[int, ...], repeats: int, months: int | None = None, step: Callable[[str], None] = print
) -> list[AdminRun]:
    """Each read at each size; ``months``: every size's turns spread over that many months (default: a turn a
    minute)."""
    runs = []
    for rows in sizes:
        of = sizes_of(rows, months=months)
        spanned = dataset.months(of)
        step(f"13. {rows:,} source rows in {spanned} months: building the dataset and its ledger")
        entries, build_seconds = build(of)
        step(f"13. {entries:,} ledger entries: timing the admin's reads")
        runs.append(
            AdminRun(
                rows=rows,
                entries=entries,
                months=spanned,
                build_seconds=build_seconds,
                median_ms=time_reads(repeats=repeats),
            )
        )
    scale_bench.reset_data()
    return runs
