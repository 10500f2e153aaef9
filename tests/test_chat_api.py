"""The chat API over HTTP: chats, the single-shot turn, access control, bad input and the schema.

Turns run through the real views, ``finalize_turn`` and the real ``post_finalize`` receiver: the
ledger entries asserted here are written by ``citations.receivers``, never mocked.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from typing import Any
from uuid import uuid4

import pytest
from django.contrib.auth.models import User
from rest_framework.test import APIClient

from chats.assistant import FinalAnswer, Script, TextDelta, ToolCall, ToolResult
from chats.models import (
    CaselawOpinion,
    Chat,
    Document,
    DocumentQuote,
    Message,
    MessageToolSource,
    OpinionQuote,
)
from chats.services import ClaimedCitation, ConsultedSource
from citations.models import CitationLedgerEntry
from lqai_verify.verification import EXACT_MATCH, TOLERANT_MATCH
from tests import factories

pytestmark = pytest.mark.django_db

QUESTION = (
    "Must the reviewing court be satisfied that no workable race-neutral alternative exists under strict scrutiny?"
)
ROW_MODELS = (Chat, Message, DocumentQuote, OpinionQuote, MessageToolSource, CitationLedgerEntry)


def row_counts() -> dict[str, int]:
    return {model.__name__: model.objects.count() for model in ROW_MODELS}


def messages_url(chat: Chat) -> str:
    return f"/api/chats/{chat.pk}/messages/"


def ledger_kinds(message_id: Any) -> list[tuple[str, str]]:
    return sorted(
        CitationLedgerEntry.objects.filter(message_id=message_id).values_list("source_kind", "verification_status")
    )


# --- chats --------------------------------------------------------------------------------------------------------


def test_create_a_chat_without_a_matter(api_client: APIClient, user: User) -> None:
    response = api_client.post("/api/chats/", {"title": "Research"}, format="json")

    assert response.status_code == 201
    chat = Chat.objects.get(pk=response.json()["id"])
    assert (chat.owner, chat.project, chat.title) == (user, None, "Research")
    assert response.json()["project"] is None


@pytest.mark.parametrize("role", ["owner", "member"])
def test_create_a_chat_in_a_matter_you_belong_to(
    api_client: APIClient, user: User, other_user: User, role: str
) -> None:
    project = (
        factories.ProjectFactory.create(owner=user)
        if role == "owner"
        else factories.ProjectFactory.create(owner=other_user, members=[user])
    )

    response = api_client.post("/api/chats/", {"project": str(project.pk)}, format="json")

    assert response.status_code == 201
    assert response.json()["project"] == str(project.pk)
    assert Chat.objects.get(pk=response.json()["id"]).owner == user


@pytest.mark.parametrize("whose", ["another user's", "nonexistent"])
def test_a_matter_you_do_not_belong_to_is_an_unknown_project(
    api_client: APIClient, other_user: User, whose: str
) -> None:
    project_id = factories.ProjectFactory.create(owner=other_user).pk if whose == "another user's" else uuid4()
    before = row_counts()

    response = api_client.post("/api/chats/", {"project": str(project_id)}, format="json")

    # The same answer either way: another user's matter is not revealed
    assert response.status_code == 400
    assert response.json() == {"project": ["unknown project"]}
    assert row_counts() == before


@pytest.mark.parametrize(
    ("body", "field"),
    [({"project": "not-a-uuid"}, "project"), ({"project": 12}, "project"), ({"title": "x" * 201}, "title")],
)
def test_create_a_chat_with_bad_fields_is_a_field_error(
    api_client: APIClient, body: dict[str, Any], field: str
) -> None:
    before = row_counts()

    response = api_client.post("/api/chats/", body, format="json")

    assert response.status_code == 400
    assert list(response.json()) == [field]
    assert row_counts() == before


@pytest.mark.parametrize("body", ["{not json", "[1, 2]"])
def test_create_a_chat_with_a_body_that_is_not_a_json_object_is_a_400(api_client: APIClient, body: str) -> None:
    before = row_counts()

    response = api_client.post("/api/chats/", body, content_type="application/json")

    assert response.status_code == 400
    assert row_counts() == before


def test_list_only_the_chats_you_can_see_paginated(api_client: APIClient, user: User, other_user: User) -> None:
    own = factories.ChatFactory.create(owner=user, project=None)
    member_chat = factories.ChatFactory.create(
        project=factories.ProjectFactory.create(owner=other_user, members=[user])
    )
    factories.ChatFactory.create(project=factories.ProjectFactory.create(owner=other_user))  # not visible
    factories.ChatFactory.create(owner=other_user, project=None)  # not visible

    response = api_client.get("/api/chats/")

    assert response.status_code == 200
    body = response.json()
    assert body["count"] == 2
    assert {c["id"] for c in body["results"]} == {str(own.pk), str(member_chat.pk)}
    assert body["next"] is None


def test_chat_detail_links_its_messages(api_client: APIClient, matter_chat: Chat) -> None:
    factories.MessageFactory.create(chat=matter_chat)

    response = api_client.get(f"/api/chats/{matter_chat.pk}/")

    assert response.status_code == 200
    assert response.json() == {
        "id": str(matter_chat.pk),
        "title": matter_chat.title,
        "project": str(matter_chat.project_id),
        "created_at": response.json()["created_at"],
        "messages_url": f"http://testserver/api/chats/{matter_chat.pk}/messages/",
    }


def test_chat_messages_have_their_citations_and_tool_sources(api_client: APIClient, matter_chat: Chat) -> None:
    factories.UserMessageFactory.create(chat=matter_chat, content="q")
    answer = factories.MessageFactory.create(chat=matter_chat)
    kb = factories.DocumentQuoteFactory.create(message=answer, document=Document.objects.get())
    caselaw = factories.OpinionQuoteFactory.create(message=answer)
    source = factories.MessageToolSourceFactory.create(message=answer)

    response = api_client.get(f"/api/chats/{matter_chat.pk}/messages/")

    assert response.status_code == 200
    user_message, assistant = response.json()["results"]
    assert user_message["role"] == "user"
    assert assistant["id"] == str(answer.pk)
    assert assistant["citations"] == [
        {
            "id": str(kb.pk),
            "kind": "kb_document",
            "position": 0,
            "quote": kb.quote,
            "document": str(kb.document_id),
            "document_title": "Strict scrutiny memo",
            "start": kb.source_offset_start,
            "end": kb.source_offset_end,
            "pages": None,
            "pin_cite": None,
            "method": "exact_match",
            "confidence": 1.0,
            # A row made without a place in the answer reads as one stored before positions were recorded.
            "answer_start": None,
            "answer_end": None,
            "answer_unplaced_reason": "stored before answer positions were recorded",
        }
    ]
    [caselaw_json] = assistant["caselaw_citations"]
    assert caselaw.opinion is not None
    assert (caselaw_json["kind"], caselaw_json["opinion"], caselaw_json["case_name"]) == (
        "caselaw",
        str(caselaw.opinion_id),
        caselaw.opinion.case_name,
    )
    [source_json] = assistant["tool_sources"]
    assert (source_json["id"], source_json["source_kind"], source_json["label"]) == (
        str(source.pk),
        "caselaw",
        source.label,
    )


@pytest.mark.parametrize("messages", [1, 10])
def test_chat_messages_run_a_constant_number_of_queries(
    api_client: APIClient, matter_chat: Chat, messages: int, django_assert_num_queries: Callable[..., Any]
) -> None:
    document = Document.objects.get()
    for _ in range(messages):
        answer = factories.MessageFactory.create(chat=matter_chat)
        factories.DocumentQuoteFactory.create(message=answer, document=document)
        factories.OpinionQuoteFactory.create(message=answer)
        factories.MessageToolSourceFactory.create(message=answer)

    # chat, the count, messages, KB citations + documents, caselaw citations + opinions, tool sources, case
    # citations, statute citations and quotes
    with django_assert_num_queries(8):
        response = api_client.get(f"/api/chats/{matter_chat.pk}/messages/")

    assert len(response.json()["results"]) == messages


# --- the single-shot turn -----------------------------------------------------------------------------------------


def test_single_shot_turn_with_the_default_backend(
    api_client: APIClient,
    matter_chat: Chat,
    local_opinion: CaselawOpinion,
) -> None:
    response = api_client.post(messages_url(matter_chat), {"content": QUESTION}, format="json")

    assert response.status_code == 201
    body = response.json()
    message = Message.objects.get(pk=body["message"]["id"])
    assert (message.role, message.status) == ("assistant", "complete")
    assert message.finalized_at is not None
    assert body["message"]["content"] == message.content
    assert Message.objects.get(pk=body["user_message_id"]).content == QUESTION
    # No tools in a single-shot turn: KB quotes only, verified exactly, nothing consulted
    document = Document.objects.get()
    citations = list(message.citations.all())
    assert citations
    assert body["message"]["citations"] == [
        {
            "id": str(c.pk),
            "kind": "kb_document",
            "position": n,  # every claim verified: the n-th citation is the n-th claim
            "quote": c.quote,
            "document": str(document.pk),
            "document_title": document.title,
            "start": c.source_offset_start,
            "end": c.source_offset_end,
            "pages": None,
            "pin_cite": None,
            "method": EXACT_MATCH,
            "confidence": 1.0,
            "answer_start": c.answer_offset_start,
            "answer_end": c.answer_offset_end,
            "answer_unplaced_reason": None,
        }
        for n, c in enumerate(citations)
    ]
    assert all(document.content[c.source_offset_start : c.source_offset_end] == c.quote for c in citations)
    # Each quote is placed where the answer says it.
    assert all(message.content[c.answer_offset_start : c.answer_offset_end] == c.quote for c in citations)
    assert body["message"]["caselaw_citations"] == body["message"]["tool_sources"] == []
    assert body["message"]["unverified_citations"] == []
    assert set(body) == {"message", "user_message_id"}  # the failed claims are listed once, in the message
    # The ledger, through the real post_finalize receiver
    assert ledger_kinds(message.pk) == [("kb_document", EXACT_MATCH)] * len(citations)


def test_single_shot_turn_reports_and_records_unverified_and_malformed_claims_apart_from_its_citations(
    api_client: APIClient,
    matter_chat: Chat,
    local_opinion: CaselawOpinion,
    other_user: User,
    scripted_backend: Callable[..., Script],
) -> None:
    document = Document.objects.get()
    foreign_document = factories.DocumentFactory.create(project=factories.ProjectFactory.create(owner=other_user))
    consulted = ConsultedSource(source_kind="mcp", tool="statutes", label="KRS 117.265", provider="statutes-mcp")
    script = scripted_backend(
        ToolCall("c1", "statutes", {"q": "x"}),
        ToolResult("c1", "statutes", {"text": "..."}, sources=(consulted,)),
        TextDelta("An answer."),
        FinalAnswer(
            (
                ClaimedCitation("must ultimately be satisfied", document_id=document.pk),  # exact
                ClaimedCitation("The  Equal Protection   Clause requires", document_id=document.pk),  # tolerant
                ClaimedCitation("strict scrutiny", opinion_id=local_opinion.pk),  # exact, caselaw
                ClaimedCitation("a sentence nobody wrote", document_id=document.pk),  # not in the document
                ClaimedCitation("strict scrutiny", document_id=document.pk, opinion_id=local_opinion.pk),  # both
                ClaimedCitation("strict scrutiny"),  # neither
                ClaimedCitation("strict scrutiny", document_id=uuid4()),  # no such document
                ClaimedCitation("strict scrutiny", opinion_id=uuid4()),  # no such opinion
                ClaimedCitation("strict scrutiny", document_id=foreign_document.pk),  # another matter's document
            )
        ),
    )

    response = api_client.post(messages_url(matter_chat), {"content": QUESTION}, format="json")

    assert response.status_code == 201
    body = response.json()
    assert script.turns[0].tools == {}  # single-shot: no tools offered
    # (rows of one turn share created_at: their order is by id, not by claim)
    kb_citations = {c["quote"]: c for c in body["message"]["citations"]}
    assert {quote: c["method"] for quote, c in kb_citations.items()} == {
        "must ultimately be satisfied": EXACT_MATCH,
        "The  Equal Protection   Clause requires": TOLERANT_MATCH,
    }
    assert 0 < kb_citations["The  Equal Protection   Clause requires"]["confidence"] < 1
    assert [(c["quote"], c["opinion"]) for c in body["message"]["caselaw_citations"]] == [
        ("strict scrutiny", str(local_opinion.pk))
    ]
    unverified = body["message"]["unverified_citations"]
    assert set(body) == {"message", "user_message_id"}  # listed once: in the message
    assert sorted(u["quote"] for u in unverified) == ["a sentence nobody wrote"] + ["strict scrutiny"] * 5
    assert {u["reason"] for u in unverified} == {
        "not found in the document",
        "the claim must name exactly one source",
        "unknown document: not a document of this chat's matter",
        "unknown opinion",
    }
    # Failed claims are recorded (each with its row id), listed apart from the citations, and fail the gate
    message_id = body["message"]["id"]
    assert body["message"]["verdict"] == "fail"
    failed = body["message"]["unverified_citations"]
    assert len({f["id"] for f in failed}) == 6
    assert body["message"]["review_count"] == len(failed)  # each failed claim is one a person must check
    assert {(f["kind"], f["reason"], f["source_id"]) for f in failed if f["quote"] == "a sentence nobody wrote"} == {
        ("kb_document", "not found in the document", str(document.pk))
    }
    assert str(foreign_document.pk) not in {f["source_id"] for f in failed}  # another matter's id is not recorded
    assert DocumentQuote.objects.filter(message_id=message_id).exclude(verification_method="unverified").count() == 2
    assert DocumentQuote.objects.filter(message_id=message_id, verification_method="unverified").count() == 5
    assert OpinionQuote.objects.filter(message_id=message_id).count() == 2
    assert [s["label"] for s in body["message"]["tool_sources"]] == ["KRS 117.265"]
    assert ledger_kinds(message_id) == [
        ("caselaw", EXACT_MATCH),
        ("caselaw", "unverified"),
        ("kb_document", EXACT_MATCH),
        ("kb_document", TOLERANT_MATCH),
        *[("kb_document", "unverified")] * 5,
        ("mcp", "provenance"),
    ]
    entry = CitationLedgerEntry.objects.get(
        message_id=message_id, source_kind="kb_document", verification_status=TOLERANT_MATCH
    )
    assert entry.confidence == DocumentQuote.objects.get(verification_method=TOLERANT_MATCH).verification_confidence


def test_a_backend_error_in_a_single_shot_turn_is_a_502_with_the_failed_turn_persisted(
    api_client: APIClient,
    matter_chat: Chat,
    scripted_backend: Callable[..., Script],
    caplog: pytest.LogCaptureFixture,
) -> None:
    consulted = ConsultedSource(source_kind="mcp", tool="statutes", label="KRS 117.265", provider="statutes-mcp")
    scripted_backend(
        ToolResult("c1", "statutes", {}, sources=(consulted,)), TextDelta("Half"), RuntimeError("model down")
    )

    with (
        caplog.at_level(logging.ERROR, logger="chats.assistant.runner"),
    ):
        response = api_client.post(messages_url(matter_chat), {"content": QUESTION}, format="json")

    assert response.status_code == 502
    body = response.json()
    assert body["code"] == "backend_error"
    assert "failed" in body["detail"]
    assert "model down" not in body["detail"]  # internals stay in the log
    message = Message.objects.get(pk=body["message_id"])
    assert (message.status, message.content) == ("failed", "Half")
    assert message.finalized_at is not None
    assert list(message.tool_sources.values_list("label", flat=True)) == ["KRS 117.265"]
    assert ledger_kinds(message.pk) == [("mcp", "provenance")]
    assert any("model down" in (r.exc_text or "") for r in caplog.records)


# --- bad input ----------------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("body", "content_type", "expected"),
    [
        pytest.param("{not json", "application/json", "detail", id="malformed-json"),
        pytest.param("{}", "application/json", "content", id="missing-content"),
        pytest.param('{"content": ""}', "application/json", "content", id="empty"),
        pytest.param('{"content": "   \\n\\t "}', "application/json", "content", id="whitespace-only"),
        pytest.param('{"content": null}', "application/json", "content", id="null"),
        pytest.param('{"content": "a\\u0000b"}', "application/json", "content", id="nul-character"),
        pytest.param('{"content": "a\\ud800b"}', "application/json", "content", id="lone-surrogate"),
        pytest.param('["content"]', "application/json", "non_field_errors", id="not-an-object"),
    ],
)
@pytest.mark.parametrize("endpoint", ["messages/", "messages/stream/"])
def test_bad_message_input_is_a_400_and_writes_nothing(
    api_client: APIClient, matter_chat: Chat, body: str, content_type: str, expected: str, endpoint: str
) -> None:
    before = row_counts()

    response = api_client.post(f"/api/chats/{matter_chat.pk}/{endpoint}", body, content_type=content_type)

    assert response.status_code == 400
    assert expected in response.json()
    assert row_counts() == before


@pytest.mark.parametrize("endpoint", ["messages/", "messages/stream/"])
def test_content_over_the_limit_is_a_400_and_writes_nothing(
    api_client: APIClient, matter_chat: Chat, settings: Any, endpoint: str
) -> None:
    settings.LQAI_MAX_MESSAGE_CHARS = 20
    before = row_counts()

    too_long = api_client.post(f"/api/chats/{matter_chat.pk}/{endpoint}", {"content": "x" * 21}, format="json")

    assert too_long.status_code == 400
    assert too_long.json() == {"content": ["Ensure this field has no more than 20 characters."]}
    assert row_counts() == before


def test_an_event_stream_client_gets_its_400_as_an_sse_error_frame(api_client: APIClient, matter_chat: Chat) -> None:
    response = api_client.post(
        f"/api/chats/{matter_chat.pk}/messages/stream/", {"content": ""}, format="json", HTTP_ACCEPT="text/event-stream"
    )

    assert response.status_code == 400
    assert response["Content-Type"].startswith("text/event-stream")
    assert response.content.startswith(b"event: error\ndata: {")


@pytest.mark.parametrize(
    "path",
    [
        "/api/chats/not-a-uuid/",
        "/api/chats/not-a-uuid/messages/",
        "/api/chats/not-a-uuid/messages/stream/",
        "/api/chats/{chat}/messages/not-a-uuid/resume/",
        "/api/chats/12/messages/34/resume/",
    ],
)
def test_non_uuid_ids_are_404(api_client: APIClient, matter_chat: Chat, path: str) -> None:
    before = row_counts()

    response = api_client.post(path.format(chat=matter_chat.pk), {"content": "hi"}, format="json")

    assert response.status_code == 404
    assert row_counts() == before


# --- access control -----------------------------------------------------------------------------------------------


def _endpoints(chat: Chat, message: Message) -> list[tuple[str, str]]:
    return [
        ("get", f"/api/chats/{chat.pk}/"),
        ("post", f"/api/chats/{chat.pk}/messages/"),
        ("post", f"/api/chats/{chat.pk}/messages/stream/"),
        ("post", f"/api/chats/{chat.pk}/messages/{message.pk}/resume/"),
    ]


@pytest.mark.parametrize("endpoint", range(4))
@pytest.mark.parametrize("whose", ["another user's chat", "a chat of a matter you are not in", "a nonexistent chat"])
def test_chats_you_cannot_see_are_404_everywhere(
    api_client: APIClient, other_user: User, endpoint: int, whose: str
) -> None:
    if whose == "another user's chat":
        chat = factories.ChatFactory.create(owner=other_user, project=None)
    elif whose == "a chat of a matter you are not in":
        chat = factories.ChatFactory.create(project=factories.ProjectFactory.create(owner=other_user))
    else:
        chat = factories.ChatFactory.build()
    message = (
        factories.MessageFactory.create(chat=chat, status=Message.Status.INTERRUPTED)
        if chat.pk and Chat.objects.filter(pk=chat.pk).exists()
        else factories.MessageFactory.build(chat=chat)
    )
    method, url = _endpoints(chat, message)[endpoint]
    before = row_counts()

    response = getattr(api_client, method)(url, {"content": QUESTION}, format="json")

    assert response.status_code == 404
    assert row_counts() == before


def test_a_project_member_can_read_and_ask_in_the_matters_chats(
    api_client: APIClient, user: User, other_user: User
) -> None:
    project = factories.ProjectFactory.create(owner=other_user, members=[user])
    chat = factories.ChatFactory.create(project=project, owner=other_user)

    assert api_client.get(f"/api/chats/{chat.pk}/").status_code == 200
    assert api_client.post(messages_url(chat), {"content": QUESTION}, format="json").status_code == 201


@pytest.mark.parametrize("endpoint", range(4))
def test_unauthenticated_requests_are_refused_and_write_nothing(matter_chat: Chat, endpoint: int) -> None:
    message = factories.MessageFactory.create(chat=matter_chat, status=Message.Status.INTERRUPTED)
    method, url = _endpoints(matter_chat, message)[endpoint]
    before = row_counts()

    response = getattr(APIClient(), method)(url, {"content": QUESTION}, format="json")

    assert response.status_code == 401
    assert response["WWW-Authenticate"] == "Bearer"
    assert row_counts() == before


def test_unauthenticated_chat_list_and_create_are_refused() -> None:
    assert APIClient().get("/api/chats/").status_code == 401
    assert APIClient().post("/api/chats/", {}, format="json").status_code == 401


def test_token_authentication_works(matter_chat: Chat, user: User) -> None:
    client = APIClient()
    client.credentials(HTTP_AUTHORIZATION=f"Bearer {factories.api_token(user)}")

    response = client.post(messages_url(matter_chat), {"content": QUESTION}, format="json")

    assert response.status_code == 201


def test_session_authentication_works(client: Any, matter_chat: Chat, user: User) -> None:
    client.force_login(user)

    response = client.get(f"/api/chats/{matter_chat.pk}/")

    assert response.status_code == 200


# --- schema -------------------------------------------------------------------------------------------------------


def test_the_openapi_schema_documents_the_chat_api(api_client: APIClient) -> None:
    response = api_client.get("/api/schema/", HTTP_ACCEPT="application/vnd.oai.openapi+json")

    assert response.status_code == 200
    schema = response.json()
    paths = schema["paths"]
    assert {
        "/api/chats/",
        "/api/chats/{chat_id}/",
        "/api/chats/{chat_id}/messages/",
        "/api/chats/{chat_id}/messages/stream/",
        "/api/chats/{chat_id}/messages/{message_id}/resume/",
    } <= set(paths)
    single_shot = paths["/api/chats/{chat_id}/messages/"]["post"]
    assert single_shot["requestBody"]["content"]["application/json"]["schema"]["$ref"].endswith("/MessageCreate")
    assert {"201", "400", "404", "502"} <= set(single_shot["responses"])
    stream = paths["/api/chats/{chat_id}/messages/stream/"]["post"]
    assert "text/event-stream" in stream["responses"]["200"]["content"]
    assert "409" in paths["/api/chats/{chat_id}/messages/{message_id}/resume/"]["post"]["responses"]
    assert paths["/api/chats/{chat_id}/"]["get"]["parameters"][0]["schema"] == {"type": "string", "format": "uuid"}


# --- a ledger failure never breaks the turn (PostgreSQL) ----------------------------------------------------------


@pytest.mark.postgres
@pytest.mark.django_db(transaction=True)
@pytest.mark.usefixtures("ledger_refuses_every_row")
def test_a_broken_ledger_leaves_the_single_shot_response_and_turn_intact(
    local_opinion: CaselawOpinion, committed_matter_chat: tuple[APIClient, Chat], caplog: pytest.LogCaptureFixture
) -> None:
    client, chat = committed_matter_chat
    with caplog.at_level(logging.ERROR, logger="citations.receivers"):
        response = client.post(messages_url(chat), {"content": QUESTION}, format="json")

    assert response.status_code == 201
    body = response.json()
    assert body["message"]["citations"]
    message = Message.objects.get(pk=body["message"]["id"])
    assert message.status == "complete"
    assert message.citations.count() == len(body["message"]["citations"])
    assert not CitationLedgerEntry.objects.exists()
    assert any("assembly failed" in r.getMessage() for r in caplog.records)
    # ... and the backfill can repair it later: the receiver logged how
    assert "backfill_ledger" in caplog.text
