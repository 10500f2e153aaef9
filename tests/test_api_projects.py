"""Matters, members and documents over the API: the matter's current membership decides (404 to others), the
owner alone manages members, documents come as JSON text or a text/PDF upload (pages kept), with size limits."""

from __future__ import annotations

import io
from typing import Any

import pytest
from django.conf import LazySettings
from django.contrib.auth.models import User
from django.core.files.uploadedfile import SimpleUploadedFile
from pypdf import PdfWriter
from rest_framework.test import APIClient

from chats.models import Chat, Document, Project
from tests import factories
from tests.pdf_fixture import make_pdf

PAGE_ONE = ["Memorandum on ballot access.", "A party may not substitute a candidate after the primary."]
PAGE_TWO = ["The reviewing court must be satisfied that", "no workable race-neutral alternative exists."]


def client_of(user: User) -> APIClient:
    client = APIClient()
    client.force_authenticate(user=user)
    return client


@pytest.fixture
def owner(user: User) -> APIClient:
    return client_of(user)


@pytest.fixture
def matter(user: User) -> Project:
    return factories.ProjectFactory.create(owner=user, name="Ballot matter")


def upload(client: APIClient, matter: Project, name: str, data: bytes, content_type: str, title: str = "Memo") -> Any:
    file = SimpleUploadedFile(name, data, content_type=content_type)
    return client.post(f"/api/projects/{matter.pk}/documents/", {"title": title, "file": file}, format="multipart")


def test_create_list_and_read_a_matter(owner: APIClient, user: User, other_user: User) -> None:
    created = owner.post("/api/projects/", {"name": "  New matter "}, format="json")

    assert created.status_code == 201
    body = created.json()
    assert (body["name"], body["owner"], body["members"]) == ("New matter", "alice", [])
    assert Project.objects.get(pk=body["id"]).owner == user
    assert [p["id"] for p in owner.get("/api/projects/").json()["results"]] == [body["id"]]
    assert owner.get(f"/api/projects/{body['id']}/").json()["id"] == body["id"]
    # Others see nothing of it
    assert client_of(other_user).get("/api/projects/").json()["results"] == []
    assert client_of(other_user).get(f"/api/projects/{body['id']}/").status_code == 404


@pytest.mark.parametrize("body", [{}, {"name": ""}, {"name": "   "}, {"name": "x" * 201}, {"name": ["a"]}])
def test_a_matter_needs_a_name(owner: APIClient, body: dict[str, Any]) -> None:
    response = owner.post("/api/projects/", body, format="json")
    assert response.status_code == 400
    assert "name" in response.json()
    assert Project.objects.count() == 0


def test_the_owner_adds_and_removes_a_member_whose_access_follows(
    owner: APIClient, matter: Project, other_user: User
) -> None:
    chat = factories.ChatFactory.create(project=matter, owner=matter.owner)
    member = client_of(other_user)
    assert member.get(f"/api/chats/{chat.pk}/").status_code == 404

    added = owner.post(f"/api/projects/{matter.pk}/members/", {"username": "mallory"}, format="json")
    again = owner.post(f"/api/projects/{matter.pk}/members/", {"username": "mallory"}, format="json")

    assert (added.status_code, again.status_code) == (201, 200)
    assert added.json()["members"] == ["mallory"]
    assert member.get(f"/api/chats/{chat.pk}/").status_code == 200
    assert member.get(f"/api/projects/{matter.pk}/").status_code == 200

    assert owner.delete(f"/api/projects/{matter.pk}/members/mallory/").status_code == 204
    assert member.get(f"/api/chats/{chat.pk}/").status_code == 404
    assert member.get(f"/api/projects/{matter.pk}/").status_code == 404
    assert owner.delete(f"/api/projects/{matter.pk}/members/mallory/").status_code == 404


def test_a_member_cannot_manage_members_and_a_stranger_gets_404(matter: Project, other_user: User) -> None:
    member_user = factories.UserFactory.create(username="bob")
    matter.members.add(member_user)
    member, stranger = client_of(member_user), client_of(other_user)

    refused = member.post(f"/api/projects/{matter.pk}/members/", {"username": "mallory"}, format="json")

    assert refused.status_code == 403
    assert member.delete(f"/api/projects/{matter.pk}/members/bob/").status_code == 403
    assert stranger.post(f"/api/projects/{matter.pk}/members/", {"username": "mallory"}, format="json").status_code == (
        404
    )
    assert stranger.delete(f"/api/projects/{matter.pk}/members/bob/").status_code == 404
    assert list(matter.members.values_list("username", flat=True)) == ["bob"]


@pytest.mark.parametrize("username", ["nobody", "", None])
def test_adding_an_unknown_user_is_a_field_error(owner: APIClient, matter: Project, username: Any) -> None:
    response = owner.post(f"/api/projects/{matter.pk}/members/", {"username": username}, format="json")
    assert response.status_code == 400
    assert "username" in response.json()


def test_adding_the_owner_changes_nothing(owner: APIClient, matter: Project) -> None:
    response = owner.post(f"/api/projects/{matter.pk}/members/", {"username": "alice"}, format="json")
    assert response.status_code == 200
    assert response.json()["members"] == []


def test_a_text_document_as_json(owner: APIClient, matter: Project) -> None:
    response = owner.post(
        f"/api/projects/{matter.pk}/documents/", {"title": "Memo", "content": "The text."}, format="json"
    )

    assert response.status_code == 201
    assert response.json()["length"] == len("The text.")
    assert response.json()["page_count"] == 0
    document = Document.objects.get()
    assert (document.project, document.title, document.content, document.pages) == (matter, "Memo", "The text.", [])
    [listed] = owner.get(f"/api/projects/{matter.pk}/documents/").json()["results"]
    assert listed["id"] == str(document.pk)


def test_a_text_file_upload(owner: APIClient, matter: Project) -> None:
    response = upload(owner, matter, "memo.txt", "Curly “quotes” kept.\n".encode(), "text/plain")
    assert response.status_code == 201
    assert Document.objects.get().content == "Curly “quotes” kept.\n"


def test_a_pdf_upload_keeps_its_pages(owner: APIClient, matter: Project) -> None:
    response = upload(owner, matter, "memo.pdf", make_pdf([PAGE_ONE, PAGE_TWO]), "application/pdf")

    assert response.status_code == 201, response.content
    assert response.json()["page_count"] == 2
    document = Document.objects.get()
    second = document.content.index("The reviewing court")
    assert document.pages == [[0, "1"], [document.content.index("The reviewing court"), "2"]]
    assert document.content[:second].startswith("Memorandum on ballot access.")


def test_a_pdf_is_recognised_by_its_bytes_whatever_its_name(owner: APIClient, matter: Project) -> None:
    response = upload(owner, matter, "memo.bin", make_pdf([PAGE_ONE]), "application/octet-stream")
    assert response.status_code == 201
    assert Document.objects.get().pages == [[0, "1"]]


def test_a_pdf_without_text_is_a_clear_400(owner: APIClient, matter: Project) -> None:
    response = upload(owner, matter, "scan.pdf", make_pdf([[], []]), "application/pdf")

    assert response.status_code == 400
    assert "no extractable text" in response.json()["file"][0]
    assert Document.objects.count() == 0


def test_an_encrypted_pdf_is_a_clear_400(owner: APIClient, matter: Project) -> None:
    writer = PdfWriter(clone_from=io.BytesIO(make_pdf([PAGE_ONE])))
    writer.encrypt(user_password="secret", algorithm="RC4-128")
    encrypted = io.BytesIO()
    writer.write(encrypted)

    response = upload(owner, matter, "sealed.pdf", encrypted.getvalue(), "application/pdf")

    assert response.status_code == 400
    assert response.json() == {"file": ["The PDF is encrypted: upload it without a password."]}
    assert Document.objects.count() == 0


@pytest.mark.parametrize(
    ("name", "data", "content_type"),
    [
        ("broken.pdf", b"%PDF-1.4\nthis is not a pdf", "application/pdf"),
        ("latin1.txt", "caf\xe9".encode("latin-1"), "text/plain"),
        ("binary.txt", b"a\x00b", "text/plain"),
        ("empty.txt", b"   \n", "text/plain"),
    ],
)
def test_unreadable_files_are_a_400(
    owner: APIClient, matter: Project, name: str, data: bytes, content_type: str
) -> None:
    response = upload(owner, matter, name, data, content_type)
    assert response.status_code == 400
    assert response.json()["file"]
    assert Document.objects.count() == 0


def test_an_upload_without_a_file_or_title_is_a_field_error(owner: APIClient, matter: Project) -> None:
    response = owner.post(f"/api/projects/{matter.pk}/documents/", {"title": "x"}, format="multipart")
    assert response.status_code == 400
    assert "file" in response.json()


def test_a_file_over_the_limit_is_a_413(owner: APIClient, matter: Project, settings: LazySettings) -> None:
    settings.LQAI_MAX_UPLOAD_BYTES = 100
    response = upload(owner, matter, "memo.txt", b"x" * 101, "text/plain")
    assert response.status_code == 413
    assert Document.objects.count() == 0


def test_a_text_over_the_limit_is_a_413(owner: APIClient, matter: Project, settings: LazySettings) -> None:
    settings.LQAI_MAX_DOCUMENT_CHARS = 10
    response = owner.post(f"/api/projects/{matter.pk}/documents/", {"title": "M", "content": "x" * 11}, format="json")
    assert response.status_code == 413
    assert response.json()["detail"]


def test_a_body_declared_over_the_upload_limit_is_refused_before_it_is_read(
    owner: APIClient, matter: Project, settings: LazySettings
) -> None:
    settings.LQAI_MAX_UPLOAD_BYTES = 1000
    file = SimpleUploadedFile("memo.txt", b"x" * 200_000, content_type="text/plain")
    response = owner.post(f"/api/projects/{matter.pk}/documents/", {"title": "M", "file": file}, format="multipart")
    assert response.status_code == 413


def test_members_add_documents_and_strangers_get_404(matter: Project, other_user: User) -> None:
    member_user = factories.UserFactory.create(username="bob")
    matter.members.add(member_user)

    assert client_of(member_user).post(
        f"/api/projects/{matter.pk}/documents/", {"title": "M", "content": "c"}, format="json"
    ).status_code == (201)
    stranger = client_of(other_user)
    assert stranger.get(f"/api/projects/{matter.pk}/documents/").status_code == 404
    assert stranger.post(
        f"/api/projects/{matter.pk}/documents/", {"title": "M", "content": "c"}, format="json"
    ).status_code == (404)
    assert Document.objects.count() == 1


def test_a_removed_member_loses_the_documents_at_once(owner: APIClient, matter: Project, other_user: User) -> None:
    matter.members.add(other_user)
    member = client_of(other_user)
    assert member.get(f"/api/projects/{matter.pk}/documents/").status_code == 200

    owner.delete(f"/api/projects/{matter.pk}/members/mallory/")

    assert member.get(f"/api/projects/{matter.pk}/documents/").status_code == 404


@pytest.mark.parametrize("projects", [1, 8])
def test_listing_matters_runs_a_constant_number_of_queries(
    owner: APIClient, user: User, projects: int, django_assert_num_queries: Any
) -> None:
    for n in range(projects):
        project = factories.ProjectFactory.create(owner=user, name=f"M{n}")
        project.members.add(factories.UserFactory.create())
    # count, page, members
    with django_assert_num_queries(3):
        assert len(owner.get("/api/projects/").json()["results"]) == projects


def test_unauthenticated_requests_are_refused(matter: Project) -> None:
    assert APIClient().get("/api/projects/").status_code == 401
    assert APIClient().get(f"/api/projects/{matter.pk}/documents/").status_code == 401
    assert APIClient().post("/api/projects/", {"name": "x"}, format="json").status_code == 401
    assert Chat.objects.count() == 0


@pytest.mark.postgres
@pytest.mark.django_db(transaction=True)
@pytest.mark.timeout(60)
def test_concurrent_member_changes_and_uploads_by_two_users_stay_consistent() -> None:
    from concurrent.futures import ThreadPoolExecutor

    from django.db import connections

    # Given a matter of alice's, and bob, whom alice adds many times at once while both upload documents
    alice = factories.UserFactory.create(username="alice")
    bob = factories.UserFactory.create(username="bob")
    matter = factories.ProjectFactory.create(owner=alice)

    def act(n: int) -> int:
        try:
            if n % 3 == 0:
                response = client_of(alice).post(
                    f"/api/projects/{matter.pk}/members/", {"username": "bob"}, format="json"
                )
            else:
                client = client_of(alice if n % 3 == 1 else bob)
                response = client.post(
                    f"/api/projects/{matter.pk}/documents/", {"title": f"D{n}", "content": "text"}, format="json"
                )
            return int(response.status_code)
        finally:
            connections.close_all()

    with ThreadPoolExecutor(max_workers=6) as pool:
        statuses = list(pool.map(act, range(18)))

    # Then bob is a member once; every upload either succeeded or (bob's, before he was added) was a 404
    assert list(matter.members.values_list("username", flat=True)) == ["bob"]
    assert all(status in {200, 201, 404} for status in statuses), statuses
    alice_uploads = [s for n, s in enumerate(statuses) if n % 3 == 1]
    assert alice_uploads == [201] * 6
    assert Document.objects.filter(project=matter).count() == statuses.count(201) - [
        s for n, s in enumerate(statuses) if n % 3 == 0
    ].count(201)
    assert client_of(bob).get(f"/api/projects/{matter.pk}/documents/").status_code == 200


def test_a_pdf_whose_text_is_over_the_limit_is_a_413(owner: APIClient, matter: Project, settings: LazySettings) -> None:
    settings.LQAI_MAX_DOCUMENT_CHARS = 100
    response = upload(owner, matter, "memo.pdf", make_pdf([PAGE_ONE, PAGE_TWO] * 3), "application/pdf")
    assert response.status_code == 413
    assert Document.objects.count() == 0


@pytest.mark.parametrize("documents", [1, 6])
def test_listing_documents_runs_a_constant_number_of_queries(
    owner: APIClient, matter: Project, documents: int, django_assert_num_queries: Any
) -> None:
    factories.DocumentFactory.create_batch(documents, project=matter)
    # the matter (access), count, page; no text read
    with django_assert_num_queries(3):
        body = owner.get(f"/api/projects/{matter.pk}/documents/").json()
    assert body["count"] == documents
    assert all(d["length"] == len(factories.TEXT) for d in body["results"])
