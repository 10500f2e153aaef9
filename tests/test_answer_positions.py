"""Every quote, failed claim and case citation carries its span in the answer text (chats/answer_positions.py):
placed at finalize, stored on the quote rows (a checked shape), and shown in the API, the stream's events
(tests/test_streaming.py) and the trace."""

from __future__ import annotations

from collections.abc import Callable

import pytest
from django.core.exceptions import ValidationError
from django.db import IntegrityError, transaction
from django.urls import reverse
from rest_framework.test import APIClient

from chats.answer_positions import NO_QUOTE, NOT_IN_ANSWER, AnswerSpan, place_quotes
from chats.assistant import FinalAnswer, Script, TextDelta
from chats.documents import save_document
from chats.models import Chat, DocumentQuote, Message, OpinionQuote
from chats.services import ClaimedCitation
from tests import factories

pytestmark = pytest.mark.django_db

QUOTE = "The Equal Protection Clause requires that a racial classification survive strict scrutiny."


# --- placing quotes ---------------------------------------------------------------------------------------------


def test_an_exact_quote_is_placed_where_the_answer_says_it() -> None:
    answer = f'The memo says "{QUOTE}" and more.'

    (span,) = place_quotes(answer, [QUOTE])

    assert answer[span.start : span.end] == QUOTE
    assert span.reason == ""


def test_a_quote_the_answer_reflows_is_placed_tolerantly() -> None:
    answer = "It holds: “The Equal  Protection Clause\nrequires that a racial classification survive strict scrutiny.”"

    (span,) = place_quotes(answer, [QUOTE])

    assert span.start == answer.index("The Equal")
    assert span.end == answer.index("scrutiny.") + len("scrutiny.")


def test_repeated_claims_of_one_quote_take_successive_uses() -> None:
    answer = "strict scrutiny here, and strict scrutiny there"

    first, second, third = place_quotes(answer, ["strict scrutiny"] * 3)

    assert (first.start, second.start) == (0, answer.rindex("strict scrutiny"))
    assert third.start == 0  # claimed more often than written: its first use


def test_a_quote_not_in_the_answer_or_empty_has_no_span_and_says_why() -> None:
    assert place_quotes("An answer.", ["never written", "  "]) == [
        AnswerSpan(None, None, NOT_IN_ANSWER),
        AnswerSpan(None, None, NO_QUOTE),
    ]


# --- stored at finalize, shown in the API ----------------------------------------------------------------------


def test_a_turn_stores_and_shows_the_span_of_each_quote_and_failed_claim(
    api_client: APIClient, matter_chat: Chat, local_opinion: object, scripted_backend: Callable[..., Script]
) -> None:
    # Given an answer quoting the memo and an opinion, and a failed claim it does write, and one it does not
    document = matter_chat.project.documents.get()  # type: ignore[union-attr]
    opinion_quote = "Strict scrutiny is a searching examination"
    answer = f'The memo: "{QUOTE}" The Court: "{opinion_quote}". It "forbids every classification".'
    scripted_backend(
        TextDelta(answer),
        FinalAnswer(
            (
                ClaimedCitation(QUOTE, document_id=document.pk),
                ClaimedCitation(opinion_quote, opinion_id=local_opinion.pk),  # type: ignore[attr-defined]
                ClaimedCitation("forbids every classification", document_id=document.pk),
                ClaimedCitation("a quote the answer never wrote", document_id=document.pk),
            )
        ),
    )

    body = api_client.post(f"/api/chats/{matter_chat.pk}/messages/", {"content": "q"}, format="json").json()

    # Then the quote rows hold their spans, and the API shows them
    kb, caselaw = body["message"]["citations"], body["message"]["caselaw_citations"]
    assert [answer[c["answer_start"] : c["answer_end"]] for c in kb + caselaw] == [QUOTE, opinion_quote]
    written, unwritten = body["message"]["unverified_citations"]
    assert answer[written["answer_start"] : written["answer_end"]] == "forbids every classification"
    assert written["answer_unplaced_reason"] is None
    assert (unwritten["answer_start"], unwritten["answer_end"]) == (None, None)
    assert unwritten["answer_unplaced_reason"] == NOT_IN_ANSWER
    message = Message.objects.get(pk=body["message"]["id"])
    row = OpinionQuote.objects.get(message=message)
    assert message.content[row.answer_offset_start : row.answer_offset_end] == opinion_quote


def test_the_trace_shows_the_answer_span_of_quotes_failed_claims_and_case_citations(
    api_client: APIClient, user: object
) -> None:
    chat = factories.ChatFactory.create(project__owner=user)
    message = factories.MessageFactory.create(chat=chat, content="See 570 U.S. 297: must ultimately be satisfied.")
    placed = factories.DocumentQuoteFactory.create(message=message, answer_offset_start=18, answer_offset_end=46)
    unplaced = factories.DocumentQuoteFactory.create(
        message=message,
        quote="words",
        source_offset_start=None,
        source_offset_end=None,
        verification_method="unverified",
        verification_confidence=None,
        passage_sha256="",
        unverified_reason="not found in the document",
        answer_unplaced_reason=NOT_IN_ANSWER,
        document=placed.document,
    )
    case = factories.CaseCitationFactory.create(message=message, answer_offset_start=4)
    from citations.ledger import assemble

    assemble(message=message)

    url = reverse("citations:chat-ledger", kwargs={"chat_id": chat.pk})
    entries = {e["source_row_id"]: e for e in api_client.get(url).json()["results"]}

    spans = {
        row: (entries[str(row.pk)]["answer_start"], entries[str(row.pk)]["answer_end"])
        for row in (placed, unplaced, case)
    }
    assert spans == {placed: (18, 46), unplaced: (None, None), case: (4, 16)}
    assert entries[str(unplaced.pk)]["answer_unplaced_reason"] == NOT_IN_ANSWER
    assert entries[str(placed.pk)]["answer_unplaced_reason"] is None


# --- the stored shape -----------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "span",
    [
        {"answer_offset_start": 5, "answer_offset_end": None},
        {"answer_offset_start": 9, "answer_offset_end": 4},
        {"answer_offset_start": 0, "answer_offset_end": 4, "answer_unplaced_reason": NOT_IN_ANSWER},
    ],
)
def test_a_quote_row_has_a_whole_span_and_no_reason_or_no_span(span: dict[str, object]) -> None:
    row = factories.DocumentQuoteFactory.build(message=factories.MessageFactory.create(), **span)
    assert row.document is not None
    save_document(document=row.document)

    with pytest.raises(ValidationError):
        row.full_clean()
    with pytest.raises(IntegrityError), transaction.atomic():
        DocumentQuote.objects.bulk_create([row])
