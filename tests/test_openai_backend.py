"""The OpenAI-compatible backend against a fake chat-completions server on 127.0.0.1 (tests/fake_openai.py)
replaying streamed chunks: turns driven through the HTTP API (single-shot, streamed, resumed) and directly,
its failures, its usage, its start-up checks, and its ledger next to the extractive backend's."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from django.conf import LazySettings
from django.core.exceptions import ImproperlyConfigured
from rest_framework.test import APIClient

from chats.apps import check_assistant_backend
from chats.assistant import OpenAICompatibleBackend, OpenAICompatibleConfig, TextDelta, ToolCall, TurnRun
from chats.assistant.openai_compatible import _client
from chats.models import CaselawOpinion, Chat, Message
from chats.services import start_turn
from chats.tools import default_tools
from citations.models import CitationLedgerEntry
from tests import factories
from tests.fake_openai import MODEL, FakeOpenAIServer, Stall, Status, Stream, answer, cite, tool_round
from tests.test_streaming import QUESTION, Event, names, resume, sse_events, stream

pytestmark = pytest.mark.django_db

ROOT = Path(__file__).resolve().parent.parent
# Verbatim sentences of the KB document (factories.TEXT) and of the Fisher slip opinion (local_opinion).
KB_QUOTE = "The Equal Protection Clause requires that a racial classification survive strict scrutiny."
OPINION_QUOTE = "Strict scrutiny is a searching examination"
NOT_IN_KB = "The Equal Protection Clause forbids every racial classification."


def streamed(client: APIClient, chat: Chat, content: str = QUESTION) -> list[Event]:
    return list(sse_events(stream(client, chat, content).streaming_content))  # type: ignore[arg-type]


def done(events: list[Event]) -> dict[str, Any]:
    assert names(events)[-1] == "done", names(events)
    return events[-1][1]


def tool_messages(request: dict[str, Any]) -> list[dict[str, Any]]:
    return [json.loads(m["content"]) for m in request["messages"] if m["role"] == "tool"]


def ledger_shape(message_id: Any) -> list[tuple[str, str, str | None]]:
    return sorted(
        CitationLedgerEntry.objects.filter(message_id=message_id).values_list(
            "source_kind", "verification_status", "provider"
        )
    )


# --- Plain answers ----------------------------------------------------------------------------------------


def test_single_shot_turn_streams_the_model_answer_with_the_matter_passages_in_the_prompt(
    api_client: APIClient, matter_chat: Chat, fake_openai: FakeOpenAIServer
) -> None:
    fake_openai.respond(
        tool_round(cite("call_a", "S1", KB_QUOTE), text="The memo says: "),
        answer(f'"{KB_QUOTE}"', prompt_tokens=300, completion_tokens=40),
    )

    response = api_client.post(f"/api/chats/{matter_chat.pk}/messages/", {"content": QUESTION}, format="json")

    assert response.status_code == 201, response.content
    body = response.json()
    message = body["message"]
    assert message["status"] == "complete"
    assert message["content"] == f'The memo says: "{KB_QUOTE}"'
    assert [(c["kind"], c["quote"], c["method"]) for c in message["citations"]] == [
        ("kb_document", KB_QUOTE, "exact_match")
    ]
    assert message["unverified_citations"] == []
    # Usage: summed over both requests (100 + 300 prompt, 20 + 40 completion), with the model's own name.
    assert (message["model_name"], message["prompt_tokens"], message["completion_tokens"]) == (MODEL, 400, 60)
    assert message["latency_ms"] is not None
    assert message["latency_ms"] >= 0
    first = fake_openai.requests[0]
    assert first["model"] == MODEL
    assert first["stream"] is True
    assert first["stream_options"] == {"include_usage": True}
    # Single-shot turns have no tools: only the claim tool is offered.
    assert [t["function"]["name"] for t in first["tools"]] == ["cite"]
    system, user = first["messages"]
    assert system["role"] == "system"
    assert "[S1] Strict scrutiny memo" in system["content"]
    assert KB_QUOTE in system["content"]
    assert user == {"role": "user", "content": QUESTION}
    # The claim was acknowledged to the model in the second request.
    assert tool_messages(fake_openai.requests[1]) == [{"ok": True}]


def test_streamed_text_deltas_become_delta_events_in_order(
    api_client: APIClient, matter_chat: Chat, fake_openai: FakeOpenAIServer
) -> None:
    text = "Nothing in the matter's documents answers that directly."
    fake_openai.respond(answer(text))

    events = streamed(api_client, matter_chat)

    deltas = [data["text"] for name, data in events if name == "delta"]
    assert len(deltas) == len(text.split(" "))
    assert "".join(deltas) == text
    assert done(events)["status"] == "complete"
    assert Message.objects.get(pk=done(events)["message_id"]).content == text


# --- Tools and claims -------------------------------------------------------------------------------------


def test_tool_calls_over_several_rounds_are_run_reported_and_their_opinions_become_citable(
    api_client: APIClient,
    matter_chat: Chat,
    local_opinion: CaselawOpinion,
    fake_openai: FakeOpenAIServer,
) -> None:
    search = json.dumps({"query": "race-neutral alternative strict scrutiny"})
    fake_openai.respond(
        tool_round(("call_1", "caselaw_search", search)),
        tool_round(("call_2", "caselaw_search", json.dumps({"query": "strict in theory fatal in fact"}))),
        tool_round(
            cite("call_3", "S1", KB_QUOTE),
            cite("call_4", "C1", OPINION_QUOTE),
            text="Under the memo and Fisher, ",
        ),
        answer("strict scrutiny applies."),
    )

    events = streamed(api_client, matter_chat)

    assert names(events)[:5] == ["start", "tool_call", "tool_result", "tool_call", "tool_result"]
    assert events[1][1] == {"call_id": "call_1", "tool": "caselaw_search", "arguments": json.loads(search)}
    assert events[2][1]["result"]["results"][0]["opinion_id"] == str(local_opinion.pk)
    # The claim tool is the claim channel: no tool events for it.
    assert [data["tool"] for name, data in events if name == "tool_call"] == ["caselaw_search", "caselaw_search"]
    summary = done(events)
    assert summary["status"] == "complete"
    assert summary["citation_count"] == 2
    assert summary["unverified_citations"] == []
    message = Message.objects.get(pk=summary["message_id"])
    assert message.content == "Under the memo and Fisher, strict scrutiny applies."
    assert list(message.caselaw_citations.values_list("opinion_id", "quote")) == [(local_opinion.pk, OPINION_QUOTE)]
    assert list(message.citations.values_list("quote", flat=True)) == [KB_QUOTE]
    # The model read the opinion under its source id; the same opinion found twice keeps it.
    assert len(fake_openai.requests) == 4
    assert [t["function"]["name"] for t in fake_openai.requests[0]["tools"]] == ["caselaw_search", "cite"]
    (first_search,) = tool_messages(fake_openai.requests[1])
    assert first_search["results"][0]["source_id"] == "C1"
    assert first_search["results"][0]["opinion_id"] == str(local_opinion.pk)
    second = tool_messages(fake_openai.requests[2])[1]
    assert second["results"][0]["source_id"] == "C1"
    assistant_calls = [m for m in fake_openai.requests[1]["messages"] if m["role"] == "assistant"]
    assert assistant_calls[0]["tool_calls"][0]["function"] == {"name": "caselaw_search", "arguments": search}
    assert ("caselaw", "exact_match", "local") in ledger_shape(message.pk)
    assert ("caselaw", "provenance", "local") in ledger_shape(message.pk)


def test_claims_that_do_not_verify_and_unknown_sources_are_recorded_unverified(
    api_client: APIClient,
    matter_chat: Chat,
    local_opinion: CaselawOpinion,
    fake_openai: FakeOpenAIServer,
) -> None:
    fake_openai.respond(
        tool_round(
            cite("call_1", "S1", NOT_IN_KB),
            cite("call_2", "S9", KB_QUOTE),  # a source the turn never provided
            cite("call_3", str(local_opinion.pk), OPINION_QUOTE),  # an opinion no tool returned in this turn
            cite("call_4", "S1", KB_QUOTE),
        ),
        answer("Done."),
    )

    events = streamed(api_client, matter_chat)

    summary = done(events)
    assert summary["status"] == "complete"
    assert summary["citation_count"] == 1
    assert sorted((u["quote"], u["reason"]) for u in summary["unverified_citations"]) == sorted(
        [
            (NOT_IN_KB, "not found in the document"),
            (KB_QUOTE, "unknown source 'S9': not a source of this turn"),
            (OPINION_QUOTE, f"unknown source '{local_opinion.pk}': not a source of this turn"),
        ]
    )
    assert summary["verdict"] == "fail"
    message = Message.objects.get(pk=summary["message_id"])
    verified = message.citations.exclude(verification_method="unverified")
    assert list(verified.values_list("quote", flat=True)) == [KB_QUOTE]
    # The failed claims are recorded, the unknown sources naming no row
    failed = message.citations.filter(verification_method="unverified")
    assert sorted(failed.values_list("quote", "document_id")) == sorted(
        [(NOT_IN_KB, verified.get().document_id), (KB_QUOTE, None), (OPINION_QUOTE, None)]
    )
    assert not message.caselaw_citations.exists()
    assert ledger_shape(message.pk) == sorted(
        [("kb_document", "exact_match", None)] + [("kb_document", "unverified", None)] * 3
    )
    # The model was told which claims named no source of the turn.
    replies = tool_messages(fake_openai.requests[1])
    assert replies[0] == {"ok": True}
    assert "unknown source_id 'S9'" in replies[1]["error"]
    assert "unknown source_id" in replies[2]["error"]
    assert replies[3] == {"ok": True}


def test_malformed_tool_arguments_are_answered_to_the_model_as_a_tool_error_and_nothing_runs(
    api_client: APIClient, matter_chat: Chat, fake_openai: FakeOpenAIServer
) -> None:
    fake_openai.respond(
        tool_round(
            ("call_1", "caselaw_search", '{"query": "strict scru'),
            ("call_2", "caselaw_search", '["not", "an", "object"]'),
            ("call_3", "no_such_tool", "{}"),
            ("call_4", "cite", '{"source_id": "S1"}'),
        ),
        answer("I could not search."),
    )

    events = streamed(api_client, matter_chat)

    assert "tool_call" not in names(events)
    assert done(events)["status"] == "complete"
    errors = [reply["error"] for reply in tool_messages(fake_openai.requests[1])]
    assert len(errors) == 4
    assert "must be a JSON object" in errors[0]
    assert "must be a JSON object" in errors[1]
    assert "no tool named 'no_such_tool'" in errors[2]
    assert "cite needs a source_id and a non-empty quote" in errors[3]
    # Each error answers its own call.
    ids = [m["tool_call_id"] for m in fake_openai.requests[1]["messages"] if m["role"] == "tool"]
    assert ids == ["call_1", "call_2", "call_3", "call_4"]


def test_a_tool_loop_that_does_not_end_fails_the_turn_at_the_round_cap(
    api_client: APIClient, matter_chat: Chat, fake_openai: FakeOpenAIServer, settings: LazySettings
) -> None:
    settings.LQAI_OPENAI_MAX_TOOL_ROUNDS = 2
    search = json.dumps({"query": "scrutiny"})
    fake_openai.respond(*(tool_round((f"call_{n}", "caselaw_search", search)) for n in range(5)))

    events = streamed(api_client, matter_chat)

    assert names(events).count("tool_call") == 2
    error = next(data for name, data in events if name == "error")
    assert "LQAI_OPENAI_MAX_TOOL_ROUNDS" in error["detail"]
    assert done(events)["status"] == "failed"
    assert len(fake_openai.requests) == 3
    assert Message.objects.get(pk=done(events)["message_id"]).prompt_tokens == 300


def test_a_round_of_many_tool_calls_runs_at_most_the_turns_budget_and_the_model_is_told_to_answer(
    api_client: APIClient, matter_chat: Chat, fake_openai: FakeOpenAIServer, settings: LazySettings
) -> None:
    """One round may hold any number of calls: each search may reach CourtListener and records its sources, so a
    turn runs at most LQAI_OPENAI_MAX_TOOL_CALLS of them; the rest are answered to the model as a tool error
    (nothing run), and it answers from what it has."""
    settings.LQAI_OPENAI_MAX_TOOL_CALLS = 3
    calls = [(f"call_{n}", "caselaw_search", json.dumps({"query": f"scrutiny {n}"})) for n in range(40)]
    fake_openai.respond(tool_round(*calls), answer("Answered from what was found."))

    events = streamed(api_client, matter_chat)

    assert names(events).count("tool_call") == 3
    assert done(events)["status"] == "complete"
    refused = [m for m in tool_messages(fake_openai.requests[1]) if "LQAI_OPENAI_MAX_TOOL_CALLS" in m.get("error", "")]
    assert len(refused) == 37
    assert len(tool_messages(fake_openai.requests[1])) == 40  # every call answered, as the protocol requires


# --- Failures ---------------------------------------------------------------------------------------------


def test_a_429_is_retried_after_the_servers_retry_after_then_the_turn_completes(
    api_client: APIClient, matter_chat: Chat, fake_openai: FakeOpenAIServer
) -> None:
    fake_openai.respond(Status(429, {"retry-after-ms": "20"}, "Rate limit reached"), answer("Answered."))

    events = streamed(api_client, matter_chat)

    assert done(events)["status"] == "complete"
    assert "error" not in names(events)
    assert len(fake_openai.requests) == 2


@pytest.mark.parametrize(
    ("status", "cause"),
    [(Status(429, {"retry-after": "0"}), "HTTP 429"), (Status(500), "HTTP 500"), (Status(503), "HTTP 503")],
)
def test_429_or_5xx_until_the_retry_bound_fails_the_turn_with_a_clear_error(
    api_client: APIClient, matter_chat: Chat, fake_openai: FakeOpenAIServer, status: Status, cause: str
) -> None:
    fake_openai.respond(*[status] * 5)

    events = streamed(api_client, matter_chat)

    assert names(events) == ["start", "error", "done"]
    detail = events[1][1]["detail"]
    assert "failed 3 time(s)" in detail
    assert cause in detail
    assert done(events)["status"] == "failed"
    assert len(fake_openai.requests) == 3  # the first try and LQAI_OPENAI_MAX_RETRIES=2 retries
    message = Message.objects.get(pk=done(events)["message_id"])
    assert (message.status, message.content, message.model_name) == (Message.Status.FAILED, "", MODEL)


def test_a_request_refused_with_another_4xx_is_not_retried(
    api_client: APIClient, matter_chat: Chat, fake_openai: FakeOpenAIServer
) -> None:
    fake_openai.respond(Status(400, message="model 'x' not found"), answer("never sent"))

    response = api_client.post(f"/api/chats/{matter_chat.pk}/messages/", {"content": QUESTION}, format="json")

    assert response.status_code == 502
    assert "refused the request: HTTP 400" in response.json()["detail"]
    assert len(fake_openai.requests) == 1
    assert Message.objects.get(pk=response.json()["message_id"]).status == Message.Status.FAILED


def test_a_timeout_before_the_answer_starts_is_retried_then_fails_the_turn(
    api_client: APIClient, matter_chat: Chat, fake_openai: FakeOpenAIServer, settings: LazySettings
) -> None:
    settings.LQAI_OPENAI_TIMEOUT = 0.3
    settings.LQAI_OPENAI_MAX_RETRIES = 1
    fake_openai.respond(Stall(1.0), Stall(1.0))

    events = streamed(api_client, matter_chat)

    assert names(events) == ["start", "error", "done"]
    assert "failed 2 time(s): timed out" in events[1][1]["detail"]
    assert done(events)["status"] == "failed"


def test_a_stream_that_stalls_mid_answer_ends_the_turn_interrupted(
    api_client: APIClient, matter_chat: Chat, fake_openai: FakeOpenAIServer, settings: LazySettings
) -> None:
    settings.LQAI_OPENAI_TIMEOUT = 0.3
    fake_openai.respond(Stream(answer("one two three four five").chunks, stall_after=3, stall_seconds=1.0))

    events = streamed(api_client, matter_chat)

    assert "error" not in names(events)
    assert done(events)["status"] == "interrupted"
    assert Message.objects.get(pk=done(events)["message_id"]).content == "one two "


def test_a_stream_cut_mid_answer_is_interrupted_keeps_its_claims_and_is_resumed(
    api_client: APIClient, matter_chat: Chat, fake_openai: FakeOpenAIServer
) -> None:
    # Given a model that claims a quote, then whose next answer is cut after four words
    cut = answer("Under the memo, strict scrutiny applies to every racial classification.")
    fake_openai.respond(
        tool_round(cite("call_1", "S1", KB_QUOTE), prompt_tokens=50, completion_tokens=5),
        Stream(cut.chunks, cut_after=5),
    )

    events = streamed(api_client, matter_chat)

    # then the turn is interrupted with what was said and claimed
    summary = done(events)
    assert "error" not in names(events)
    assert summary["status"] == "interrupted"
    assert summary["citation_count"] == 1
    message = Message.objects.get(pk=summary["message_id"])
    assert message.content == "Under the memo, strict "
    assert (message.prompt_tokens, message.completion_tokens) == (50, 5)

    # when it is resumed, the model is shown the partial answer and continues it
    fake_openai.respond(answer("scrutiny applies to every racial classification.", completion_tokens=7))
    response = resume(api_client, matter_chat, message.pk)
    assert response.status_code == 200
    resumed = list(sse_events(response.streaming_content))

    assert done(resumed)["status"] == "complete"
    message.refresh_from_db()
    assert message.content == "Under the memo, strict scrutiny applies to every racial classification."
    assert message.citations.count() == 1
    # Usage adds up over both runs.
    assert (message.prompt_tokens, message.completion_tokens) == (150, 12)
    last = fake_openai.requests[-1]["messages"]
    assert last[-2] == {"role": "assistant", "content": "Under the memo, strict "}
    assert last[-1]["role"] == "user"
    assert "cut off" in last[-1]["content"]


def test_a_stream_that_ends_without_finishing_is_interrupted(matter_chat: Chat, fake_openai: FakeOpenAIServer) -> None:
    # A server that closes the stream cleanly ([DONE]) without a finish_reason: the answer is incomplete.
    fake_openai.respond(Stream(answer("Half an").chunks[:-2]))
    _, message = start_turn(chat=matter_chat, content=QUESTION, assistant_status=Message.Status.STREAMING)

    run = TurnRun(message=message, backend=OpenAICompatibleBackend(), tools={})
    result = run.run_to_end()

    assert result.message.status == Message.Status.INTERRUPTED
    assert result.message.content == "Half an"
    assert run.failure is None


@pytest.mark.parametrize(
    ("frame", "reason"),
    [
        (b'data: {"error": {"message": "CUDA out of memory"}}\n\n', "reported an error mid-answer: CUDA out of memory"),
        (b"data: {not json\n\n", "undecodable event"),
    ],
)
def test_an_error_event_or_garbage_mid_stream_ends_the_turn_interrupted(
    matter_chat: Chat, fake_openai: FakeOpenAIServer, frame: bytes, reason: str, caplog: pytest.LogCaptureFixture
) -> None:
    chunks = answer("Never finished.").chunks
    fake_openai.respond(
        Stream(chunks[3:], raw_frames=(*(f"data: {json.dumps(c)}\n\n".encode() for c in chunks[:3]), frame))
    )
    _, message = start_turn(chat=matter_chat, content=QUESTION, assistant_status=Message.Status.STREAMING)

    result = TurnRun(message=message, backend=OpenAICompatibleBackend(), tools={}).run_to_end()

    assert (result.message.status, result.message.content) == (Message.Status.INTERRUPTED, "Never finished.")
    assert reason in caplog.text


def test_comments_in_the_stream_are_skipped_and_each_round_is_read_by_the_package(
    matter_chat: Chat, fake_openai: FakeOpenAIServer
) -> None:
    fake_openai.respond(
        tool_round(cite("call_1", "S1", KB_QUOTE)),
        Stream(answer("Fine.").chunks, raw_frames=(b": keep-alive\n\n",)),
    )
    _, message = start_turn(chat=matter_chat, content=QUESTION, assistant_status=Message.Status.STREAMING)

    result = TurnRun(message=message, backend=OpenAICompatibleBackend(), tools={}).run_to_end()

    assert (result.message.status, result.message.content) == (Message.Status.COMPLETE, "Fine.")
    assert len(result.citations) == 1
    # The package's stream closes its response after [DONE] (so the next round may connect anew).
    assert fake_openai.connections in {1, 2}
    assert len(fake_openai.requests) == 2


def test_tool_calls_sent_whole_without_index_or_id_are_told_apart(
    matter_chat: Chat, local_opinion: CaselawOpinion, fake_openai: FakeOpenAIServer
) -> None:
    # Some servers (older Ollama) send each call whole in one delta, with no index and no id.
    calls = [
        {"type": "function", "function": {"name": "caselaw_search", "arguments": json.dumps({"query": q})}}
        for q in ("strict scrutiny", "race-neutral alternative")
    ]
    round_one = [
        {
            "id": "x",
            "object": "chat.completion.chunk",
            "model": MODEL,
            "choices": [
                {"index": 0, "delta": {"role": "assistant", "tool_calls": calls}, "finish_reason": "tool_calls"}
            ],
        }
    ]
    fake_openai.respond(Stream(round_one), answer("Two searches."))
    _, message = start_turn(chat=matter_chat, content=QUESTION, assistant_status=Message.Status.STREAMING)

    events = list(TurnRun(message=message, backend=OpenAICompatibleBackend(), tools=default_tools()))

    tool_calls = [e for e in events if isinstance(e, ToolCall)]
    assert [(c.call_id, c.arguments["query"]) for c in tool_calls] == [
        ("call_1", "strict scrutiny"),
        ("call_2", "race-neutral alternative"),
    ]
    assert [m["tool_call_id"] for m in fake_openai.requests[1]["messages"] if m["role"] == "tool"] == [
        "call_1",
        "call_2",
    ]


# --- Directly, without the API ----------------------------------------------------------------------------


def test_the_backend_yields_deltas_tool_events_and_a_final_answer_with_usage(
    matter_chat: Chat, local_opinion: CaselawOpinion, fake_openai: FakeOpenAIServer
) -> None:
    fake_openai.respond(
        tool_round(("call_1", "caselaw_search", json.dumps({"query": "strict scrutiny"}))),
        tool_round(cite("call_2", "C1", OPINION_QUOTE)),
        answer("Fisher says so.", prompt_tokens=10, completion_tokens=3),
    )
    _, message = start_turn(chat=matter_chat, content=QUESTION, assistant_status=Message.Status.STREAMING)
    run = TurnRun(message=message, backend=OpenAICompatibleBackend(), tools=default_tools())

    events = list(run)

    assert [type(e).__name__ for e in events] == [
        "ToolCall",
        "ToolResult",
        "TextDelta",
        "TextDelta",
        "TextDelta",
        "TurnFinalized",
    ]
    assert isinstance(events[0], ToolCall)
    assert all(isinstance(e, TextDelta) for e in events[2:5])
    assert run.result is not None
    assert [c.quote for c in run.result.caselaw_citations] == [OPINION_QUOTE]
    message.refresh_from_db()
    assert (message.model_name, message.prompt_tokens, message.completion_tokens) == (MODEL, 210, 43)


def test_a_chat_outside_a_matter_gets_no_kb_sources(user: factories.User, fake_openai: FakeOpenAIServer) -> None:
    chat = factories.ChatFactory.create(owner=user, project=None)
    fake_openai.respond(answer("No documents."))
    _, message = start_turn(chat=chat, content=QUESTION, assistant_status=Message.Status.STREAMING)

    TurnRun(message=message, backend=OpenAICompatibleBackend(), tools={}).run_to_end()

    system = fake_openai.requests[0]["messages"][0]["content"]
    assert "(none matched this question)" in system
    assert "caselaw_search" not in system


# --- The ledger, next to the extractive backend's -----------------------------------------------------------


def test_the_ledger_of_a_model_turn_has_the_shape_of_the_extractive_backends_for_the_same_sources(
    api_client: APIClient,
    matter_chat: Chat,
    local_opinion: CaselawOpinion,
    settings: LazySettings,
) -> None:
    # Given a turn answered by the extractive backend
    settings.LQAI_ASSISTANT_BACKEND = "chats.assistant.ExtractiveBackend"
    extractive = done(streamed(api_client, matter_chat))
    extractive_message = Message.objects.get(pk=extractive["message_id"])
    kb_quotes = list(extractive_message.citations.values_list("quote", flat=True))
    opinion_quotes = list(extractive_message.caselaw_citations.values_list("quote", flat=True))
    assert kb_quotes
    assert opinion_quotes

    # when a model searches the same caselaw, claims the same quotes and cites the same case in its answer
    case = f"{local_opinion.case_name}, {local_opinion.citation}"
    assert case in extractive_message.content
    server = FakeOpenAIServer().start()
    try:
        settings.LQAI_ASSISTANT_BACKEND = "chats.assistant.OpenAICompatibleBackend"
        settings.LQAI_OPENAI_BASE_URL = server.base_url
        settings.LQAI_OPENAI_MODEL = MODEL
        server.respond(
            tool_round(("call_1", "caselaw_search", json.dumps({"query": QUESTION}))),
            tool_round(
                *(cite(f"kb_{n}", "S1", quote) for n, quote in enumerate(kb_quotes)),
                *(cite(f"op_{n}", "C1", quote) for n, quote in enumerate(opinion_quotes)),
            ),
            answer(f"Both sources agree ({case})."),
        )
        model = done(streamed(api_client, matter_chat))
    finally:
        server.stop()
        _client.cache_clear()

    # then both ledgers hold the same kinds, statuses and providers, as many of each
    assert model["status"] == extractive["status"] == "complete"
    assert model["citation_count"] == extractive["citation_count"]
    assert ledger_shape(model["message_id"]) == ledger_shape(extractive["message_id"])
    # (the quotes, the consulted opinion, and the case cited in the answer, checked)
    assert len(ledger_shape(model["message_id"])) == len(kb_quotes) + len(opinion_quotes) + 2
    assert ("caselaw", "verified", "local") in ledger_shape(model["message_id"])


# --- Configuration and start-up ---------------------------------------------------------------------------


def test_the_configuration_lists_every_bad_setting(settings: LazySettings) -> None:
    settings.LQAI_OPENAI_BASE_URL = "localhost:11434"
    settings.LQAI_OPENAI_MODEL = ""
    settings.LQAI_OPENAI_TIMEOUT = 0
    settings.LQAI_OPENAI_MAX_TOKENS = 0
    settings.LQAI_OPENAI_TEMPERATURE = 3
    settings.LQAI_OPENAI_MAX_TOOL_ROUNDS = 0
    settings.LQAI_OPENAI_MAX_RETRIES = -1

    with pytest.raises(ImproperlyConfigured) as excinfo:
        OpenAICompatibleConfig.from_settings()

    message = str(excinfo.value)
    for name in (
        "LQAI_OPENAI_BASE_URL",
        "LQAI_OPENAI_MODEL",
        "LQAI_OPENAI_TIMEOUT",
        "LQAI_OPENAI_MAX_TOKENS",
        "LQAI_OPENAI_TEMPERATURE",
        "LQAI_OPENAI_MAX_TOOL_ROUNDS",
        "LQAI_OPENAI_MAX_RETRIES",
    ):
        assert name in message


def test_a_valid_configuration_needs_no_api_key(settings: LazySettings) -> None:
    settings.LQAI_OPENAI_BASE_URL = "http://127.0.0.1:11434/v1"
    settings.LQAI_OPENAI_MODEL = "llama3.1:8b"
    settings.LQAI_OPENAI_API_KEY = ""

    config = OpenAICompatibleConfig.from_settings()

    assert (config.base_url, config.model, config.max_retries) == ("http://127.0.0.1:11434/v1", "llama3.1:8b", 2)


def test_the_start_up_check_refuses_the_selected_backend_misconfigured_or_unknown(settings: LazySettings) -> None:
    settings.LQAI_ASSISTANT_BACKEND = "chats.assistant.OpenAICompatibleBackend"
    settings.LQAI_OPENAI_BASE_URL = ""
    with pytest.raises(ImproperlyConfigured, match="LQAI_OPENAI_BASE_URL"):
        check_assistant_backend()

    settings.LQAI_ASSISTANT_BACKEND = "chats.assistant.NoSuchBackend"
    with pytest.raises(ImproperlyConfigured, match="NoSuchBackend"):
        check_assistant_backend()

    settings.LQAI_ASSISTANT_BACKEND = "chats.assistant.ExtractiveBackend"
    check_assistant_backend()  # nothing to configure


def _manage(*args: str, **env: str) -> subprocess.CompletedProcess[str]:
    environ = {k: v for k, v in os.environ.items() if not k.startswith("LQAI_")} | env
    environ.pop("DATABASE_URL", None)
    return subprocess.run(  # noqa: S603 - our own interpreter and manage.py
        [sys.executable, *args],
        cwd=ROOT,
        env={**environ, "DJANGO_SETTINGS_MODULE": "lqai.settings_test"},
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )


def test_manage_py_refuses_to_start_with_the_backend_selected_and_no_model() -> None:
    result = _manage(
        "manage.py",
        "check",
        LQAI_ASSISTANT_BACKEND="chats.assistant.OpenAICompatibleBackend",
        LQAI_OPENAI_BASE_URL="http://127.0.0.1:8001/v1",
    )

    assert result.returncode != 0
    assert "ImproperlyConfigured" in result.stderr
    assert "LQAI_OPENAI_MODEL is not set" in result.stderr


def test_start_up_does_not_import_the_openai_package() -> None:
    code = (
        "import sys, django; django.setup(); import chats.assistant, chats.views; "
        "sys.exit('openai imported' if 'openai' in sys.modules else 0)"
    )

    result = _manage(
        "-c",
        code,
        LQAI_ASSISTANT_BACKEND="chats.assistant.OpenAICompatibleBackend",
        LQAI_OPENAI_BASE_URL="http://127.0.0.1:8001/v1",
        LQAI_OPENAI_MODEL="m",
    )

    assert result.returncode == 0, result.stderr
