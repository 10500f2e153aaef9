"""The drafts' pages in a real browser (headless Chromium through Playwright, as ``test_browser_pages.py``).

A member uploads a Word brief made here (a footnote, a block quote, citing the project's opinions) from the
matter's page, sees its findings come in as they are checked and lands on the draft's page; she sees a marker at
each finding, opens a card, filters to what needs review, opens the table of authorities and copies it. A
non-member gets 404 for the draft's page.

Screenshots go to ``artifacts/browser/``; with ``LQAI_WRITE_SCREENSHOTS=1`` also to ``docs/`` (``draft-page.png``,
``draft-authorities.png``). Every database read and write happens before the browser starts or after it stops.
"""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest
from django.contrib.auth.models import User
from playwright.sync_api import expect
from pytest_django.live_server_helper import LiveServer

from authorities.loading import load_uslm
from chats.models import CaselawOpinion
from drafts.models import DraftCheck
from tests import factories
from tests.conftest import DEMOCRACY, FISHER, corpus_text
from tests.test_browser_pages import ARTIFACTS, DOCS, PASSWORD, WRITE_SCREENSHOTS, _sign_in, chromium_browser
from tests.test_draft_checks import AUTHORITIES, PATEL
from tests.test_draft_pages import brief

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]


def _opinions() -> None:
    supreme = "Supreme Court of the United States"
    for key, name, case_name, citation in (
        ("fisher", FISHER, "Fisher v. University of Texas at Austin", "570 U.S. 297"),
        ("patel", PATEL, "City of Los Angeles v. Patel", "576 U.S. 409"),
        (
            "democracy",
            DEMOCRACY,
            "Democracy North Carolina v. North Carolina State Board of Elections",
            "590 F. Supp. 3d 850",
        ),
    ):
        factories.CaselawOpinionFactory.create(
            provider="local",
            opinion_id=key,
            case_name=case_name,
            citation=citation,
            court=supreme,
            text=corpus_text(name),
        )


def _member(username: str) -> User:
    user = factories.UserFactory.create(username=username)
    user.set_password(PASSWORD)
    user.save()
    return user


def test_a_member_uploads_a_brief_and_works_through_its_findings(live_server: LiveServer, tmp_path: Path) -> None:
    # Given a matter with the project's opinions, its owner, and a Word brief on her disk
    _opinions()
    load_uslm(path=AUTHORITIES / "usc09.xml")
    owner = _member("counsel")
    outsider = _member("stranger")
    matter = factories.ProjectFactory.create(owner=owner, name="Admissions appeal")
    path = tmp_path / "opening-brief.docx"
    path.write_bytes(brief())
    assert CaselawOpinion.objects.count() == 3

    with chromium_browser() as browser:
        context = browser.new_context(viewport={"width": 1400, "height": 1000})
        context.grant_permissions(["clipboard-read", "clipboard-write"])
        page = context.new_page()
        page.set_default_timeout(30_000)
        _sign_in(page, live_server, owner.username, f"/matters/{matter.pk}/")

        # When she uploads the brief from the matter's page
        expect(page.locator("#drafts")).to_contain_text("No draft checked in this matter yet.")
        # (a file that is not what its name says is refused on the form, nothing written)
        bad = tmp_path / "notes.docx"
        bad.write_bytes(b"plain words, not a Word file")
        page.set_input_files("#draft_file", str(bad))
        page.click("#draft-submit")
        expect(page.locator("#drafts .form-error")).to_contain_text("Word document (DOCX) but it is a text file")
        expect(page.locator("#drafts")).to_contain_text("No draft checked in this matter yet.")
        page.set_input_files("#draft_file", str(path))
        with page.expect_response(lambda r: r.request.method == "POST") as posted:
            page.click("#draft-submit")
        # (the page's script posted it for the streamed progress, whose events test_draft_pages.py reads)
        assert posted.value.headers["content-type"] == "application/x-ndjson"

        # Then she sees the findings come in, then lands on the draft's page
        page.wait_for_url(f"{live_server.url}/drafts/*/")
        expect(page.locator("h1")).to_have_text("Draft check: opening-brief.docx")
        expect(page.locator(".draft-header .verdict")).to_contain_text("Verdict: Fail")

        # ... a numbered marker at each finding, the draft's own page numbers between its pages
        markers = page.locator(".draft-text a.marker")
        cards = page.locator(".claim-card")
        total = cards.count()
        assert total >= 8
        assert markers.count() == total
        expect(page.locator(".draft-page")).to_have_text(["p. 1", "p. 2", "p. 3"])

        # When she follows the misquote's marker, its card opens, focused, saying why in words
        misquote = page.locator(".draft-text a.marker[aria-label*='not found']").first
        target = str(misquote.get_attribute("href"))
        misquote.click()
        card = page.locator(target)
        expect(card).to_be_focused()
        expect(card).to_be_in_viewport()
        expect(card.locator(".status")).to_contain_text("not found")
        expect(card).to_contain_text("p. 2 of the draft")
        # ... and a verified quotation's card shows its passage highlighted in the opinion
        verified = page.locator(".claim-card[data-status='exact_match'], .claim-card[data-status='tolerant_match']")
        expect(verified.first.locator(".passage-in-context mark").first).to_be_visible()
        # (the picture: the page from its top, the verdict, the text with its markers and the first cards)
        page.set_viewport_size({"width": 1400, "height": 1350})
        page.evaluate("window.scrollTo(0, 0)")
        page.screenshot(path=ARTIFACTS / "draft-page.png")
        page.set_viewport_size({"width": 1400, "height": 1000})

        # When she shows only what needs review
        page.click("#review-filter")
        page.wait_for_url("**?review=1")
        shown = page.locator(".claim-card")
        statuses = set(shown.evaluate_all("cards => cards.map(c => c.dataset.status)"))
        assert 0 < shown.count() < total
        assert not statuses & {"exact_match", "tolerant_match", "verified"}
        assert page.locator(".draft-text a.marker").count() == shown.count()

        # When she opens the table of authorities
        page.click("a[href='#authorities']")
        toa = page.locator("#authorities")
        expect(toa).to_be_in_viewport()
        expect(toa.locator(".toa-part")).to_have_text(["Cases", "Statutes and regulations"])
        expect(toa.locator("tr", has_text="9 U.S.C. § 2").locator(".status")).to_contain_text("section found")
        fisher = toa.locator("tr", has_text="570 U.S. 297")
        expect(fisher.locator(".toa-pages")).to_have_text("1, 2")
        expect(toa.locator("tr", has_text="999 U.S. 999").locator(".status")).to_contain_text("not checked")
        # ... and copies it: the authorities and their pages, no statuses
        page.click("#copy-toa")
        expect(page.locator("#copy-status")).to_have_text("Copied, without the statuses.")
        copied = str(page.evaluate("navigator.clipboard.readText()"))
        assert "Fisher v. University of Texas at Austin, 570 U.S. 297\t1, 2" in copied
        assert "verified" not in copied
        assert "not checked" not in copied
        toa.screenshot(path=ARTIFACTS / "draft-authorities.png")

        # ... and the printed report has every card and nothing interactive
        page.goto(page.url.split("?")[0])
        page.emulate_media(media="print")
        assert page.locator(".claim-card").count() == total
        expect(page.locator(".chat-tools")).to_be_hidden()
        expect(page.locator("#copy-toa")).to_be_hidden()
        expect(page.locator(".site-header")).to_be_hidden()
        expect(page.locator(".appendix-note")).to_be_visible()
        page.set_viewport_size({"width": 900, "height": 1270})  # about an A4 page's proportions
        page.evaluate("window.scrollTo(0, 0)")
        page.screenshot(path=ARTIFACTS / "draft-page-print.png")
        page.pdf(path=ARTIFACTS / "draft-report.pdf", format="A4")
        draft_url = page.url.replace(live_server.url, "")
        # The matter's page lists the draft with its verdict and what needs review
        page.emulate_media(media="screen")
        page.goto(f"{live_server.url}/matters/{matter.pk}/")
        drafts = page.locator("#drafts")
        expect(drafts.locator(f"a[href='{draft_url}']")).to_have_text("opening-brief.docx")
        expect(drafts).to_contain_text("Fail")
        drafts.screenshot(path=ARTIFACTS / "matter-drafts.png")
        page.close()

        # A non-member gets 404
        other = browser.new_context().new_page()
        other.goto(f"{live_server.url}/accounts/login/?next={draft_url}")
        other.fill("#id_username", outsider.username)
        other.fill("#id_password", PASSWORD)
        with other.expect_response(lambda r: r.url.endswith(draft_url)) as answer:
            other.click("button[type=submit]")
        assert answer.value.status == 404

    assert DraftCheck.objects.filter(project=matter).count() == 1
    if WRITE_SCREENSHOTS:
        shutil.copyfile(ARTIFACTS / "draft-page.png", DOCS / "draft-page.png")
        shutil.copyfile(ARTIFACTS / "draft-authorities.png", DOCS / "draft-authorities.png")
