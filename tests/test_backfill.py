"""``manage.py backfill_ledger`` and its service (``citations.backfill``): what it writes (exactly what
``assemble()`` writes), its scope filters, its modes (dry run, check), its arguments, and that it stays
exact when stopped, killed, rerun or run next to other writers."""

from __future__ import annotations

import os
import re
import signal
import subprocess
import sys
import threading
import time
from collections import Counter
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from datetime import UTC, datetime, timedelta
from io import StringIO
from pathlib import Path
from typing import Any
from uuid import UUID, uuid4

import pytest
from django.core.management import CommandError, call_command
from django.db import connection, connections, transaction
from django.test.utils import CaptureQueriesContext

from chats.models import Chat, DocumentQuote, Message, MessageToolSource, OpinionQuote
from citations import backfill, ledger
from citations.backfill import BackfillResult, BackfillScope, LogProgress, backfill_ledger
from citations.models import CitationLedgerEntry
from tests import factories
from tests.conftest import this_test_database_url

pytestmark = pytest.mark.django_db

ROOT = Path(__file__).resolve().parent.parent
SUMMARY = re.compile(
    r"^backfill_ledger: (?P<verb>created|would create) (?P<n>\d+) entries "
    r"\(kb_document=(?P<kb>\d+) caselaw=(?P<caselaw>\d+) mcp=(?P<mcp>\d+)(?: \w+=\d+)*\) "
    r"for (?P<m>\d+) messages; (?P<k>\d+) already present; \d+\.\d s$"
)
# The columns an entry copies from its source row: all but its own id and creation time.
ENTRY_COLUMNS = [f.attname for f in CitationLedgerEntry._meta.concrete_fields if f.attname not in {"id", "created_at"}]


def run_command(*args: str) -> tuple[str, str]:
    """``manage.py backfill_ledger *args`` in-process; its stdout and stderr."""
    out, err = StringIO(), StringIO()
    call_command("backfill_ledger", *args, stdout=out, stderr=err)
    return out.getvalue(), err.getvalue()


def summary(out: str) -> dict[str, Any]:
    match = SUMMARY.match(out.strip().splitlines()[-1])
    assert match is not None, out
    return {k: (v if k == "verb" else int(v)) for k, v in match.groupdict().items()}


def make_turn(
    *,
    chat: Chat | None = None,
    created_at: datetime | None = None,
    kb: int = 1,
    caselaw: int = 1,
    tool_kinds: tuple[str, ...] = ("caselaw", "mcp"),
) -> Message:
    """An assistant message with ``kb`` KB quotes, ``caselaw`` caselaw quotes and one tool source per kind."""
    fields: dict[str, Any] = {}
    if chat is not None:
        fields["chat"] = chat
    if created_at is not None:
        fields["created_at"] = created_at
    with transaction.atomic():  # a turn and its rows, in one transaction as a finalize writes them
        message = factories.MessageFactory.create(**fields)
        for _ in range(kb):
            factories.DocumentQuoteFactory.create(message=message)
        for _ in range(caselaw):
            factories.OpinionQuoteFactory.create(message=message)
        for kind in tool_kinds:
            factories.MessageToolSourceFactory.create(message=message, source_kind=kind)
    return message


def source_ids(messages: list[Message] | None = None) -> set[UUID]:
    """Ids of every source row (of ``messages``, or all)."""
    ids: set[UUID] = set()
    for model in (DocumentQuote, OpinionQuote, MessageToolSource):
        rows = model.objects.all() if messages is None else model.objects.filter(message__in=messages)
        ids |= set(rows.values_list("id", flat=True))
    return ids


def entry_source_ids() -> list[UUID]:
    """The source row of every ledger entry (a list: a duplicate would show)."""
    return [e.source_row_id for e in CitationLedgerEntry.objects.all() if e.source_row_id is not None]


def assert_exactly_one_entry_per_source_row() -> None:
    entries = entry_source_ids()
    assert len(entries) == len(set(entries))
    assert set(entries) == source_ids()


def entries_by_source() -> dict[UUID | None, dict[str, Any]]:
    return {
        e["message_citation_id"] or e["message_caselaw_citation_id"] or e["message_tool_source_id"]: e
        for e in CitationLedgerEntry.objects.values(*ENTRY_COLUMNS)
    }


@pytest.fixture
def two_turns() -> list[Message]:
    """Two turns, each with one KB quote, one caselaw quote, one caselaw and one MCP tool source."""
    return [make_turn(), make_turn()]


# --- What it writes -----------------------------------------------------------------------------------------------


def test_backfill_writes_the_same_entries_as_assemble() -> None:
    # Given turns with every kind of source row and varied verification shapes
    first = make_turn(kb=2, caselaw=2, tool_kinds=("caselaw", "mcp", "westlaw"))
    factories.DocumentQuoteFactory.create(
        message=first, verification_method="tolerant_match", verification_confidence=0.875
    )
    factories.OpinionQuoteFactory.create(
        message=first, verification_method="tolerant_match", verification_confidence=0.93
    )
    factories.MessageToolSourceFactory.create(message=first, source_kind="mcp", provider=None)
    matterless = factories.MessageFactory.create(chat=factories.ChatFactory.create(project=None))
    factories.OpinionQuoteFactory.create(message=matterless)
    factories.MessageToolSourceFactory.create(message=matterless, source_kind="mcp", provider="acme")
    messages = [first, make_turn(), matterless]
    # When assemble() writes their entries, and then, from scratch, the backfill does
    # (assemble()'s entries are read in a savepoint rolled back: entries are never deleted)
    with rolled_back():
        assert sum(ledger.assemble(m) for m in messages) == len(source_ids())
        assembled = entries_by_source()
    assert not CitationLedgerEntry.objects.exists()
    out, _ = run_command()
    # Then both paths wrote identical entries (every column but id and created_at)
    assert entries_by_source() == assembled
    assert summary(out)["n"] == len(assembled)


def test_summary_line_counts_entries_by_kind_messages_and_already_present(two_turns: list[Message]) -> None:
    # Given one turn already in the ledger
    ledger.assemble(two_turns[0])
    # When the backfill runs
    out, err = run_command()
    # Then the one summary line gives the entries by kind, the messages they belong to and those present
    assert out.count("\n") == 1
    assert summary(out) == {"verb": "created", "n": 4, "kb": 1, "caselaw": 2, "mcp": 1, "m": 1, "k": 4}
    assert err == ""
    assert_exactly_one_entry_per_source_row()


def test_summary_lists_tool_kinds_beyond_the_three_known_ones() -> None:
    make_turn(kb=0, caselaw=0, tool_kinds=("westlaw",))
    out, _ = run_command()
    assert "(kb_document=0 caselaw=0 mcp=0 statute=0 westlaw=1) for 1 messages;" in out


def test_rerun_writes_nothing(two_turns: list[Message]) -> None:
    run_command()
    before = entries_by_source()
    out, _ = run_command()
    assert summary(out) == {"verb": "created", "n": 0, "kb": 0, "caselaw": 0, "mcp": 0, "m": 0, "k": 8}
    assert entries_by_source() == before


def test_a_rerun_over_complete_data_only_counts(two_turns: list[Message]) -> None:
    # Given a backfill that ran in batches of one message
    backfill_ledger(batch_size=1)
    # When it runs again
    with CaptureQueriesContext(connection) as captured:
        again = backfill_ledger(batch_size=1)
    # Then no batch tried to insert anything: each counted its rows and entries and moved on
    assert (again.total_created, again.already_present, again.batches) == (0, 8, 2)
    assert not [q for q in captured.captured_queries if "INSERT INTO" in str(q["sql"])]


def test_empty_tables_backfill_nothing() -> None:
    out, _ = run_command()
    assert summary(out)["n"] == 0
    assert CitationLedgerEntry.objects.count() == 0


@pytest.mark.parametrize("batch_size", [1, 2, 3, 1000])
def test_batches_are_whole_messages_so_counts_are_exact_at_any_batch_size(batch_size: int) -> None:
    # Given messages whose rows, by random UUID, interleave across tables
    messages = [make_turn(kb=2, caselaw=1, tool_kinds=("caselaw", "mcp")) for _ in range(4)]
    # When the backfill runs in small batches
    result = backfill_ledger(batch_size=batch_size)
    # Then every message is counted once and every row gets exactly one entry
    assert result.messages == len(messages)
    assert result.created == Counter({"kb_document": 8, "caselaw": 8, "mcp": 4})
    assert result.rows_scanned == 20
    if batch_size < 5:  # smaller than a message's 5 rows: several batches, and never half a message
        assert result.batches >= 2
    assert_exactly_one_entry_per_source_row()


def test_batches_follow_message_creation_order_not_message_ids() -> None:
    # Given turns created a minute apart, whose ids sort in another order (time-ordered ids made in the
    # reverse order of the turns' times, as for turns imported newest first)
    start = datetime(2025, 3, 1, 9, 0, tzinfo=UTC)
    newest_first = [
        make_turn(created_at=start + timedelta(minutes=i), kb=1, caselaw=0, tool_kinds=()) for i in reversed(range(6))
    ]
    messages = newest_first[::-1]
    assert sorted(messages, key=lambda m: str(m.pk)) != messages
    # When the backfill runs one row per batch, noting the messages that had entries after each batch
    seen: list[set[UUID]] = []

    def note(totals: BackfillResult, batch_rows: int) -> None:
        seen.append(set(CitationLedgerEntry.objects.values_list("message_id", flat=True)))

    backfill_ledger(batch_size=1, on_batch=note)
    # Then each batch added the next message in creation order
    assert seen == [{m.pk for m in messages[: i + 1]} for i in range(len(messages))]


@contextmanager
def rolled_back() -> Iterator[None]:
    """Run the block in a savepoint that is rolled back: what it wrote is gone, nothing was deleted."""

    class Rollback(Exception):
        pass

    try:
        with transaction.atomic():
            yield
            raise Rollback
    except Rollback:
        pass


def _queries_per_batch(turns: int) -> list[int]:
    """Backfill ``turns`` new turns; the number of queries each batch ran."""
    for _ in range(turns):
        make_turn()
    per_batch: list[int] = []
    with CaptureQueriesContext(connection) as captured:
        seen = [0]

        def count(totals: BackfillResult, batch_rows: int) -> None:
            per_batch.append(len(captured) - seen[0])
            seen[0] = len(captured)

        backfill_ledger(batch_size=10_000, on_batch=count)
    return per_batch


def test_queries_per_batch_do_not_grow_with_rows() -> None:
    # Given a backfill of 2 turns (8 rows) (rolled back: entries are never deleted), then one of 20 turns (80 rows)
    with rolled_back():
        small = _queries_per_batch(2)
    large = _queries_per_batch(20)
    # Then no batch ran more queries for 80 rows than for 8: set-based, no per-row or per-message query
    assert max(large) == max(small)
    assert CitationLedgerEntry.objects.count() == 80


# --- Modes ---------------------------------------------------------------------------------------------------------


def test_dry_run_writes_nothing_and_reports_what_it_would_create(two_turns: list[Message]) -> None:
    ledger.assemble(two_turns[1])
    out, _ = run_command("--dry-run", "--batch-size", "1")
    assert summary(out) == {"verb": "would create", "n": 4, "kb": 1, "caselaw": 2, "mcp": 1, "m": 1, "k": 4}
    assert CitationLedgerEntry.objects.filter(message=two_turns[0]).count() == 0
    assert CitationLedgerEntry.objects.count() == 4


def test_check_exits_1_with_counts_by_kind_on_gaps_and_0_after_a_backfill(two_turns: list[Message]) -> None:
    # Given gaps
    out = StringIO()
    with pytest.raises(SystemExit) as exited:
        call_command("backfill_ledger", "--check", stdout=out, stderr=StringIO())
    # Then --check exits 1, prints the counts by kind, and writes nothing
    assert exited.value.code == 1
    assert "8 source rows lack their ledger entry (kb_document=2 caselaw=4 mcp=2 statute=0)" in out.getvalue()
    assert CitationLedgerEntry.objects.count() == 0
    # When the gaps are backfilled, --check passes (exit status 0)
    run_command()
    out_after, _ = run_command("--check")
    assert "every source row in scope has its ledger entry (8 present)" in out_after


def test_altered_quotes_and_pin_mismatches_are_backfilled_and_checked_like_any_other() -> None:
    # Given a turn whose quotes are altered (one with a context flag) and whose case citation has a wrong pin
    turn = make_turn(kb=0, caselaw=0, tool_kinds=())
    flag = {"flag": "limited_after", "source_start": 30, "source_end": 36}
    kb = factories.DocumentQuoteFactory.create(
        message=turn, verification_method="altered", verification_confidence=0.6, context_flags=[flag]
    )
    caselaw = factories.OpinionQuoteFactory.create(
        message=turn, verification_method="altered", verification_confidence=0.55
    )
    case = factories.CaseCitationFactory.create(message=turn, status="pin_mismatch", pin="9000", pin_status="outside")
    out = StringIO()
    with pytest.raises(SystemExit) as exited:
        call_command("backfill_ledger", "--check", stdout=out, stderr=StringIO())
    # Then --check counts them as gaps, the backfill writes their entries with their statuses, and --check passes
    assert exited.value.code == 1
    assert "3 source rows lack their ledger entry" in out.getvalue()
    run_command()
    assert CitationLedgerEntry.objects.get(message_citation=kb).verification_status == "altered"
    assert CitationLedgerEntry.objects.get(message_caselaw_citation=caselaw).confidence == 0.55
    assert CitationLedgerEntry.objects.get(message_case_citation=case).verification_status == "pin_mismatch"
    out_after, _ = run_command("--check")
    assert "every source row in scope has its ledger entry (3 present)" in out_after


def test_check_and_dry_run_are_exclusive() -> None:
    with pytest.raises(CommandError, match="not allowed with argument"):
        run_command("--check", "--dry-run")


# --- Scope filters -------------------------------------------------------------------------------------------------


@pytest.fixture
def scoped_turns() -> dict[str, Message]:
    """Turns in two projects, two chats of one project, a matter-less chat, at known times."""
    chat_a1 = factories.ChatFactory.create()
    chat_a2 = factories.ChatFactory.create(project=chat_a1.project)
    chat_b = factories.ChatFactory.create()
    matterless = factories.ChatFactory.create(project=None)
    return {
        "a1_jan": make_turn(chat=chat_a1, created_at=datetime(2024, 1, 15, tzinfo=UTC)),
        "a1_feb": make_turn(chat=chat_a1, created_at=datetime(2024, 2, 1, tzinfo=UTC)),
        "a2_mar": make_turn(chat=chat_a2, created_at=datetime(2024, 3, 1, tzinfo=UTC)),
        "b_feb": make_turn(chat=chat_b, created_at=datetime(2024, 2, 20, 12, 30, tzinfo=UTC)),
        "none_mar": make_turn(chat=matterless, created_at=datetime(2024, 3, 5, tzinfo=UTC), kb=0),
    }


@pytest.mark.parametrize(
    ("make_args", "expected"),
    [
        (lambda t: ["--project", str(t["a1_jan"].chat.project_id)], {"a1_jan", "a1_feb", "a2_mar"}),
        (lambda t: ["--chat", str(t["a1_jan"].chat_id)], {"a1_jan", "a1_feb"}),
        (lambda t: ["--since", "2024-02-01"], {"a1_feb", "a2_mar", "b_feb", "none_mar"}),  # inclusive
        (lambda t: ["--until", "2024-03-01T00:00:00+00:00"], {"a1_jan", "a1_feb", "b_feb"}),  # exclusive
        (lambda t: ["--since", "2024-02-20T12:30", "--until", "2024-03-05"], {"b_feb", "a2_mar"}),  # naive: UTC
        (lambda t: ["--since", "2024-02-20T14:30+02:00"], {"b_feb", "a2_mar", "none_mar"}),  # with an offset
        (
            lambda t: ["--project", str(t["a1_jan"].chat.project_id), "--since", "2024-02-01", "--until", "2024-03-01"],
            {"a1_feb"},
        ),
        (
            lambda t: ["--project", str(t["a1_jan"].chat.project_id), "--chat", str(t["a2_mar"].chat_id)],
            {"a2_mar"},
        ),
    ],
    ids=["project", "chat", "since", "until", "naive-range", "offset", "project-and-dates", "project-and-chat"],
)
@pytest.mark.parametrize("batch_size", ["1", "20000"])
def test_filters_restrict_exactly_to_in_scope_rows(
    scoped_turns: dict[str, Message],
    make_args: Callable[[dict[str, Message]], list[str]],
    expected: set[str],
    batch_size: str,
) -> None:
    in_scope = [scoped_turns[name] for name in expected]
    out, _ = run_command(*make_args(scoped_turns), "--batch-size", batch_size)
    assert set(entry_source_ids()) == source_ids(in_scope)
    assert summary(out)["m"] == len(in_scope)
    assert summary(out)["n"] == len(source_ids(in_scope))


def test_a_filtered_check_looks_only_at_its_scope(scoped_turns: dict[str, Message]) -> None:
    chat_id = str(scoped_turns["b_feb"].chat_id)
    run_command("--chat", chat_id)
    out, _ = run_command("--check", "--chat", chat_id)
    assert "every source row in scope has its ledger entry (4 present)" in out
    with pytest.raises(SystemExit):
        run_command("--check")


# --- Stopping, resuming, concurrency -------------------------------------------------------------------------------


def test_a_run_after_a_partial_run_completes_exactly(scoped_turns: dict[str, Message]) -> None:
    # Given a run limited to one chat, and a run that died after its first batch
    run_command("--chat", str(scoped_turns["a1_jan"].chat_id))

    def die_once_a_batch_wrote(totals: BackfillResult, batch_rows: int) -> None:
        if totals.total_created:
            raise KeyboardInterrupt

    with pytest.raises(KeyboardInterrupt):
        backfill_ledger(batch_size=1, on_batch=die_once_a_batch_wrote)
    present = CitationLedgerEntry.objects.count()
    assert 8 < present < len(source_ids())
    # When a full run follows
    out, _ = run_command()
    # Then it writes exactly the rest, and counts what the earlier runs wrote as already present
    assert summary(out)["n"] == len(source_ids()) - present
    assert summary(out)["k"] == present
    assert_exactly_one_entry_per_source_row()


def _subprocess_env() -> dict[str, str]:
    """The environment for a ``manage.py`` subprocess using this test's database."""
    return {
        **os.environ,
        "DATABASE_URL": this_test_database_url(),
        "SECRET_KEY": "test-only-secret-key-not-for-production",
        "DJANGO_SETTINGS_MODULE": "lqai.settings_test",
    }


@pytest.mark.postgres
@pytest.mark.django_db(transaction=True)
def test_a_backfill_killed_mid_run_with_sigkill_then_rerun_ends_with_one_entry_per_row() -> None:
    # Given enough turns that a throttled run of one-row batches takes seconds
    for _ in range(25):
        make_turn(kb=1, caselaw=0, tool_kinds=("mcp",))
    total = len(source_ids())
    # When the command runs in a subprocess and is killed with SIGKILL once some batches have committed
    process = subprocess.Popen(
        [sys.executable, "manage.py", "backfill_ledger", "--batch-size", "1", "--sleep", "0.05"],
        cwd=ROOT,
        env=_subprocess_env(),
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
    )
    try:
        deadline = time.monotonic() + 60
        while CitationLedgerEntry.objects.count() < 6:
            assert process.poll() is None, process.stderr.read() if process.stderr else ""
            assert time.monotonic() < deadline, "the backfill subprocess wrote nothing in 60 s"
            time.sleep(0.02)
        process.send_signal(signal.SIGKILL)
    finally:
        process.wait(timeout=30)
    assert process.returncode == -signal.SIGKILL
    killed_at = CitationLedgerEntry.objects.count()
    assert 6 <= killed_at < total
    # Then monitoring sees the gap (exit status 1), a rerun completes the job exactly, and monitoring is happy
    assert _check_in_subprocess().returncode == 1
    out, _ = run_command()
    assert summary(out)["n"] == total - killed_at
    assert_exactly_one_entry_per_source_row()
    passed = _check_in_subprocess()
    assert passed.returncode == 0, passed.stdout
    assert "every source row in scope has its ledger entry" in passed.stdout


def _check_in_subprocess() -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "manage.py", "backfill_ledger", "--check"],
        cwd=ROOT,
        env=_subprocess_env(),
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )


def _in_thread(target: Callable[[], object], errors: list[BaseException]) -> threading.Thread:
    def run() -> None:
        try:
            target()
        except BaseException as exc:  # any failure fails the test, reported by the main thread
            errors.append(exc)
        finally:
            connections.close_all()

    return threading.Thread(target=run)


@pytest.mark.postgres
@pytest.mark.django_db(transaction=True)
def test_concurrent_backfills_and_live_assembly_end_with_exactly_one_entry_per_row() -> None:
    # Given turns none of which is in the ledger
    messages = [make_turn(kb=2, caselaw=1, tool_kinds=("caselaw", "mcp")) for _ in range(30)]
    start = threading.Barrier(4)
    errors: list[BaseException] = []
    results: list[BackfillResult] = []

    def backfill_in_small_batches() -> None:
        start.wait()
        results.append(backfill_ledger(batch_size=4))

    def assemble_live(order: list[Message]) -> None:
        start.wait()
        for message in order:
            with transaction.atomic():
                ledger.assemble(message)

    # When two backfills and two live assemblers (in opposite orders) run at once
    threads = [
        _in_thread(backfill_in_small_batches, errors),
        _in_thread(backfill_in_small_batches, errors),
        _in_thread(lambda: assemble_live(messages), errors),
        _in_thread(lambda: assemble_live(messages[::-1]), errors),
    ]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=120)
    # Then nothing failed (no deadlock, no unique violation) and every row has exactly one entry
    assert errors == []
    assert_exactly_one_entry_per_source_row()
    # and each backfill accounted for every row: created by it, or already present
    for result in results:
        assert result.total_created + result.already_present == len(source_ids())


@pytest.mark.postgres
@pytest.mark.django_db(transaction=True)
def test_a_batch_blocked_past_the_statement_timeout_stops_with_a_clear_error_and_a_rerun_finishes() -> None:
    # Given a turn whose entries another transaction is writing and holds uncommitted
    blocked = make_turn()
    make_turn()
    holding, release = threading.Event(), threading.Event()
    errors: list[BaseException] = []

    def hold_uncommitted_entries() -> None:
        with transaction.atomic():
            ledger.assemble(blocked)
            holding.set()
            release.wait(timeout=30)
            transaction.set_rollback(True)

    holder = _in_thread(hold_uncommitted_entries, errors)
    holder.start()
    assert holding.wait(timeout=30)
    try:
        # When a backfill must wait on those rows longer than its statement timeout
        with pytest.raises(
            CommandError,
            match=r"stopped: canceling statement due to statement timeout\. The batches committed so far are kept",
        ):
            run_command("--statement-timeout", "0.3")
    finally:
        release.set()
        holder.join(timeout=30)
    assert errors == []
    # Then, once the other writer is gone, a rerun completes the job
    run_command()
    assert_exactly_one_entry_per_source_row()


def test_sleep_throttles_between_batches_not_after_the_last(
    two_turns: list[Message], monkeypatch: pytest.MonkeyPatch
) -> None:
    pauses: list[float] = []
    monkeypatch.setattr(backfill.time, "sleep", pauses.append)
    result = backfill_ledger(batch_size=1, sleep=0.25)
    assert result.total_created == 8
    assert result.batches >= 2
    assert pauses == [0.25] * (result.batches - 1)


# --- Arguments -----------------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--project", "not-a-uuid"], "--project 'not-a-uuid' is not an id"),
        (["--chat", "42"], "--chat '42' is not an id"),
        (["--project", str(uuid4())], "no such project"),
        (["--chat", str(uuid4())], "no such chat"),
        (["--since", "yesterday"], "--since 'yesterday' is not an ISO date or datetime"),
        (["--until", "2024-13-01"], "--until '2024-13-01' is not an ISO date or datetime"),
        (["--since", "2024-03-01", "--until", "2024-02-01"], "must be before --until"),
        (["--since", "2024-03-01", "--until", "2024-03-01T00:00:00Z"], "must be before --until"),
        (["--batch-size", "0"], "--batch-size must be at least 1"),
        (["--batch-size", "many"], "invalid int value"),
        (["--sleep", "-1"], "--sleep must not be negative"),
        (["--statement-timeout", "0"], "--statement-timeout must be positive"),
    ],
)
def test_bad_arguments_raise_command_error_and_write_nothing(
    two_turns: list[Message], args: list[str], message: str
) -> None:
    with pytest.raises(CommandError, match=re.escape(message)):
        run_command(*args)
    assert CitationLedgerEntry.objects.count() == 0


def test_a_chat_outside_the_given_project_is_refused(scoped_turns: dict[str, Message]) -> None:
    project = str(scoped_turns["a1_jan"].chat.project_id)
    with pytest.raises(CommandError, match="is not a chat of --project"):
        run_command("--project", project, "--chat", str(scoped_turns["b_feb"].chat_id))
    assert CitationLedgerEntry.objects.count() == 0


def test_the_service_refuses_bad_values() -> None:
    for kwargs in ({"batch_size": 0}, {"sleep": -0.1}, {"statement_timeout": 0.0}):
        with pytest.raises(ValueError, match="must"):
            backfill_ledger(**kwargs)


# --- Rows the ledger cannot hold -----------------------------------------------------------------------------------


@pytest.mark.usefixtures("quote_checks_off")
def test_invalid_rows_are_skipped_counted_and_reported_never_fatal() -> None:
    # Given a turn with two quotes whose verification shape the ledger cannot hold (written before the
    # quote tables' checks refused such rows)
    message = make_turn()
    factories.DocumentQuoteFactory.create(message=message, verification_method="provenance")
    factories.OpinionQuoteFactory.create(message=message, verification_method="provenance")
    # When the backfill runs
    out, err = run_command()
    # Then the valid rows get their entries, the others are skipped and reported on stderr
    assert summary(out)["n"] == 4
    assert "skipped 2 source rows the ledger cannot hold (message_caselaw_citations=1 message_citations=1)" in err
    assert CitationLedgerEntry.objects.count() == 4
    # and they are not gaps for --check
    out_check, err_check = run_command("--check")
    assert "every source row in scope has its ledger entry" in out_check
    assert "skipped 2" in err_check


# --- Observability -------------------------------------------------------------------------------------------------


def test_without_a_terminal_progress_goes_to_periodic_log_lines(
    two_turns: list[Message], caplog: pytest.LogCaptureFixture
) -> None:
    with caplog.at_level("INFO", logger="citations.backfill"):
        result = backfill_ledger(batch_size=1, on_batch=LogProgress(every_seconds=3600, every_batches=1))
    lines = [r.getMessage() for r in caplog.records if r.name == "citations.backfill"]
    assert len(lines) == result.batches
    assert lines[-1].startswith(
        f"backfill_ledger: {result.batches} batches, 8 source rows scanned, created 8 entries, 0 already present"
    )


def test_log_progress_is_quiet_between_intervals(two_turns: list[Message], caplog: pytest.LogCaptureFixture) -> None:
    with caplog.at_level("INFO", logger="citations.backfill"):
        backfill_ledger(batch_size=1, on_batch=LogProgress(every_seconds=3600, every_batches=100))
    assert not [r for r in caplog.records if r.name == "citations.backfill"]


class _Terminal(StringIO):
    def isatty(self) -> bool:
        return True


def test_on_a_terminal_progress_is_a_bar(two_turns: list[Message], capsys: pytest.CaptureFixture[str]) -> None:
    out = StringIO()
    call_command("backfill_ledger", "--batch-size", "1", stdout=out, stderr=_Terminal())
    assert summary(out.getvalue())["n"] == 8
    bar = capsys.readouterr().err
    assert "backfill_ledger" in bar
    assert "created=8, present=0" in bar


def test_the_row_estimate_is_unknown_for_a_filtered_scope(two_turns: list[Message]) -> None:
    assert backfill.estimated_source_rows(BackfillScope(chat_id=two_turns[0].chat_id)) is None
    estimate = backfill.estimated_source_rows()
    if connection.vendor != "postgresql":  # PostgreSQL's estimate is the planner's, updated by ANALYZE
        assert estimate == 8


def test_help_documents_the_date_filters() -> None:
    from citations.management.commands.backfill_ledger import Command

    text = " ".join(Command().create_parser("manage.py", "backfill_ledger").format_help().split())
    assert "created at or after WHEN (inclusive)" in text
    assert "created before WHEN (exclusive)" in text


def test_failed_claims_are_backfilled_as_unverified_entries() -> None:
    # Given an older turn whose failed claims have no entries yet
    message = make_turn(kb=1, caselaw=0, tool_kinds=())
    for opinion in (None, factories.CaselawOpinionFactory.create()):
        factories.OpinionQuoteFactory.create(
            message=message,
            opinion=opinion,
            failed=True,
            unverified_reason="not found in the opinion",
        )

    out, _ = run_command()

    # Then every claim has its entry, the failed ones "unverified" without confidence, as assemble() writes them
    assert summary(out)["n"] == 3
    entries = CitationLedgerEntry.objects.filter(message=message)
    assert sorted((e.source_kind, e.verification_status, e.confidence) for e in entries) == [
        ("caselaw", "unverified", None),
        ("caselaw", "unverified", None),
        ("kb_document", "exact_match", 1.0),
    ]
    assert run_command()[0].strip().splitlines()[-1].startswith("backfill_ledger: created 0 entries")


def test_checked_case_citations_are_backfilled_once() -> None:
    # Given an older turn whose answer cited a case under a wrong name and a statute, without entries
    message = make_turn(kb=0, caselaw=0, tool_kinds=())
    mismatch = factories.CaseCitationFactory.create(message=message, case_name="Smith v. Jones", status="name_mismatch")
    factories.CaseCitationFactory.create(
        message=message, opinion=None, kind="statute", citation="42 U.S.C. 1983", status="unchecked", provider=""
    )

    out, _ = run_command()

    # Then each checked citation has its caselaw entry with the check's status, as assemble() writes it
    assert summary(out)["n"] == 2
    entries = CitationLedgerEntry.objects.filter(message=message)
    assert sorted((e.source_kind, e.verification_status, e.confidence, e.provider) for e in entries) == [
        ("caselaw", "name_mismatch", None, "local"),
        ("caselaw", "unchecked", None, None),
    ]
    assert entries.get(verification_status="name_mismatch").message_case_citation_id == mismatch.pk
    # and a rerun writes nothing
    assert run_command()[0].strip().splitlines()[-1].startswith("backfill_ledger: created 0 entries")
