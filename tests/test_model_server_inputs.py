"""What a model server may send that must still end the turn well, against the fake server
(tests/fake_openai.py): a 200 that is not an event stream, a server that does not stream at all, NUL bytes
and lone surrogates in the text and the claims; and the ``openai`` package's own retries (configured, each
attempt recording the turn's progress) and its stream, shut when the run stops."""

from __future__ import annotations

import itertools
import json
import threading
import time
from collections.abc import Mapping
from typing import Any

import pytest
from django.conf import LazySettings
from rest_framework.test import APIClient

from chats.assistant import OpenAICompatibleBackend, OpenAICompatibleConfig, TurnRun
from chats.assistant.events import HistoryEntry, TextDelta, Turn
from chats.assistant.openai_compatible import _client
from chats.models import Chat, DocumentQuote, Message
from chats.services import start_turn
from chats.tools import ToolOutput
from tests.fake_openai import FakeOpenAIServer, Json, Status, Stream, answer, cite, completion, tool_round
from tests.test_openai_backend import KB_QUOTE, streamed
from tests.test_streaming import QUESTION, names

pytestmark = pytest.mark.django_db


def _single_shot(client: APIClient, chat: Chat) -> object:
    return client.post(f"/api/chats/{chat.pk}/messages/", {"content": QUESTION}, format="json")


# --- a 200 that is not an event stream ------------------------------------------------------------------------


def test_a_200_with_json_instead_of_an_event_stream_fails_the_single_shot_turn_with_a_502(
    api_client: APIClient, matter_chat: Chat, fake_openai: FakeOpenAIServer
) -> None:
    fake_openai.respond(completion("An answer the client asked to be streamed."))

    response = _single_shot(api_client, matter_chat)

    assert response.status_code == 502  # type: ignore[attr-defined]
    body = response.json()  # type: ignore[attr-defined]
    assert "not an event stream" in body["detail"]
    assert "LQAI_OPENAI_STREAM=false" in body["detail"]
    message = Message.objects.get(pk=body["message_id"])
    assert (message.status, message.content) == (Message.Status.FAILED, "")
    assert len(fake_openai.requests) == 1  # a wrong kind of answer is not retried


def test_a_200_that_is_not_an_event_stream_ends_a_streamed_turn_failed_with_an_error_event(
    api_client: APIClient, matter_chat: Chat, fake_openai: FakeOpenAIServer
) -> None:
    fake_openai.respond(Json({"unexpected": "body"}))

    events = streamed(api_client, matter_chat)

    assert names(events) == ["start", "error", "done"]
    assert "not an event stream" in events[1][1]["detail"]
    assert events[-1][1]["status"] == "failed"


# --- chunks of the wrong shape --------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "chunk",
    [
        {"choices": "abc"},
        {"choices": [5]},
        {"choices": [{"delta": "text"}]},
        {"choices": [{"delta": {"content": 5}}]},
        {"choices": [{"delta": {"tool_calls": {"index": 0}}}]},
        {"choices": [{"delta": {"tool_calls": [{"index": 0, "function": "cite"}]}}]},
        {"choices": [{"delta": {"tool_calls": [{"index": 0, "function": {"arguments": ["x"]}}]}}]},
        {"choices": [{"delta": {}, "finish_reason": 7}]},
        {"choices": [], "usage": {"prompt_tokens": "12", "completion_tokens": 3}},
        {"choices": [], "model": ["m"]},
    ],
)
def test_a_chunk_that_is_no_completion_chunk_fails_the_turn_saying_so(
    api_client: APIClient, matter_chat: Chat, fake_openai: FakeOpenAIServer, chunk: dict[str, Any]
) -> None:
    """Valid JSON of the wrong shape: the turn fails with a reason a reader can act on, not an internal error."""
    fake_openai.respond(Stream([{"id": "x", "object": "chat.completion.chunk", "model": "m", **chunk}]))

    response = _single_shot(api_client, matter_chat)

    assert response.status_code == 502  # type: ignore[attr-defined]
    body = response.json()  # type: ignore[attr-defined]
    assert "not a chat completion chunk" in body["detail"], body["detail"]
    assert Message.objects.get(pk=body["message_id"]).status == Message.Status.FAILED


# --- a server that does not stream ----------------------------------------------------------------------------


def test_a_server_that_does_not_stream_is_supported_by_a_setting(
    api_client: APIClient, matter_chat: Chat, fake_openai: FakeOpenAIServer, settings: LazySettings
) -> None:
    # Given a server answering each request with one JSON completion: a cite round, then the answer
    settings.LQAI_OPENAI_STREAM = False
    fake_openai.respond(
        completion(calls=[cite("call_1", "S1", KB_QUOTE)], prompt_tokens=40, completion_tokens=4),
        completion(f'The memo: "{KB_QUOTE}"', prompt_tokens=60, completion_tokens=16),
    )

    response = _single_shot(api_client, matter_chat)

    # Then the turn completes with its verified quote and the usage of both requests
    assert response.status_code == 201, response.content  # type: ignore[attr-defined]
    message = Message.objects.get(pk=response.json()["message"]["id"])  # type: ignore[attr-defined]
    assert (message.status, message.content) == (Message.Status.COMPLETE, f'The memo: "{KB_QUOTE}"')
    assert (message.prompt_tokens, message.completion_tokens) == (100, 20)
    (citation,) = message.citations.all()
    assert citation.quote == KB_QUOTE
    assert all("stream" not in request or request["stream"] is False for request in fake_openai.requests)


# --- NUL and lone surrogates --------------------------------------------------------------------------------


def test_nul_bytes_and_lone_surrogates_from_the_model_are_sanitized_and_the_single_shot_turn_completes(
    api_client: APIClient, matter_chat: Chat, fake_openai: FakeOpenAIServer
) -> None:
    # Given a model whose text holds a NUL and a lone surrogate, and whose claim does too
    fake_openai.respond(
        tool_round(cite("call_1", "S1", KB_QUOTE + "\x00")),
        answer("Strict\x00 scrutiny \ud800applies."),
    )

    response = _single_shot(api_client, matter_chat)

    # Then the turn completes: NUL dropped, the surrogate replaced, the claim verified
    assert response.status_code == 201, response.content  # type: ignore[attr-defined]
    message = Message.objects.get(pk=response.json()["message"]["id"])  # type: ignore[attr-defined]
    assert (message.status, message.content) == (Message.Status.COMPLETE, "Strict scrutiny \ufffdapplies.")
    assert DocumentQuote.objects.get(message=message).quote == KB_QUOTE


def test_lone_surrogates_in_a_stream_reach_the_client_replaced(
    api_client: APIClient, matter_chat: Chat, fake_openai: FakeOpenAIServer
) -> None:
    fake_openai.respond(answer("Half \udc00 a pair\x00."))

    events = streamed(api_client, matter_chat)

    assert "".join(data["text"] for name, data in events if name == "delta") == "Half \ufffd a pair."
    assert events[-1][1]["status"] == "complete"


# --- the package's own retries -------------------------------------------------------------------------------


def test_the_client_retries_with_the_packages_own_retries_as_configured(
    fake_openai: FakeOpenAIServer, settings: LazySettings
) -> None:
    settings.LQAI_OPENAI_MAX_RETRIES = 4

    assert _client(OpenAICompatibleConfig.from_settings()).max_retries == 4


def test_each_attempt_of_a_request_records_the_turns_progress(matter_chat: Chat, fake_openai: FakeOpenAIServer) -> None:
    # Given a server that fails twice (asking for a retry after 200 ms) before it answers
    fake_openai.respond(
        Status(503, {"retry-after-ms": "200"}), Status(429, {"retry-after-ms": "200"}), answer("At last.")
    )
    attempts: list[float] = []
    turn = Turn(
        chat=matter_chat,
        history=(HistoryEntry(role="user", content=QUESTION),),
        progress=lambda: attempts.append(time.monotonic()),
    )

    events = list(OpenAICompatibleBackend().respond(turn))

    # Then the run heard from the backend at each of the three attempts, while it waited between them
    assert [e.text for e in events if isinstance(e, TextDelta)] == ["At ", "last."]
    assert len(attempts) == 3
    assert all(later - earlier >= 0.15 for earlier, later in itertools.pairwise(attempts))


# --- the stream is shut when the run stops ------------------------------------------------------------------


@pytest.mark.django_db(transaction=True)
def test_a_disconnect_mid_answer_shuts_the_models_stream_and_joins_the_backends_thread(
    committed_matter_chat: tuple[APIClient, Chat], fake_openai: FakeOpenAIServer, settings: LazySettings
) -> None:
    # Given a model that says a few words, then stalls for 30 s (its read timeout is longer)
    settings.LQAI_SSE_HEARTBEAT_SECONDS = 0.05
    settings.LQAI_OPENAI_TIMEOUT = 60.0
    fake_openai.respond(Stream(answer("one two three four five").chunks, stall_after=3, stall_seconds=30))
    client, chat = committed_matter_chat
    response = client.post(
        f"/api/chats/{chat.pk}/messages/stream/", {"content": QUESTION}, format="json", HTTP_ACCEPT="text/event-stream"
    )
    body = iter(response.streaming_content)  # type: ignore[attr-defined]
    seen = b""
    deadline = time.monotonic() + 10
    while b"two" not in seen and time.monotonic() < deadline:
        seen += next(body)
    assert b"two" in seen

    # When the client goes away
    started = time.monotonic()
    response.close()
    elapsed = time.monotonic() - started

    # Then the close shut the stream and the backend's thread ended with it, well before the model's stall
    assert elapsed < 3
    assert not [t for t in threading.enumerate() if t.name == "assistant-backend" and t.is_alive()]
    message = Message.objects.get(chat=chat, role=Message.Role.ASSISTANT)
    assert (message.status, message.content) == (Message.Status.INTERRUPTED, "one two ")


def test_a_turn_stopped_before_its_request_makes_none(matter_chat: Chat, fake_openai: FakeOpenAIServer) -> None:
    _, message = start_turn(chat=matter_chat, content=QUESTION, assistant_status=Message.Status.STREAMING)
    backend = OpenAICompatibleBackend()
    backend.cancel()

    result = TurnRun(message=message, backend=backend, tools={}).run_to_end()

    assert result.message.status == Message.Status.INTERRUPTED
    assert fake_openai.requests == []


def test_the_worst_case_of_one_request_counts_every_attempt_and_the_longest_wait(settings: LazySettings) -> None:
    import openai._constants  # the package's own bound, read (never changed) to keep ours honest

    settings.LQAI_OPENAI_BASE_URL = "http://127.0.0.1:1/v1"
    settings.LQAI_OPENAI_MODEL = "m"
    settings.LQAI_OPENAI_TIMEOUT = 10.0
    settings.LQAI_OPENAI_MAX_RETRIES = 2

    wait = OpenAICompatibleBackend.worst_case_wait_seconds()

    assert wait >= 10.0 * 3 + 2 * openai._constants.MAX_RETRY_AFTER_DELAY
    assert json.dumps(wait)  # a plain number, for the start-up check's message


def test_a_server_asking_to_wait_longer_than_the_package_honours_fails_at_once_and_says_so(
    api_client: APIClient, matter_chat: Chat, fake_openai: FakeOpenAIServer
) -> None:
    # The package does not retry a Retry-After above its bound: the error counts the one attempt made.
    fake_openai.respond(Status(429, {"retry-after": "3600"}), answer("never sent"))

    events = streamed(api_client, matter_chat)

    assert "failed 1 time(s): HTTP 429" in events[1][1]["detail"]
    assert len(fake_openai.requests) == 1


class ProbeTool:
    """Records the arguments it is run with."""

    name = "probe"
    description = "Records its arguments."
    parameters: Mapping[str, Any] = {"type": "object", "properties": {"query": {"type": "string"}}}

    def __init__(self) -> None:
        self.received: list[Mapping[str, Any]] = []

    def run(self, arguments: Mapping[str, Any]) -> ToolOutput:
        self.received.append(arguments)
        return ToolOutput(payload={"results": []})


def test_a_nul_or_lone_surrogate_in_the_models_tool_arguments_never_reaches_the_tool(
    matter_chat: Chat, fake_openai: FakeOpenAIServer
) -> None:
    search = json.dumps({"query": "strict\x00 scrutiny\ud800"})
    fake_openai.respond(tool_round(("call_1", "probe", search)), answer("Found it."))
    probe = ProbeTool()
    turn = Turn(chat=matter_chat, history=(HistoryEntry(role="user", content=QUESTION),), tools={"probe": probe})

    list(OpenAICompatibleBackend().respond(turn))

    assert probe.received == [{"query": "strict scrutiny\ufffd"}]
