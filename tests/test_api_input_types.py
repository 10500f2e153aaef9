"""Input taken as its type: every text a client writes through the API must be sent as a string; a number, a
boolean, an object or a list is a 400 naming the field, and nothing is written."""

from __future__ import annotations

from typing import Any

import pytest
from django.contrib.auth.models import User
from rest_framework.test import APIClient

from chats.models import Chat, Document, Message, Project
from tests import factories

NOT_TEXT = [123, 1.5, True, {"a": "b"}, ["a"]]


@pytest.fixture
def matter(user: User) -> Project:
    return factories.ProjectFactory.create(owner=user, name="Typed matter")


@pytest.mark.parametrize("route", ["messages/", "messages/stream/"])
@pytest.mark.parametrize("value", NOT_TEXT)
def test_a_question_that_is_not_a_string_is_a_400_naming_the_field(
    api_client: APIClient, matter_chat: Chat, value: Any, route: str
) -> None:
    response = api_client.post(f"/api/chats/{matter_chat.pk}/{route}", {"content": value}, format="json")

    assert response.status_code == 400
    assert list(response.json()) == ["content"]
    assert not Message.objects.filter(chat=matter_chat).exists()


@pytest.mark.parametrize(
    ("path", "body", "field"),
    [
        ("/api/projects/", {"name": 123}, "name"),
        ("/api/chats/", {"title": 123}, "title"),
        ("/api/projects/{matter}/documents/", {"title": 7, "content": "Text."}, "title"),
        ("/api/projects/{matter}/documents/", {"title": "Note", "content": 12345}, "content"),
        ("/api/projects/{matter}/members/", {"username": 42}, "username"),
    ],
)
def test_every_text_a_client_writes_must_be_a_string(
    api_client: APIClient, matter: Project, path: str, body: dict[str, Any], field: str
) -> None:
    factories.UserFactory.create(username="42")  # a username that a coerced 42 would have found
    before = (Project.objects.count(), Chat.objects.count(), Document.objects.count(), matter.members.count())

    response = api_client.post(path.format(matter=matter.pk), body, format="json")

    assert response.status_code == 400
    assert field in response.json()
    assert (Project.objects.count(), Chat.objects.count(), Document.objects.count(), matter.members.count()) == before


def test_a_token_request_with_a_numeric_password_is_a_400_naming_the_field(user: User) -> None:
    response = APIClient().post("/api/auth/token/", {"username": "alice", "password": 1234}, format="json")

    assert response.status_code == 400
    assert list(response.json()) == ["password"]


def test_text_sent_as_a_string_is_still_taken(api_client: APIClient, matter: Project) -> None:
    response = api_client.post("/api/projects/", {"name": "123"}, format="json")

    assert response.status_code == 201
    assert response.json()["name"] == "123"
