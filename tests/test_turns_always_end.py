"""Turns always end, whatever the backend says and whatever breaks on the way (chats/assistant/runner.py):
text and claims sanitized at the backend boundary, a finalize that raises ending the turn ``failed`` (an
``error`` event; a 502, never a 500, on single-shot), a database error while recording progress or at
finalize survived, the history sent to the model kept within its budget and the stored answer within its
maximum size. The backend is :class:`ScriptedBackend`."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest
from django.conf import LazySettings
from django.db import OperationalError
from rest_framework.test import APIClient

from chats.assistant import FinalAnswer, Script, ScriptedBackend, TextDelta, ToolCall, ToolResult, TurnRun
from chats.assistant import runner as runner_module
from chats.assistant.runner import ANSWER_LIMIT_NOTE, FINALIZE_FAILED, NOT_SAVED, clean_text, turn_history
from chats.models import Chat, DocumentQuote, Message, MessageToolSource
from chats.services import ClaimedCitation, ConsultedSource, start_turn
from tests import factories
from tests.test_streaming import names, sse_events, stream

pytestmark = pytest.mark.django_db

QUOTE = "The Equal Protection Clause requires that a racial classification survive strict scrutiny."


def _single_shot(client: APIClient, chat: Chat) -> Any:
    return client.post(f"/api/chats/{chat.pk}/messages/", {"content": "strict scrutiny?"}, format="json")


# --- sanitized at the backend boundary -----------------------------------------------------------------------


def test_clean_text_drops_nul_and_replaces_lone_surrogates_only() -> None:
    assert clean_text("a\x00b\ud800c\udfffd") == "ab\ufffdc\ufffdd"
    assert clean_text("paired \U0001f600 and accents é") == "paired \U0001f600 and accents é"


def test_nul_and_lone_surrogates_in_deltas_claims_and_sources_never_break_a_single_shot_turn(
    api_client: APIClient, matter_chat: Chat, scripted_backend: Callable[..., Script]
) -> None:
    document = matter_chat.project.documents.get()  # type: ignore[union-attr]
    scripted_backend(
        TextDelta(f'Held\x00: "{QUOTE}" \ud83d.'),
        ToolResult(
            call_id="c1",
            tool="caselaw_search",
            payload={},
            sources=(ConsultedSource(source_kind="caselaw", tool="caselaw_search", label="Fisher\x00 \udc00"),),
        ),
        FinalAnswer((ClaimedCitation(QUOTE + "\x00", document_id=document.pk),)),
    )

    response = _single_shot(api_client, matter_chat)

    assert response.status_code == 201, response.content
    message = Message.objects.get(pk=response.json()["message"]["id"])
    assert (message.status, message.content) == (Message.Status.COMPLETE, f'Held: "{QUOTE}" \ufffd.')
    assert DocumentQuote.objects.get(message=message).quote == QUOTE
    assert MessageToolSource.objects.get(message=message).label == "Fisher \ufffd"


def test_a_stream_sends_sanitized_deltas_tool_calls_and_results(
    api_client: APIClient, matter_chat: Chat, scripted_backend: Callable[..., Script]
) -> None:
    scripted_backend(
        TextDelta("a\x00b\udfff"),
        ToolCall(call_id="c1", tool="caselaw_search", arguments={"query": "strict\ud800", "k\x00": ["x\x00"]}),
        ToolResult(call_id="c1", tool="caselaw_search", payload={"results": [{"title": "Fisher\udc00"}]}),
        FinalAnswer(),
    )

    events = list(sse_events(stream(api_client, matter_chat).streaming_content))  # type: ignore[arg-type]

    assert [data["text"] for name, data in events if name == "delta"] == ["ab\ufffd"]
    (call,) = [data for name, data in events if name == "tool_call"]
    assert call["arguments"] == {"query": "strict\ufffd", "k": ["x"]}
    (result,) = [data for name, data in events if name == "tool_result"]
    assert result["result"] == {"results": [{"title": "Fisher\ufffd"}]}
    assert events[-1][1]["status"] == "complete"


# --- a finalize that raises -------------------------------------------------------------------------------------


@pytest.fixture
def finalize_refusing(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """``finalize_turn`` raises for every status but ``failed``; returns the statuses it was called with."""
    real = runner_module.finalize_turn
    calls: list[str] = []

    def finalize(**kwargs: Any) -> Any:
        calls.append(kwargs["status"])
        if kwargs["status"] != Message.Status.FAILED:
            raise RuntimeError("a receiver broke")
        return real(**kwargs)

    monkeypatch.setattr(runner_module, "finalize_turn", finalize)
    return calls


def test_a_finalize_that_raises_ends_the_single_shot_turn_failed_with_a_502(
    api_client: APIClient, matter_chat: Chat, scripted_backend: Callable[..., Script], finalize_refusing: list[str]
) -> None:
    scripted_backend(TextDelta("An answer."), FinalAnswer())

    response = _single_shot(api_client, matter_chat)

    assert response.status_code == 502
    assert response.json()["detail"] == FINALIZE_FAILED
    message = Message.objects.get(pk=response.json()["message_id"])
    assert (message.status, message.content) == (Message.Status.FAILED, "An answer.")
    assert message.finalized_at is not None
    assert finalize_refusing == ["complete", "failed"]


def test_a_finalize_that_raises_ends_the_stream_with_an_error_event_and_a_failed_turn(
    api_client: APIClient, matter_chat: Chat, scripted_backend: Callable[..., Script], finalize_refusing: list[str]
) -> None:
    scripted_backend(TextDelta("An answer."), FinalAnswer())

    events = list(sse_events(stream(api_client, matter_chat).streaming_content))  # type: ignore[arg-type]

    assert names(events) == ["start", "delta", "error", "done"]
    assert events[2][1] == {"code": "backend_error", "detail": FINALIZE_FAILED}
    assert events[-1][1]["status"] == "failed"
    assert Message.objects.get(pk=events[-1][1]["message_id"]).status == Message.Status.FAILED


# transaction=True: outside any transaction, as a request runs, so that the connection can be replaced.
@pytest.mark.django_db(transaction=True)
def test_a_database_error_at_finalize_is_retried_once_on_a_fresh_connection_and_the_turn_completes(
    committed_matter_chat: tuple[APIClient, Chat],
    monkeypatch: pytest.MonkeyPatch,
    scripted_backend: Callable[..., Script],
) -> None:
    # Given a finalize whose first call loses the database
    scripted_backend(TextDelta("An answer."), FinalAnswer())
    real = runner_module.finalize_turn
    calls: list[str] = []

    def finalize(**kwargs: Any) -> Any:
        calls.append(kwargs["status"])
        if len(calls) == 1:
            raise OperationalError("server closed the connection unexpectedly")
        return real(**kwargs)

    monkeypatch.setattr(runner_module, "finalize_turn", finalize)
    _, chat = committed_matter_chat
    _, message = start_turn(chat=chat, content="q")

    result = TurnRun(message=message, backend=ScriptedBackend(), tools={}).run_to_end()

    # Then it was tried again, and the turn completed
    assert calls == ["complete", "complete"]
    assert result.message.status == Message.Status.COMPLETE
    message.refresh_from_db()
    assert (message.status, message.content) == (Message.Status.COMPLETE, "An answer.")


# --- a database error while recording progress -------------------------------------------------------------


def test_a_database_error_while_recording_progress_is_logged_and_the_stream_goes_on(
    api_client: APIClient,
    matter_chat: Chat,
    monkeypatch: pytest.MonkeyPatch,
    scripted_backend: Callable[..., Script],
    caplog: pytest.LogCaptureFixture,
) -> None:
    def lost(**kwargs: Any) -> None:
        raise OperationalError("the database restarted")

    monkeypatch.setattr(runner_module, "record_progress", lost)
    scripted_backend(TextDelta("One. "), TextDelta("Two."), FinalAnswer())
    _, message = start_turn(chat=matter_chat, content="q", assistant_status=Message.Status.STREAMING)

    run = TurnRun(message=message, backend=ScriptedBackend(), tools={}, progress_every=0)
    result = run.run_to_end()

    assert (result.message.status, result.message.content) == (Message.Status.COMPLETE, "One. Two.")
    assert "could not record progress" in caplog.text


# --- the history's budget ---------------------------------------------------------------------------------------


def test_the_history_keeps_the_question_and_the_newest_messages_within_its_budget(
    matter_chat: Chat, settings: LazySettings
) -> None:
    # Given a chat with an old 10,000-character answer, then a short exchange, then the question
    settings.LQAI_HISTORY_MAX_CHARS = 1_000
    factories.UserMessageFactory.create(chat=matter_chat, content="first question")
    factories.MessageFactory.create(chat=matter_chat, content="x" * 10_000)
    factories.UserMessageFactory.create(chat=matter_chat, content="second question")
    factories.MessageFactory.create(chat=matter_chat, content="a short answer")
    _, message = start_turn(chat=matter_chat, content="the question")

    history = turn_history(message)

    # Then the long answer and everything before it are left out; the rest is kept, in order
    assert [entry.content for entry in history] == ["second question", "a short answer", "the question"]


def test_the_question_is_kept_even_when_it_alone_is_over_the_budget(matter_chat: Chat, settings: LazySettings) -> None:
    settings.LQAI_HISTORY_MAX_CHARS = 10
    factories.UserMessageFactory.create(chat=matter_chat, content="earlier")
    _, message = start_turn(chat=matter_chat, content="a question longer than the budget")

    assert [entry.content for entry in turn_history(message)] == ["a question longer than the budget"]


# --- the answer's maximum size -----------------------------------------------------------------------------------


def test_an_answer_reaching_its_maximum_size_is_cut_there_with_a_note_and_the_backend_stopped(
    api_client: APIClient, matter_chat: Chat, settings: LazySettings, scripted_backend: Callable[..., Script]
) -> None:
    settings.LQAI_MAX_ANSWER_CHARS = 25
    script = scripted_backend(*[TextDelta("ten chars ") for _ in range(100)], FinalAnswer())

    response = _single_shot(api_client, matter_chat)

    assert response.status_code == 201
    message = Message.objects.get(pk=response.json()["message"]["id"])
    assert message.content == "ten chars ten chars ten c" + ANSWER_LIMIT_NOTE
    assert message.status == Message.Status.COMPLETE
    assert len(script.turns) == 1


@pytest.fixture
def database_gone_at_finalize(monkeypatch: pytest.MonkeyPatch) -> None:
    """From finalize on, every write of the turn fails as if the database were down."""

    def gone(*args: Any, **kwargs: Any) -> Any:
        raise OperationalError("could not connect to server")

    monkeypatch.setattr(runner_module, "finalize_turn", gone)
    monkeypatch.setattr(Message, "refresh_from_db", gone)


def test_when_not_even_a_failed_turn_can_be_saved_the_single_shot_answers_503_not_500(
    api_client: APIClient,
    matter_chat: Chat,
    scripted_backend: Callable[..., Script],
    database_gone_at_finalize: None,
) -> None:
    scripted_backend(TextDelta("An answer."), FinalAnswer())

    response = _single_shot(api_client, matter_chat)

    assert response.status_code == 503
    assert response.json()["code"] == "not_saved"
    assert response.json()["detail"] == NOT_SAVED


def test_when_not_even_a_failed_turn_can_be_saved_the_stream_ends_with_an_error_event(
    api_client: APIClient,
    matter_chat: Chat,
    scripted_backend: Callable[..., Script],
    database_gone_at_finalize: None,
) -> None:
    scripted_backend(TextDelta("An answer."), FinalAnswer())

    events = list(sse_events(stream(api_client, matter_chat).streaming_content))  # type: ignore[arg-type]

    assert names(events) == ["start", "delta", "error"]
    assert events[-1][1] == {"code": "backend_error", "detail": NOT_SAVED}
