"""The ledger trace API: ``GET /api/chats/{chat_id}/ledger/[?message={id}]``.

Entries are written by the real writer (``citations.ledger.assemble``) over source rows made by
the factories; passages are checked against the source text sliced in Python.
"""

from __future__ import annotations

import datetime
import io
from collections.abc import Callable
from contextlib import AbstractContextManager
from typing import Any
from uuid import uuid4

import pytest
from django.contrib.auth.models import User
from django.core.management import call_command
from django.db import connection
from django.test.utils import CaptureQueriesContext
from django.urls import reverse
from django.utils import timezone
from rest_framework.test import APIClient

from chats.models import Chat
from citations import ledger, seals
from citations.models import CitationLedgerEntry, TurnSeal
from tests import factories
from tests.test_cited_sources import change_below_the_application

pytestmark = pytest.mark.django_db

AssertNumQueries = Callable[[int], AbstractContextManager[Any]]

# Multi-byte characters before the quote: SQL SUBSTR must count characters exactly as Python slices do.
DOCUMENT_TEXT = "Café — « résumé » 🙂. " + factories.TEXT


def _url(chat: Chat, **query: str) -> str:
    url = reverse("citations:chat-ledger", kwargs={"chat_id": chat.pk})
    return url + ("?" + "&".join(f"{k}={v}" for k, v in query.items()) if query else "")


@pytest.fixture
def chat(user: User) -> Chat:
    return factories.ChatFactory.create(project__owner=user)


def test_entries_resolve_to_their_sources_with_the_passage_read_from_the_content_layer(
    api_client: APIClient, chat: Chat
) -> None:
    # Given a turn that quoted a KB document (multi-byte text before the quote) and an opinion,
    # and consulted one tool source
    message = factories.MessageFactory.create(chat=chat)
    document = factories.DocumentFactory.create(project=chat.project, content=DOCUMENT_TEXT)
    factories.DocumentQuoteFactory.create(message=message, document=document)
    factories.OpinionQuoteFactory.create(message=message)
    factories.MessageToolSourceFactory.create(message=message)
    ledger.assemble(message)
    citation = message.citations.get()
    caselaw = message.caselaw_citations.get()
    tool_source = message.tool_sources.get()

    # When its chat's ledger is read
    response = api_client.get(_url(chat))

    # Then each entry names its source, and a quote's passage is source[start:end]
    assert response.status_code == 200
    assert response.data["count"] == 3
    entries = response.json()["results"]
    kb_entry = next(e for e in entries if e["document"] is not None)
    assert kb_entry["source_kind"] == "kb_document"
    assert kb_entry["message_id"] == str(message.pk)
    assert kb_entry["source_row_id"] == str(citation.pk)
    assert citation.document is not None
    assert kb_entry["document"] == {"id": str(citation.document.pk), "title": citation.document.title}
    assert kb_entry["opinion"] is None
    assert kb_entry["tool_source"] is None
    start, end = citation.source_offset_start, citation.source_offset_end
    assert kb_entry["passage"] == {"start": start, "end": end, "text": DOCUMENT_TEXT[start:end]}
    assert kb_entry["passage"]["text"] == citation.quote
    # The passage read by the database hashes to the digest finalize computed in Python (multi-byte text before it)
    assert kb_entry["passage_intact"] is True
    assert kb_entry["verification_status"] == "exact_match"
    assert kb_entry["confidence"] == 1.0
    assert kb_entry["provider"] is None
    assert kb_entry["retrieved_at"] is None
    stored = CitationLedgerEntry.objects.get(message_citation=citation)
    assert kb_entry["id"] == str(stored.pk)
    assert kb_entry["created_at"] == stored.created_at.isoformat().replace("+00:00", "Z")

    caselaw_entry = next(e for e in entries if e["opinion"] is not None)
    opinion = caselaw.opinion
    assert opinion is not None
    assert caselaw.source_offset_start is not None
    assert caselaw_entry["source_kind"] == "caselaw"
    assert caselaw_entry["source_row_id"] == str(caselaw.pk)
    assert caselaw_entry["opinion"] == {
        "id": str(opinion.pk),
        "case_name": opinion.case_name,
        "citation": opinion.citation,
        "court": opinion.court,
        "date_filed": None,
        "url": opinion.absolute_url,
    }
    start, end = caselaw.source_offset_start, caselaw.source_offset_end
    assert caselaw_entry["passage"] == {"start": start, "end": end, "text": opinion.text[start:end]}
    assert caselaw_entry["passage_intact"] is True
    assert caselaw_entry["provider"] == opinion.provider
    assert caselaw_entry["retrieved_at"] is not None

    tool_entry = next(e for e in entries if e["tool_source"] is not None)
    assert tool_entry["source_row_id"] == str(tool_source.pk)
    assert tool_entry["tool_source"] == {
        "id": str(tool_source.pk),
        "tool": tool_source.tool,
        "label": tool_source.label,
        "subtitle": tool_source.subtitle,
        "url": tool_source.url,
        "external_ref": tool_source.external_ref,
    }
    assert tool_entry["passage"] is None
    assert tool_entry["passage_intact"] is None
    assert tool_entry["document"] is None
    assert tool_entry["opinion"] is None
    assert tool_entry["verification_status"] == "provenance"
    assert tool_entry["confidence"] is None
    assert tool_entry["provider"] == tool_source.provider


def test_the_passage_is_read_at_request_time_not_stored(api_client: APIClient, chat: Chat) -> None:
    # Given a KB quote in the ledger
    message = factories.assembled_turn(chat, caselaw=0, tools=0)
    citation = message.citations.get()
    document = citation.document
    start, end = citation.source_offset_start, citation.source_offset_end
    assert document is not None
    assert start is not None
    assert end is not None

    # When the document's text at those offsets changes afterwards (below the application: a cited
    # text is immutable to it)
    change_below_the_application(document, document.content[:start] + "X" * (end - start) + document.content[end:])

    # Then the trace shows what the source says now, and that it is not what was verified
    (entry,) = api_client.get(_url(chat)).json()["results"]
    assert entry["passage"]["text"] == "X" * (end - start)
    assert entry["passage_intact"] is False


def test_a_chat_of_another_user_is_not_found(chat: Chat, other_user: User) -> None:
    factories.assembled_turn(chat)
    client = APIClient()
    client.force_authenticate(user=other_user)

    assert client.get(_url(chat)).status_code == 404


def test_an_unknown_chat_is_not_found(api_client: APIClient) -> None:
    url = reverse("citations:chat-ledger", kwargs={"chat_id": uuid4()})

    assert api_client.get(url).status_code == 404


def test_a_project_member_sees_the_trace(chat: Chat, other_user: User) -> None:
    factories.assembled_turn(chat)
    assert chat.project is not None
    chat.project.members.add(other_user)
    client = APIClient()
    client.force_authenticate(user=other_user)

    response = client.get(_url(chat))

    assert response.status_code == 200
    assert response.data["count"] == 3


def test_an_anonymous_caller_is_refused(chat: Chat) -> None:
    factories.assembled_turn(chat)

    assert APIClient().get(_url(chat)).status_code == 401


def test_the_message_parameter_narrows_to_one_turn(api_client: APIClient, chat: Chat) -> None:
    first = factories.assembled_turn(chat)
    second = factories.assembled_turn(chat, kb=2, caselaw=0, tools=0)

    everything = api_client.get(_url(chat)).json()
    one_turn = api_client.get(_url(chat, message=str(second.pk))).json()

    assert everything["count"] == 5
    # Turn order: the first turn's entries come first.
    assert [e["message_id"] for e in everything["results"]] == [str(first.pk)] * 3 + [str(second.pk)] * 2
    assert one_turn["count"] == 2
    assert {e["message_id"] for e in one_turn["results"]} == {str(second.pk)}


def test_each_entry_carries_its_turns_seal(api_client: APIClient, chat: Chat) -> None:
    # Given a turn sealed when it was answered, one sealed late by seal_turns, and one not sealed
    on_time = factories.assembled_turn(chat, kb=1, caselaw=0, tools=0)
    seals.seal_turn(message_id=on_time.pk)
    late = factories.assembled_turn(chat, kb=1, caselaw=0, tools=1)
    call_command("seal_turns", stdout=io.StringIO())
    unsealed = factories.assembled_turn(chat, kb=0, caselaw=0, tools=1)

    entries = api_client.get(_url(chat)).json()["results"]

    by_turn = {entry["message_id"]: entry["turn_seal"] for entry in entries}
    assert len(entries) == 4
    assert all(entry["turn_seal"] == by_turn[entry["message_id"]] for entry in entries)
    assert {k: v for k, v in by_turn[str(on_time.pk)].items() if k != "sealed_at"} == {"sequence": 1, "late": False}
    late_seal = TurnSeal.objects.get(message=late)
    assert by_turn[str(late.pk)] == {
        "sequence": 2,
        "late": True,
        "sealed_at": late_seal.sealed_at.isoformat().replace("+00:00", "Z"),
    }
    assert by_turn[str(unsealed.pk)] is None


def test_a_message_of_another_chat_yields_an_empty_list(api_client: APIClient, chat: Chat, user: User) -> None:
    factories.assembled_turn(chat)
    elsewhere = factories.assembled_turn(factories.ChatFactory.create(project__owner=user))

    response = api_client.get(_url(chat, message=str(elsewhere.pk)))

    assert response.status_code == 200
    assert response.data["count"] == 0


def test_a_message_that_is_not_a_uuid_is_a_field_error(api_client: APIClient, chat: Chat) -> None:
    response = api_client.get(_url(chat, message="42"))

    assert response.status_code == 400
    assert set(response.json()) == {"message"}


def test_an_invisible_chat_is_not_found_even_with_a_bad_message(chat: Chat, other_user: User) -> None:
    client = APIClient()
    client.force_authenticate(user=other_user)

    assert client.get(_url(chat, message="42")).status_code == 404


@pytest.mark.parametrize("turns", [1, 10])
def test_the_query_count_does_not_grow_with_the_entries(
    api_client: APIClient, chat: Chat, django_assert_num_queries: AssertNumQueries, turns: int
) -> None:
    # Given 3 entries (1 turn) or 30 entries (10 turns), one of each kind per turn, the quotes with alterations
    messages = [factories.assembled_turn(chat, altered=True) for _ in range(turns)]

    # Then the trace takes the same queries: the chat (access), when its first turn began, the count, the page,
    # the seals of the page's turns
    with django_assert_num_queries(5):
        response = api_client.get(_url(chat))
    assert response.data["count"] == 3 * turns

    with django_assert_num_queries(5):
        api_client.get(_url(chat, message=str(messages[-1].pk)))


def test_entries_are_paginated(api_client: APIClient, chat: Chat) -> None:
    factories.assembled_turn(chat, kb=0, caselaw=0, tools=55)

    first = api_client.get(_url(chat)).json()
    second = api_client.get(first["next"]).json()

    assert first["count"] == 55
    assert len(first["results"]) == 50
    assert len(second["results"]) == 5
    assert {e["id"] for e in first["results"]}.isdisjoint({e["id"] for e in second["results"]})


def test_the_schema_documents_the_trace(api_client: APIClient) -> None:
    response = api_client.get("/api/schema/", {"format": "json"})

    assert response.status_code == 200
    operation = response.json()["paths"]["/api/chats/{chat_id}/ledger/"]["get"]
    parameters = {p["name"]: p for p in operation["parameters"]}
    assert parameters["message"]["in"] == "query"
    assert parameters["message"]["schema"] == {"type": "string", "format": "uuid"}
    assert parameters["chat_id"]["in"] == "path"
    entry_schema = response.json()["components"]["schemas"]["LedgerEntry"]["properties"]
    assert {"document", "opinion", "tool_source", "passage", "verification_status", "provider"} <= set(entry_schema)
    assert entry_schema["turn_seal"]["nullable"] is True
    turn_seal = response.json()["components"]["schemas"]["TurnSeal"]["properties"]
    assert set(turn_seal) == {"sequence", "late", "sealed_at"}
    assert entry_schema["alterations"]["nullable"] is True
    alteration = response.json()["components"]["schemas"]["Alteration"]["properties"]
    assert set(alteration) == {"kind", "detail", "quote_text", "source_start", "source_end", "alters"}
    assert entry_schema["context_flags"]["nullable"] is True
    flag = response.json()["components"]["schemas"]["ContextFlag"]["properties"]
    assert set(flag) == {"flag", "source_start", "source_end"}


def test_a_failed_claim_is_traced_as_unverified_with_its_reason_and_no_passage(
    api_client: APIClient, chat: Chat
) -> None:
    # Given a turn with one verified quote and two failed claims (one naming a document, one naming none)
    message = factories.MessageFactory.create(chat=chat)
    verified = factories.DocumentQuoteFactory.create(message=message)
    failed = factories.DocumentQuoteFactory.create(
        message=message,
        document=verified.document,
        failed=True,
        unverified_reason="not found in the document",
    )
    nameless = factories.OpinionQuoteFactory.create(
        message=message,
        opinion=None,
        failed=True,
        unverified_reason="unknown opinion",
    )
    ledger.assemble(message)

    entries = {e["source_row_id"]: e for e in api_client.get(_url(chat)).json()["results"]}

    # Then each claim has its entry; the failed ones say why, with no passage and no confidence
    assert entries[str(verified.pk)]["verification_status"] == "exact_match"
    assert entries[str(verified.pk)]["unverified_reason"] is None
    assert (
        entries[str(failed.pk)]["verification_status"],
        entries[str(failed.pk)]["unverified_reason"],
        entries[str(failed.pk)]["passage"],
        entries[str(failed.pk)]["confidence"],
        entries[str(failed.pk)]["document"]["id"],
    ) == ("unverified", "not found in the document", None, None, str(verified.document_id))
    assert (
        entries[str(nameless.pk)]["source_kind"],
        entries[str(nameless.pk)]["verification_status"],
        entries[str(nameless.pk)]["unverified_reason"],
        entries[str(nameless.pk)]["opinion"],
        entries[str(nameless.pk)]["provider"],
    ) == ("caselaw", "unverified", "unknown opinion", None, None)


def test_each_alteration_and_omission_is_traced_with_its_source_span(api_client: APIClient, chat: Chat) -> None:
    # Given a turn with an altered quote of a document and of an opinion, an exact quote, a failed claim,
    # and a consulted source
    message = factories.assembled_turn(chat, altered=True)
    exact = factories.DocumentQuoteFactory.create(message=message)
    failed = factories.DocumentQuoteFactory.create(
        message=message, document=exact.document, failed=True, unverified_reason="not found in the document"
    )
    ledger.assemble(message)
    altered_kb = message.citations.get(verification_method="tolerant_match")
    altered_caselaw = message.caselaw_citations.get()
    assert altered_caselaw.opinion is not None

    entries = {e["source_row_id"]: e for e in api_client.get(_url(chat)).json()["results"]}

    # Then each altered quote lists its bracketed letter and its omission, with the source text each stands for
    for row, text in ((altered_kb, factories.TEXT), (altered_caselaw, altered_caselaw.opinion.text)):
        traced = entries[str(row.pk)]["alterations"]
        assert [(a["kind"], a["detail"], a["quote_text"]) for a in traced] == [
            ("letter", "", "[t]"),
            ("ellipsis", "", "..."),
        ]
        assert [text[a["source_start"] : a["source_end"]] for a in traced] == ["T", "ultimately"]
        passage = entries[str(row.pk)]["passage"]
        assert passage["text"] == "The reviewing court must ultimately be satisfied"
        assert all(passage["start"] <= a["source_start"] <= a["source_end"] <= passage["end"] for a in traced)
    # ... an exact quote and a failed claim have none, and a consulted source has no place for them
    assert entries[str(exact.pk)]["alterations"] == []
    assert entries[str(failed.pk)]["alterations"] == []
    (tool_entry,) = [e for e in entries.values() if e["tool_source"] is not None]
    assert tool_entry["alterations"] is None


def test_a_checked_case_citation_is_traced_with_its_status_and_the_case_it_really_is(
    api_client: APIClient, chat: Chat
) -> None:
    message = factories.MessageFactory.create(chat=chat, content="Smith v. Jones, 570 U.S. 297 (2013).")
    case = factories.CaseCitationFactory.create(
        message=message, answer_offset_start=16, case_name="Smith v. Jones", status="name_mismatch", detail="other"
    )
    ledger.assemble(message)
    opinion = case.opinion
    assert opinion is not None

    (entry,) = api_client.get(_url(chat)).json()["results"]

    assert assert_is_case_entry(entry) == {
        "id": str(case.pk),
        "kind": "full",
        "citation": "570 U.S. 297",
        "case_name": "Smith v. Jones",
        "status": "name_mismatch",
        "detail": "other",
        "pin": "",
        "pin_status": "",
        "answer_start": 16,
        "answer_end": 28,
        "opinion": {
            "id": str(opinion.pk),
            "case_name": opinion.case_name,
            "citation": opinion.citation,
            "court": opinion.court,
            "date_filed": None,
            "url": opinion.absolute_url,
        },
    }


def assert_is_case_entry(entry: dict[str, Any]) -> dict[str, Any]:
    """A case-citation entry: kind caselaw, the check's status, no confidence, no passage, no other source."""
    assert (entry["source_kind"], entry["verification_status"], entry["confidence"]) == (
        "caselaw",
        "name_mismatch",
        None,
    )
    assert entry["passage"] is entry["document"] is entry["opinion"] is entry["tool_source"] is None
    case: dict[str, Any] = entry["case_citation"]
    return case


def test_turns_dated_before_their_chat_and_rows_dated_before_their_turn_are_traced(
    api_client: APIClient, chat: Chat
) -> None:
    # Given a turn dated 90 days before its chat was made (imported with its own date, as the demo's older
    # turns are), one of whose rows is dated a second before the turn (written by a server whose clock is
    # a second behind)
    message = factories.MessageFactory.create(chat=chat, created_at=chat.created_at - datetime.timedelta(days=90))
    factories.DocumentQuoteFactory.create(message=message, created_at=message.created_at)
    factories.MessageToolSourceFactory.create(
        message=message, created_at=message.created_at - datetime.timedelta(seconds=1)
    )
    ledger.assemble(message)

    # Then the chat's trace and the turn's list both entries: the trace's date bound (the months it reads)
    # is when the chat's first turn began, less a margin, not when the chat was made
    for query in ({}, {"message": str(message.pk)}):
        response = api_client.get(_url(chat, **query))
        assert response.status_code == 200
        assert response.json()["count"] == 2, query


@pytest.mark.postgres
def test_a_chats_trace_reads_no_month_before_its_first_turn(api_client: APIClient, chat: Chat) -> None:
    # Given a ledger with the partitions of the three months before this one and of the next (a deployment
    # keeps every month of its record), and a chat whose turn is this month's
    from citations import partitions

    months = [timezone.now().date().replace(day=1)]
    for _ in range(3):
        months.insert(0, (months[0] - datetime.timedelta(days=1)).replace(day=1))
    partitions.ensure_partitions(ahead=4, today=months[0])
    message = factories.assembled_turn(chat)
    ledger_table = CitationLedgerEntry._meta.db_table

    for query in ({}, {"message": str(message.pk)}):
        with CaptureQueriesContext(connection) as captured:
            assert api_client.get(_url(chat, **query)).status_code == 200
        reads = [q["sql"] for q in captured.captured_queries if f'FROM "{ledger_table}"' in q["sql"]]
        assert len(reads) == 2, reads  # the count and the page

        # Then neither plans the months before the turn began: three and two months ago are pruned (the last
        # month may be read, when the turn began less than the bound's margin after it ended)
        for sql in reads:
            with connection.cursor() as cursor:
                cursor.execute(f"EXPLAIN {sql}")
                plan = "\n".join(row[0] for row in cursor.fetchall())
            assert partitions.partition_name(months[-1]) in plan, plan
            for month in months[:2]:
                assert partitions.partition_name(month) not in plan, (query, plan)
