"""Review in a real browser (issue 52): a reviewer of the demo's matter clears its "needs review" queue from the
trace page's cards and issues the certificate of verification of the turn she reviewed, then reads it as printed.

Headless Chromium driven by Playwright, as ``tests/test_browser_pages.py``: every database read and write happens
before the browser starts or after it stops. Screenshots go to ``artifacts/browser/``; with
``LQAI_WRITE_SCREENSHOTS=1`` the certificate's page is also written to ``docs/certificate.png``.
"""

from __future__ import annotations

import re

import pytest
from playwright.sync_api import Page, expect
from pytest_django.live_server_helper import LiveServer

from chats.models import Message, Role
from citations.integrity import verify_record
from citations.models import Certificate, ReviewDecision
from demo import seed as demo
from tests import factories
from tests.test_browser_pages import ARTIFACTS, DOCS, PASSWORD, WRITE_SCREENSHOTS, _sign_in, chromium_browser

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]


def _decide_on(page: Page, card_id: str) -> str:
    """Record a decision on the card ``card_id`` from its own form: a claim the machine found wrong is corrected
    (a case cited under another name: the name found at its citation), one to review is confirmed with the
    source consulted. Returns the decision."""
    card = page.locator(f"#{card_id}")
    form = card.locator("details.decision-form")
    if form.get_attribute("open") is None:
        form.locator("summary").click()
    if "tone-fail" in (card.get_attribute("class") or ""):
        found = card.locator(".case-names dd").nth(1).inner_text().strip()
        citation = card.locator(".case-names dd").nth(2).inner_text().strip()
        form.locator("input[value=corrected]").check()
        form.locator("textarea[name=corrected_text]").fill(f"{found}, {citation}")
        form.locator("textarea[name=note]").fill("The answer named the wrong case; the citation is this case.")
        decision = "corrected"
    else:
        form.locator("input[value=confirmed]").check()
        form.locator("input[name=source]").fill("The opinion as printed in the official reporter, at the pin page")
        decision = "confirmed"
    card.screenshot(path=ARTIFACTS / "review-card.png")
    form.locator("button[type=submit]").click()
    return decision


def test_a_reviewer_clears_the_demo_queue_and_issues_its_certificate(live_server: LiveServer) -> None:
    # Given the demo's matter, run through the API, and a reviewer of it
    matter = demo.seed()
    demo.run_turns(matter)
    reviewer = factories.UserFactory.create(username="reviewer")
    reviewer.set_password(PASSWORD)
    reviewer.save()
    matter.project.members.add(reviewer, through_defaults={"role": Role.REVIEWER})
    queue_url = f"/matters/{matter.project.pk}/review/"
    to_review = Message.objects.filter(chat__project=matter.project, verdict__in=["review", "fail"]).count()
    assert to_review >= 1

    with chromium_browser() as browser:
        page = browser.new_page(viewport={"width": 1200, "height": 1000})
        page.set_default_timeout(15_000)
        _sign_in(page, live_server, reviewer.username, queue_url)

        # When she follows each open claim of the queue to its card and decides on it there
        decisions = []
        while page.locator(".review-queue .queue-item ul a").count():
            first = page.locator(".review-queue .queue-item ul a").first
            href = str(first.get_attribute("href"))
            card_id = href.split("#", 1)[1]
            page.goto(f"{live_server.url}{href}")
            decisions.append(_decide_on(page, card_id))
            # ... back on her card, which shows the sealed decision
            page.wait_for_url(re.compile(f"#{card_id}$"))
            expect(page.locator(f"#{card_id} .decision")).to_contain_text("by reviewer (reviewer)")
            page.goto(f"{live_server.url}{queue_url}")
        page.screenshot(path=ARTIFACTS / "review-queue-cleared.png", full_page=True)

        # Then each turn of the queue is ready for its certificate; she issues the first one's from its answer
        ready = page.locator(".review-queue .queue-item")
        assert ready.count() == to_review
        expect(ready.first.locator(".ready")).to_be_visible()
        turn_href = str(ready.first.locator(".ready a").get_attribute("href"))
        page.goto(f"{live_server.url}{turn_href}")
        page.locator(f"#{turn_href.split('#', 1)[1]} .turn-review button", has_text="Issue the certificate").click()
        page.wait_for_url(re.compile(r"/certificates/[0-9a-f-]+/$"))

        # ... and its page says, in words, what the machine checked, what she decided and what nobody checked
        text = page.locator(".certificate-text")
        expect(text).to_contain_text("CERTIFICATE OF VERIFICATION")
        expect(text).to_contain_text("1. WHAT THE MACHINE CHECKED")
        expect(text).to_contain_text("by reviewer (reviewer)")
        expect(text).to_contain_text("3. WHAT NOBODY CHECKED")
        page.emulate_media(media="print")
        expect(page.locator(".certificate-actions")).to_be_hidden()
        page.screenshot(path=ARTIFACTS / "certificate.png", full_page=True)
        if WRITE_SCREENSHOTS:
            page.screenshot(path=DOCS / "certificate.png", full_page=True)
        page.emulate_media(media="screen")
        page.goto(f"{live_server.url}{queue_url}")
        assert page.locator(".review-queue .queue-item").count() == to_review - 1

    assert decisions
    assert ReviewDecision.objects.count() == len(decisions)
    assert Certificate.objects.count() == 1
    assert verify_record().intact
