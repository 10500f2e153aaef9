"""A turn is finalized exactly once: concurrent finalizers, a resume during a slow finalize or during a live
run's model retries, and a superseded run's late finalize (with real threads and real commits, on PostgreSQL,
where the row lock of ``finalize_turn`` is what holds: SQLite runs one writer at a time)."""

from __future__ import annotations

import datetime
import threading
import time
from collections.abc import Callable
from typing import Any

import pytest
from django.conf import LazySettings
from django.db import connection, connections
from django.test.utils import CaptureQueriesContext
from django.utils import timezone
from rest_framework.test import APIClient

from chats import services
from chats.assistant import FinalAnswer, ScriptedBackend, TextDelta, TurnRun
from chats.models import Chat, Document, DocumentQuote, Message
from chats.services import (
    ClaimedCitation,
    TurnSuperseded,
    finalize_turn,
    reopen_interrupted_turn,
    start_turn,
)
from citations.models import CitationLedgerEntry
from tests.fake_openai import FakeOpenAIServer, Status, answer

QUOTE = "The Equal Protection Clause requires that a racial classification survive strict scrutiny."


def in_thread(target: Callable[[], Any]) -> tuple[threading.Thread, dict[str, Any]]:
    """Run ``target`` in a thread of its own, with its own database connection (closed at the end); its
    result, or the exception it raised, lands in the returned dict."""
    outcome: dict[str, Any] = {}

    def run() -> None:
        try:
            outcome["result"] = target()
        except BaseException as exc:  # reported to the test, which asserts on it
            outcome["error"] = exc
        finally:
            connections.close_all()

    thread = threading.Thread(target=run, daemon=True)
    thread.start()
    return thread, outcome


def joined(thread: threading.Thread, seconds: float = 20) -> None:
    thread.join(seconds)
    assert not thread.is_alive(), "the thread did not finish"


def _make_stale(message: Message) -> None:
    """As if the run's worker stopped long ago (its last progress is old)."""
    Message.objects.filter(pk=message.pk).update(updated_at=timezone.now() - datetime.timedelta(hours=1))


def _claim(chat: Chat) -> ClaimedCitation:
    return ClaimedCitation(quote=QUOTE, document_id=Document.objects.get(project=chat.project).pk)


def _record_of(message: Message) -> tuple[int, int]:
    return DocumentQuote.objects.filter(message=message).count(), CitationLedgerEntry.objects.filter(
        message=message
    ).count()


# --- the service ------------------------------------------------------------------------------------------------------


@pytest.mark.postgres
@pytest.mark.django_db(transaction=True)
def test_of_two_concurrent_finalizers_one_writes_the_turn_and_the_other_is_refused(
    committed_matter_chat: tuple[APIClient, Chat],
) -> None:
    # Given a streaming turn, held by two runs that both believe they hold attempt 1
    _, chat = committed_matter_chat
    _, message = start_turn(chat=chat, content="q", assistant_status=Message.Status.STREAMING)
    barrier = threading.Barrier(2, timeout=10)

    def finalizer(content: str) -> Callable[[], Any]:
        def run() -> Any:
            copy = Message.objects.select_related("chat").get(pk=message.pk)
            barrier.wait()
            return finalize_turn(
                message=copy, content=content, status="complete", claimed_citations=[_claim(chat)], attempt=1
            )

        return run

    # When both finalize at once
    threads = [in_thread(finalizer(content)) for content in ("first answer", "second answer")]
    for thread, _ in threads:
        joined(thread)

    # Then exactly one wrote the turn, with its quote row and its ledger entry; the other wrote nothing
    outcomes = [outcome for _, outcome in threads]
    refused = [o["error"] for o in outcomes if "error" in o]
    written = [o["result"] for o in outcomes if "result" in o]
    assert len(written) == 1, outcomes
    assert len(refused) == 1, outcomes
    assert isinstance(refused[0], TurnSuperseded)
    stored = Message.objects.get(pk=message.pk)
    assert (stored.status, stored.content) == ("complete", written[0].message.content)
    assert _record_of(message) == (1, 1)


@pytest.mark.postgres
@pytest.mark.django_db(transaction=True)
def test_a_resume_during_a_slow_finalize_waits_for_it_and_is_refused(
    committed_matter_chat: tuple[APIClient, Chat], monkeypatch: pytest.MonkeyPatch
) -> None:
    # Given a streamed turn whose progress looks stale, being finalized slowly (its verification takes a while)
    _, chat = committed_matter_chat
    _, message = start_turn(chat=chat, content="q", assistant_status=Message.Status.STREAMING)
    _make_stale(message)
    message.refresh_from_db()
    verifying = threading.Event()
    verify = services._verify_claims

    def slow_verify(**kwargs: Any) -> Any:
        verifying.set()
        time.sleep(1.0)  # the resume arrives meanwhile
        return verify(**kwargs)

    monkeypatch.setattr(services, "_verify_claims", slow_verify)
    finalizer, finalized = in_thread(
        lambda: finalize_turn(
            message=message, content="the answer", status="complete", claimed_citations=[_claim(chat)]
        )
    )
    assert verifying.wait(10)

    # When a resume comes during the finalize
    resume, resumed = in_thread(lambda: reopen_interrupted_turn(message=Message.objects.get(pk=message.pk)))
    joined(finalizer)
    joined(resume)

    # Then it waited for the finalize and was refused; the turn is the finalize's, once
    assert "error" not in finalized, finalized
    assert resumed == {"result": False}
    stored = Message.objects.get(pk=message.pk)
    assert (stored.status, stored.content, stored.attempt) == ("complete", "the answer", 1)
    assert _record_of(message) == (1, 1)


@pytest.mark.django_db
def test_a_superseded_runs_late_finalize_writes_nothing(matter_chat: Chat, caplog: pytest.LogCaptureFixture) -> None:
    # Given a turn whose first run looked stopped, so that a resume took it over (attempt 2)
    _, message = start_turn(chat=matter_chat, content="q", assistant_status=Message.Status.STREAMING)
    first_run = Message.objects.select_related("chat").get(pk=message.pk)
    _make_stale(message)
    resumed = Message.objects.select_related("chat").get(pk=message.pk)
    assert reopen_interrupted_turn(message=resumed)
    assert (first_run.attempt, resumed.attempt) == (1, 2)

    # When the first run finalizes late
    with pytest.raises(TurnSuperseded, match="attempt 1 is superseded"):
        finalize_turn(
            message=first_run,
            content="the late answer",
            status="failed",
            claimed_citations=[_claim(matter_chat)],
            attempt=first_run.attempt,
        )

    # Then nothing of it was written, and it was logged with the message id; the resumed run finalizes
    stored = Message.objects.get(pk=message.pk)
    assert (stored.status, stored.content, stored.finalized_at) == ("streaming", "", None)
    assert _record_of(message) == (0, 0)
    assert any(str(message.pk) in r.getMessage() and "refused" in r.getMessage() for r in caplog.records)
    finalize_turn(
        message=resumed, content="the answer", status="complete", claimed_citations=[_claim(matter_chat)], attempt=2
    )
    assert _record_of(message) == (1, 1)
    # and the first run, trying once more, is still refused: the turn is final
    with pytest.raises(TurnSuperseded):
        finalize_turn(message=first_run, content="again", status="complete", attempt=1)
    assert Message.objects.get(pk=message.pk).content == "the answer"


@pytest.mark.django_db
def test_a_run_holds_the_attempt_it_started_with_and_ends_superseded_without_writing(matter_chat: Chat) -> None:
    # Given a run started on a turn, which a resume then takes over
    _, message = start_turn(chat=matter_chat, content="q", assistant_status=Message.Status.STREAMING)
    with ScriptedBackend.scripted(TextDelta("the superseded answer"), FinalAnswer(citations=(_claim(matter_chat),))):
        run = TurnRun(message=message, backend=ScriptedBackend(), tools={})
        _make_stale(message)
        assert reopen_interrupted_turn(message=Message.objects.get(pk=message.pk))

        # When the run goes to its end
        with pytest.raises(TurnSuperseded):
            run.run_to_end()

    # Then it wrote nothing: the turn is the resume's to finalize
    stored = Message.objects.get(pk=message.pk)
    assert (stored.status, stored.content, stored.attempt) == ("streaming", "", 2)
    assert _record_of(message) == (0, 0)


# --- through the HTTP views, against a model server ----------------------------------------------------------------


@pytest.fixture
def fake_openai(fake_openai: FakeOpenAIServer, settings: LazySettings) -> FakeOpenAIServer:
    """The suite's fake model server (tests/conftest.py), with a longer timeout for these slower runs."""
    settings.LQAI_OPENAI_TIMEOUT = 5.0
    return fake_openai


def _wait_for(condition: Callable[[], bool], seconds: float = 10) -> None:
    deadline = time.monotonic() + seconds
    while not condition():
        assert time.monotonic() < deadline, "timed out waiting"
        time.sleep(0.02)


def _client(user: Any) -> APIClient:
    client = APIClient()
    client.force_authenticate(user=user)
    return client


@pytest.mark.postgres
@pytest.mark.django_db(transaction=True)
def test_a_resume_during_a_live_streams_model_retries_is_refused(
    committed_matter_chat: tuple[APIClient, Chat], fake_openai: FakeOpenAIServer, settings: LazySettings
) -> None:
    # Given a streamed turn whose model refuses its first request (retried after 3 s): the stream is silent
    # longer than the stale window, but alive (its heartbeats record progress)
    client, chat = committed_matter_chat
    settings.LQAI_SSE_HEARTBEAT_SECONDS = 0.1
    settings.LQAI_STALE_TURN_SECONDS = 1.0
    fake_openai.respond(Status(429, headers={"Retry-After": "3"}), answer("The answer after the retry."))
    user = chat.owner

    def stream() -> Any:
        response = _client(user).post(f"/api/chats/{chat.pk}/messages/stream/", {"content": "q"}, format="json")
        return b"".join(response.streaming_content)  # type: ignore[attr-defined]

    streaming, streamed = in_thread(stream)
    _wait_for(lambda: len(fake_openai.requests) >= 1)
    message = Message.objects.get(chat=chat, role="assistant")

    # When a resume comes while the model is retrying, after more than the stale window
    time.sleep(1.5)
    resume = client.post(f"/api/chats/{chat.pk}/messages/{message.pk}/resume/")
    joined(streaming)

    # Then it is refused, and the live run's answer is the turn's, written once
    assert resume.status_code == 409
    assert "error" not in streamed, streamed
    assert b"event: done" in streamed["result"]
    stored = Message.objects.get(pk=message.pk)
    assert (stored.status, stored.content, stored.attempt) == ("complete", "The answer after the retry.", 1)
    assert len(fake_openai.requests) == 2


@pytest.mark.postgres
@pytest.mark.django_db(transaction=True)
def test_a_single_shot_run_taken_over_by_a_resume_answers_409_and_does_not_overwrite_the_answer(
    committed_matter_chat: tuple[APIClient, Chat], fake_openai: FakeOpenAIServer, settings: LazySettings
) -> None:
    # Given a single-shot turn whose model refuses its first request (retried after 2 s), silent for longer
    # than the stale window, so that a resume takes it over and answers first
    client, chat = committed_matter_chat
    settings.LQAI_STALE_TURN_SECONDS = 0.5
    fake_openai.respond(
        Status(429, headers={"Retry-After": "2"}),
        answer("The resumed answer."),
        answer("The late answer of the first request."),
    )
    user = chat.owner
    single_shot, shot = in_thread(
        lambda: _client(user).post(f"/api/chats/{chat.pk}/messages/", {"content": "q"}, format="json")
    )
    _wait_for(lambda: len(fake_openai.requests) >= 1)
    message = Message.objects.get(chat=chat, role="assistant")
    time.sleep(0.8)
    resume = client.post(f"/api/chats/{chat.pk}/messages/{message.pk}/resume/")
    assert resume.status_code == 200, resume.content
    assert b"event: done" in b"".join(resume.streaming_content)  # type: ignore[attr-defined]

    # When the first request's run finishes, after the retry
    joined(single_shot)

    # Then its finalize was refused: a 409 saying so, and the resumed answer stands
    assert "error" not in shot, shot
    assert shot["result"].status_code == 409, shot["result"].content
    assert shot["result"].json()["code"] == "turn_superseded"
    stored = Message.objects.get(pk=message.pk)
    assert (stored.status, stored.content, stored.attempt) == ("complete", "The resumed answer.", 2)
    assert len(fake_openai.requests) == 3


@pytest.mark.django_db
def test_the_stored_state_is_read_with_the_row_locked(matter_chat: Chat) -> None:
    """The stored state is read with the row locked (FOR UPDATE on PostgreSQL), inside the transaction."""
    _, message = start_turn(chat=matter_chat, content="q", assistant_status=Message.Status.STREAMING)

    with CaptureQueriesContext(connection) as queries:
        finalize_turn(message=message, content="a", status="complete")
    locking = [q["sql"] for q in queries.captured_queries if 'FROM "messages"' in q["sql"] and "attempt" in q["sql"]]
    assert locking, "finalize read no stored attempt"
    if connection.vendor == "postgresql":
        assert any("FOR UPDATE" in sql for sql in locking)
