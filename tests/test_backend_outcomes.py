"""How the turn runner ends a turn on a backend's outcome: cut off (``BackendInterrupted``), an explained
failure (``BackendError``), and the model usage a backend reports, through ``finalize_turn``."""

from __future__ import annotations

import pytest
from django.test import Client
from rest_framework.test import APIClient

from chats.assistant import (
    BackendError,
    BackendInterrupted,
    FinalAnswer,
    ScriptedBackend,
    TextDelta,
    TurnFailed,
    TurnFinalized,
    TurnRun,
)
from chats.assistant.runner import BACKEND_FAILED
from chats.models import Chat, Message
from chats.services import ClaimedCitation, TurnUsage, finalize_turn, start_turn
from tests import factories

pytestmark = pytest.mark.django_db

QUESTION = "Must strict scrutiny be satisfied?"
QUOTE = "The Equal Protection Clause requires that a racial classification survive strict scrutiny."


def _run(chat: Chat, *steps: object) -> tuple[TurnRun, list[object]]:
    _, message = start_turn(chat=chat, content=QUESTION, assistant_status=Message.Status.STREAMING)
    with ScriptedBackend.scripted(*steps):  # type: ignore[arg-type]
        run = TurnRun(message=message, backend=ScriptedBackend(), tools={})
        return run, list(run)


def test_a_backend_cut_off_ends_the_turn_interrupted_with_its_claims_and_usage(matter_chat: Chat) -> None:
    claim = ClaimedCitation(quote=QUOTE, document_id=matter_chat.project.documents.get().pk)  # type: ignore[union-attr]
    usage = TurnUsage(model_name="m", prompt_tokens=10, completion_tokens=2, latency_ms=30)

    run, events = _run(
        matter_chat, TextDelta("So far "), FinalAnswer(citations=(claim,), usage=usage), BackendInterrupted("cut")
    )

    assert not any(isinstance(e, TurnFailed) for e in events)
    assert isinstance(events[-1], TurnFinalized)
    assert run.failure is None
    message = Message.objects.get(pk=run.message.pk)
    assert (message.status, message.content) == (Message.Status.INTERRUPTED, "So far ")
    assert message.citations.count() == 1
    assert (message.model_name, message.prompt_tokens, message.completion_tokens, message.latency_ms) == (
        "m",
        10,
        2,
        30,
    )


def test_a_backend_error_explains_the_failure_in_the_error_event(matter_chat: Chat) -> None:
    run, events = _run(matter_chat, TextDelta("x"), BackendError("the model server failed 3 time(s): HTTP 429"))

    failed = [e for e in events if isinstance(e, TurnFailed)]
    assert [f.detail for f in failed] == [f"{BACKEND_FAILED} (the model server failed 3 time(s): HTTP 429)"]
    assert Message.objects.get(pk=run.message.pk).status == Message.Status.FAILED


def test_any_other_exception_keeps_the_generic_detail(matter_chat: Chat) -> None:
    _, events = _run(matter_chat, RuntimeError("secret internals"))

    assert [e.detail for e in events if isinstance(e, TurnFailed)] == [BACKEND_FAILED]


def test_a_resumed_run_adds_its_usage_to_the_earlier_runs(matter_chat: Chat) -> None:
    _, message = start_turn(chat=matter_chat, content=QUESTION, assistant_status=Message.Status.STREAMING)
    finalize_turn(
        message=message,
        content="Half ",
        status=Message.Status.INTERRUPTED,
        usage=TurnUsage(model_name="m", prompt_tokens=None, completion_tokens=None, latency_ms=40),
    )
    message.status = Message.Status.STREAMING
    message.save(update_fields=["status"])

    with ScriptedBackend.scripted(
        TextDelta("done."), FinalAnswer(usage=TurnUsage(model_name="m2", prompt_tokens=7, latency_ms=5))
    ):
        TurnRun(message=message, backend=ScriptedBackend(), tools={}).run_to_end()

    message.refresh_from_db()
    assert message.content == "Half done."
    assert (message.model_name, message.prompt_tokens, message.completion_tokens, message.latency_ms) == (
        "m2",
        7,
        None,
        45,
    )


def test_a_turn_without_usage_records_none(matter_chat: Chat) -> None:
    run, _ = _run(matter_chat, TextDelta("Offline answer."), FinalAnswer())

    message = Message.objects.get(pk=run.message.pk)
    assert (message.model_name, message.prompt_tokens, message.completion_tokens, message.latency_ms) == (
        "",
        None,
        None,
        None,
    )


def test_usage_is_shown_in_the_chat_api_and_the_admin(
    api_client: APIClient, matter_chat: Chat, admin_client: Client
) -> None:
    message = factories.MessageFactory.create(
        chat=matter_chat, model_name="llama3.1:8b", prompt_tokens=812, completion_tokens=96, latency_ms=2345
    )

    listed = api_client.get(f"/api/chats/{matter_chat.pk}/messages/").json()
    page = admin_client.get(f"/admin/chats/message/{message.pk}/change/")

    shown = listed["results"][0]
    assert (shown["model_name"], shown["prompt_tokens"], shown["completion_tokens"], shown["latency_ms"]) == (
        "llama3.1:8b",
        812,
        96,
        2345,
    )
    assert page.status_code == 200
    for value in ("llama3.1:8b", "812", "96", "2345"):
        assert value in page.content.decode()
