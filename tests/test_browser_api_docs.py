"""The interactive API docs in a real browser (headless Chromium, Playwright), under the Content-Security-Policy:
a visitor is sent to the login page and back, then Swagger UI loads from this server's files, renders the schema
(read with the session) with the token scheme under "Authorize", and the browser reports no CSP violation.
Skipped (``browser`` marker) when ``chromium`` is not on PATH."""

from __future__ import annotations

import shutil

import pytest
from playwright.sync_api import ConsoleMessage, sync_playwright
from pytest_django.live_server_helper import LiveServer

from tests import factories
from tests.test_browser_admin import CHROMIUM_ARGS

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True), pytest.mark.timeout(90)]


def test_swagger_ui_renders_the_schema_under_the_csp(live_server: LiveServer) -> None:
    chromium = shutil.which("chromium")
    assert chromium is not None
    factories.UserFactory.create(username="reader")
    console: list[str] = []
    outside: list[str] = []

    with sync_playwright() as playwright:
        browser = playwright.chromium.launch(executable_path=chromium, headless=True, args=CHROMIUM_ARGS)
        try:
            page = browser.new_page()
            page.set_default_timeout(20_000)

            def on_console(message: ConsoleMessage) -> None:
                console.append(f"{message.type}: {message.text}")

            page.on("console", on_console)
            page.on(
                "request",
                lambda request: None if request.url.startswith(live_server.url) else outside.append(request.url),
            )

            page.goto(f"{live_server.url}/api/docs/")
            # Not signed in: the login page first, then back to the docs
            assert "/accounts/login/" in page.url
            page.fill("input[name=username]", "reader")
            page.fill("input[name=password]", "correct horse battery staple")
            page.locator("form [type=submit]").first.click()
            page.wait_for_url(f"{live_server.url}/api/docs/")
            page.wait_for_selector(".swagger-ui .info .title")
            assert "lqai API" in page.locator(".swagger-ui .info .title").inner_text()
            assert page.locator(".opblock-summary-path", has_text="/api/auth/token/").count() >= 1
            assert page.locator(".opblock-summary-path", has_text="/api/projects/{project_id}/documents/").count() >= 1

            page.locator("button.authorize").first.click()
            dialog = page.locator(".dialog-ux")
            dialog.wait_for()
            assert "bearerAuth" in dialog.inner_text()
        finally:
            browser.close()

    assert not [line for line in console if "Content Security Policy" in line or "Refused to" in line], console
    assert outside == []  # no CDN, nothing from elsewhere
