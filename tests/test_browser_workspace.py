"""The workspace in a real browser (headless Chromium through Playwright, as ``test_browser_pages.py``): an owner
opens a matter from the home page, starts a chat, uploads documents, makes an invitation link; a colleague without
an account opens it in a browser of her own, makes her account and lands on the matter; the owner deletes a
document. A bad upload's error is shown on the form.

Screenshots go to ``artifacts/browser/``; with ``LQAI_WRITE_SCREENSHOTS=1`` the owner's matter page is also written
to ``docs/workspace.png``. Every database read and write happens before the browser starts or after it stops.
"""

from __future__ import annotations

import shutil

import pytest
from django.contrib.auth.models import User
from playwright.sync_api import Page, expect
from pytest_django.live_server_helper import LiveServer

from chats.models import Chat, Document, Invitation, Project
from tests import factories
from tests.test_browser_pages import ARTIFACTS, DOCS, PASSWORD, WRITE_SCREENSHOTS, _sign_in, chromium_browser

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]

MEMO = (
    "Memorandum to file.\n\nThe client's claim accrued on 3 March 2021, when the notice of termination was "
    "received; the limitations period is three years.\n"
)


def _upload(page: Page, title: str, name: str, content: bytes) -> None:
    form = page.locator("form[aria-label='Upload a document']")
    form.get_by_label("Title").fill(title)
    form.get_by_label("File").set_input_files({"name": name, "mimeType": "text/plain", "buffer": content})
    form.get_by_role("button", name="Upload").click()


def test_an_owner_opens_a_matter_uploads_invites_a_colleague_who_joins_and_deletes_a_document(
    live_server: LiveServer,
) -> None:
    # Given a lawyer with an account and nothing else
    owner = factories.UserFactory.create(username="alice")
    owner.set_password(PASSWORD)
    owner.save()

    with chromium_browser() as browser:
        page = browser.new_page(viewport={"width": 1400, "height": 1000})
        page.set_default_timeout(15_000)
        _sign_in(page, live_server, owner.username, "/")

        # When she opens a matter from the home page
        page.get_by_label("Name").fill("Doe v. Roe Logistics")
        page.get_by_role("button", name="Open the matter").click()
        expect(page.locator("h1")).to_have_text("Doe v. Roe Logistics")
        expect(page.locator(".messages")).to_contain_text("You are its owner.")
        page.screenshot(path=ARTIFACTS / "workspace-new-matter.png")
        matter_url = page.url

        # ... starts a chat, and comes back to the matter from it
        page.locator("form[aria-label='New chat']").get_by_label("Title (optional)").fill("Limitations")
        page.get_by_role("button", name="New chat").click()
        expect(page.locator("h1")).to_have_text("Limitations")
        page.locator(".breadcrumbs").get_by_role("link", name="Doe v. Roe Logistics").click()
        assert page.url == matter_url

        # ... uploads a file that is no document: the form says why, in words
        _upload(page, "Scan", "scan.txt", b"\xff\xfe\x00\x01")
        expect(page.locator("form[aria-label='Upload a document'] .field-error")).to_have_text(
            "The file is neither a PDF nor UTF-8 text."
        )
        # ... then two real ones
        _upload(page, "Memo on limitations", "memo.txt", MEMO.encode())
        expect(page.locator(".messages")).to_contain_text("Document 'Memo on limitations' added.")
        _upload(page, "Engagement letter", "letter.txt", b"We are pleased to act for you in this matter.\n")
        documents = page.locator("#documents tbody tr")
        expect(documents).to_have_count(2)

        # ... reads one on a page of its own
        page.get_by_role("link", name="Memo on limitations").click()
        expect(page.locator(".document-text")).to_contain_text("the limitations period is three years")
        page.go_back()

        # ... and makes an invitation link for a colleague who has no account
        page.get_by_role("button", name="Make an invitation link").click()
        link = page.locator("#invitation-link").input_value()
        assert link.startswith(f"{live_server.url}/invitations/")

        # Then the colleague, in a browser of her own, opens it, makes her account and lands on the matter
        colleague = browser.new_context().new_page()
        colleague.set_default_timeout(15_000)
        colleague.goto(link)
        expect(colleague.locator("h1")).to_contain_text("Doe v. Roe Logistics")
        colleague.get_by_label("Username").fill("dana")
        colleague.get_by_label("Password", exact=True).fill("password")
        colleague.get_by_label("Password again").fill("password")
        colleague.get_by_role("button", name="Make my account and join").click()
        expect(colleague.locator(".field-error").first).to_contain_text("This password is too common.")
        colleague.screenshot(path=ARTIFACTS / "workspace-invitation.png")
        colleague.get_by_label("Password", exact=True).fill(PASSWORD)
        colleague.get_by_label("Password again").fill(PASSWORD)
        colleague.get_by_role("button", name="Make my account and join").click()
        colleague.wait_for_url(matter_url)
        expect(colleague.locator(".messages")).to_contain_text("You joined the matter 'Doe v. Roe Logistics'.")
        expect(colleague.locator(".site-header")).to_contain_text("Signed in as dana")
        expect(colleague.locator("#documents tbody tr")).to_have_count(2)
        # ... and the link is used up
        colleague.goto(link)
        expect(colleague.locator("h1")).to_have_text("This link no longer works")

        # When the owner looks at her matter again, dana is a member
        page.goto(matter_url)
        expect(page.locator(".member-list")).to_contain_text("dana")
        page.screenshot(path=ARTIFACTS / "workspace.png", full_page=True)

        # ... and she deletes the engagement letter
        page.get_by_role("button", name="Delete Engagement letter").click()
        expect(page.locator(".messages")).to_contain_text("Document 'Engagement letter' deleted.")
        expect(documents).to_have_count(1)

    # Then the database holds what the pages showed
    project = Project.objects.get(name="Doe v. Roe Logistics")
    assert project.owner == owner
    assert list(project.members.values_list("username", flat=True)) == ["dana"]
    assert User.objects.get(username="dana").check_password(PASSWORD)
    assert list(Document.objects.filter(project=project).values_list("title", flat=True)) == ["Memo on limitations"]
    assert Chat.objects.get(project=project).title == "Limitations"
    assert Invitation.objects.get(project=project).used_by is not None
    if WRITE_SCREENSHOTS:
        shutil.copyfile(ARTIFACTS / "workspace.png", DOCS / "workspace.png")
