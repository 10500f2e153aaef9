"""Routes of the API as a client expects them, each checked for a second user: a matter's document read back
alone (text, pages, whether it is cited), ``?project=`` on the chats list, and the legal-hold route's 404."""

from __future__ import annotations

import pytest
from django.contrib.auth.models import User
from django.core.files.uploadedfile import SimpleUploadedFile
from rest_framework.test import APIClient

from chats.models import Chat, Document, Project
from tests import factories
from tests.pdf_fixture import make_pdf


def client_of(user: User) -> APIClient:
    client = APIClient()
    client.force_authenticate(user=user)
    return client


@pytest.fixture
def matter(user: User) -> Project:
    return factories.ProjectFactory.create(owner=user, name="Ballot matter")


def _document_url(project: Project, document: Document) -> str:
    return f"/api/projects/{project.pk}/documents/{document.pk}/"


# --- GET /api/projects/{id}/documents/{doc}/ --------------------------------------------------------------------


def test_a_document_is_read_back_with_its_text_and_pages(api_client: APIClient, matter: Project) -> None:
    uploaded = api_client.post(
        f"/api/projects/{matter.pk}/documents/",
        {"title": "Memo", "file": _pdf()},
        format="multipart",
    )
    document = Document.objects.get(pk=uploaded.json()["id"])

    body = api_client.get(_document_url(matter, document)).json()

    assert (body["id"], body["title"], body["content"]) == (str(document.pk), "Memo", document.content)
    assert body["pages"] == [
        {"label": "1", "start": 0},
        {"label": "2", "start": document.content.index("The reviewing court")},
    ]
    assert (body["page_count"], body["length"]) == (2, len(document.content))
    assert (body["cited"], body["citation_count"]) == (False, 0)


def test_a_document_says_whether_a_verified_quote_cites_it(api_client: APIClient, matter_chat: Chat) -> None:
    project = matter_chat.project
    assert project is not None
    document = project.documents.get()
    answer = factories.MessageFactory.create(chat=matter_chat)
    # A failed claim naming it does not make it cited
    factories.DocumentQuoteFactory.create(message=answer, document=document, failed=True)
    assert api_client.get(_document_url(project, document)).json()["cited"] is False

    factories.DocumentQuoteFactory.create(message=answer, document=document)
    factories.DocumentQuoteFactory.create(message=answer, document=document)

    body = api_client.get(_document_url(project, document)).json()
    assert (body["cited"], body["citation_count"]) == (True, 2)


def test_a_document_is_a_404_to_anyone_outside_its_matter(matter: Project, other_user: User) -> None:
    document = factories.DocumentFactory.create(project=matter)
    elsewhere = factories.ProjectFactory.create(owner=other_user)

    # Not a member: 404, as for a document that does not exist
    assert client_of(other_user).get(_document_url(matter, document)).status_code == 404
    # Nor can her own matter's id reach it
    assert client_of(other_user).get(_document_url(elsewhere, document)).status_code == 404
    # A member reads it
    matter.members.add(other_user)
    assert client_of(other_user).get(_document_url(matter, document)).status_code == 200


def test_a_document_of_another_matter_is_a_404_even_to_a_member_of_both(
    api_client: APIClient, user: User, matter: Project
) -> None:
    other_matter = factories.ProjectFactory.create(owner=user, name="Other")
    document = factories.DocumentFactory.create(project=other_matter)

    assert api_client.get(_document_url(matter, document)).status_code == 404
    assert api_client.get(_document_url(other_matter, document)).status_code == 200


# --- ?project= on /api/chats/ ------------------------------------------------------------------------------------


def test_the_chats_list_keeps_one_matters_chats(
    api_client: APIClient, user: User, matter: Project, other_user: User
) -> None:
    in_matter = factories.ChatFactory.create(project=matter, owner=user)
    factories.ChatFactory.create(project=None, owner=user)
    other_matter = factories.ProjectFactory.create(owner=user, name="Other")
    factories.ChatFactory.create(project=other_matter, owner=user)

    listed = api_client.get("/api/chats/", {"project": str(matter.pk)}).json()

    assert [chat["id"] for chat in listed["results"]] == [str(in_matter.pk)]
    assert listed["count"] == 1
    # Without it, every chat she can see
    assert api_client.get("/api/chats/").json()["count"] == 3
    # Another user's matter, like one that does not exist, is an empty list: nothing tells them apart
    theirs = factories.ProjectFactory.create(owner=other_user)
    factories.ChatFactory.create(project=theirs, owner=other_user)
    for project_id in (theirs.pk, "6a0cfc4f-5d0e-4b36-8f2c-0b7a4e1e2d33"):
        assert api_client.get("/api/chats/", {"project": str(project_id)}).json()["results"] == []


@pytest.mark.parametrize("value", ["not-a-uuid", "123", "{}"])
def test_a_malformed_project_filter_is_a_400_naming_it(api_client: APIClient, value: str) -> None:
    response = api_client.get("/api/chats/", {"project": value})

    assert response.status_code == 400
    assert list(response.json()) == ["project"]


# --- the legal-hold route --------------------------------------------------------------------------------------


def test_the_legal_hold_route_describes_its_404_as_a_matter(api_client: APIClient) -> None:
    schema = api_client.get("/api/schema/", {"format": "json"}).json()
    route = schema["paths"]["/api/projects/{project_id}/legal-hold/"]

    for method in ("get", "put", "patch"):
        assert route[method]["responses"]["404"]["description"] == "No such matter visible to you."


def _pdf() -> SimpleUploadedFile:
    pages = [["Memorandum on ballot access."], ["The reviewing court must be satisfied."]]
    return SimpleUploadedFile("memo.pdf", make_pdf(pages), content_type="application/pdf")


def test_the_schema_describes_every_operation_on_its_own(api_client: APIClient) -> None:
    schema = api_client.get("/api/schema/", {"format": "json"}).json()
    operations = [
        (path, method, operation)
        for path, methods in schema["paths"].items()
        for method, operation in methods.items()
        if method in {"get", "post", "put", "patch", "delete"}
    ]

    assert all(operation.get("summary") for _, _, operation in operations)
    # A list says that a cursor it did not make, or a bad page_size, is a 400
    for path, _, operation in operations:
        ok = operation["responses"].get("200", {}).get("content", {}).get("application/json", {}).get("schema", {})
        if ok.get("$ref", "").split("/")[-1].startswith("Paginated"):
            assert "cursor the server did not make" in operation["responses"]["400"]["description"], path
    # The token route's two methods are each described as what they do, not by one shared text
    token = schema["paths"]["/api/auth/token/"]
    assert token["post"]["description"] != token["delete"]["description"]
    assert "no session" in token["post"]["description"]
    # A chat route's 404 names a chat; a matter route's, a matter
    assert schema["paths"]["/api/chats/{chat_id}/messages/"]["post"]["responses"]["404"]["description"] == (
        "No such chat visible to you."
    )
