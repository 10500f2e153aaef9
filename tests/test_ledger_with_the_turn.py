"""The ledger is written with the turn: in its transaction, before its response, bounded in time.

Every test here commits for real (``transaction=True``): what a client sees right after a response is what
is committed, and a reader on another connection sees the same. The server-process test runs the real
development server in a subprocess and kills it.
"""

from __future__ import annotations

import json
import logging
import os
import signal
import socket
import subprocess
import sys
import threading
import time
import urllib.request
from collections.abc import Iterator
from io import StringIO
from pathlib import Path
from typing import Any

import psycopg
import pytest
from django.conf import LazySettings
from django.core.management import call_command
from django.db import connection, transaction
from rest_framework.test import APIClient

from chats.models import Chat, DocumentQuote, Message
from citations.models import CitationLedgerEntry
from tests import factories
from tests.conftest import this_test_database_url
from tests.test_streaming import QUESTION, disconnect, resume, sse_events, stream

ROOT = Path(__file__).resolve().parent.parent


def _entries(message_id: Any) -> int:
    return CitationLedgerEntry.objects.filter(message_id=message_id).count()


def _rows(message_id: Any) -> int:
    message = Message.objects.get(pk=message_id)
    return (
        message.citations.count()
        + message.caselaw_citations.count()
        + message.tool_sources.count()
        + message.case_citations.count()
    )


# --- The entries exist when the response arrives ---------------------------------------------------------------


@pytest.mark.django_db(transaction=True)
@pytest.mark.usefixtures("local_opinion")
def test_a_single_shot_turns_entries_exist_when_its_response_arrives(
    committed_matter_chat: tuple[APIClient, Chat],
) -> None:
    client, chat = committed_matter_chat

    response = client.post(f"/api/chats/{chat.pk}/messages/", {"content": QUESTION}, format="json")

    assert response.status_code == 201, response.content
    message_id = response.json()["message"]["id"]
    # Read right after the response, as the client would: the trace already has every entry
    trace = client.get(f"/api/chats/{chat.pk}/ledger/", {"message": message_id}).json()
    assert trace["count"] == _rows(message_id) > 0
    assert not connection.in_atomic_block  # what this test reads is committed


@pytest.mark.django_db(transaction=True)
@pytest.mark.usefixtures("local_opinion")
def test_a_streamed_turns_entries_exist_at_its_done_event(committed_matter_chat: tuple[APIClient, Chat]) -> None:
    client, chat = committed_matter_chat
    seen_at_done: list[tuple[int, int]] = []

    for name, data in sse_events(stream(client, chat).streaming_content):  # type: ignore[arg-type]
        if name == "done":
            # Read while the stream is still open, at the moment the client gets the event
            seen_at_done.append((_entries(data["message_id"]), _rows(data["message_id"])))

    ((entries, rows),) = seen_at_done
    assert entries == rows > 0


@pytest.mark.django_db(transaction=True)
@pytest.mark.usefixtures("local_opinion")
def test_a_resumed_turns_entries_exist_at_its_done_event(committed_matter_chat: tuple[APIClient, Chat]) -> None:
    client, chat = committed_matter_chat
    # Given a turn interrupted after its tool result (its consulted sources are already recorded)
    response = stream(client, chat)
    events = sse_events(response.streaming_content)  # type: ignore[arg-type]
    message_id = next(events)[1]["message_id"]
    assert [next(events)[0] for _ in range(2)] == ["tool_call", "tool_result"]
    disconnect(response)
    interrupted_entries = _entries(message_id)
    assert interrupted_entries == _rows(message_id) > 0

    # When it is resumed, then at its done event every row of the turn has its entry
    seen_at_done = [
        (_entries(data["message_id"]), _rows(data["message_id"]))
        for name, data in sse_events(resume(client, chat, message_id).streaming_content)
        if name == "done"
    ]
    ((entries, rows),) = seen_at_done
    assert entries == rows > interrupted_entries


# --- A ledger that waits on a lock holds the turn no longer than the bound -------------------------------------


@pytest.fixture
def ledger_locked_elsewhere() -> Iterator[threading.Event]:
    """Another connection holds an exclusive lock on the ledger table until the yielded event is set (or 30 s)."""
    locked, release = threading.Event(), threading.Event()

    def hold() -> None:
        with psycopg.connect(this_test_database_url(), autocommit=False) as other:
            other.execute("LOCK TABLE citation_ledger_entry IN ACCESS EXCLUSIVE MODE")
            locked.set()
            release.wait(timeout=30)
            other.rollback()

    holder = threading.Thread(target=hold, daemon=True)
    holder.start()
    assert locked.wait(timeout=10), "the other connection did not get its lock"
    try:
        yield release
    finally:
        release.set()
        holder.join(timeout=30)
        assert not holder.is_alive()


def _check_exit_status() -> int:
    try:
        call_command("backfill_ledger", "--check", stdout=StringIO(), stderr=StringIO())
    except SystemExit as exit_:
        return int(exit_.code or 0)
    return 0


@pytest.mark.postgres
@pytest.mark.django_db(transaction=True)
@pytest.mark.usefixtures("local_opinion")
def test_a_locked_ledger_holds_the_turn_only_for_the_bound_and_the_backfill_repairs_it(
    committed_matter_chat: tuple[APIClient, Chat],
    ledger_locked_elsewhere: threading.Event,
    settings: LazySettings,
    caplog: pytest.LogCaptureFixture,
) -> None:
    # Given a ledger table locked by another connection for longer than the bound
    settings.LQAI_LEDGER_TIMEOUT = 0.5
    client, chat = committed_matter_chat

    # When a turn is asked for
    started = time.monotonic()
    with caplog.at_level(logging.ERROR, logger="citations.receivers"):
        response = client.post(f"/api/chats/{chat.pk}/messages/", {"content": QUESTION}, format="json")
    elapsed = time.monotonic() - started

    # Then it answers 201 in about the bound, committed with its citations but without its entries
    assert response.status_code == 201, response.content
    assert 0.5 <= elapsed < 0.5 + 3.0
    message_id = response.json()["message"]["id"]
    assert DocumentQuote.objects.filter(message_id=message_id).count() == len(response.json()["message"]["citations"])
    assert _rows(message_id) > 0
    # and the failure is logged once, with the message id and the repair
    (record,) = [r for r in caplog.records if r.name == "citations.receivers" and r.levelno == logging.ERROR]
    assert message_id in record.getMessage()
    assert "backfill_ledger" in record.getMessage()
    assert "timeout" in (record.exc_text or "")  # lock_timeout or statement_timeout, whichever fires first

    # When the lock is gone: the gap shows, a backfill repairs it, and the gap is gone
    ledger_locked_elsewhere.set()
    assert _entries(message_id) == 0
    assert _check_exit_status() == 1
    call_command("backfill_ledger", stdout=StringIO(), stderr=StringIO())
    assert _entries(message_id) == _rows(message_id)
    assert _check_exit_status() == 0


@pytest.mark.postgres
@pytest.mark.django_db(transaction=True)
def test_the_bound_is_lifted_after_the_ledger_write(committed_matter_chat: tuple[APIClient, Chat]) -> None:
    # Given a session with its own limits, which a turn is finalized in
    from citations import ledger

    _, chat = committed_matter_chat
    with transaction.atomic():  # the message finalized and its row, in one transaction as a finalize writes them
        message = factories.MessageFactory.create(chat=chat, status=Message.Status.STREAMING)
        factories.MessageToolSourceFactory.create(message=message)
    with connection.cursor() as cursor:
        cursor.execute("SET lock_timeout = '7s'")
        cursor.execute("SET statement_timeout = '9s'")
    try:
        # When the ledger is written with a bound (inside a transaction, as finalize_turn does)
        with transaction.atomic():
            assert ledger.assemble(message, timeout=0.25) == 1
            with connection.cursor() as cursor:
                cursor.execute("SELECT current_setting('lock_timeout'), current_setting('statement_timeout')")
                inside = cursor.fetchone()
        # Then the caller's limits are back in force right after it, inside the same transaction
        assert inside == ("7s", "9s")
    finally:
        with connection.cursor() as cursor:
            cursor.execute("RESET lock_timeout")
            cursor.execute("RESET statement_timeout")


# --- A server killed right after its responses leaves nothing to repair -----------------------------------------


def _free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


def _wait_until_listening(port: int, server: subprocess.Popen[bytes], *, seconds: float) -> None:
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        assert server.poll() is None, "the server exited before listening"
        try:
            with socket.create_connection(("127.0.0.1", port), timeout=0.5):
                return
        except OSError:
            time.sleep(0.1)
    raise AssertionError(f"the server did not listen on port {port} within {seconds} s")


@pytest.mark.postgres
@pytest.mark.django_db(transaction=True)
@pytest.mark.usefixtures("local_opinion")
def test_a_server_killed_right_after_its_last_response_leaves_no_gap(
    committed_matter_chat: tuple[APIClient, Chat],
) -> None:
    # Given a real server process on this test's database, and a user with a token
    _, chat = committed_matter_chat
    token = factories.api_token(chat.owner)
    port = _free_port()
    env = {
        **{k: v for k, v in os.environ.items() if not k.startswith("LQAI_")},
        "DJANGO_SETTINGS_MODULE": "lqai.settings",
        "DEBUG": "1",
        "SECRET_KEY": "test-only-server-secret",
        "DATABASE_URL": this_test_database_url(),
        "LOG_LEVEL": "WARNING",
    }
    server = subprocess.Popen(  # noqa: S603 - our own manage.py, fixed arguments
        [sys.executable, "manage.py", "runserver", "--noreload", "--nothreading", f"127.0.0.1:{port}"],
        cwd=ROOT,
        env=env,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    try:
        _wait_until_listening(port, server, seconds=30)
        # When it answers several turns and is killed right after the last response
        message_ids = []
        for question in (QUESTION, "What did the Court hold about deference?", "Is a write-in list public?"):
            request = urllib.request.Request(
                f"http://127.0.0.1:{port}/api/chats/{chat.pk}/messages/",
                data=json.dumps({"content": question}).encode(),
                headers={"Content-Type": "application/json", "Authorization": f"Bearer {token}"},
                method="POST",
            )
            with urllib.request.urlopen(request, timeout=30) as answer:  # noqa: S310
                assert answer.status == 201
                message_ids.append(json.loads(answer.read())["message"]["id"])
        server.send_signal(signal.SIGKILL)
        server.wait(timeout=10)
    finally:
        if server.poll() is None:
            server.kill()
            server.wait(timeout=10)

    # Then every committed turn has all its entries: nothing was waiting to be written
    assert all(_entries(message_id) == _rows(message_id) for message_id in message_ids)
    assert sum(_rows(message_id) for message_id in message_ids) > 0
    assert _check_exit_status() == 0
