"""The ledger writer (``citations/writer.py``): turns' entries written just after the turn, off its request.

First the writer's own behaviour with a stand-in for ``ledger.assemble_turns`` (batches, retries, flush,
stop, fork, exit), then, on PostgreSQL, the shipped path end to end: real commits, the real thread on its
own connection."""

from __future__ import annotations

import logging
import os
import subprocess
import sys
import textwrap
import threading
import uuid
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any
from uuid import UUID

import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext
from rest_framework.test import APIClient

from chats.models import CaselawOpinion, Chat, Message
from chats.services import ClaimedCitation, ConsultedSource, finalize_turn, start_turn
from citations import ledger
from citations.models import CitationLedgerEntry
from citations.writer import LedgerWriter, writer
from tests.conftest import this_test_database_url
from tests.test_ledger import entries_by_source, expected_entry, mirrored

ROOT = Path(__file__).resolve().parent.parent
KB_QUOTE = "must ultimately be satisfied"
CASELAW_QUOTE = "strict scrutiny"


class StandIn:
    """Replaces ``ledger.assemble_turns``: records each batch, raises for batches holding a ``failing`` id,
    and while ``gate`` is clear holds each call until it is set (``entered`` says a call is waiting)."""

    def __init__(self, *, failing: Sequence[UUID] = (), write: Any = None) -> None:
        self.batches: list[list[UUID]] = []
        self.failing = set(failing)
        self.gate = threading.Event()
        self.gate.set()
        self.entered = threading.Event()
        self.write = write

    def __call__(self, message_ids: Sequence[UUID]) -> int:
        self.entered.set()
        assert self.gate.wait(10), "the test never opened the gate"
        self.batches.append(list(message_ids))
        if self.failing & set(message_ids):
            raise RuntimeError("the ledger refused the batch")
        return self.write(message_ids) if self.write else len(message_ids)

    def hold(self, writer: LedgerWriter, first: UUID, *queued: UUID) -> None:
        """``first`` submitted to ``writer`` and held in the middle of its write, ``queued`` submitted behind it."""
        self.gate.clear()
        writer.submit(first)
        assert self.entered.wait(10)
        for message_id in queued:
            writer.submit(message_id)


@pytest.fixture
def stand_in(monkeypatch: pytest.MonkeyPatch) -> StandIn:
    fake = StandIn()
    monkeypatch.setattr(ledger, "assemble_turns", fake)
    return fake


@pytest.fixture
def own_writer() -> Iterator[LedgerWriter]:
    instance = LedgerWriter(max_batch=2)
    yield instance
    assert instance.stop(timeout=10)


def ids(count: int) -> list[UUID]:
    return [uuid.uuid4() for _ in range(count)]


# --- The writer with a stand-in ----------------------------------------------------------------------------------


def test_turns_queued_during_a_write_go_together_in_the_next_batches(
    stand_in: StandIn, own_writer: LedgerWriter
) -> None:
    a, b, c, d = ids(4)
    # Given a write in flight, when three more turns are finalized meanwhile
    stand_in.hold(own_writer, a, b, c, d)

    # Then flush waits for all of them, and they are written in batches of at most max_batch, in order
    assert own_writer.pending == 4
    assert not own_writer.flush(timeout=0.05)
    stand_in.gate.set()
    assert own_writer.flush(timeout=10)
    assert stand_in.batches == [[a], [b, c], [d]]
    assert own_writer.pending == 0


def test_a_failed_batch_is_retried_turn_by_turn_and_only_the_failing_turn_is_lost(
    stand_in: StandIn, own_writer: LedgerWriter, caplog: pytest.LogCaptureFixture
) -> None:
    first, good, bad = ids(3)
    stand_in.failing = {bad}
    stand_in.hold(own_writer, first, good, bad)

    with caplog.at_level(logging.INFO, logger="citations.writer"):
        stand_in.gate.set()
        assert own_writer.flush(timeout=10)

    assert stand_in.batches == [[first], [good, bad], [good], [bad]]
    (error,) = [r for r in caplog.records if r.levelno == logging.ERROR]
    assert str(bad) in error.getMessage()
    assert "backfill_ledger" in error.getMessage()
    assert error.exc_text is not None
    assert "the ledger refused the batch" in error.exc_text
    (retry,) = [r for r in caplog.records if r.levelno == logging.WARNING]
    assert "retrying them one by one" in retry.getMessage()
    # and the writer goes on with later turns
    later = uuid.uuid4()
    own_writer.submit(later)
    assert own_writer.flush(timeout=10)
    assert stand_in.batches[-1] == [later]


def test_stop_writes_what_is_queued_then_ends_and_a_later_turn_starts_a_new_thread(
    stand_in: StandIn, own_writer: LedgerWriter
) -> None:
    a, b, c = ids(3)
    stand_in.hold(own_writer, a, b)

    assert not own_writer.stop(timeout=0.05)  # still writing: stop does not drop the queue
    stand_in.gate.set()
    assert own_writer.stop(timeout=10)
    assert stand_in.batches == [[a], [b]]
    assert "ledger-writer" not in {t.name for t in threading.enumerate()}

    own_writer.submit(c)
    assert own_writer.flush(timeout=10)
    assert stand_in.batches[-1] == [c]


# The writer's thread dies of the exit on purpose; its traceback is expected.
@pytest.mark.filterwarnings("ignore::pytest.PytestUnhandledThreadExceptionWarning")
def test_a_writer_thread_ended_by_an_uncaught_exit_is_replaced_by_the_next_turn(
    stand_in: StandIn, own_writer: LedgerWriter
) -> None:
    first, later = ids(2)
    stand_in.write = lambda message_ids: (_ for _ in ()).throw(SystemExit(3))  # not an Exception: not caught
    stand_in.hold(own_writer, first)
    (dying,) = [t for t in threading.enumerate() if t.name == "ledger-writer"]

    stand_in.gate.set()
    dying.join(timeout=10)
    assert not dying.is_alive()
    assert own_writer.pending == 0  # the turn is accounted for; its entries are the backfill's to write
    stand_in.write = None
    own_writer.submit(later)

    assert own_writer.flush(timeout=10)
    assert stand_in.batches == [[first], [later]]


@pytest.mark.skipif(not hasattr(os, "fork"), reason="needs os.fork")
def test_a_forked_child_starts_with_an_empty_queue_and_its_own_thread(
    stand_in: StandIn, own_writer: LedgerWriter
) -> None:
    a, b, c = ids(3)
    # Given a parent whose writer is in the middle of a write with another turn queued
    stand_in.hold(own_writer, a, b)

    pid = os.fork()
    if pid == 0:  # pragma: no cover - the child reports through its exit code
        code = 3
        try:
            child = StandIn()
            ledger.assemble_turns = child
            fresh = own_writer.pending == 0
            own_writer.submit(c)
            code = 0 if fresh and own_writer.flush(timeout=10) and child.batches == [[c]] else 1
        finally:
            os._exit(code)

    # Then the child wrote its own turn only, and the parent still writes its two
    _, status = os.waitpid(pid, 0)
    assert os.waitstatus_to_exitcode(status) == 0
    stand_in.gate.set()
    assert own_writer.flush(timeout=10)
    assert stand_in.batches == [[a], [b]]


EXIT_SCRIPT = """
import os, sys, time, uuid
import django
os.environ["DJANGO_SETTINGS_MODULE"] = "lqai.settings_test"
django.setup()
from citations import ledger, writer

def slow(message_ids):
    time.sleep(float(sys.argv[1]))
    print("wrote", *message_ids, flush=True)
    return 0

ledger.assemble_turns = slow
writer.DRAIN_SECONDS = float(sys.argv[2])
for index in range(3):
    writer.writer.submit(uuid.UUID(int=index + 1))
print("exiting with", writer.writer.pending, "pending", flush=True)
"""


def _exit_with_queued_turns(*, write_seconds: float, drain_seconds: float) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if k != "DATABASE_URL"}
    return subprocess.run(  # noqa: S603 - this module's own script
        [sys.executable, "-c", textwrap.dedent(EXIT_SCRIPT), str(write_seconds), str(drain_seconds)],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )


def test_an_orderly_exit_writes_the_queued_turns_first() -> None:
    result = _exit_with_queued_turns(write_seconds=0.3, drain_seconds=10)

    assert result.returncode == 0, result.stderr
    lines = result.stdout.splitlines()
    assert lines[0] == "exiting with 3 pending"
    written = {word for line in lines[1:] for word in line.split()[1:]}
    assert written == {str(uuid.UUID(int=n)) for n in (1, 2, 3)}


def test_an_exit_that_cannot_wait_says_how_many_turns_are_left_for_the_backfill() -> None:
    result = _exit_with_queued_turns(write_seconds=2, drain_seconds=0.2)

    assert result.returncode == 0, result.stderr
    assert "turns still unwritten at exit; `manage.py backfill_ledger` will write their entries" in result.stderr
    assert "level=ERROR logger=citations.writer msg=ledger: 3 turns still unwritten" in result.stderr


# --- As shipped on PostgreSQL: real commits, the real thread -----------------------------------------------------


def _rows_of(message: Message) -> list[Any]:
    return [*message.citations.all(), *message.caselaw_citations.all(), *message.tool_sources.all()]


def _assert_ledger_mirrors_rows(message: Message) -> None:
    rows = _rows_of(message)
    assert rows
    entries = entries_by_source(message)
    assert {pk: mirrored(entry) for pk, entry in entries.items()} == {row.pk: expected_entry(row) for row in rows}


def _finalize(chat: Chat, opinion: CaselawOpinion) -> Message:
    """A real turn in ``chat`` (a KB quote, a caselaw quote, a consulted source), committed for real."""
    _, message = start_turn(chat=chat, content="What must the court be satisfied of?")
    turn = finalize_turn(
        message=message,
        content="The answer.",
        status=Message.Status.COMPLETE,
        claimed_citations=[
            ClaimedCitation(KB_QUOTE, document_id=chat.project.documents.get().pk if chat.project else None),
            ClaimedCitation(CASELAW_QUOTE, opinion_id=opinion.pk),
        ],
        tool_sources=[ConsultedSource(source_kind="mcp", tool="mcp:search", label="An MCP result")],
    )
    assert (len(turn.citations), len(turn.caselaw_citations), len(turn.unverified)) == (1, 1, 0)
    return message


@pytest.mark.postgres
@pytest.mark.django_db(transaction=True)
@pytest.mark.usefixtures("ledger_write_as_shipped")
def test_a_turn_through_the_api_is_in_the_ledger_just_after_its_response(
    api_client: APIClient, matter_chat: Chat, local_opinion: CaselawOpinion
) -> None:
    # When a turn is answered through the API, as shipped
    with CaptureQueriesContext(connection) as queries:
        response = api_client.post(f"/api/chats/{matter_chat.pk}/messages/", {"content": "strict scrutiny"}, "json")

    # Then the request did not touch the ledger: the writer did, just after
    assert response.status_code == 201, response.content
    assert not [q["sql"] for q in queries if "citation_ledger_entry" in q["sql"]]
    assert writer.flush(timeout=10)
    _assert_ledger_mirrors_rows(Message.objects.get(pk=response.json()["message"]["id"]))


@pytest.mark.postgres
@pytest.mark.django_db(transaction=True)
@pytest.mark.usefixtures("ledger_write_as_shipped")
def test_turns_finalized_during_a_write_share_the_next_statement(
    monkeypatch: pytest.MonkeyPatch, matter_chat: Chat, local_opinion: CaselawOpinion
) -> None:
    # Given a ledger write in flight (the real one, held at a gate)
    held = StandIn(write=ledger.assemble_turns)
    monkeypatch.setattr(ledger, "assemble_turns", held)
    held.gate.clear()
    first = _finalize(matter_chat, local_opinion)
    assert held.entered.wait(10)

    # When three more turns are finalized meanwhile
    others = [_finalize(matter_chat, local_opinion) for _ in range(3)]
    held.gate.set()

    # Then they are written by one statement, and every turn's entries mirror its rows
    assert writer.flush(timeout=10)
    assert held.batches == [[first.pk], [m.pk for m in others]]
    for message in [first, *others]:
        _assert_ledger_mirrors_rows(message)


@pytest.mark.postgres
@pytest.mark.django_db(transaction=True)
@pytest.mark.usefixtures("ledger_write_as_shipped")
def test_a_connection_dropped_while_idle_costs_no_turn_its_entries(
    matter_chat: Chat, local_opinion: CaselawOpinion, caplog: pytest.LogCaptureFixture
) -> None:
    # Given a writer that has written a turn and keeps its connection
    _finalize(matter_chat, local_opinion)
    assert writer.flush(timeout=10)

    # When the server ends that connection (a restart, a pooler, an administrator)
    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT count(pg_terminate_backend(pid)) FROM pg_stat_activity "
            "WHERE datname = current_database() AND pid <> pg_backend_pid()"
        )
        assert cursor.fetchone() == (1,)

    # Then the next turn is still written, on a fresh connection
    with caplog.at_level(logging.WARNING, logger="citations.writer"):
        message = _finalize(matter_chat, local_opinion)
        assert writer.flush(timeout=10)
    _assert_ledger_mirrors_rows(message)
    assert [r.levelno for r in caplog.records if r.levelno >= logging.WARNING] == [logging.WARNING]


@pytest.mark.postgres
@pytest.mark.django_db(transaction=True)
@pytest.mark.usefixtures("ledger_write_as_shipped", "ledger_refuses_every_row")
def test_a_ledger_failure_in_the_writer_is_logged_with_the_turn_and_leaves_the_turn_alone(
    matter_chat: Chat, local_opinion: CaselawOpinion, caplog: pytest.LogCaptureFixture
) -> None:
    with caplog.at_level(logging.ERROR, logger="citations.writer"):
        message = _finalize(matter_chat, local_opinion)
        assert writer.flush(timeout=10)

    (record,) = [r for r in caplog.records if r.name == "citations.writer" and r.levelno == logging.ERROR]
    assert str(message.pk) in record.getMessage()
    assert record.exc_text is not None
    assert "test_refuse_all" in record.exc_text
    assert Message.objects.get(pk=message.pk).status == Message.Status.COMPLETE
    assert not CitationLedgerEntry.objects.exists()


EXIT_WITH_A_TURN = """
import time
import uuid
from chats.models import Message
from chats.services import ClaimedCitation, finalize_turn
from citations import ledger, writer

real = ledger.assemble_turns
def slow(message_ids):
    time.sleep(0.5)  # still writing when the process exits
    return real(message_ids)

ledger.assemble_turns = slow
message = Message.objects.get(pk="{message}")
turn = finalize_turn(message=message, content="The answer.", status="complete",
              claimed_citations=[ClaimedCitation("{quote}", document_id=uuid.UUID("{document}"))])
print("verified:", len(turn.citations), "pending at exit:", writer.writer.pending)
"""


@pytest.mark.postgres
@pytest.mark.django_db(transaction=True)
def test_a_process_that_exits_right_after_a_turn_still_writes_its_entries(matter_chat: Chat) -> None:
    # Given a turn started and committed, to be finalized by another process running as shipped
    _, message = start_turn(chat=matter_chat, content="What must the court be satisfied of?")
    document = matter_chat.project.documents.get() if matter_chat.project else None
    assert document is not None
    env = {
        **os.environ,
        "DATABASE_URL": this_test_database_url(),
        "DJANGO_SETTINGS_MODULE": "lqai.settings",
        "DEBUG": "1",
    }
    env.pop("LQAI_LEDGER_WRITE", None)
    script = EXIT_WITH_A_TURN.format(message=message.pk, quote=KB_QUOTE, document=document.pk)

    # When that process finalizes it and exits at once
    result = subprocess.run(  # noqa: S603 - this module's own script
        [sys.executable, "manage.py", "shell", "-c", script],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )

    # Then its writer wrote the turn's entry before the process ended
    assert result.returncode == 0, result.stderr
    assert "verified: 1 pending at exit: 1" in result.stdout, result.stderr
    _assert_ledger_mirrors_rows(message)
