"""Claim order: a turn's quotes (verified or failed) and the sources its tools consulted read back in the
order the turn made them, in the chat API, the trace and the admin, although a turn's rows share their
``created_at`` and have random ids; and the trace reads turn by turn, whenever its entries were written."""

from __future__ import annotations

import io
from collections.abc import Sequence

import pytest
from django.contrib.auth.models import User
from django.core.management import call_command
from django.test import Client
from django.urls import reverse
from rest_framework.test import APIClient

from chats.models import CaselawOpinion, Chat, Message
from chats.services import ClaimedCitation, ConsultedSource, finalize_turn, start_turn
from citations import ledger
from citations.models import CitationLedgerEntry
from citations.selectors import chat_ledger
from tests import factories

# Distinct words, so that every three-word slice verifies exactly and at one place only.
WORDS = [f"w{n}" for n in range(600)]
FISHER_ANSWER = (
    "The Court remanded. Fisher v. University of Texas at Austin, 570 U.S. 297, 310 (2013). "
    "Strict scrutiny applies. Id. at 311. See also Fisher, 570 U.S., at 312."
)


def _claims(chat: Chat, opinion: CaselawOpinion, count: int) -> list[ClaimedCitation]:
    """``count`` claims cycling through a KB quote, a caselaw quote, a KB claim that fails and a caselaw claim
    that fails, each quote different."""
    document = factories.DocumentFactory.create(project=chat.project, content=" ".join(WORDS))
    claims = []
    for n in range(count):
        quote = " ".join(WORDS[3 * n : 3 * n + 3])
        claims.append(
            [
                ClaimedCitation(quote, document_id=document.pk),
                ClaimedCitation(quote, opinion_id=opinion.pk),
                ClaimedCitation(f"{quote} never said", document_id=document.pk),
                ClaimedCitation(f"{quote} never said", opinion_id=opinion.pk),
            ][n % 4]
        )
    return claims


def _turn(
    chat: Chat,
    claims: list[ClaimedCitation],
    sources: Sequence[ConsultedSource] = (),
    answer: str = "The answer.",
) -> Message:
    _, message = start_turn(chat=chat, content="question")
    finalize_turn(message=message, content=answer, status="complete", claimed_citations=claims, tool_sources=sources)
    return message


def _failing_assembly(message: Message, **kwargs: object) -> int:
    raise RuntimeError("the ledger is unavailable")


def _sources(count: int) -> list[ConsultedSource]:
    return [ConsultedSource(source_kind="mcp", tool="search", label=f"source {n}") for n in range(count)]


def test_a_turns_quotes_failed_claims_and_sources_read_back_in_the_order_it_made_them(user: User) -> None:
    chat = factories.ChatFactory.create(project__owner=user)
    opinion = factories.CaselawOpinionFactory.create(text=" ".join(WORDS))
    claims = _claims(chat, opinion, 40)

    message = _turn(chat, claims, _sources(20))

    # KB and caselaw claims are numbered together, in the order claimed
    kb = list(message.citations.all())
    caselaw = list(message.caselaw_citations.all())
    assert [row.position for row in kb] == [n for n in range(40) if n % 2 == 0]
    assert [row.position for row in caselaw] == [n for n in range(40) if n % 2 == 1]
    assert [row.quote for row in sorted([*kb, *caselaw], key=lambda row: row.position)] == [c.quote for c in claims]
    assert [source.label for source in message.tool_sources.all()] == [f"source {n}" for n in range(20)]

    # The chat API lists each kind in that order, and says where each claim stood
    client = APIClient()
    client.force_authenticate(user=user)
    response = client.get(f"/api/chats/{chat.pk}/messages/")
    assert response.status_code == 200
    body = next(m for m in response.json()["results"] if m["id"] == str(message.pk))
    assert [c["position"] for c in body["citations"]] == list(range(0, 40, 4))
    assert [c["quote"] for c in body["citations"]] == [claims[n].quote for n in range(0, 40, 4)]
    assert [c["position"] for c in body["caselaw_citations"]] == list(range(1, 40, 4))
    # Failed claims: the KB ones then the caselaw ones, each in claim order
    assert [c["position"] for c in body["unverified_citations"]] == [*range(2, 40, 4), *range(3, 40, 4)]
    assert [s["label"] for s in body["tool_sources"]] == [f"source {n}" for n in range(20)]


def test_a_resumed_turn_numbers_its_claims_and_sources_on_from_its_first_run(user: User) -> None:
    chat = factories.ChatFactory.create(project__owner=user)
    opinion = factories.CaselawOpinionFactory.create(text=" ".join(WORDS))
    claims = _claims(chat, opinion, 12)
    sources = _sources(8)
    _, message = start_turn(chat=chat, content="question")
    finalize_turn(
        message=message, content="Part", status="interrupted", claimed_citations=claims[:5], tool_sources=sources[:3]
    )

    finalize_turn(
        message=message, content="Part two", status="complete", claimed_citations=claims[5:], tool_sources=sources[3:]
    )

    quotes = sorted([*message.citations.all(), *message.caselaw_citations.all()], key=lambda row: row.position)
    assert [(row.position, row.quote) for row in quotes] == [(n, claim.quote) for n, claim in enumerate(claims)]
    assert [(s.position, s.label) for s in message.tool_sources.all()] == [(n, f"source {n}") for n in range(8)]


def test_the_trace_reads_turn_by_turn_in_claim_then_answer_order_whenever_entries_were_written(
    user: User, local_opinion: CaselawOpinion, monkeypatch: pytest.MonkeyPatch
) -> None:
    chat = factories.ChatFactory.create(project__owner=user)
    opinion = factories.CaselawOpinionFactory.create(text=" ".join(WORDS))
    # The first turn's entries are lost (its ledger assembly fails, logged), and written again by a backfill
    # after the second turn's
    with monkeypatch.context() as failing:
        failing.setattr(ledger, "assemble", _failing_assembly)
        first = _turn(chat, _claims(chat, opinion, 24), _sources(6), answer=FISHER_ANSWER)
    second = _turn(chat, _claims(chat, opinion, 24), _sources(6), answer=FISHER_ANSWER)
    assert first.case_citations.count() == 3
    assert not CitationLedgerEntry.objects.filter(message=first).exists()
    call_command("backfill_ledger", stdout=io.StringIO())
    assert CitationLedgerEntry.objects.filter(message=first).count() == 24 + 3 + 6

    expected = [row_id for message in (first, second) for row_id in _rows_in_turn_order(message)]
    client = APIClient()
    client.force_authenticate(user=user)
    response = client.get(f"/api/chats/{chat.pk}/ledger/")
    assert response.status_code == 200
    pages = [response.json()]
    while pages[-1]["next"]:
        pages.append(client.get(pages[-1]["next"]).json())
    assert len(pages) == 2  # 66 entries, 50 a page: the order holds across pages
    traced = [entry["source_row_id"] for page in pages for entry in page["results"]]
    assert traced == expected

    # The admin's message page lists a turn's entries in the same order (each links to its source row)
    admin = Client()
    admin.force_login(factories.UserFactory.create(is_staff=True, is_superuser=True))
    page = admin.get(reverse("admin:chats_message_change", args=[second.pk])).content.decode()
    page = page[page.lower().index("citation ledger entries") :]
    rows = _rows_in_turn_order(second)
    assert all(row in page for row in rows)
    assert sorted(rows, key=page.index) == rows
    assert [str(e.source_row_id) for e in chat_ledger(chat=chat, message_id=second.pk)] == rows


def _rows_in_turn_order(message: Message) -> list[str]:
    quotes = sorted([*message.citations.all(), *message.caselaw_citations.all()], key=lambda row: row.position)
    cases = message.case_citations.order_by("answer_offset_start")
    return [str(row.pk) for row in [*quotes, *cases, *message.tool_sources.order_by("position")]]
