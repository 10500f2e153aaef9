"""The ledger admin in a real browser: headless Chromium (Debian's ``chromium`` package) driven by
Playwright. A superuser logs in, filters the ledger by kind, opens an entry and follows its link
to the source row, and finds no add, save or delete control anywhere on the way; and sees an altered
quote of a real opinion highlighted in its context with its alteration and omission marked.

Skipped (by the ``browser`` marker, see ``conftest.py``) when ``chromium`` is not on PATH.
Screenshots go to ``artifacts/browser/`` (ignored by git); the changelist's is also copied to
``docs/admin-ledger.png``, shown in the README, when ``LQAI_UPDATE_DOCS_SCREENSHOT=1`` is set.

Playwright's sync API runs an event loop in this thread, where Django refuses ORM calls
(``SynchronousOnlyOperation``): every database read and write happens before the browser starts
or after it stops. The live server answers from its own thread.
"""

from __future__ import annotations

import os
import re
import shutil
from pathlib import Path

import pytest
from django.contrib.auth.models import User
from django.db import transaction
from playwright.sync_api import Browser, Page, sync_playwright
from pytest_django.live_server_helper import LiveServer

from chats.models import CaselawOpinion, Message
from chats.services import ClaimedCitation, finalize_turn
from citations import ledger
from citations.models import CitationLedgerEntry, SourceKind
from tests import factories

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]

ROOT = Path(__file__).resolve().parent.parent
ARTIFACTS = ROOT / "artifacts" / "browser"
DOCS_SCREENSHOT = ROOT / "docs" / "admin-ledger.png"
PASSWORD = "correct horse battery staple"
# No network, no background services: the machine may be offline and the run must be quiet and repeatable.
CHROMIUM_ARGS = [
    "--no-sandbox",
    "--disable-gpu",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--no-first-run",
    "--disable-quic",
]
# Admin URLs of the read-only models: no page may link to their add view.
READ_ONLY_MODELS = ("citationledgerentry", "documentquote", "opinionquote", "messagetoolsource")


def _seed() -> None:
    """A superuser and a few turns of a matter, named as a lawyer would see them."""
    User.objects.create_superuser("admin", "admin@example.com", PASSWORD)
    project = factories.ProjectFactory.create(name="Admissions policy review")
    chat = factories.ChatFactory.create(project=project, title="Is the race-conscious policy defensible?")
    memo = factories.DocumentFactory.create(project=project, title="Strict scrutiny memo")
    fisher = factories.CaselawOpinionFactory.create(case_name="Fisher v. University of Texas at Austin")
    for _ in range(2):
        with transaction.atomic():  # a turn and its rows, in one transaction as a finalize writes them
            message = factories.MessageFactory.create(chat=chat)
            factories.DocumentQuoteFactory.create(message=message, document=memo)
            factories.OpinionQuoteFactory.create(message=message, opinion=fisher)
            factories.MessageToolSourceFactory.create(
                message=message, label="Grutter v. Bollinger", tool="caselaw_search"
            )
            factories.MessageToolSourceFactory.create(
                message=message,
                source_kind="mcp",
                tool="docket_lookup",
                provider="example-mcp",
                label="Docket 1:14-cv-00954",
                url="https://example.com/docket/1-14-cv-00954",
            )
            ledger.assemble(message)


def _log_in(page: Page, live_server: LiveServer, next_url: str) -> None:
    page.goto(f"{live_server.url}/admin/login/?next={next_url}")
    page.fill("#id_username", "admin")
    page.fill("#id_password", PASSWORD)
    page.click("input[type=submit]")
    page.wait_for_url(f"**{next_url}")


def _assert_nothing_can_be_written(page: Page) -> None:
    content = page.locator("#content")
    assert content.locator("input[name=_save], input[name=_continue], input[name=_addanother]").count() == 0
    assert content.locator("a.addlink").count() == 0
    assert page.locator("a.deletelink").count() == 0
    assert page.locator("select[name=action], button[name=index]").count() == 0
    # The nav sidebar offers "Add" for the editable models (projects, chats...), never for a read-only one.
    for model in READ_ONLY_MODELS:
        assert page.locator(f"a.addlink[href*='/{model}/']").count() == 0


def _ledger_page_as(browser: Browser, live_server: LiveServer, username: str, *, width: int) -> Page:
    """A new page of ``browser``, logged in to the admin as ``username`` and on the ledger's changelist."""
    page = browser.new_page(viewport={"width": width, "height": 900})
    page.set_default_timeout(15_000)
    page.goto(f"{live_server.url}/admin/login/?next=/admin/citations/citationledgerentry/")
    page.fill("#id_username", username)
    page.fill("#id_password", PASSWORD)
    page.click("input[type=submit]")
    page.wait_for_url("**/admin/citations/citationledgerentry/")
    return page


def test_a_superuser_traces_an_entry_to_its_source_and_can_change_nothing(live_server: LiveServer) -> None:
    # Given a ledger (written before the browser's event loop starts)
    _seed()
    caselaw_entries = CitationLedgerEntry.objects.filter(source_kind=SourceKind.CASELAW).count()
    before = list(CitationLedgerEntry.objects.order_by("id").values())
    chromium = shutil.which("chromium")
    assert chromium is not None
    ARTIFACTS.mkdir(parents=True, exist_ok=True)

    with sync_playwright() as playwright:
        browser = playwright.chromium.launch(executable_path=chromium, headless=True, args=CHROMIUM_ARGS)
        try:
            # When a superuser logs in and lands on the ledger
            page = _ledger_page_as(browser, live_server, "admin", width=1600)
            assert page.locator("#result_list tbody tr").count() == 8
            _assert_nothing_can_be_written(page)
            page.screenshot(path=ARTIFACTS / "1-ledger-changelist.png")

            # ... filters it by kind
            page.locator("details[data-filter-title='source kind'] a", has_text="Caselaw").click()
            page.wait_for_url("**source_kind=caselaw**")
            assert page.locator("#result_list tbody tr").count() == caselaw_entries
            _assert_nothing_can_be_written(page)
            page.screenshot(path=ARTIFACTS / "2-ledger-caselaw.png", full_page=True)

            # ... opens a caselaw quote's entry
            quote_row = page.locator("#result_list tbody tr", has=page.locator("td", has_text="verified exactly")).first
            quote_row.locator("th a").click()
            page.wait_for_url(re.compile(r"/admin/citations/citationledgerentry/[0-9a-f-]{36}/change/"))
            assert page.locator(".field-passage mark").inner_text() == "strict scrutiny"
            _assert_nothing_can_be_written(page)
            page.screenshot(path=ARTIFACTS / "3-ledger-entry.png", full_page=True)

            # ... and follows its link to the row it indexes
            page.locator(".field-source_link a").click()
            page.wait_for_url(re.compile(r"/admin/chats/opinionquote/[0-9a-f-]{36}/change/"))
            assert "Fisher v. University of Texas at Austin" in page.locator("#content").inner_text()
            _assert_nothing_can_be_written(page)
            page.screenshot(path=ARTIFACTS / "4-source-row.png", full_page=True)
        finally:
            browser.close()

    # Then nothing was written on the way, and the changelist's picture is the README's
    assert list(CitationLedgerEntry.objects.order_by("id").values()) == before
    if os.environ.get("LQAI_UPDATE_DOCS_SCREENSHOT") == "1":
        DOCS_SCREENSHOT.parent.mkdir(exist_ok=True)
        shutil.copyfile(ARTIFACTS / "1-ledger-changelist.png", DOCS_SCREENSHOT)


# A quote of the Fisher opinion with a bracket (for "the Court of Appeals") and an omitted citation.
ALTERED_QUOTE = (
    "The Court concludes that [the appeals court] did not hold the University to the demanding burden of strict "
    "scrutiny articulated in Grutter . . . . Because the Court of Appeals did not apply the correct standard"
)


def test_an_altered_quote_is_shown_in_its_context_with_its_alteration_and_omission_marked(
    live_server: LiveServer, local_opinion: CaselawOpinion
) -> None:
    # Given a turn that quoted the real Fisher opinion with a bracket and an ellipsis, its ledger written
    User.objects.create_superuser("admin", "admin@example.com", PASSWORD)
    message = factories.MessageFactory.create(status=Message.Status.STREAMING, content="", finalized_at=None)
    finalize_turn(
        message=message,
        content="The Court remanded.",
        status=Message.Status.COMPLETE,
        claimed_citations=[ClaimedCitation(ALTERED_QUOTE, opinion_id=local_opinion.pk)],
    )
    entry = CitationLedgerEntry.objects.get(message=message)
    assert entry.verification_status == "tolerant_match"
    entry_url = f"/admin/citations/citationledgerentry/{entry.pk}/change/"
    chromium = shutil.which("chromium")
    assert chromium is not None
    ARTIFACTS.mkdir(parents=True, exist_ok=True)

    with sync_playwright() as playwright:
        browser = playwright.chromium.launch(executable_path=chromium, headless=True, args=CHROMIUM_ARGS)
        try:
            page = browser.new_page(viewport={"width": 1400, "height": 900})
            page.set_default_timeout(15_000)

            # When a superuser opens the entry's page
            _log_in(page, live_server, entry_url)
            passage = page.locator(".field-passage .passage-in-context")

            # Then the passage is highlighted among the text before and after it
            highlighted = passage.locator("mark")
            assert highlighted.count() == 1
            assert highlighted.is_visible()
            shown = " ".join(highlighted.inner_text().split())
            assert shown.startswith("The Court concludes that the Court of Appeals")
            assert shown.endswith("Because the Court of Appeals did not apply the correct standard")
            around = " ".join(passage.inner_text().split())
            assert "Pet. for Cert. i. The Court concludes" in around  # the source before the passage
            assert "of strict 2 FISHER v. UNIVERSITY OF TEXAS AT AUSTIN" in around  # and after it

            # ... the bracket is marked: the words it stands for struck out, the quote's words inserted
            bracket = highlighted.locator(".alteration[data-kind=bracket]")
            assert bracket.is_visible()
            assert bracket.locator("del").inner_text() == "the Court of Appeals"
            assert bracket.locator("ins").inner_text() == "[the appeals court]"
            assert bracket.get_attribute("title") == (
                "bracket (shortened): the quote's \u201c[the appeals court]\u201d stands for "
                "\u201cthe Court of Appeals\u201d"
            )
            assert bracket.locator("del").evaluate("e => getComputedStyle(e).textDecorationLine") == "line-through"

            # ... and so is the omission: the citation the ellipsis left out, struck out
            omission = highlighted.locator(".alteration[data-kind=ellipsis]")
            assert omission.is_visible()
            omitted = " ".join(omission.locator("del").inner_text().split())
            assert (
                omitted == "and Regents of Univ. of Cal. v. Bakke, 438 U. S. 265, 305 (1978) (opinion of Powell, J.)."
            )
            assert omission.locator("ins").count() == 0

            # ... each listed below with its offsets in the source
            listed = page.locator(".field-passage ol.alterations li")
            assert listed.count() == 2
            assert listed.nth(0).get_attribute("data-kind") == "bracket"
            assert listed.nth(1).get_attribute("data-kind") == "ellipsis"
            assert listed.nth(1).is_visible()
            _assert_nothing_can_be_written(page)
            page.screenshot(path=ARTIFACTS / "5-ledger-entry-alterations.png", full_page=True)
        finally:
            browser.close()


def test_a_staff_member_sees_only_their_matter_and_can_change_none_of_its_record(live_server: LiveServer) -> None:
    # Given two staff users (not superusers), each a member of one matter with a finalized turn
    from django.contrib.auth.models import Permission

    turns = {}
    for name in ("anne", "bob"):
        user = factories.UserFactory.create(username=name, is_staff=True)
        user.user_permissions.add(*Permission.objects.filter(codename__startswith="view_"))
        chat = factories.ChatFactory.create(project__owner=user, project__name=f"{name.title()}'s matter")
        with transaction.atomic():  # a turn and its rows, in one transaction as a finalize writes them
            message = factories.MessageFactory.create(chat=chat, verdict="fail")
            factories.DocumentQuoteFactory.create(message=message)
            factories.MessageToolSourceFactory.create(message=message, label=f"{name.title()}'s docket")
            ledger.assemble(message)
        turns[name] = message
    before = list(Message.objects.order_by("id").values())
    chromium = shutil.which("chromium")
    assert chromium is not None
    ARTIFACTS.mkdir(parents=True, exist_ok=True)

    with sync_playwright() as playwright:
        browser = playwright.chromium.launch(executable_path=chromium, headless=True, args=CHROMIUM_ARGS)
        try:
            # When Anne logs in and looks at the ledger
            page = _ledger_page_as(browser, live_server, "anne", width=1400)

            # Then she sees her matter's entries only, and no API token anywhere in the admin
            rows = page.locator("#result_list tbody tr")
            assert rows.count() == 2
            assert str(turns["bob"].pk)[-8:] not in page.locator("#result_list").inner_text()
            assert page.locator("#nav-sidebar", has_text="Token").count() == 0
            page.screenshot(path=ARTIFACTS / "5-staff-ledger.png", full_page=True)

            # ... her message's page is read-only
            page.goto(f"{live_server.url}/admin/chats/message/{turns['anne'].pk}/change/")
            content = page.locator("#content")
            assert content.locator("input[name=_save], input[name=_continue], a.deletelink").count() == 0
            # (the ledger inline's "Add another" row is rendered hidden, never offered)
            assert not any(link.is_visible() for link in content.locator("a.addlink").all())
            assert content.locator("textarea, input[name=content], select").count() == 0
            page.screenshot(path=ARTIFACTS / "6-staff-message.png", full_page=True)

            # ... and Bob's message is as if it did not exist
            page.goto(f"{live_server.url}/admin/chats/message/{turns['bob'].pk}/change/")
            page.wait_for_url(f"{live_server.url}/admin/")
            assert "doesn\u2019t exist" in page.locator(".messagelist").inner_text()
        finally:
            browser.close()

    assert list(Message.objects.order_by("id").values()) == before
