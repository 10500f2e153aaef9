"""What a hostile or broken model server may send that must still end the turn, finalized once, with a clear
answer and bounded memory: through the real HTTP views and the fake server (tests/fake_openai.py). Token counts
no column holds, a connection kept alive without an answer, tool calls and events that never end."""

from __future__ import annotations

import gzip
from typing import Any

import httpx2
import pytest
from django.conf import LazySettings
from rest_framework.test import APIClient

from chats import services
from chats.assistant.backends import BackendError
from chats.assistant.bounded_body import BoundedBody
from chats.models import Chat, Message
from tests.fake_openai import FakeOpenAIServer, Stream, _chunk, answer, completion, finish, text_chunks
from tests.test_streaming import QUESTION

pytestmark = pytest.mark.django_db


def _single_shot(client: APIClient, chat: Chat, content: str = QUESTION) -> Any:
    return client.post(f"/api/chats/{chat.pk}/messages/", {"content": content}, format="json")


def _with_usage(prompt_tokens: int, completion_tokens: int) -> Stream:
    return Stream(
        [*text_chunks("Strict scrutiny applies."), *finish("stop")[:1], _usage(prompt_tokens, completion_tokens)]
    )


def _usage(prompt_tokens: int, completion_tokens: int) -> dict[str, Any]:
    chunk = finish("stop")[1]
    chunk["usage"] = {"prompt_tokens": prompt_tokens, "completion_tokens": completion_tokens, "total_tokens": 0}
    return chunk


# --- usage figures the message's columns cannot hold -----------------------------------------------------------


@pytest.mark.parametrize(
    ("prompt_tokens", "completion_tokens", "stored"),
    [(-5, 20, (None, 20)), (100, 2**63, (100, None)), (10**30, 1, (None, 1))],
)
def test_usage_figures_out_of_range_still_complete_the_turn(
    api_client: APIClient,
    matter_chat: Chat,
    fake_openai: FakeOpenAIServer,
    prompt_tokens: int,
    completion_tokens: int,
    stored: tuple[int | None, int | None],
) -> None:
    # Given a model server reporting token counts no column can hold (negative, or past the column's range)
    fake_openai.respond(_with_usage(prompt_tokens, completion_tokens))

    # When a single-shot turn runs
    response = _single_shot(api_client, matter_chat)

    # Then the answer is recorded complete; the figures that cannot be true are not stored
    assert response.status_code == 201, response.content
    message = Message.objects.get(pk=response.json()["message"]["id"])
    assert (message.status, message.content) == (Message.Status.COMPLETE, "Strict scrutiny applies.")
    assert message.finalized_at is not None
    assert (message.prompt_tokens, message.completion_tokens) == stored


def test_a_turn_whose_finalize_breaks_on_its_usage_is_still_saved_failed(
    api_client: APIClient, matter_chat: Chat, fake_openai: FakeOpenAIServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Given usage that breaks finalize (counts stored unchecked, as before they were fitted to their columns)
    monkeypatch.setattr(services, "fit_count", lambda model, field, value: value)
    fake_openai.respond(_with_usage(-5, 20))

    response = _single_shot(api_client, matter_chat)

    # Then the fallback saves the turn failed with its text, without what broke it: a 502, not "not saved"
    assert response.status_code == 502, response.content
    message = Message.objects.get(pk=response.json()["message_id"])
    assert (message.status, message.content) == (Message.Status.FAILED, "Strict scrutiny applies.")
    assert (message.prompt_tokens, message.completion_tokens) == (None, None)


# --- a model server that drips --------------------------------------------------------------------------------


@pytest.mark.django_db(transaction=True)
def test_a_single_shot_turn_against_a_dripping_model_ends_at_the_turns_time_limit(
    committed_matter_chat: tuple[APIClient, Chat], fake_openai: FakeOpenAIServer, settings: LazySettings
) -> None:
    # Given a model server that sends an SSE comment every 0.1 s, each well within the read timeout, for 6 s
    # before its answer: no read ever times out, and the package shows the run no event meanwhile
    settings.LQAI_SSE_HEARTBEAT_SECONDS = 0.05
    settings.LQAI_MAX_STREAM_SECONDS = 1
    settings.LQAI_OPENAI_TIMEOUT = 2.0
    fake_openai.respond(Stream(answer("A late answer.").chunks, raw_frames=(b": ping\n\n",) * 60, chunk_seconds=0.1))
    client, chat = committed_matter_chat

    # When a single-shot turn runs
    response = _single_shot(client, chat)

    # Then it stops at the turns' time limit with a clear error; the turn is saved interrupted (resumable)
    assert response.status_code == 504, response.content
    assert response.json()["code"] == "turn_timeout"
    message = Message.objects.get(pk=response.json()["message_id"])
    assert (message.status, message.content) == (Message.Status.INTERRUPTED, "")
    assert message.finalized_at is not None


# --- tool calls that never end ----------------------------------------------------------------------------------


def test_a_tool_call_whose_arguments_outgrow_the_answers_limit_fails_the_turn_and_is_not_sent_back(
    api_client: APIClient, matter_chat: Chat, fake_openai: FakeOpenAIServer, settings: LazySettings
) -> None:
    # Given a model that streams one tool call's arguments in 300 pieces of 1,000 characters, past the bound
    settings.LQAI_MAX_ANSWER_CHARS = 10_000
    head = {"index": 0, "id": "call_1", "type": "function", "function": {"name": "cite", "arguments": ""}}
    piece = {"index": 0, "function": {"arguments": "x" * 1000}}
    chunks = [_chunk({"role": "assistant", "tool_calls": [head]}), *[_chunk({"tool_calls": [piece]})] * 300]
    fake_openai.respond(Stream([*chunks, *finish("tool_calls")]))

    # When a single-shot turn runs
    response = _single_shot(api_client, matter_chat)

    # Then the turn fails, saying why, and what the model sent is never sent back to it
    assert response.status_code == 502, response.content
    assert "LQAI_MAX_ANSWER_CHARS" in response.json()["detail"]
    assert Message.objects.get(pk=response.json()["message_id"]).status == Message.Status.FAILED
    assert len(fake_openai.requests) == 1


# --- an enormous event --------------------------------------------------------------------------------------------


def test_a_model_response_past_its_byte_bound_fails_the_turn_at_the_bound(
    api_client: APIClient, matter_chat: Chat, fake_openai: FakeOpenAIServer, settings: LazySettings
) -> None:
    # Given a model server that sends one event of 2 MB (the package reads an event whole, without a size limit:
    # an endless line would be held in memory until the turn's time limit)
    settings.LQAI_OPENAI_MAX_RESPONSE_BYTES = 1_000_000
    enormous = b'data: {"choices": [{"index": 0, "delta": {"content": "' + b"x" * 2_000_000 + b'"}}]}\n\n'
    fake_openai.respond(Stream(answer("Hello.").chunks, raw_frames=(enormous,)))

    # When a single-shot turn runs
    response = _single_shot(api_client, matter_chat)

    # Then the turn fails at the bound, naming the setting
    assert response.status_code == 502, response.content
    assert "LQAI_OPENAI_MAX_RESPONSE_BYTES" in response.json()["detail"]
    message = Message.objects.get(pk=response.json()["message_id"])
    assert (message.status, message.content) == (Message.Status.FAILED, "")


def test_a_whole_completion_past_the_byte_bound_fails_the_turn_naming_the_setting(
    api_client: APIClient, matter_chat: Chat, fake_openai: FakeOpenAIServer, settings: LazySettings
) -> None:
    # Given a server that does not stream, answering a completion of 2 MB (read whole by the package)
    settings.LQAI_OPENAI_STREAM = False
    settings.LQAI_OPENAI_MAX_RETRIES = 0
    settings.LQAI_OPENAI_MAX_RESPONSE_BYTES = 1_000_000
    fake_openai.respond(completion("x" * 2_000_000))

    response = _single_shot(api_client, matter_chat)

    assert response.status_code == 502, response.content
    assert "LQAI_OPENAI_MAX_RESPONSE_BYTES" in response.json()["detail"]
    assert Message.objects.get(pk=response.json()["message_id"]).status == Message.Status.FAILED


def test_a_body_sent_compressed_though_asked_not_to_is_refused_as_it_is_read() -> None:
    gzipped = httpx2.ByteStream(gzip.compress(b"data: [DONE]\n\n"))

    with pytest.raises(BackendError, match="compressed"):
        list(BoundedBody(gzipped, max_bytes=1_000_000, encoding="gzip"))
    assert list(BoundedBody(httpx2.ByteStream(b"data"), max_bytes=4, encoding="identity")) == [b"data"]
