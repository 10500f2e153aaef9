"""The trace pages in a real browser: headless Chromium (Debian's ``chromium``) driven by Playwright, against the
demo's chat (seeded and run through the API as ``make demo`` does).

A member signs in, sees the markers, follows one to its card (focused, its passage highlighted), moves between
cards with the keyboard, filters to what needs review (only the ``name_mismatch`` card on the wrong-name turn),
reads the page without JavaScript, previews the printed appendix, and asks a question whose answer streams in
before its cards appear. A non-member gets 404; a logged-out visitor is sent to the login page.

Screenshots go to ``artifacts/browser/`` (ignored by git); with ``LQAI_WRITE_SCREENSHOTS=1`` the chat page's
and its print preview's are also written to ``docs/`` (``trace-page.png``, ``trace-page-print.png``), and the
demo's turn to review on its page and in its export's printed report (``trace-page-review.png``,
``report-review.png``).

As in ``test_browser_admin.py``, every database read and write happens before the browser starts or after it
stops (Playwright's event loop runs in this thread); the live server answers from its own thread.
"""

from __future__ import annotations

import os
import re
import shutil
import zipfile
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest
from django.conf import LazySettings
from django.contrib.auth.models import User
from playwright.sync_api import Browser, Page, expect, sync_playwright
from pytest_django.live_server_helper import LiveServer

from chats.models import CaseCitation, Chat, Message
from demo import seed as demo
from tests import factories
from tests.test_browser_admin import CHROMIUM_ARGS

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]

ROOT = Path(__file__).resolve().parent.parent
ARTIFACTS = ROOT / "artifacts" / "browser"
DOCS = ROOT / "docs"
PASSWORD = "correct horse battery staple"
WRITE_SCREENSHOTS = os.environ.get("LQAI_WRITE_SCREENSHOTS") == "1"


def _demo_chat() -> tuple[Chat, User]:
    """The demo's chat, run through the API, and a member of its matter (not its owner)."""
    matter = demo.seed()
    _, chat = demo.run_turns(matter)
    member = factories.UserFactory.create(username="associate")
    matter.project.members.add(member)
    return chat, member


@contextmanager
def chromium_browser() -> Iterator[Browser]:
    """Headless Chromium; open it only after the test's database work (see the module's docstring)."""
    chromium = shutil.which("chromium")
    assert chromium is not None
    ARTIFACTS.mkdir(parents=True, exist_ok=True)
    with sync_playwright() as playwright:
        launched = playwright.chromium.launch(executable_path=chromium, headless=True, args=CHROMIUM_ARGS)
        try:
            yield launched
        finally:
            launched.close()


def _sign_in(page: Page, live_server: LiveServer, username: str, next_url: str) -> None:
    page.goto(f"{live_server.url}{next_url}")
    # A logged-out visitor is sent to the login page, which brings her back after signing in.
    assert page.url == f"{live_server.url}/accounts/login/?next={next_url}"
    page.fill("#id_username", username)
    page.fill("#id_password", PASSWORD)
    page.click("button[type=submit]")
    page.wait_for_url(f"{live_server.url}{next_url}")


def _active_id(page: Page) -> str:
    return str(page.evaluate("document.activeElement && document.activeElement.id"))


def test_a_member_follows_a_marker_to_its_card_filters_to_what_needs_review_and_prints(live_server: LiveServer) -> None:
    # Given the demo's chat and a member of its matter
    chat, member = _demo_chat()
    member.set_password(PASSWORD)
    member.save()
    url = f"/chats/{chat.pk}/"
    wrong_name = Message.objects.get(
        chat=chat, role=Message.Role.ASSISTANT, case_citations__status=CaseCitation.Status.NAME_MISMATCH
    )
    cards_in_chat = sum(
        m.citations.count() + m.caselaw_citations.count() + m.case_citations.count() + m.statute_citations.count()
        for m in Message.objects.filter(chat=chat, role=Message.Role.ASSISTANT)
    )

    with chromium_browser() as browser:
        page = browser.new_page(viewport={"width": 1400, "height": 1000})
        page.set_default_timeout(15_000)

        # When the member signs in and opens the chat
        _sign_in(page, live_server, member.username, url)

        # Then every claim has a marker in the answer and a card
        markers = page.locator(".answer a.marker, .unplaced a.marker")
        assert markers.count() == cards_in_chat
        assert page.locator(".claim-card").count() == cards_in_chat
        expect(page.locator(".turn .verdict").first).to_contain_text("Verdict: Pass")

        # ... and following a quote's marker lands on its card, focused, with its passage highlighted
        marker = page.locator(".answer a.marker[aria-label*='verified exactly']").nth(2)
        target = str(marker.get_attribute("href"))
        marker.click()
        assert page.url.endswith(target)
        card = page.locator(target)
        expect(card).to_be_focused()
        expect(card).to_be_in_viewport()
        highlighted = card.locator(".passage-in-context mark")
        expect(highlighted).to_be_visible()
        assert highlighted.inner_text().strip()
        assert card.locator(".status").inner_text().strip() == "\u2713 verified exactly"
        # (the picture: the card's turn from its question down, the card focused)
        card.evaluate("c => window.scrollTo(0, c.closest('.turn').getBoundingClientRect().top + window.scrollY - 8)")
        page.screenshot(path=ARTIFACTS / "trace-page.png")

        # ... the keyboard moves to the next card and back, and a card links back to its marker
        page.keyboard.press("n")
        assert _active_id(page) != target[1:]
        assert _active_id(page).startswith("claim-")
        page.keyboard.press("p")
        assert _active_id(page) == target[1:]
        card.locator(".claim-back a").click()
        assert page.url.endswith(f"#marker-{target[len('#claim-') :]}")
        # ... and a marker is reached with Tab and followed with Enter
        marker.focus()
        page.keyboard.press("Enter")
        expect(card).to_be_focused()

        # When she asks for only what needs review
        page.click("#review-filter")
        page.wait_for_url(f"**{url}?review=1")

        # Then the wrong-name turn shows only its name_mismatch card, and no card shown is a verified one
        turn = page.locator(f"#turn-{wrong_name.pk}")
        assert turn.locator(".claim-card").count() == 1
        assert turn.locator(".claim-card").get_attribute("data-status") == "name_mismatch"
        expect(turn.locator(".claim-card .status")).to_have_text("\u2717 cited under another case's name")
        expect(turn.locator(".case-names")).to_contain_text("Grutter v. Bollinger")
        expect(turn.locator(".case-names")).to_contain_text("Fisher v. University of Texas at Austin")
        statuses = set(page.locator(".claim-card").evaluate_all("cards => cards.map(c => c.dataset.status)"))
        assert "name_mismatch" in statuses
        assert not statuses & {"exact_match", "tolerant_match", "verified"}

        # When she opens it again, every claim, and previews the print
        page.goto(f"{live_server.url}{url}#turn-{wrong_name.pk}")
        page.locator(f"#turn-{wrong_name.pk}").scroll_into_view_if_needed()
        page.screenshot(path=ARTIFACTS / "trace-page-wrong-name.png")
        page.emulate_media(media="print")

        # Then the appendix has every card, none split across pages, and nothing interactive
        assert page.locator(".claim-card").count() == cards_in_chat
        assert page.locator(".claim-card").first.evaluate("c => getComputedStyle(c).breakInside") == "avoid"
        expect(page.locator(".ask")).to_be_hidden()
        expect(page.locator(".site-header")).to_be_hidden()
        expect(page.locator(".appendix-note")).to_be_visible()
        expect(page.locator(f"#turn-{wrong_name.pk} .turn-meta")).to_contain_text(str(wrong_name.pk))
        page.set_viewport_size({"width": 900, "height": 1270})  # about an A4 page's proportions
        page.evaluate("window.scrollTo(0, 0)")
        page.screenshot(path=ARTIFACTS / "trace-page-print.png")
        page.pdf(path=ARTIFACTS / "trace-page.pdf", format="A4")
        page.close()

    if WRITE_SCREENSHOTS:
        shutil.copyfile(ARTIFACTS / "trace-page.png", DOCS / "trace-page.png")
        shutil.copyfile(ARTIFACTS / "trace-page-print.png", DOCS / "trace-page-print.png")


def test_the_page_reads_without_javascript(live_server: LiveServer) -> None:
    chat, member = _demo_chat()
    member.set_password(PASSWORD)
    member.save()
    url = f"/chats/{chat.pk}/"

    with chromium_browser() as browser:
        context = browser.new_context(java_script_enabled=False, viewport={"width": 1200, "height": 900})
        page = context.new_page()
        page.set_default_timeout(15_000)
        _sign_in(page, live_server, member.username, url)

        # Markers are plain links to their cards; the filter is a plain link too; asking says it needs JavaScript
        marker = page.locator(".answer a.marker").first
        target = str(marker.get_attribute("href"))
        marker.click()
        assert page.url.endswith(target)
        expect(page.locator(target)).to_be_in_viewport()
        expect(page.locator("#ask-form")).to_be_hidden()
        expect(page.locator("#ask-needs-js")).to_be_visible()
        page.click("#review-filter")
        page.wait_for_url(f"**{url}?review=1")
        assert page.locator(".claim-card[data-status=exact_match]").count() == 0
        context.close()


def test_asking_from_the_page_streams_the_answer_then_shows_its_cards(live_server: LiveServer) -> None:
    chat, member = _demo_chat()
    member.set_password(PASSWORD)
    member.save()
    url = f"/chats/{chat.pk}/"
    turns_before = Message.objects.filter(chat=chat, role=Message.Role.ASSISTANT).count()

    with chromium_browser() as browser:
        page = browser.new_page(viewport={"width": 1400, "height": 1000})
        page.set_default_timeout(20_000)
        _sign_in(page, live_server, member.username, url)
        assert page.locator(".turn").count() == turns_before
        # Every change of the answer's text while it streams is counted, before the drawn turn replaces it.
        page.evaluate(
            """() => {
              window.streamedChanges = 0;
              new MutationObserver(records => {
                for (const r of records) {
                  if (r.target.closest && r.target.closest('.turn.streaming .answer')) window.streamedChanges++;
                }
              }).observe(document.getElementById('turns'), {subtree: true, childList: true, characterData: true});
            }"""
        )

        # When she asks a question from the page
        page.fill("#ask-content", demo.STREAMED_QUESTION)
        page.click("#ask-submit")

        # Then the answer streams in, piece by piece, and when the turn ends its cards appear
        expect(page.locator("#ask-status")).to_contain_text("Answer complete", timeout=30_000)
        assert page.evaluate("window.streamedChanges") >= 2
        assert page.locator(".turn").count() == turns_before + 1
        new_turn = page.locator(".turn").last
        expect(new_turn.locator(".question")).to_contain_text(demo.STREAMED_QUESTION)
        expect(new_turn.locator(".verdict")).to_contain_text("Verdict:")
        assert new_turn.locator(".claim-card").count() >= 1
        assert new_turn.locator(".answer a.marker").count() >= 1
        drawn_id = str(new_turn.get_attribute("id"))
        expect(page.locator("#ask-content")).to_have_value("")
        page.close()

    answered = Message.objects.filter(chat=chat, role=Message.Role.ASSISTANT).order_by("-created_at").first()
    assert answered is not None
    assert answered.author == member
    assert answered.status == Message.Status.COMPLETE
    assert drawn_id == f"turn-{answered.pk}"  # the turn drawn is the one the stream answered


def test_a_non_member_gets_404(live_server: LiveServer) -> None:
    chat, _ = _demo_chat()
    factories.UserFactory.create(username="stranger")
    url = f"/chats/{chat.pk}/"

    with chromium_browser() as browser:
        page = browser.new_page()
        page.set_default_timeout(15_000)
        page.goto(f"{live_server.url}{url}")
        assert page.url == f"{live_server.url}/accounts/login/?next={url}"
        page.fill("#id_username", "stranger")
        page.fill("#id_password", PASSWORD)
        with page.expect_response(f"{live_server.url}{url}") as answered:
            page.click("button[type=submit]")
        assert answered.value.status == 404
        expect(page.locator("h1")).to_have_text("Not found")
        assert demo.WRONG_NAME_ANSWER not in page.content()
        page.close()


def test_a_question_the_api_refuses_is_said_on_the_page(live_server: LiveServer, settings: LazySettings) -> None:
    # Given the demo's chat, then questions of at most 20 characters (the live server reads the same settings)
    chat, member = _demo_chat()
    settings.LQAI_MAX_MESSAGE_CHARS = 20
    member.set_password(PASSWORD)
    member.save()
    url = f"/chats/{chat.pk}/"
    turns_before = Message.objects.filter(chat=chat).count()

    with chromium_browser() as browser:
        page = browser.new_page()
        page.set_default_timeout(15_000)
        _sign_in(page, live_server, member.username, url)

        # When she asks a longer one
        page.fill("#ask-content", demo.STREAMED_QUESTION)
        page.click("#ask-submit")

        # Then the page says why, in words, and she can try again
        expect(page.locator("#ask-status")).to_have_class(re.compile(r"\berror\b"))
        message = page.locator("#ask-status").inner_text()
        assert "20" in message
        expect(page.locator("#ask-submit")).to_be_enabled()
        expect(page.locator("#ask-content")).to_have_value(demo.STREAMED_QUESTION)
        page.close()

    assert Message.objects.filter(chat=chat).count() == turns_before  # nothing was stored


def test_the_altered_turn_reads_review_in_amber_on_its_page_and_in_its_printed_report(
    live_server: LiveServer, settings: LazySettings, tmp_path: Path
) -> None:
    # Given the demo's chat, its record sealed and exported as `make demo` does, and a member of its matter
    settings.VAR_DIR = tmp_path
    matter = demo.seed()
    _, chat = demo.run_turns(matter)
    member = factories.UserFactory.create(username="associate")
    matter.project.members.add(member)
    member.set_password(PASSWORD)
    member.save()
    proven = demo.prove_record(matter)
    assert proven.offline_exit == 0, proven.lines
    with zipfile.ZipFile(proven.export) as bundle:
        (tmp_path / "report.html").write_bytes(bundle.read("report.html"))
    altered = Message.objects.get(chat=chat, reply_to__content__startswith="When is there a vacancy")
    assert altered.verdict == "review"
    pinned = Message.objects.get(chat=chat, reply_to__content=demo.PIN_CITE_QUESTION)  # the turn before it
    top = "t => t.scrollIntoView({block: 'start'})"
    url = f"/chats/{chat.pk}/"
    amber = "rgb(122, 77, 0)"  # trace.css's --review

    with chromium_browser() as browser:
        page = browser.new_page(viewport={"width": 1400, "height": 1500})
        page.set_default_timeout(15_000)
        _sign_in(page, live_server, member.username, url)

        # Then the quote of an opinion that carries its reporter's pages is cited as a court cites it
        expect(page.locator(f"#turn-{pinned.pk}")).to_contain_text("590 F. Supp. 3d 850, 870 (M.D.N.C. 2022)")
        # ... and the turn whose only claim is altered reads Review, in amber, with its claim to review: no green
        banner = page.locator(f"#turn-{altered.pk} .verdict")
        expect(banner).to_contain_text("Verdict: Review")
        expect(banner).to_contain_text("1 claim to review")
        assert banner.evaluate("b => getComputedStyle(b).color") == amber
        assert "\u2713" not in banner.inner_text()
        page.locator(f"#turn-{pinned.pk}").evaluate(top)
        page.screenshot(path=ARTIFACTS / "trace-page-review.png")

        # ... and so does the signed report, printed, with the omitted words spelled out
        report = browser.new_page(viewport={"width": 900, "height": 1600})
        report.goto((tmp_path / "report.html").as_uri())
        report.emulate_media(media="print")
        turn = report.locator(f"#turn-{altered.pk}")
        expect(turn.locator(".verdict")).to_contain_text("Verdict: Review")
        assert turn.locator(".verdict").evaluate("b => getComputedStyle(b).color") == amber
        expect(turn.locator("ol.alterations")).to_contain_text(
            "omits \u201conly if the candidate is legally qualified for the office."
        )
        expect(report.locator(f"#turn-{pinned.pk}")).to_contain_text("590 F. Supp. 3d 850, 870 (M.D.N.C. 2022)")
        report.locator(f"#turn-{pinned.pk}").evaluate(top)
        report.screenshot(path=ARTIFACTS / "report-review.png")
        report.pdf(path=ARTIFACTS / "report.pdf", format="A4")
        report.close()
        page.close()

    if WRITE_SCREENSHOTS:
        shutil.copyfile(ARTIFACTS / "trace-page-review.png", DOCS / "trace-page-review.png")
        shutil.copyfile(ARTIFACTS / "report-review.png", DOCS / "report-review.png")
