"""One pagination style for every list of the API: ``count``, ``page_size`` (bounded), ``next``/``previous``
links whose cursor the server signs for that list (anything else is a 400), each list read whole by following
``next``, and another user's rows never on a page."""

from __future__ import annotations

import base64
from collections.abc import Callable
from typing import Any

import pytest
from django.conf import LazySettings
from django.contrib.auth.models import User
from knox.models import AuthToken
from rest_framework.test import APIClient

from chats.models import Chat, Project
from tests import factories

KEYS = ["count", "page_size", "next", "previous", "results"]


@pytest.fixture
def lists(user: User, other_user: User) -> dict[str, str]:
    """Five rows in every list of ``user``, and some of ``other_user``'s, who must never show."""
    matter = factories.ProjectFactory.create(owner=user, name="Matter 0")
    for n in range(1, 5):
        factories.ProjectFactory.create(owner=user, name=f"Matter {n}")
    chat = factories.ChatFactory.create(project=matter, owner=user)
    factories.ChatFactory.create_batch(4, project=matter, owner=user)
    factories.DocumentFactory.create_batch(5, project=matter)
    for _ in range(5):
        AuthToken.objects.create(user=user)
    factories.MessageFactory.create(chat=chat)
    factories.UserMessageFactory.create_batch(4, chat=chat)
    theirs = factories.ProjectFactory.create(owner=other_user, name="Theirs")
    factories.ChatFactory.create(project=theirs, owner=other_user)
    AuthToken.objects.create(user=other_user)
    return {
        "projects": "/api/projects/",
        "chats": "/api/chats/",
        "documents": f"/api/projects/{matter.pk}/documents/",
        "messages": f"/api/chats/{chat.pk}/messages/",
        "tokens": "/api/auth/tokens/",
    }


def _read_whole(client: APIClient, url: str) -> tuple[list[str], list[dict[str, Any]]]:
    ids: list[str] = []
    pages: list[dict[str, Any]] = []
    next_url: str | None = url
    while next_url is not None and len(pages) < 20:
        response = client.get(next_url)
        assert response.status_code == 200, response.content
        page = response.json()
        pages.append(page)
        ids += [row["id"] for row in page["results"]]
        next_url = page["next"]
    return ids, pages


@pytest.mark.parametrize("name", ["projects", "chats", "documents", "messages", "tokens"])
def test_every_list_pages_alike(api_client: APIClient, lists: dict[str, str], name: str) -> None:
    whole = api_client.get(lists[name]).json()
    assert list(whole) == KEYS
    assert (whole["count"], whole["page_size"], whole["next"], whole["previous"]) == (5, 50, None, None)

    ids, pages = _read_whole(api_client, f"{lists[name]}?page_size=2")

    assert ids == [row["id"] for row in whole["results"]]  # the same rows, in the same order, none twice
    assert [len(page["results"]) for page in pages] == [2, 2, 1]
    assert all(list(page) == KEYS and page["count"] == 5 and page["page_size"] == 2 for page in pages)
    # previous leads back to the page before
    back = api_client.get(pages[1]["previous"]).json()
    assert [row["id"] for row in back["results"]] == ids[:2]


def test_the_trace_pages_alike(api_client: APIClient, matter_chat: Chat) -> None:
    factories.assembled_turn(matter_chat, kb=0, caselaw=0, tools=5)
    url = f"/api/chats/{matter_chat.pk}/ledger/"
    whole = api_client.get(url).json()
    assert list(whole) == KEYS
    assert whole["count"] == 5

    ids, pages = _read_whole(api_client, f"{url}?page_size=2")

    assert ids == [row["id"] for row in whole["results"]]
    assert [len(page["results"]) for page in pages] == [2, 2, 1]
    assert api_client.get(pages[2]["previous"]).json()["results"] == pages[1]["results"]


def test_a_page_size_above_the_maximum_is_the_maximum(
    api_client: APIClient, lists: dict[str, str], settings: LazySettings
) -> None:
    settings.LQAI_MAX_PAGE_SIZE = 3

    for asked in ("1000", "9" * 5000):
        page = api_client.get("/api/projects/", {"page_size": asked}).json()
        assert (page["page_size"], len(page["results"]), page["count"]) == (3, 3, 5)


@pytest.mark.parametrize("value", ["0", "-1", "two", "1.5", "²", "000", " 5"])
def test_a_page_size_that_is_not_a_positive_whole_number_is_a_400(
    api_client: APIClient, lists: dict[str, str], value: str
) -> None:
    response = api_client.get("/api/chats/", {"page_size": value})

    assert response.status_code == 400
    assert list(response.json()) == ["page_size"]


def _drf_cursor(query: str) -> str:
    return base64.b64encode(query.encode()).decode()


@pytest.mark.parametrize("name", ["projects", "chats", "documents", "messages", "tokens"])
@pytest.mark.parametrize("cursor", [_drf_cursor("o=999999999999999999"), _drf_cursor("o=1&p=Matter 2"), "junk", ""])
def test_a_cursor_the_server_did_not_make_is_a_400(
    api_client: APIClient, lists: dict[str, str], name: str, cursor: str
) -> None:
    response = api_client.get(lists[name], {"cursor": cursor})

    assert response.status_code == 400
    assert response.json() == {"detail": "Invalid cursor."}


def test_a_cursor_of_one_list_is_not_a_cursor_of_another(api_client: APIClient, lists: dict[str, str]) -> None:
    next_link = api_client.get("/api/chats/", {"page_size": 2}).json()["next"]
    cursor = next_link.split("cursor=")[1].split("&")[0]

    assert api_client.get(lists["documents"], {"cursor": cursor}).status_code == 400


def test_another_users_rows_are_never_listed(lists: dict[str, str], other_user: User, api_client: APIClient) -> None:
    theirs = APIClient()
    theirs.force_authenticate(user=other_user)

    counts: dict[str, Callable[[], Any]] = {
        "projects": lambda: theirs.get(lists["projects"]).json()["count"],
        "chats": lambda: theirs.get(lists["chats"]).json()["count"],
        "tokens": lambda: theirs.get(lists["tokens"]).json()["count"],
    }
    assert {name: count() for name, count in counts.items()} == {"projects": 1, "chats": 1, "tokens": 1}
    assert theirs.get(lists["documents"]).status_code == 404
    assert theirs.get(lists["messages"]).status_code == 404
    # Nor does a cursor made for her reach them
    next_link = api_client.get(lists["chats"], {"page_size": 2}).json()["next"]
    assert Project.objects.count() == 6
    assert theirs.get(next_link).json()["results"] == []
