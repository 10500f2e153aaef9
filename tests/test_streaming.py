"""The streamed tool loop and the resume, over HTTP, consumed as a client would: server-sent events
read from ``response.streaming_content``, and a disconnect as ``response.close()`` mid-stream (what the
WSGI server does when the client goes away). Ledger entries come from the real ``post_finalize`` receiver.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Callable, Iterable, Iterator
from typing import Any
from unittest import mock

import pytest
from django.db import DEFAULT_DB_ALIAS, connections
from django.http import StreamingHttpResponse
from rest_framework.test import APIClient

from chats.assistant import FinalAnswer, Script, TextDelta, ToolCall, ToolResult
from chats.models import CaselawOpinion, Chat, DocumentQuote, Message, MessageToolSource, OpinionQuote
from chats.services import ClaimedCitation, ConsultedSource
from citations.models import CitationLedgerEntry
from lqai_verify.verification import EXACT_MATCH
from tests import factories

pytestmark = pytest.mark.django_db

QUESTION = (
    "Must the reviewing court be satisfied that no workable race-neutral alternative exists under strict scrutiny?"
)
Event = tuple[str, dict[str, Any]]


def sse_events(chunks: Iterable[bytes]) -> Iterator[Event]:
    """Parse a text/event-stream body into (event, data) pairs, frame by frame as the bytes arrive;
    comments (``: keepalive``) are skipped."""
    buffer = b""
    for chunk in chunks:
        buffer += chunk
        while b"\n\n" in buffer:
            frame, buffer = buffer.split(b"\n\n", 1)
            if frame.startswith(b":"):
                continue
            fields = dict(line.split(": ", 1) for line in frame.decode("utf-8").splitlines())
            yield fields["event"], json.loads(fields["data"])
    assert buffer == b"", "the stream ended inside a frame"


def stream(client: APIClient, chat: Chat, content: str = QUESTION) -> StreamingHttpResponse:
    response = client.post(
        f"/api/chats/{chat.pk}/messages/stream/", {"content": content}, format="json", HTTP_ACCEPT="text/event-stream"
    )
    assert response.status_code == 200, response.content
    assert isinstance(response, StreamingHttpResponse)
    assert response["Content-Type"] == "text/event-stream"
    assert "no-store" in response["Cache-Control"]  # never cached: an answer is privileged
    return response


def resume(client: APIClient, chat: Chat, message_id: Any) -> Any:
    return client.post(f"/api/chats/{chat.pk}/messages/{message_id}/resume/", HTTP_ACCEPT="text/event-stream")


def disconnect(response: StreamingHttpResponse) -> None:
    """The client goes away mid-stream: the WSGI server closes the response, which closes its generator.

    Closing also sends ``request_finished``, whose ``close_old_connections`` would close the test's database
    connection in the middle of its transaction (the test client holds it back for the responses it closes
    itself); here it is held back too.
    """
    with mock.patch.object(type(connections[DEFAULT_DB_ALIAS]), "close_if_unusable_or_obsolete"):
        response.close()


def names(events: list[Event]) -> list[str]:
    return [name for name, _ in events]


def ledger_kinds(message_id: Any) -> list[tuple[str, str]]:
    return sorted(
        CitationLedgerEntry.objects.filter(message_id=message_id).values_list("source_kind", "verification_status")
    )


def _collapse_deltas(event_names: list[str]) -> list[str]:
    collapsed: list[str] = []
    for name in event_names:
        if not (collapsed and name == collapsed[-1] and name in {"delta", "citation"}):
            collapsed.append(name)
    return collapsed


# --- the tool loop ------------------------------------------------------------------------------------------------


def test_the_tool_loop_streams_tools_deltas_citations_and_done(
    api_client: APIClient,
    matter_chat: Chat,
    local_opinion: CaselawOpinion,
) -> None:
    events = list(sse_events(stream(api_client, matter_chat).streaming_content))  # type: ignore[arg-type]

    assert _collapse_deltas(names(events)) == ["start", "tool_call", "tool_result", "delta", "citation", "done"]
    data = dict(events)
    message = Message.objects.get(pk=data["start"]["message_id"])
    assert data["tool_call"] == {"call_id": "call_1", "tool": "caselaw_search", "arguments": {"query": QUESTION}}
    assert data["tool_result"]["sources"] == [
        {
            "source_kind": "caselaw",
            "tool": "caselaw_search",
            "provider": "local",
            "label": local_opinion.case_name,
            "subtitle": "570 U.S. 297 · Supreme Court of the United States",
            "url": local_opinion.absolute_url,
            "external_ref": "fisher-2013",
        }
    ]
    # The message: complete, its content the deltas, its rows as the events said
    assert (message.status, message.content) == ("complete", "".join(d["text"] for n, d in events if n == "delta"))
    citations = [d for n, d in events if n == "citation"]
    assert {c["kind"] for c in citations} == {"kb_document", "caselaw"}
    assert all(c["method"] == EXACT_MATCH and c["confidence"] == 1.0 for c in citations)
    [caselaw] = [c for c in citations if c["kind"] == "caselaw"]
    assert (caselaw["opinion"], caselaw["case_name"]) == (str(local_opinion.pk), local_opinion.case_name)
    assert local_opinion.text[caselaw["start"] : caselaw["end"]] == caselaw["quote"]
    assert {str(pk) for pk in DocumentQuote.objects.filter(message=message).values_list("pk", flat=True)} | {
        str(pk) for pk in OpinionQuote.objects.filter(message=message).values_list("pk", flat=True)
    } == {c["id"] for c in citations}
    assert list(MessageToolSource.objects.filter(message=message).values_list("label", flat=True)) == [
        local_opinion.case_name
    ]
    # The done event also carries the case the answer cites, checked against the local opinion
    (case,) = data["done"].pop("case_citations")
    assert (case["citation"], case["case_name"], case["status"], case["opinion"]) == (
        "570 U.S. 297",
        local_opinion.case_name,
        "verified",
        str(local_opinion.pk),
    )
    assert message.content[case["answer_start"] : case["answer_end"]].startswith("570 U.S. 297")
    assert data["done"].pop("statute_citations") == []  # the answer cites no statute
    assert data["done"] == {
        "message_id": str(message.pk),
        "status": "complete",
        "verdict": "pass",
        "review_count": 0,
        "citation_count": len(citations),
        "unverified_citations": [],
    }
    kb_count = len(citations) - 1
    # the quotes, the opinion consulted, and the case the answer cites (Fisher, 570 U.S. 297), checked
    assert ledger_kinds(message.pk) == sorted(
        [("caselaw", EXACT_MATCH), ("caselaw", "provenance"), ("caselaw", "verified")]
        + [("kb_document", EXACT_MATCH)] * kb_count
    )


def test_the_tool_loop_reports_and_records_unverified_claims_and_sends_only_verified_citations(
    api_client: APIClient,
    matter_chat: Chat,
    scripted_backend: Callable[..., Script],
) -> None:
    document = matter_chat.project.documents.get()  # type: ignore[union-attr]
    answer = 'The memo requires "strict scrutiny".'
    scripted_backend(
        TextDelta(answer),
        FinalAnswer(
            (
                ClaimedCitation("strict scrutiny", document_id=document.pk),
                ClaimedCitation("words the memo never used", document_id=document.pk),
            )
        ),
    )

    events = list(sse_events(stream(api_client, matter_chat).streaming_content))  # type: ignore[arg-type]

    assert names(events) == ["start", "delta", "citation", "done"]
    # The citation event says where the quote stands in the answer; the failed claim why it has no place.
    citation = events[2][1]
    assert answer[citation["answer_start"] : citation["answer_end"]] == "strict scrutiny"
    assert citation["answer_unplaced_reason"] is None
    done = events[-1][1]
    assert (done["citation_count"], done["verdict"], done["review_count"]) == (1, "fail", 1)
    (failed,) = done["unverified_citations"]
    assert failed == {
        "id": str(DocumentQuote.objects.get(verification_method="unverified").pk),
        "kind": "kb_document",
        "position": 1,
        "quote": "words the memo never used",
        "reason": "not found in the document",
        "source_id": str(document.pk),
        "answer_start": None,
        "answer_end": None,
        "answer_unplaced_reason": "the quote is not in the answer text",
    }
    assert ledger_kinds(done["message_id"]) == [("kb_document", EXACT_MATCH), ("kb_document", "unverified")]


def test_a_backend_error_mid_stream_ends_the_turn_failed_with_an_error_event(
    api_client: APIClient,
    matter_chat: Chat,
    scripted_backend: Callable[..., Script],
) -> None:
    consulted = ConsultedSource(source_kind="mcp", tool="statutes", label="KRS 117.265", provider="statutes-mcp")
    scripted_backend(
        ToolCall("c1", "statutes", {}),
        ToolResult("c1", "statutes", {}, sources=(consulted,)),
        TextDelta("Half"),
        RuntimeError("model down"),
    )

    events = list(sse_events(stream(api_client, matter_chat).streaming_content))  # type: ignore[arg-type]

    assert names(events) == ["start", "tool_call", "tool_result", "delta", "error", "done"]
    assert events[4][1]["code"] == "backend_error"
    assert events[-1][1]["status"] == "failed"
    message = Message.objects.get(pk=events[0][1]["message_id"])
    assert (message.status, message.content) == ("failed", "Half")
    assert ledger_kinds(message.pk) == [("mcp", "provenance")]


# --- disconnect and resume ----------------------------------------------------------------------------------------


def test_a_disconnect_saves_the_turn_interrupted_and_resume_completes_it(
    api_client: APIClient,
    matter_chat: Chat,
    local_opinion: CaselawOpinion,
) -> None:
    # Given the answer the same question gets when nothing goes wrong
    reference_chat = factories.ChatFactory.create(project=matter_chat.project, owner=matter_chat.owner)
    reference = list(sse_events(stream(api_client, reference_chat).streaming_content))  # type: ignore[arg-type]
    full_answer = Message.objects.get(pk=reference[0][1]["message_id"]).content

    # When the client reads the tool events and the first delta, then goes away
    response = stream(api_client, matter_chat)
    events = sse_events(response.streaming_content)  # type: ignore[arg-type]
    first = [next(events) for _ in range(4)]
    disconnect(response)

    # Then the turn is saved as interrupted with what was produced, and its consulted source is in the ledger
    assert names(first) == ["start", "tool_call", "tool_result", "delta"]
    message = Message.objects.get(pk=first[0][1]["message_id"])
    assert (message.status, message.content) == ("interrupted", first[3][1]["text"])
    assert message.finalized_at is not None
    assert message.tool_sources.count() == 1
    assert not message.citations.exists()
    assert ledger_kinds(message.pk) == [("caselaw", "provenance")]

    # When the client resumes it
    resumed = resume(api_client, matter_chat, message.pk)
    assert resumed.status_code == 200
    rest = list(sse_events(resumed.streaming_content))

    # Then the content is the partial answer plus its continuation: the uninterrupted answer
    assert _collapse_deltas(names(rest)) == ["start", "tool_call", "tool_result", "delta", "citation", "done"]
    assert rest[-1][1]["status"] == "complete"
    message.refresh_from_db()
    assert message.status == "complete"
    assert message.content == full_answer
    assert message.content == first[3][1]["text"] + "".join(d["text"] for n, d in rest if n == "delta")
    # The opinion consulted again is not recorded twice; the quotes are now verified and in the ledger
    assert message.tool_sources.count() == 1
    citations = [d for n, d in rest if n == "citation"]
    assert message.citations.count() + message.caselaw_citations.count() == len(citations) > 0
    assert ledger_kinds(message.pk) == sorted(
        [("caselaw", EXACT_MATCH), ("caselaw", "provenance"), ("caselaw", "verified")]
        + [("kb_document", EXACT_MATCH)] * (len(citations) - 1)
    )


def test_a_disconnect_before_the_first_event_leaves_an_interrupted_record(
    api_client: APIClient, matter_chat: Chat
) -> None:
    response = stream(api_client, matter_chat)
    message = Message.objects.get(chat=matter_chat, role="assistant")
    assert message.status == "streaming"  # recorded before the first byte
    disconnect(response)

    message.refresh_from_db()
    assert (message.status, message.content) == ("interrupted", "")
    assert Message.objects.filter(chat=matter_chat, role="user", content=QUESTION).exists()


def test_resume_gives_the_backend_the_history_and_the_partial_content(
    api_client: APIClient,
    matter_chat: Chat,
    scripted_backend: Callable[..., Script],
) -> None:
    consulted = ConsultedSource(source_kind="mcp", tool="statutes", label="KRS 117.265", provider="statutes-mcp")
    scripted_backend(ToolResult("c1", "statutes", {}, sources=(consulted,)), TextDelta("The answer "), TextDelta("is"))
    response = stream(api_client, matter_chat)
    events = sse_events(response.streaming_content)  # type: ignore[arg-type]
    [next(events) for _ in range(3)]
    disconnect(response)
    message = Message.objects.get(chat=matter_chat, role="assistant")
    assert (message.status, message.content) == ("interrupted", "The answer ")

    document = matter_chat.project.documents.get()  # type: ignore[union-attr]
    script = scripted_backend(
        ToolResult("c2", "statutes", {}, sources=(consulted,)),
        TextDelta("strict scrutiny."),
        FinalAnswer((ClaimedCitation("strict scrutiny", document_id=document.pk),)),
    )
    rest = list(sse_events(resume(api_client, matter_chat, message.pk).streaming_content))

    [turn] = script.turns
    assert turn.partial == "The answer "
    assert [(e.role, e.content) for e in turn.history] == [("user", QUESTION)]
    assert set(turn.tools) == {"caselaw_search"}
    assert names(rest) == ["start", "tool_result", "delta", "citation", "done"]
    message.refresh_from_db()
    assert (message.status, message.content) == ("complete", "The answer strict scrutiny.")
    assert list(message.tool_sources.values_list("label", flat=True)) == ["KRS 117.265"]
    assert ledger_kinds(message.pk) == [("kb_document", EXACT_MATCH), ("mcp", "provenance")]


@pytest.mark.parametrize("status", ["complete", "failed", "streaming", "pending"])
def test_only_an_interrupted_turn_can_be_resumed(api_client: APIClient, matter_chat: Chat, status: str) -> None:
    message = factories.MessageFactory.create(chat=matter_chat, status=status, content="kept")

    response = resume(api_client, matter_chat, message.pk)

    assert response.status_code == 409
    assert response["Content-Type"] == "text/event-stream"  # the client asked for events: an error frame
    [(name, data)] = list(sse_events([response.content]))
    assert (name, data["status"]) == ("error", status)
    message.refresh_from_db()
    assert (message.status, message.content) == (status, "kept")


def test_a_resume_in_progress_cannot_be_resumed_again(
    api_client: APIClient, matter_chat: Chat, scripted_backend: Callable[..., Script]
) -> None:
    scripted_backend(TextDelta("more"), FinalAnswer())
    message = factories.MessageFactory.create(chat=matter_chat, status="interrupted", content="Some")

    first = resume(api_client, matter_chat, message.pk)
    second = resume(api_client, matter_chat, message.pk)

    assert first.status_code == 200
    assert second.status_code == 409
    disconnect(first)


@pytest.mark.parametrize("which", ["a user message", "a message of another chat", "no message"])
def test_resume_of_anything_but_this_chats_assistant_message_is_404(
    api_client: APIClient, matter_chat: Chat, user: Any, which: str
) -> None:
    if which == "a user message":
        message = factories.UserMessageFactory.create(chat=matter_chat, status="interrupted")
    elif which == "a message of another chat":
        other_chat = factories.ChatFactory.create(owner=user, project=None)
        message = factories.MessageFactory.create(chat=other_chat, status="interrupted")
    else:
        message = factories.MessageFactory.build(chat=matter_chat)

    response = resume(api_client, matter_chat, message.pk)

    assert response.status_code == 404


# --- a ledger failure never breaks the turn (PostgreSQL) ----------------------------------------------------------


@pytest.mark.postgres
@pytest.mark.django_db(transaction=True)
@pytest.mark.usefixtures("ledger_refuses_every_row")
def test_a_broken_ledger_leaves_the_stream_and_the_resume_intact(
    local_opinion: CaselawOpinion, committed_matter_chat: tuple[APIClient, Chat], caplog: pytest.LogCaptureFixture
) -> None:
    client, chat = committed_matter_chat
    with caplog.at_level(logging.ERROR, logger="citations.receivers"):
        # A full stream
        complete = list(sse_events(stream(client, chat).streaming_content))  # type: ignore[arg-type]
        # A disconnect, then its resume
        response = stream(client, chat)
        events = sse_events(response.streaming_content)  # type: ignore[arg-type]
        first = [next(events) for _ in range(4)]
        disconnect(response)
        rest = list(sse_events(resume(client, chat, first[0][1]["message_id"]).streaming_content))

    # The events are those of a healthy ledger
    assert _collapse_deltas(names(complete)) == ["start", "tool_call", "tool_result", "delta", "citation", "done"]
    assert _collapse_deltas(names(rest)) == ["start", "tool_call", "tool_result", "delta", "citation", "done"]
    # The turns and their rows are persisted; only the ledger is missing (and logged, for the backfill)
    for message_id in (complete[0][1]["message_id"], first[0][1]["message_id"]):
        message = Message.objects.get(pk=message_id)
        assert message.status == "complete"
        assert message.tool_sources.count() == 1
        assert message.citations.exists()
        assert message.caselaw_citations.exists()
    assert not CitationLedgerEntry.objects.exists()
    # One failed assembly per finalize: the stream, the interruption and the resume
    assert sum("assembly failed" in r.getMessage() for r in caplog.records) == 3
