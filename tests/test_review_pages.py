"""The review pages (issue 52, item 4): decision controls on the trace page's cards, the certificate issued from a
turn and shown as a printable page, the matter's "needs review" queue, and the owner's roles and wording."""

from __future__ import annotations

from typing import Any

import pytest
from django.contrib.auth.models import User
from django.db import connection
from django.test import Client
from django.test.utils import CaptureQueriesContext
from django.urls import reverse

from chats.models import Chat, Message, ProjectMembership, Role
from citations import review_queue
from citations.claims import claims_of
from citations.models import Certificate, ReviewDecision
from citations.reviews import record_decision
from tests import factories
from tests.test_reviews import answered_turn


def client_of(user: User, *, csrf: bool = False) -> Client:
    client = Client(enforce_csrf_checks=csrf)
    client.force_login(user)
    return client


@pytest.fixture
def reviewer(matter_chat: Chat) -> User:
    person = factories.UserFactory.create(username="rita")
    matter_chat.project.members.add(person, through_defaults={"role": Role.REVIEWER})  # type: ignore[union-attr]
    return person


@pytest.fixture
def turn(matter_chat: Chat) -> Message:
    return answered_turn(matter_chat, claims=2)


def decision_url(turn: Message, claim_id: object) -> str:
    return reverse("pages:claim-decision", args=[turn.chat_id, turn.pk, claim_id])


def certificate_url(turn: Message) -> str:
    return reverse("pages:turn-certificate", args=[turn.chat_id, turn.pk])


def test_a_reviewer_decides_from_the_card_and_is_sent_back_to_it(reviewer: User, turn: Message) -> None:
    client = client_of(reviewer)
    failed = claims_of(turn)[1]
    page = client.get(reverse("pages:chat", args=[turn.chat_id])).content.decode()
    assert decision_url(turn, failed.id) in page  # the card's controls
    assert "a person must check this claim" in page

    answer = client.post(decision_url(turn, failed.id), {"decision": "removed", "note": "not in the memo"})

    assert answer.status_code == 302
    assert answer["Location"].endswith(f"#claim-{failed.id}")
    decision = ReviewDecision.objects.get()
    assert (decision.decision, decision.reviewer, decision.note) == ("removed", "rita", "not in the memo")
    page = client.get(answer["Location"]).content.decode()
    assert "<strong>Removed</strong> by rita (reviewer)" in page


def test_a_confirmation_without_source_is_drawn_again_with_the_error(reviewer: User, turn: Message) -> None:
    answer = client_of(reviewer).post(decision_url(turn, claims_of(turn)[1].id), {"decision": "confirmed"})

    assert answer.status_code == 400
    assert "says where the claim was checked" in answer.content.decode()
    assert not ReviewDecision.objects.exists()


def test_a_member_sees_no_controls_and_gets_403_an_outsider_404(
    matter_chat: Chat, other_user: User, turn: Message
) -> None:
    member = factories.UserFactory.create(username="mo")
    matter_chat.project.members.add(member)  # type: ignore[union-attr]
    claim = claims_of(turn)[1]
    page = client_of(member).get(reverse("pages:chat", args=[turn.chat_id])).content.decode()

    assert decision_url(turn, claim.id) not in page
    assert certificate_url(turn) not in page
    assert client_of(member).post(decision_url(turn, claim.id), {"decision": "removed"}).status_code == 403
    assert client_of(member).post(certificate_url(turn)).status_code == 403
    assert client_of(other_user).post(decision_url(turn, claim.id), {"decision": "removed"}).status_code == 404
    assert client_of(other_user).post(certificate_url(turn)).status_code == 404
    assert not ReviewDecision.objects.exists()
    assert not Certificate.objects.exists()


def test_the_forms_need_the_csrf_token(reviewer: User, turn: Message) -> None:
    client = client_of(reviewer, csrf=True)
    assert client.post(decision_url(turn, claims_of(turn)[1].id), {"decision": "removed"}).status_code == 403
    assert client.post(certificate_url(turn)).status_code == 403
    assert not ReviewDecision.objects.exists()


def test_a_certificate_is_refused_listing_the_open_claim_then_issued_and_printable(
    reviewer: User, turn: Message
) -> None:
    client = client_of(reviewer)
    failed = claims_of(turn)[1]

    refused = client.post(certificate_url(turn))
    assert refused.status_code == 409
    assert f"#claim-{failed.id}" in refused.content.decode()

    record_decision(message=turn, claim_id=failed.id, decision="removed", by=reviewer)
    issued = client.post(certificate_url(turn))

    certificate = Certificate.objects.get()
    assert issued.status_code == 302
    assert issued["Location"] == reverse("pages:certificate", args=[certificate.pk])
    page = client.get(issued["Location"]).content.decode()
    assert "CERTIFICATE OF VERIFICATION" in page
    assert certificate.seal_sha256 in page
    assert "Print or save as PDF" in page
    assert "onclick" not in page  # the pages allow no inline script (CSP)
    chat_page = client.get(reverse("pages:chat", args=[turn.chat_id])).content.decode()
    assert reverse("pages:certificate", args=[certificate.pk]) in chat_page


def test_the_queue_lists_what_is_open_until_the_certificate(reviewer: User, turn: Message) -> None:
    project_id = turn.chat.project_id
    client = client_of(reviewer)
    url = reverse("pages:review-queue", args=[project_id])
    failed = claims_of(turn)[1]

    assert f"#claim-{failed.id}" in client.get(url).content.decode()
    record_decision(message=turn, claim_id=failed.id, decision="removed", by=reviewer)
    assert "ready for its certificate" in client.get(url).content.decode()
    client.post(certificate_url(turn))
    assert "Nothing in this matter needs review." in client.get(url).content.decode()


def test_the_queue_is_a_keyset_page_in_constant_queries(
    matter_chat: Chat, turn: Message, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(review_queue, "PAGE_SIZE", 2)
    project_id = matter_chat.project_id
    assert project_id is not None

    def queries(after: tuple[Any, Any] | None = None) -> tuple[int, review_queue.QueuePage]:
        with CaptureQueriesContext(connection) as captured:
            page = review_queue.review_queue(project_id=project_id, after=after)
        return len(captured), page

    small, first = queries()
    for _ in range(5):
        answered_turn(matter_chat, claims=2)
    large, first = queries()
    assert small == large
    assert len(first.items) == 2
    assert first.next_after is not None
    seen = [item.answer.pk for item in first.items]
    after = review_queue.parse_after(first.next_after)
    while after is not None:
        _, page = queries(after)
        seen += [item.answer.pk for item in page.items]
        after = review_queue.parse_after(page.next_after)
    assert len(seen) == len(set(seen)) == 6


def test_the_queue_page_costs_the_same_queries_whatever_the_matter_size(reviewer: User, matter_chat: Chat) -> None:
    client = client_of(reviewer)
    url = reverse("pages:review-queue", args=[matter_chat.project_id])
    answered_turn(matter_chat, claims=2)
    client.get(url)  # the session and the user read once, as on any page

    def queries() -> int:
        with CaptureQueriesContext(connection) as captured:
            assert client.get(url).status_code == 200
        return len(captured)

    small = queries()
    for _ in range(4):
        answered_turn(matter_chat, claims=2)
    assert queries() == small


def test_the_owner_sets_a_role_on_the_matter_page(user: User, matter_chat: Chat) -> None:
    colleague = factories.UserFactory.create(username="carol")
    matter_chat.project.members.add(colleague)  # type: ignore[union-attr]
    project_id = matter_chat.project_id
    url = reverse("pages:member-role", args=[project_id, "carol"])

    assert client_of(colleague).post(url, {"role": "reviewer"}).status_code == 403
    assert client_of(user).post(url, {"role": "owner"}).status_code == 400
    answer = client_of(user).post(url, {"role": "reviewer"})

    assert answer.status_code == 302
    assert ProjectMembership.objects.get(user=colleague).role == Role.REVIEWER
    page = client_of(user).get(reverse("pages:matter", args=[project_id])).content.decode()
    assert 'value="reviewer" selected' in page


def test_the_owner_words_the_certificates(user: User, reviewer: User, matter_chat: Chat) -> None:
    url = reverse("pages:certificate-wording", args=[matter_chat.project_id])

    assert client_of(reviewer).post(url, {"court": "txnd"}).status_code == 403
    assert client_of(user).post(url, {"court": "moon"}).status_code == 400
    assert client_of(user).post(url, {"court": "txnd", "judge_wording": "Also list sources."}).status_code == 302

    matter_chat.project.refresh_from_db()  # type: ignore[union-attr]
    assert (matter_chat.project.certificate_court, matter_chat.project.judge_wording) == (  # type: ignore[union-attr]
        "txnd",
        "Also list sources.",
    )
