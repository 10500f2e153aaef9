"""Bounded use of the turn endpoints: throttles, concurrent streams, stream duration and heartbeats,
stuck turns, paginated messages, and questions as long as a message may be."""

from __future__ import annotations

import datetime
import itertools
import json
import os
import string
import subprocess
import sys
import threading
import time
import uuid
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import pytest
from django.conf import LazySettings
from django.conf import settings as django_settings
from django.contrib.auth.models import User
from django.db import connection
from django.utils import timezone
from rest_framework.test import APIClient

from chats.assistant import AssistantEvent, FinalAnswer, Script, ScriptedBackend, TextDelta, Turn, TurnRun
from chats.models import CaselawOpinion, Chat, Message, TurnRateCount
from chats.retrieval import MAX_QUERY_TERMS, query_terms
from chats.services import reopen_interrupted_turn, start_turn
from tests import factories
from tests.conftest import this_test_database_url
from tests.test_streaming import names, resume, sse_events, stream

pytestmark = pytest.mark.django_db
ROOT = Path(__file__).resolve().parent.parent
# Seconds of the rate's minute a throttle test needs at most (its turns, a server process started).
WINDOW_LEFT = 20


def _distinct_words(count: int) -> list[str]:
    """``count`` distinct two- and three-letter content words (no stop words), shortest first."""
    words = ("".join(letters) for size in (2, 3) for letters in itertools.product(string.ascii_lowercase, repeat=size))
    return list(itertools.islice((w for w in words if query_terms(w)), count))


# --- long questions -----------------------------------------------------------------------------------------------


def test_query_terms_are_capped_to_the_first_ones() -> None:
    words = _distinct_words(MAX_QUERY_TERMS + 10)
    assert query_terms(" ".join(words)) == words[:MAX_QUERY_TERMS]


def test_a_question_of_two_thousand_distinct_words_is_answered(
    api_client: APIClient, matter_chat: Chat, local_opinion: CaselawOpinion
) -> None:
    """The tool loop searches the matter's documents and the opinions with it (SQLite: one OR-ed
    condition per term; PostgreSQL: one tsquery), and answers from both."""
    question = "strict scrutiny " + " ".join(_distinct_words(2000))
    assert len(question) <= django_settings.LQAI_MAX_MESSAGE_CHARS

    events = list(sse_events(stream(api_client, matter_chat, question).streaming_content))  # type: ignore[arg-type]

    assert names(events)[-1] == "done"
    assert events[-1][1]["status"] == "complete"
    kinds = {data["kind"] for name, data in events if name == "citation"}
    assert kinds == {"kb_document", "caselaw"}


# --- throttles ----------------------------------------------------------------------------------------------------


@pytest.fixture
def fresh_throttles() -> Iterator[None]:
    """Throttle counts live in a table (chats.throttles): start and end each test with none. The rate's
    windows are fixed minutes, so a test that crossed into the next one would see its count start again:
    each test starts with at least ``WINDOW_LEFT`` seconds of its minute to go (waiting for the next if not)."""
    left = 60 - time.time() % 60
    if left < WINDOW_LEFT:
        time.sleep(left + 0.05)
    TurnRateCount.objects.all().delete()
    yield
    TurnRateCount.objects.all().delete()


def _ask(client: APIClient, chat: Chat) -> Any:
    return client.post(f"/api/chats/{chat.pk}/messages/", {"content": "strict scrutiny?"}, format="json")


def test_turns_over_the_rate_answer_429_with_retry_after(
    api_client: APIClient,
    matter_chat: Chat,
    other_user: User,
    settings: LazySettings,
    fresh_throttles: None,
    scripted_backend: Callable[..., Script],
) -> None:
    settings.LQAI_THROTTLE_TURNS = "2/min"
    scripted_backend(TextDelta("Answer."), FinalAnswer())
    assert [_ask(api_client, matter_chat).status_code for _ in range(2)] == [201, 201]

    single_shot = _ask(api_client, matter_chat)
    streamed = api_client.post(f"/api/chats/{matter_chat.pk}/messages/stream/", {"content": "q"}, format="json")
    resumed = api_client.post(f"/api/chats/{matter_chat.pk}/messages/{uuid.uuid4()}/resume/")

    for response in (single_shot, streamed, resumed):
        assert response.status_code == 429
        assert response["Content-Type"] == "application/json"
        assert response.json()["detail"].startswith("Request was throttled. Expected available in ")
        assert 0 < int(response["Retry-After"]) <= 60
    assert Message.objects.filter(role=Message.Role.ASSISTANT).count() == 2
    # Reading is not a turn; another user has their own count.
    assert api_client.get(f"/api/chats/{matter_chat.pk}/messages/").status_code == 200
    other_chat = factories.ChatFactory.create(project__owner=other_user, owner=other_user)
    other = APIClient()
    other.force_authenticate(user=other_user)
    assert _ask(other, other_chat).status_code == 201


# A turn asked from another server process: this project's settings (the rate on), the test's database.
ANOTHER_PROCESS = """
import os, sys
import django
django.setup()
from django.contrib.auth.models import User
from rest_framework.test import APIClient
client = APIClient()
client.force_authenticate(user=User.objects.get(pk=int(sys.argv[1])))
response = client.post(f"/api/chats/{sys.argv[2]}/messages/", {"content": "strict scrutiny?"}, format="json")
print(response.status_code)
"""


def _ask_from_another_process(user: User, chat: Chat) -> int:
    env = {
        **{k: v for k, v in os.environ.items() if not k.startswith("LQAI_")},
        "DJANGO_SETTINGS_MODULE": "lqai.settings",
        "DEBUG": "1",
        "DATABASE_URL": this_test_database_url(),
        "ALLOWED_HOSTS": "testserver",
        "LQAI_THROTTLE_TURNS": "2/min",
        "LOG_LEVEL": "ERROR",
    }
    done = subprocess.run(  # noqa: S603 - this interpreter, a constant script
        [sys.executable, "-c", ANOTHER_PROCESS, str(user.pk), str(chat.pk)],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert done.returncode == 0, done.stderr
    return int(done.stdout.strip().splitlines()[-1])


@pytest.mark.postgres
@pytest.mark.django_db(transaction=True)
def test_server_processes_count_a_users_turns_together(
    committed_matter_chat: tuple[APIClient, Chat], settings: LazySettings, fresh_throttles: None
) -> None:
    # Given a user who used up the rate in this process
    client, chat = committed_matter_chat
    settings.LQAI_THROTTLE_TURNS = "2/min"
    assert [_ask(client, chat).status_code for _ in range(2)] == [201, 201]
    user = chat.owner
    assert user is not None
    other = factories.UserFactory.create()
    other_chat = factories.ChatFactory.create(project__owner=other, owner=other)

    # Then another server process refuses her next turn, and still serves another user
    assert _ask_from_another_process(user, chat) == 429
    assert _ask_from_another_process(other, other_chat) == 201
    assert Message.objects.filter(chat=chat, role=Message.Role.ASSISTANT).count() == 2


def test_a_users_count_survives_many_other_users_counts(
    api_client: APIClient,
    matter_chat: Chat,
    settings: LazySettings,
    fresh_throttles: None,
    scripted_backend: Callable[..., Script],
) -> None:
    # Given a user's first turn, then many other users' counts in the same window
    settings.LQAI_THROTTLE_TURNS = "2/min"
    scripted_backend(TextDelta("Answer."), FinalAnswer())
    assert _ask(api_client, matter_chat).status_code == 201
    window_start = TurnRateCount.objects.get().window_start
    others = factories.UserFactory.create_batch(50)
    TurnRateCount.objects.bulk_create(TurnRateCount(user=u, window_start=window_start) for u in others)

    # Then her count is kept: her third turn within the minute is refused
    assert [_ask(api_client, matter_chat).status_code for _ in range(2)] == [201, 429]


def test_the_turn_rate_can_be_turned_off(
    api_client: APIClient,
    matter_chat: Chat,
    settings: LazySettings,
    fresh_throttles: None,
    scripted_backend: Callable[..., Script],
) -> None:
    settings.LQAI_THROTTLE_TURNS = None
    scripted_backend(TextDelta("Answer."), FinalAnswer())
    assert {_ask(api_client, matter_chat).status_code for _ in range(5)} == {201}


# --- concurrent streams -------------------------------------------------------------------------------------------


def _open_stream(client: APIClient, chat: Chat) -> Any:
    return client.post(f"/api/chats/{chat.pk}/messages/stream/", {"content": "strict scrutiny?"}, format="json")


def assert_too_many_streams(response: Any, *, streams: int) -> None:
    assert response.status_code == 429
    assert response["Content-Type"] == "application/json"
    assert response.json() == {
        "detail": f"You already have {streams} answers streaming; wait for one to finish.",
        "code": "too_many_streams",
    }


def test_streams_over_the_cap_answer_429_and_record_nothing(
    api_client: APIClient, matter_chat: Chat, settings: LazySettings, scripted_backend: Callable[..., Script]
) -> None:
    settings.LQAI_MAX_CONCURRENT_STREAMS = 2
    scripted_backend(TextDelta("Answer."), FinalAnswer())
    # Two streams opened and not yet read: both are `streaming`.
    first, second = _open_stream(api_client, matter_chat), _open_stream(api_client, matter_chat)
    assert (first.status_code, second.status_code) == (200, 200)
    messages_before = Message.objects.count()

    refused = _open_stream(api_client, matter_chat)

    assert_too_many_streams(refused, streams=2)
    assert Message.objects.count() == messages_before
    # A finished stream frees its place.
    assert names(list(sse_events(first.streaming_content)))[-1] == "done"
    third = _open_stream(api_client, matter_chat)
    assert third.status_code == 200
    for response in (second, third):
        list(response.streaming_content)


def test_a_resume_over_the_stream_cap_answers_429_and_leaves_the_turn_interrupted(
    api_client: APIClient, matter_chat: Chat, settings: LazySettings, scripted_backend: Callable[..., Script]
) -> None:
    # Given an interrupted turn, and its user's one allowed stream open (not yet read)
    interrupted = factories.MessageFactory.create(chat=matter_chat, content="Half an", status="interrupted")
    scripted_backend(TextDelta("Answer."), FinalAnswer())
    settings.LQAI_MAX_CONCURRENT_STREAMS = 1
    open_stream = _open_stream(api_client, matter_chat)

    refused = api_client.post(f"/api/chats/{matter_chat.pk}/messages/{interrupted.pk}/resume/")

    assert_too_many_streams(refused, streams=1)
    stored = Message.objects.get(pk=interrupted.pk)
    assert (stored.status, stored.attempt, stored.content) == (
        Message.Status.INTERRUPTED,
        interrupted.attempt,
        "Half an",
    )
    list(open_stream.streaming_content)


def test_a_stream_without_progress_no_longer_counts(
    api_client: APIClient,
    user: User,
    matter_chat: Chat,
    settings: LazySettings,
    scripted_backend: Callable[..., Script],
) -> None:
    settings.LQAI_MAX_CONCURRENT_STREAMS = 1
    scripted_backend(TextDelta("Answer."), FinalAnswer())
    factories.MessageFactory.create(
        chat=matter_chat, author=user, status=Message.Status.STREAMING, finalized_at=None, updated_at=_stale()
    )

    response = _open_stream(api_client, matter_chat)

    assert response.status_code == 200
    list(response.streaming_content)


def test_another_users_streams_do_not_count(
    api_client: APIClient,
    other_user: User,
    matter_chat: Chat,
    settings: LazySettings,
    scripted_backend: Callable[..., Script],
) -> None:
    settings.LQAI_MAX_CONCURRENT_STREAMS = 1
    scripted_backend(TextDelta("Answer."), FinalAnswer())
    factories.MessageFactory.create(
        chat=matter_chat, author=other_user, status=Message.Status.STREAMING, finalized_at=None
    )

    response = _open_stream(api_client, matter_chat)

    assert response.status_code == 200
    list(response.streaming_content)


@pytest.mark.postgres
@pytest.mark.django_db(transaction=True)
def test_concurrent_stream_starts_respect_the_cap(
    committed_matter_chat: tuple[APIClient, Chat], settings: LazySettings, scripted_backend: Callable[..., Script]
) -> None:
    """Eight requests at once, in threads with their own connections (as separate server processes would
    be), for a cap of two: exactly two streams open."""
    settings.LQAI_MAX_CONCURRENT_STREAMS = 2
    scripted_backend(TextDelta("Answer."), FinalAnswer())
    client, chat = committed_matter_chat
    barrier = threading.Barrier(8)

    def start(_: int) -> int:
        try:
            barrier.wait(timeout=10)
            return int(_open_stream(client, chat).status_code)  # opened, never read: it stays `streaming`
        finally:
            connection.close()

    with ThreadPoolExecutor(max_workers=8) as pool:
        statuses = sorted(pool.map(start, range(8), timeout=60))

    assert statuses == [200, 200] + [429] * 6
    assert Message.objects.filter(status=Message.Status.STREAMING).count() == 2


# --- stuck turns --------------------------------------------------------------------------------------------------


def _stale() -> datetime.datetime:
    return timezone.now() - datetime.timedelta(seconds=django_settings.LQAI_STALE_TURN_SECONDS + 1)


@pytest.mark.parametrize("stuck_status", [Message.Status.STREAMING, Message.Status.PENDING])
def test_a_turn_stuck_without_progress_is_resumable(
    api_client: APIClient, matter_chat: Chat, user: User, stuck_status: str, scripted_backend: Callable[..., Script]
) -> None:
    """A worker killed mid-turn leaves it `streaming` (or `pending`) forever; once its progress is older than
    LQAI_STALE_TURN_SECONDS the resume takes it over and finishes it."""
    factories.UserMessageFactory.create(chat=matter_chat, content="strict scrutiny?")
    stuck = factories.MessageFactory.create(
        chat=matter_chat, author=user, content="", status=stuck_status, finalized_at=None, updated_at=_stale()
    )
    scripted_backend(TextDelta("Answer."), FinalAnswer())

    response = resume(api_client, matter_chat, stuck.pk)

    assert response.status_code == 200
    events = list(sse_events(response.streaming_content))
    assert events[-1] == ("done", {**events[-1][1], "status": "complete"})
    stuck.refresh_from_db()
    assert (stuck.status, stuck.content) == ("complete", "Answer.")
    assert stuck.updated_at == stuck.finalized_at


def test_a_turn_with_recent_progress_is_not_resumable(
    api_client: APIClient, matter_chat: Chat, user: User, scripted_backend: Callable[..., Script]
) -> None:
    live = factories.MessageFactory.create(
        chat=matter_chat, author=user, content="", status=Message.Status.STREAMING, finalized_at=None
    )
    scripted_backend(TextDelta("Answer."), FinalAnswer())

    response = api_client.post(f"/api/chats/{matter_chat.pk}/messages/{live.pk}/resume/")

    assert response.status_code == 409
    assert response.json()["status"] == "streaming"
    live.refresh_from_db()
    assert live.status == Message.Status.STREAMING


def test_of_two_resumes_of_a_stuck_turn_one_wins(matter_chat: Chat, user: User) -> None:
    stuck = factories.MessageFactory.create(
        chat=matter_chat, author=user, status=Message.Status.STREAMING, finalized_at=None, updated_at=_stale()
    )

    first = reopen_interrupted_turn(message=Message.objects.get(pk=stuck.pk))
    second = reopen_interrupted_turn(message=Message.objects.get(pk=stuck.pk))

    assert (first, second) == (True, False)


# --- paginated messages -------------------------------------------------------------------------------------------


def test_a_chats_messages_are_read_page_by_page_in_order(
    api_client: APIClient, matter_chat: Chat, settings: LazySettings
) -> None:
    settings.LQAI_PAGE_SIZE = 2
    start = timezone.now()
    created = [
        factories.MessageFactory.create(chat=matter_chat, created_at=start + datetime.timedelta(seconds=i // 2))
        for i in range(5)  # pairs share a timestamp: the id breaks the tie
    ]
    expected = sorted(created, key=lambda m: (m.created_at, str(m.pk)))

    seen: list[str] = []
    url: str | None = f"/api/chats/{matter_chat.pk}/messages/"
    pages = 0
    while url is not None and pages < 10:
        body = api_client.get(url).json()
        assert len(body["results"]) <= 2
        seen += [m["id"] for m in body["results"]]
        url, pages = body["next"], pages + 1

    assert seen == [str(m.pk) for m in expected]
    assert pages == 3


def test_the_schema_says_the_messages_are_cursor_paginated(api_client: APIClient) -> None:
    schema = api_client.get("/api/schema/", HTTP_ACCEPT="application/vnd.oai.openapi+json").json()
    get = schema["paths"]["/api/chats/{chat_id}/messages/"]["get"]
    assert [p["name"] for p in get["parameters"] if p["in"] == "query"] == ["cursor", "page_size"]
    page = get["responses"]["200"]["content"]["application/json"]["schema"]["$ref"].rsplit("/", 1)[-1]
    properties = schema["components"]["schemas"][page]["properties"]
    assert set(properties) == {"count", "page_size", "next", "previous", "results"}
    assert "messages_url" in schema["components"]["schemas"]["ChatDetail"]["properties"]


# --- heartbeats and the maximum stream duration (the backend runs in its own thread) --------------------------------


class GatedBackend:
    """Says a first sentence, then is silent until the test opens the gate or the run cancels it (at most
    10 s), then finishes."""

    gate = threading.Event()

    def __init__(self) -> None:
        self.cancelled = threading.Event()

    def cancel(self) -> None:
        self.cancelled.set()

    def respond(self, turn: Turn) -> Iterator[AssistantEvent]:
        yield TextDelta("Thinking. ")
        deadline = time.monotonic() + 10
        while not (GatedBackend.gate.is_set() or self.cancelled.is_set()) and time.monotonic() < deadline:
            time.sleep(0.01)
        yield TextDelta("Done.")
        yield FinalAnswer()


@pytest.fixture
def gated_backend(settings: LazySettings) -> Iterator[threading.Event]:
    """The assistant is :class:`GatedBackend` and streams are paced (heartbeat 50 ms); yields the gate, and
    afterwards opens it and waits (bounded) until no backend thread is left."""
    settings.LQAI_ASSISTANT_BACKEND = "tests.test_bounded_use.GatedBackend"
    settings.LQAI_SSE_HEARTBEAT_SECONDS = 0.05
    GatedBackend.gate.clear()
    yield GatedBackend.gate
    GatedBackend.gate.set()
    for thread in threading.enumerate():
        if thread.name == "assistant-backend":
            thread.join(timeout=10)
            assert not thread.is_alive(), "the backend thread did not end"


def _frames(response: Any) -> Iterator[bytes]:
    """The raw frames of a stream, comments included."""
    buffer = b""
    for chunk in response.streaming_content:
        buffer += chunk
        while b"\n\n" in buffer:
            frame, buffer = buffer.split(b"\n\n", 1)
            yield frame


def _event_names(frames: list[bytes]) -> list[str]:
    return [frame.split(b"\n", 1)[0].decode().removeprefix("event: ") for frame in frames]


@pytest.mark.django_db(transaction=True)
def test_a_silent_backend_gets_keepalive_comments_and_its_progress_recorded(
    committed_matter_chat: tuple[APIClient, Chat], gated_backend: threading.Event, settings: LazySettings
) -> None:
    settings.LQAI_STALE_TURN_SECONDS = 1  # progress recorded at least every heartbeat
    client, chat = committed_matter_chat
    frames = _frames(stream(client, chat, "strict scrutiny?"))
    start, first_delta = next(frames), next(frames)
    message = Message.objects.get(pk=json.loads(start.split(b"data: ", 1)[1])["message_id"])
    progress_at_start = message.updated_at

    keepalives = [next(frames) for _ in range(3)]  # the backend is silent: each comes after 50 ms
    message.refresh_from_db()
    gated_backend.set()
    rest = list(frames)

    assert b"Thinking." in first_delta
    assert keepalives == [b": keepalive"] * 3
    assert message.updated_at > progress_at_start
    assert message.status == Message.Status.STREAMING
    assert [name for name in _event_names(rest) if name != ": keepalive"] == ["delta", "done"]
    message.refresh_from_db()
    assert (message.status, message.content) == ("complete", "Thinking. Done.")


@pytest.mark.django_db(transaction=True)
def test_a_stream_past_its_maximum_duration_ends_interrupted_and_resumes(
    committed_matter_chat: tuple[APIClient, Chat], gated_backend: threading.Event, settings: LazySettings
) -> None:
    settings.LQAI_MAX_STREAM_SECONDS = 0.3
    client, chat = committed_matter_chat

    started = time.monotonic()
    events = list(sse_events(stream(client, chat, "strict scrutiny?").streaming_content))  # type: ignore[arg-type]
    elapsed = time.monotonic() - started

    assert names(events) == ["start", "delta", "error", "done"]
    assert events[2][1]["code"] == "stream_timeout"
    assert events[3][1]["status"] == "interrupted"
    assert 0.3 <= elapsed < 5
    message = Message.objects.get(pk=events[0][1]["message_id"])
    assert (message.status, message.content) == ("interrupted", "Thinking. ")

    gated_backend.set()
    resumed = list(sse_events(resume(client, chat, message.pk).streaming_content))

    assert resumed[-1][1]["status"] == "complete"
    message.refresh_from_db()
    assert message.status == Message.Status.COMPLETE


@pytest.mark.django_db(transaction=True)
def test_a_disconnect_while_the_backend_is_silent_interrupts_the_turn_at_once(
    committed_matter_chat: tuple[APIClient, Chat], gated_backend: threading.Event
) -> None:
    client, chat = committed_matter_chat
    response = stream(client, chat, "strict scrutiny?")
    frames = _frames(response)
    start = next(frames)
    next(frames)  # the first delta; the backend now waits at its gate

    started = time.monotonic()
    response.close()

    assert time.monotonic() - started < 2  # the gate is still shut: the close did not wait for the backend
    message = Message.objects.get(pk=json.loads(start.split(b"data: ", 1)[1])["message_id"])
    assert (message.status, message.content) == ("interrupted", "Thinking. ")


@pytest.mark.django_db(transaction=True)
def test_a_backend_failure_in_its_thread_ends_the_turn_failed(
    committed_matter_chat: tuple[APIClient, Chat], settings: LazySettings, scripted_backend: Callable[..., Script]
) -> None:
    settings.LQAI_SSE_HEARTBEAT_SECONDS = 0.05
    scripted_backend(TextDelta("Half"), RuntimeError("model down"))
    client, chat = committed_matter_chat

    events = list(sse_events(stream(client, chat, "strict scrutiny?").streaming_content))  # type: ignore[arg-type]

    assert names(events) == ["start", "delta", "error", "done"]
    assert events[-1][1]["status"] == "failed"


def test_an_unpaced_run_records_its_progress_between_events(
    matter_chat: Chat, user: User, scripted_backend: Callable[..., Script]
) -> None:
    scripted_backend(TextDelta("One. "), TextDelta("Two."), FinalAnswer())
    _, message = start_turn(chat=matter_chat, content="q", author=user)
    Message.objects.filter(pk=message.pk).update(updated_at=_stale())
    run = TurnRun(message=message, backend=ScriptedBackend(), tools={}, progress_every=0)

    assert next(run) == TextDelta("One. ")

    message.refresh_from_db()
    assert message.status == Message.Status.PENDING
    assert message.updated_at > _stale()
    assert not reopen_interrupted_turn(message=message)  # alive: not taken over
    run.run_to_end()
    message.refresh_from_db()
    assert (message.status, message.content) == ("complete", "One. Two.")
