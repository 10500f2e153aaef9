"""Every error under ``/api/`` is JSON with a ``detail`` (validation errors: messages keyed by field),
whether DRF or Django answers it; outside ``/api/`` (the admin) Django's pages are unchanged.
The 429s are in ``tests/test_bounded_use.py``."""

from __future__ import annotations

import uuid
from typing import Any
from unittest import mock

import pytest
from django.conf import LazySettings
from django.contrib.auth.models import User
from django.core.files.uploadedfile import SimpleUploadedFile
from django.test import Client
from rest_framework.test import APIClient

from chats.models import Chat, Document

pytestmark = pytest.mark.django_db


def _json(response: Any, status: int) -> Any:
    assert response.status_code == status, response.content
    assert response["Content-Type"] == "application/json", response["Content-Type"]
    return response.json()


def test_400_invalid_input_names_the_field(api_client: APIClient, matter_chat: Chat) -> None:
    body = _json(api_client.post(f"/api/chats/{matter_chat.pk}/messages/", {}, format="json"), 400)
    assert body == {"content": ["This field is required."]}


def test_400_malformed_json(api_client: APIClient, matter_chat: Chat) -> None:
    response = api_client.post(
        f"/api/chats/{matter_chat.pk}/messages/", data="{not json", content_type="application/json"
    )
    assert _json(response, 400)["detail"].startswith("JSON parse error")


def test_400_from_django_itself(api_client: APIClient) -> None:
    """A host not in ALLOWED_HOSTS is refused by Django before any view: still JSON under /api/."""
    assert _json(api_client.get("/api/chats/", HTTP_HOST="evil.example.com"), 400) == {"detail": "Bad request."}


def test_401_without_credentials(db: None) -> None:
    response = APIClient().get("/api/chats/")
    assert _json(response, 401) == {"detail": "Authentication credentials were not provided."}
    assert response["WWW-Authenticate"] == "Bearer"


def test_403_session_request_without_csrf_token(user: User, matter_chat: Chat) -> None:
    user.set_password("pw")
    user.save()
    client = APIClient(enforce_csrf_checks=True)
    assert client.login(username=user.username, password="pw")

    body = _json(client.post(f"/api/chats/{matter_chat.pk}/messages/", {"content": "q"}, format="json"), 403)
    assert body["detail"].startswith("CSRF Failed")


@pytest.mark.parametrize("path", ["/api/chats/{unknown}/", "/api/chats/not-a-uuid/", "/api/no-such-endpoint/"])
def test_404_unknown_object_or_url(api_client: APIClient, path: str) -> None:
    body = _json(api_client.get(path.format(unknown=uuid.uuid4())), 404)
    assert body["detail"] in {"Not found.", "No Chat matches the given query."}


def test_405_wrong_method(api_client: APIClient, matter_chat: Chat) -> None:
    body = _json(api_client.delete(f"/api/chats/{matter_chat.pk}/messages/"), 405)
    assert body == {"detail": 'Method "DELETE" not allowed.'}


def test_413_body_too_large(api_client: APIClient, matter_chat: Chat, settings: LazySettings) -> None:
    settings.DATA_UPLOAD_MAX_MEMORY_SIZE = 1000

    response = api_client.post(f"/api/chats/{matter_chat.pk}/messages/", {"content": "x" * 2000}, format="json")

    assert _json(response, 413) == {"detail": "The request body is too large: at most 1000 bytes."}
    assert not matter_chat.messages.exists()


def test_415_unsupported_media_type(api_client: APIClient, matter_chat: Chat) -> None:
    response = api_client.post(f"/api/chats/{matter_chat.pk}/messages/", data="question", content_type="text/plain")
    assert _json(response, 415) == {"detail": 'Unsupported media type "text/plain" in request.'}


def test_500_unhandled_error(user: User, matter_chat: Chat) -> None:
    client = Client(raise_request_exception=False)
    client.force_login(user)

    with mock.patch("chats.views.load_backend", side_effect=RuntimeError("bug")):
        response = client.post(
            f"/api/chats/{matter_chat.pk}/messages/", {"content": "q"}, content_type="application/json"
        )

    assert _json(response, 500) == {"detail": "A server error occurred."}


def test_errors_outside_the_api_stay_html(db: None) -> None:
    response = Client().get("/no-such-page/")

    assert response.status_code == 404
    assert response["Content-Type"].startswith("text/html")


def test_400_content_length_not_a_number(api_client: APIClient, matter_chat: Chat) -> None:
    response = api_client.post(
        f"/api/chats/{matter_chat.pk}/messages/", {"content": "q"}, format="json", CONTENT_LENGTH="many"
    )

    assert _json(response, 400) == {"detail": "Content-Length is not a number."}
    assert not matter_chat.messages.exists()


def test_400_too_many_form_fields(api_client: APIClient, matter_chat: Chat, settings: LazySettings) -> None:
    """Django refuses a form of more than DATA_UPLOAD_MAX_NUMBER_FIELDS fields (a SuspiciousOperation): a 400."""
    settings.DATA_UPLOAD_MAX_NUMBER_FIELDS = 10
    form = "&".join(f"field{n}=x" for n in range(20))

    response = api_client.post(
        f"/api/chats/{matter_chat.pk}/messages/", data=form, content_type="application/x-www-form-urlencoded"
    )

    assert _json(response, 400) == {"detail": "Bad request."}
    assert not matter_chat.messages.exists()


def test_413_multipart_form_fields_too_large(api_client: APIClient, matter_chat: Chat, settings: LazySettings) -> None:
    """A multipart body may be as large as an upload, but its form fields (beside the file) are bounded by
    DATA_UPLOAD_MAX_MEMORY_SIZE, which Django checks while parsing them."""
    settings.DATA_UPLOAD_MAX_MEMORY_SIZE = 1000
    file = SimpleUploadedFile("memo.txt", b"A short memo.", content_type="text/plain")
    documents = Document.objects.count()

    response = api_client.post(
        f"/api/projects/{matter_chat.project_id}/documents/", {"title": "T" * 5000, "file": file}, format="multipart"
    )

    assert _json(response, 413) == {"detail": "The request body is too large: at most 1000 bytes."}
    assert Document.objects.count() == documents


def test_a_development_error_page_under_the_api_is_json(api_client: APIClient, settings: LazySettings) -> None:
    """With DEBUG on, Django answers a refused host with its technical HTML page: JSON under /api/ all the same."""
    settings.DEBUG = True

    response = api_client.get("/api/chats/", HTTP_HOST="evil.example.com")

    assert _json(response, 400) == {"detail": "Bad Request."}
    assert response["Cache-Control"] == "no-store"


def test_django_errors_outside_the_api_stay_html(user: User) -> None:
    refused_host = Client().get("/", HTTP_HOST="evil.example.com")
    client = Client(raise_request_exception=False)
    with mock.patch("django.contrib.auth.views.LoginView.get", side_effect=RuntimeError("bug")):
        server_error = client.get("/accounts/login/")

    assert (refused_host.status_code, server_error.status_code) == (400, 500)
    assert refused_host["Content-Type"].startswith("text/html")
    assert server_error["Content-Type"].startswith("text/html")
