"""Sharp edges of the API and its operation: crafted cursors and deep JSON are 400s, every /api/ error is JSON with
DEBUG on too, /api/ is never cached, the CSP and the interactive docs, health checks, settings refused clearly."""

from __future__ import annotations

import base64
import os
import subprocess
import sys
from pathlib import Path
from typing import Any
from unittest import mock

import pytest
from django.conf import LazySettings
from django.contrib.auth.models import User
from django.db import connection
from django.test import Client
from rest_framework.test import APIClient

from chats.models import Chat
from tests import factories

ROOT = Path(__file__).resolve().parent.parent
KEY = base64.b64encode(bytes(range(32))).decode()  # a ledger key, which production settings require


def _cursor(query: str) -> str:
    return base64.b64encode(query.encode()).decode()


@pytest.mark.parametrize(
    "cursor",
    [
        "not base64 at all!",
        _cursor("p=not-a-date"),
        _cursor("p=2026-13-45 99:00:00"),
        _cursor("p=2026-01-01 00:00:00"),  # naive: not made by the server
        _cursor("o=-1"),
        _cursor("r=x"),
        _cursor("o=999999999999999999"),  # a well-formed cursor of DRF's, but not one this server made
        _cursor("o=1"),
        "w6k=",  # base64 of non-ASCII
    ],
)
def test_a_crafted_messages_cursor_is_a_400(api_client: APIClient, matter_chat: Chat, cursor: str) -> None:
    response = api_client.get(f"/api/chats/{matter_chat.pk}/messages/", {"cursor": cursor})
    assert response.status_code == 400
    assert response.json() == {"detail": "Invalid cursor."}


def test_a_real_cursor_still_pages(api_client: APIClient, matter_chat: Chat, settings: LazySettings) -> None:
    settings.LQAI_PAGE_SIZE = 1
    factories.UserMessageFactory.create_batch(2, chat=matter_chat)
    first = api_client.get(f"/api/chats/{matter_chat.pk}/messages/").json()
    second = api_client.get(first["next"])
    assert second.status_code == 200
    assert second.json()["results"][0]["id"] != first["results"][0]["id"]


@pytest.mark.parametrize("depth", [1_000, 100_000])
def test_json_nested_too_deep_is_a_400(api_client: APIClient, matter_chat: Chat, depth: int) -> None:
    body = "[" * depth + "]" * depth
    response = api_client.post(f"/api/chats/{matter_chat.pk}/messages/", body, content_type="application/json")
    assert response.status_code == 400
    assert "nested too deeply" in response.json()["detail"]


@pytest.mark.parametrize("debug", [True, False])
def test_api_404s_are_json_with_debug_on_or_off(api_client: APIClient, settings: LazySettings, debug: bool) -> None:
    settings.DEBUG = debug
    for path in ("/api/nowhere/", "/api/chats/not-a-uuid/", "/api/chats/00000000-0000-0000-0000-000000000000/"):
        response = api_client.get(path)
        assert response.status_code == 404
        assert response["Content-Type"] == "application/json"
        assert set(response.json()) == {"detail"}


def test_an_api_500_with_debug_on_is_json_and_shows_no_settings(
    api_client: APIClient, matter_chat: Chat, settings: LazySettings
) -> None:
    settings.DEBUG = True
    settings.DEBUG_PROPAGATE_EXCEPTIONS = False
    api_client.raise_request_exception = False
    with mock.patch("chats.views.ChatDetailView.get_queryset", side_effect=RuntimeError("boom DATABASE_URL")):
        response = api_client.get(f"/api/chats/{matter_chat.pk}/")
    assert response.status_code == 500
    assert response.json() == {"detail": "A server error occurred."}
    assert b"DATABASE_URL" not in response.content


def test_a_non_api_404_with_debug_on_stays_djangos_page(settings: LazySettings, db: None) -> None:
    settings.DEBUG = True
    response = Client().get("/nowhere/")
    assert response.status_code == 404
    assert response["Content-Type"].startswith("text/html")


def test_api_responses_are_never_cached(api_client: APIClient, matter_chat: Chat) -> None:
    for response in (
        api_client.get("/api/chats/"),
        api_client.get(f"/api/chats/{matter_chat.pk}/"),
        api_client.get("/api/nowhere/"),
        APIClient().get("/api/chats/"),
    ):
        assert "no-store" in response["Cache-Control"]


def test_every_response_carries_a_content_security_policy(api_client: APIClient, user: User) -> None:
    docs = Client()
    docs.force_login(user)
    for response in (api_client.get("/api/chats/"), Client().get("/admin/login/"), docs.get("/api/docs/")):
        policy = response["Content-Security-Policy"]
        assert "default-src 'self'" in policy
        assert "script-src 'self'" in policy
        assert "unsafe-inline" not in policy.split("script-src")[1].split(";")[0]
        assert "frame-ancestors 'none'" in policy


def test_the_interactive_docs_are_served_from_this_server_under_the_csp(user: User) -> None:
    client = Client()
    client.force_login(user)
    page = client.get("/api/docs/")

    assert page.status_code == 200
    html = page.content.decode()
    assert "swagger-ui" in html
    assert "cdn." not in html
    assert "https://" not in html
    assert "<script>" not in html.replace(" ", "")  # no inline script: the start-up script is a file
    script = client.get("/api/docs/?script=")
    assert script.status_code == 200
    assert "/api/schema/" in script.content.decode()
    static_paths = [part.split('"')[0] for part in html.split('src="')[1:]]
    assert any("swagger-ui-bundle.js" in path for path in static_paths)


def test_the_schema_describes_the_bearer_scheme(api_client: APIClient) -> None:
    schema = api_client.get("/api/schema/", HTTP_ACCEPT="application/json").json()
    assert schema["components"]["securitySchemes"]["bearerAuth"] == {
        "type": "http",
        "scheme": "bearer",
        "description": schema["components"]["securitySchemes"]["bearerAuth"]["description"],
    }
    assert {"/api/auth/token/", "/api/projects/", "/api/projects/{project_id}/documents/"} <= set(schema["paths"])
    # Getting a token needs no credentials; everything else names the bearer scheme
    assert schema["paths"]["/api/auth/token/"]["post"].get("security", [{}]) == [{}]
    assert {"bearerAuth": []} in schema["paths"]["/api/projects/"]["get"]["security"]


# --- health ------------------------------------------------------------------------------------------------------


def test_the_schema_requires_a_token_or_a_session(user: User) -> None:
    # Without credentials: 401 with the bearer challenge, as everywhere in the API
    anonymous = APIClient().get("/api/schema/", HTTP_ACCEPT="application/json")
    assert anonymous.status_code == 401
    assert anonymous["WWW-Authenticate"].startswith("Bearer")
    # A token or a signed-in session reads it
    token = APIClient(HTTP_AUTHORIZATION=f"Bearer {factories.api_token(user)}")
    assert token.get("/api/schema/", HTTP_ACCEPT="application/json").json()["info"]["title"] == "lqai API"
    session = Client()
    session.force_login(user)
    assert session.get("/api/schema/", HTTP_ACCEPT="application/json").status_code == 200


def test_the_docs_page_sends_a_visitor_to_the_login_and_back(db: None) -> None:
    for path in ("/api/docs/", "/api/docs/?script="):
        response = Client().get(path)
        assert response.status_code == 302
        assert response["Location"].startswith("/accounts/login/?next=/api/docs/")
        assert "swagger" not in response.content.decode().lower()


def test_healthz_answers_without_credentials_or_database(db: None, django_assert_num_queries: Any) -> None:
    with django_assert_num_queries(0):
        response = Client().get("/healthz")
    assert response.status_code == 200
    assert response.json() == {"status": "ok"}


def test_readyz_answers_ready_when_migrated(db: None) -> None:
    response = Client().get("/readyz")
    assert response.status_code == 200
    assert response.json() == {"status": "ready"}
    assert "no-cache" in response["Cache-Control"] or "max-age=0" in response["Cache-Control"]


def test_readyz_is_unavailable_with_pending_migrations_and_says_nothing_more(db: None) -> None:
    with mock.patch("lqai.health.unapplied_migrations", return_value=2):
        response = Client().get("/readyz")
    assert response.status_code == 503
    assert response.json() == {"status": "unavailable"}


def test_readyz_is_unavailable_when_the_database_is_down(db: None) -> None:
    from django.db import OperationalError

    with mock.patch.object(connection, "cursor", side_effect=OperationalError("password authentication failed")):
        response = Client().get("/readyz")
    assert response.status_code == 503
    assert response.json() == {"status": "unavailable"}
    assert b"password" not in response.content


def test_health_checks_refuse_writes(db: None) -> None:
    assert Client().post("/healthz").status_code == 405
    assert Client().post("/readyz").status_code == 405


def test_readyz_counts_unapplied_migrations(db: None) -> None:
    from lqai.health import unapplied_migrations

    assert unapplied_migrations() == 0


# --- settings from the environment -------------------------------------------------------------------------------


def _check(env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    base = {k: v for k, v in os.environ.items() if k not in {"LOG_LEVEL", "DATABASE_URL"} and not k.startswith("LQAI_")}
    return subprocess.run(
        [sys.executable, "manage.py", "check"],
        cwd=ROOT,
        env={**base, "DJANGO_SETTINGS_MODULE": "lqai.settings", "SECRET_KEY": "x" * 50, "LQAI_LEDGER_KEY": KEY, **env},
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )


@pytest.mark.parametrize("level", ["warning", "Warning", "DEBUG", " error "])
def test_a_log_level_in_any_case_works(level: str) -> None:
    result = _check({"LOG_LEVEL": level})
    assert result.returncode == 0, result.stderr


@pytest.mark.parametrize(
    ("env", "message"),
    [
        ({"LOG_LEVEL": "loud"}, "LOG_LEVEL='loud' is not a log level"),
        ({"LQAI_TOKEN_TTL_HOURS": "soon"}, "LQAI_TOKEN_TTL_HOURS='soon' is not an integer"),
        ({"LQAI_TOKEN_TTL_HOURS": "0"}, "LQAI_TOKEN_TTL_HOURS must be a positive number of hours"),
        ({"LQAI_THROTTLE_TOKEN_REQUESTS": "lots"}, "LQAI_THROTTLE_TOKEN_REQUESTS='lots' is not a rate"),
        ({"LQAI_MAX_UPLOAD_BYTES": "0"}, "LQAI_MAX_UPLOAD_BYTES must be a positive number"),
        ({"AXES_FAILURE_LIMIT": "0"}, "AXES_FAILURE_LIMIT must be at least 1"),
    ],
)
def test_bad_settings_are_refused_at_start_up_with_a_clear_message(env: dict[str, str], message: str) -> None:
    result = _check(env)
    assert result.returncode != 0
    assert message in result.stderr


@pytest.mark.parametrize(
    ("env", "ok"),
    [({"LOG_LEVEL": "warning"}, True), ({"LOG_LEVEL": "WARNING"}, True), ({"LOG_LEVEL": "loud"}, False)],
)
def test_the_gunicorn_config_takes_a_log_level_in_any_case_and_refuses_others(env: dict[str, str], ok: bool) -> None:
    script = "import runpy; print(runpy.run_path('gunicorn.conf.py')['loglevel'])"
    result = subprocess.run(  # noqa: S603 - our own interpreter
        [sys.executable, "-c", script], cwd=ROOT, env={**os.environ, **env}, capture_output=True, text=True, check=False
    )
    if ok:
        assert result.returncode == 0
        assert result.stdout.strip() == "warning"
    else:
        assert result.returncode != 0
        assert "LOG_LEVEL='loud' is not a log level" in result.stderr


def test_make_serve_takes_a_port() -> None:
    result = subprocess.run(
        ["make", "-n", "serve", "PORT=8123"],  # noqa: S607 - make from PATH, dry run
        cwd=ROOT,
        capture_output=True,
        text=True,
        check=False,
    )
    assert result.returncode == 0, result.stderr
    assert "runserver 127.0.0.1:8123" in result.stdout
    assert "--base-url http://127.0.0.1:8123" in result.stdout


def test_health_checks_answer_plain_http_where_the_rest_redirects_to_https(settings: LazySettings, db: None) -> None:
    settings.SECURE_SSL_REDIRECT = True
    assert Client().get("/healthz").status_code == 200
    assert Client().get("/readyz").status_code == 200
    assert Client().get("/api/chats/").status_code == 301


def test_a_page_may_run_an_inline_script_with_the_requests_nonce(rf: Any) -> None:
    from csp.middleware import CSPMiddleware
    from django.http import HttpResponse
    from django.template import engines

    template = engines["django"].from_string('<script nonce="{{ request.csp_nonce }}">go()</script>')

    def view(request: Any) -> HttpResponse:
        return HttpResponse(template.render({}, request))

    response: Any = CSPMiddleware(view)(rf.get("/"))

    nonce = response.content.decode().split('nonce="')[1].split('"')[0]
    assert nonce
    assert f"'nonce-{nonce}'" in response["Content-Security-Policy"]
    # A response that used no nonce gets none in its policy
    plain: Any = CSPMiddleware(lambda request: HttpResponse("x"))(rf.get("/"))
    assert "nonce-" not in plain["Content-Security-Policy"]


def test_the_schema_is_valid_openapi_without_a_warning(tmp_path: Path) -> None:
    from django.core.management import call_command

    # --fail-on-warn: an endpoint drf-spectacular cannot describe (a field of unknown type, a clashing
    # operation id) fails here rather than showing up wrong in the interactive docs.
    call_command("spectacular", "--validate", "--fail-on-warn", "--file", str(tmp_path / "schema.yml"))
    assert "/api/projects/{project_id}/members/{username}/" in (tmp_path / "schema.yml").read_text()


def test_the_production_server_refuses_a_bad_setting_at_start_up_before_any_worker(tmp_path: Path) -> None:
    env = {
        **{k: v for k, v in os.environ.items() if not k.startswith("LQAI_") and k != "DATABASE_URL"},
        "DJANGO_SETTINGS_MODULE": "lqai.settings",
        "SECRET_KEY": "x" * 50,
        "LQAI_TOKEN_TTL_HOURS": "soon",
        "LQAI_LEDGER_KEY": KEY,
        "GUNICORN_BIND": "127.0.0.1:0",
    }
    result = subprocess.run(  # noqa: S603 - the venv's gunicorn with the shipped config
        [str(Path(sys.executable).with_name("gunicorn")), "--config", "gunicorn.conf.py"],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert result.returncode != 0
    assert "LQAI_TOKEN_TTL_HOURS='soon' is not an integer" in result.stderr
    assert "Booting worker" not in result.stderr
