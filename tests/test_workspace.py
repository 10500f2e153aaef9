"""The workspace pages (pages/workspace.py) with Django's test client: a matter opened, its chats, documents,
members and invitation links, by its owner, a member and someone outside it (404), with CSRF enforced.
The services beneath (chats.invitations, chats.documents.delete_document) are tested through them and alone."""

from __future__ import annotations

import datetime
import re

import pytest
from django.conf import LazySettings
from django.contrib.auth.models import User
from django.core.files.uploadedfile import SimpleUploadedFile
from django.db import IntegrityError, connection
from django.test import Client
from django.test.utils import CaptureQueriesContext
from django.urls import reverse
from django.utils import timezone

from chats import invitations
from chats.documents import DocumentKept, delete_document
from chats.models import Chat, Document, DocumentPassage, Invitation, Project
from tests import factories
from tests.pdf_fixture import make_pdf

pytestmark = pytest.mark.django_db
PASSWORD = "correct horse battery staple"


@pytest.fixture
def owner(user: User) -> User:
    return user


@pytest.fixture
def member() -> User:
    return factories.UserFactory.create(username="bob")


@pytest.fixture
def matter(owner: User, member: User) -> Project:
    return factories.ProjectFactory.create(owner=owner, members=[member], name="Doe v. Roe")


def client_of(user: User) -> Client:
    client = Client()
    client.force_login(user)
    return client


def matter_url(matter: Project, name: str = "pages:matter", **kwargs: object) -> str:
    return reverse(name, kwargs={"project_id": matter.pk, **kwargs})


def messages_of(response: object) -> list[str]:
    return [str(m) for m in response.context["messages"]]  # type: ignore[attr-defined]


# --- matters and chats --------------------------------------------------------------------------------------------


def test_a_new_matter_is_opened_from_home_and_its_page_shown(owner: User) -> None:
    client = client_of(owner)
    assert 'action="/matters/new/"' in client.get("/").content.decode()

    response = client.post(reverse("pages:matter-create"), {"name": "  Smith v. Jones  "})

    project = Project.objects.get(owner=owner)
    assert project.name == "Smith v. Jones"
    assert response.status_code == 302
    assert response["Location"] == matter_url(project)
    page = client.get(response["Location"])
    assert "Matter 'Smith v. Jones' opened" in messages_of(page)[0]
    assert "<h1>Smith v. Jones</h1>" in page.content.decode()


@pytest.mark.parametrize("name", ["", "   ", "x" * 201])
def test_a_matter_without_a_usable_name_is_refused_on_the_form(owner: User, name: str) -> None:
    response = client_of(owner).post(reverse("pages:matter-create"), {"name": name})
    assert response.status_code == 400
    assert 'class="form-error field-error"' in response.content.decode()
    assert not Project.objects.exists()


def test_a_member_starts_a_chat_and_lands_on_its_page(matter: Project, member: User) -> None:
    response = client_of(member).post(matter_url(matter, "pages:chat-create"), {"title": "Standing"})
    chat = Chat.objects.get(project=matter)
    assert (chat.title, chat.owner) == ("Standing", member)
    assert response["Location"] == reverse("pages:chat", args=[chat.pk])


def test_the_matter_page_lists_its_chats_documents_and_members(matter: Project, member: User) -> None:
    factories.ChatFactory.create(project=matter, title="Remedies")
    factories.DocumentFactory.create(project=matter, title="Engagement letter")
    page = client_of(member).get(matter_url(matter)).content.decode()
    assert "Remedies" in page
    assert "Engagement letter" in page
    assert "bob" in page
    assert "alice" in page
    # a member sees the list, not the owner's forms
    assert "Only the matter's owner adds and removes members." in page
    assert matter_url(matter, "pages:member-add") not in page
    assert matter_url(matter, "pages:invitation-create") not in page


def test_the_matter_page_costs_the_same_queries_whatever_its_size(matter: Project, owner: User) -> None:
    client = client_of(owner)
    client.get(matter_url(matter))  # the session and user, read once

    def queries_of_the_page() -> int:
        with CaptureQueriesContext(connection) as captured:
            assert client.get(matter_url(matter)).status_code == 200
        return len(captured.captured_queries)

    small = queries_of_the_page()
    for _ in range(4):
        chat = factories.ChatFactory.create(project=matter)
        factories.DocumentQuoteFactory.create(message__chat=chat)
        matter.members.add(factories.UserFactory.create())
        invitations.create_invitation(project=matter, by=owner)
    assert queries_of_the_page() == small


# --- access ------------------------------------------------------------------------------------------------------


def _every_matter_action(matter: Project, document: Document, member: User) -> list[tuple[str, str]]:
    return [
        ("get", matter_url(matter)),
        ("get", matter_url(matter, "pages:document", document_id=document.pk)),
        ("post", matter_url(matter, "pages:chat-create")),
        ("post", matter_url(matter, "pages:document-upload")),
        ("post", matter_url(matter, "pages:document-delete", document_id=document.pk)),
        ("post", matter_url(matter, "pages:member-add")),
        ("post", matter_url(matter, "pages:member-remove", username=member.username)),
        ("post", matter_url(matter, "pages:invitation-create")),
    ]


def test_someone_outside_the_matter_gets_404_everywhere_and_changes_nothing(
    matter: Project, member: User, other_user: User
) -> None:
    document = factories.DocumentFactory.create(project=matter)
    client = client_of(other_user)
    for method, url in _every_matter_action(matter, document, member):
        assert getattr(client, method)(url, {"username": "mallory", "title": "x"}).status_code == 404, url
    assert Document.objects.filter(pk=document.pk).exists()
    assert list(matter.members.all()) == [member]
    assert not Chat.objects.exists()
    assert not Invitation.objects.exists()


def test_a_visitor_not_signed_in_is_sent_to_the_login_page(matter: Project, member: User) -> None:
    document = factories.DocumentFactory.create(project=matter)
    for method, url in _every_matter_action(matter, document, member):
        response = getattr(Client(), method)(url)
        assert response.status_code == 302
        assert response["Location"].startswith("/accounts/login/?next=")


def test_only_the_owner_adds_and_removes_members_and_invites(matter: Project, member: User) -> None:
    factories.UserFactory.create(username="carol")
    client = client_of(member)
    assert client.post(matter_url(matter, "pages:member-add"), {"username": "carol"}).status_code == 403
    assert client.post(matter_url(matter, "pages:member-remove", username="bob")).status_code == 403
    assert client.post(matter_url(matter, "pages:invitation-create")).status_code == 403
    assert list(matter.members.all()) == [member]
    assert not Invitation.objects.exists()


def test_the_workspace_pages_carry_the_security_headers_of_the_trace_pages(matter: Project, owner: User) -> None:
    document = factories.DocumentFactory.create(project=matter)
    client = client_of(owner)
    for url in (matter_url(matter), matter_url(matter, "pages:document", document_id=document.pk)):
        response = client.get(url)
        assert "default-src 'self'" in response["Content-Security-Policy"]
        assert response["X-Frame-Options"] == "DENY"
        assert response["X-Content-Type-Options"] == "nosniff"


def test_every_form_needs_the_csrf_token(matter: Project, owner: User) -> None:
    client = Client(enforce_csrf_checks=True)
    client.force_login(owner)
    assert client.post(reverse("pages:matter-create"), {"name": "No token"}).status_code == 403
    assert client.post(matter_url(matter, "pages:invitation-create")).status_code == 403
    assert Project.objects.count() == 1
    assert not Invitation.objects.exists()


# --- members -----------------------------------------------------------------------------------------------------


def test_the_owner_adds_and_removes_a_member_by_username(matter: Project, owner: User, member: User) -> None:
    carol = factories.UserFactory.create(username="carol")
    client = client_of(owner)

    added = client.post(matter_url(matter, "pages:member-add"), {"username": "carol"}, follow=True)
    assert "carol is now a member of this matter." in messages_of(added)
    assert set(matter.members.all()) == {member, carol}

    removed = client.post(matter_url(matter, "pages:member-remove", username="carol"), follow=True)
    assert "carol is no longer a member of this matter." in messages_of(removed)
    assert list(matter.members.all()) == [member]
    # her access ends with it
    assert client_of(carol).get(matter_url(matter)).status_code == 404


def test_adding_an_unknown_username_says_so_on_the_form(matter: Project, owner: User) -> None:
    response = client_of(owner).post(matter_url(matter, "pages:member-add"), {"username": "nobody"})
    assert response.status_code == 400
    assert "No active user has this username." in response.content.decode()


# --- documents ---------------------------------------------------------------------------------------------------


def test_a_member_uploads_a_pdf_reads_it_by_page_and_deletes_it(matter: Project, member: User) -> None:
    client = client_of(member)
    pdf = SimpleUploadedFile("memo.pdf", make_pdf([["First page words."], ["Second page words."]]), "application/pdf")

    response = client.post(matter_url(matter, "pages:document-upload"), {"title": "Memo", "file": pdf})

    assert response.status_code == 302
    document = Document.objects.get(project=matter)
    assert document.title == "Memo"
    assert len(document.pages) == 2
    page = client.get(matter_url(matter, "pages:document", document_id=document.pk)).content.decode()
    assert "Page 1" in page
    assert "Page 2" in page
    assert "Second page words." in page

    deleted = client.post(matter_url(matter, "pages:document-delete", document_id=document.pk), follow=True)
    assert "Document 'Memo' deleted." in messages_of(deleted)
    assert not Document.objects.filter(pk=document.pk).exists()
    assert not DocumentPassage.objects.filter(document_id=document.pk).exists()


@pytest.mark.parametrize(
    ("content", "status", "error"),
    [
        (b"\xff\xfe\x00binary", 400, "The file is neither a PDF nor UTF-8 text."),
        (b"%PDF-1.4 not really a pdf", 400, "The file is not a PDF that can be read."),
        (b"   ", 400, "The document has no text."),
    ],
)
def test_a_bad_upload_is_refused_on_the_form_in_words(
    matter: Project, member: User, content: bytes, status: int, error: str
) -> None:
    upload = SimpleUploadedFile("bad.bin", content, "application/octet-stream")
    response = client_of(member).post(matter_url(matter, "pages:document-upload"), {"title": "Bad", "file": upload})
    assert response.status_code == status
    assert error in response.content.decode()
    assert not Document.objects.exists()


def test_an_upload_over_the_size_limit_is_a_413_naming_it(
    matter: Project, member: User, settings: LazySettings
) -> None:
    settings.LQAI_MAX_UPLOAD_BYTES = 10
    upload = SimpleUploadedFile("long.txt", b"eleven bytes", "text/plain")
    response = client_of(member).post(matter_url(matter, "pages:document-upload"), {"title": "Long", "file": upload})
    assert response.status_code == 413
    assert "The file is too large: at most 10 bytes." in response.content.decode()
    assert not Document.objects.exists()


def test_a_quoted_document_is_not_deleted_and_the_page_says_why(matter: Project, member: User) -> None:
    chat = factories.ChatFactory.create(project=matter)
    quote = factories.DocumentQuoteFactory.create(message__chat=chat)
    document = quote.document
    assert document is not None

    page = client_of(member).get(matter_url(matter)).content.decode()
    assert "kept: an answer's record names it" in page
    response = client_of(member).post(matter_url(matter, "pages:document-delete", document_id=document.pk), follow=True)

    assert Document.objects.filter(pk=document.pk).exists()
    assert messages_of(response) == [
        f"Not deleted: {document.title!r} is quoted by an answer in this matter: it stays as long as that turn's "
        "record."
    ]


def test_delete_document_refuses_a_document_a_failed_claim_names_too(matter: Project, member: User) -> None:
    # The quote rows' RESTRICT holds for a failed claim naming the document: the turn's record keeps it.
    chat = factories.ChatFactory.create(project=matter)
    document = factories.DocumentFactory.create(project=matter)
    factories.DocumentQuoteFactory.create(message__chat=chat, document=document, failed=True)
    page = client_of(member).get(matter_url(matter)).content.decode()
    assert "named by a claim that failed" in page
    assert matter_url(matter, "pages:document-delete", document_id=document.pk) not in page
    with pytest.raises(DocumentKept):
        delete_document(document=document)
    assert Document.objects.filter(pk=document.pk).exists()


def test_no_document_of_a_matter_on_legal_hold_is_deleted(matter: Project, member: User) -> None:
    document = factories.DocumentFactory.create(project=matter)
    Project.objects.filter(pk=matter.pk).update(legal_hold=True)
    response = client_of(member).post(matter_url(matter, "pages:document-delete", document_id=document.pk), follow=True)
    assert Document.objects.filter(pk=document.pk).exists()
    assert messages_of(response) == [f"Not deleted: The matter is on legal hold: {document.title!r} cannot be deleted."]


def test_another_matters_document_is_not_found_through_this_matter(matter: Project, member: User) -> None:
    elsewhere = factories.DocumentFactory.create()
    client = client_of(member)
    assert client.get(matter_url(matter, "pages:document", document_id=elsewhere.pk)).status_code == 404
    assert client.post(matter_url(matter, "pages:document-delete", document_id=elsewhere.pk)).status_code == 404
    assert Document.objects.filter(pk=elsewhere.pk).exists()


# --- invitations -------------------------------------------------------------------------------------------------


def _invitation_link(client: Client, matter: Project) -> str:
    """The owner makes a link; it is shown once, on the page she is sent back to."""
    response = client.post(matter_url(matter, "pages:invitation-create"), follow=True)
    found = re.search(r'id="invitation-link" readonly value="([^"]+)"', response.content.decode())
    assert found is not None
    again = client.get(matter_url(matter)).content.decode()
    assert found.group(1) not in again  # shown only once
    return found.group(1).removeprefix("http://testserver")


JOIN = "/invitations/join/"


def opened(client: Client, link: str) -> Client:
    """``client`` after opening ``link``: it is sent on to the join page, which no longer shows the token."""
    response = client.get(link)
    assert response.status_code == 302
    assert response["Location"] == JOIN
    return client


def test_a_colleague_without_an_account_signs_up_by_the_link_and_joins(matter: Project, owner: User) -> None:
    link = _invitation_link(client_of(owner), matter)
    invitation = Invitation.objects.get()
    assert link.split("/")[-2] not in invitation.token_sha256  # only the digest is stored
    visitor = opened(Client(), link)
    assert "Make my account and join" in visitor.get(JOIN).content.decode()

    response = visitor.post(JOIN, {"username": "dana", "password": PASSWORD, "password_again": PASSWORD})

    dana = User.objects.get(username="dana")
    assert dana.check_password(PASSWORD)
    assert response["Location"] == matter_url(matter)
    assert matter.members.filter(pk=dana.pk).exists()
    page = visitor.get(matter_url(matter))  # signed in as her
    assert page.status_code == 200
    assert "You joined the matter 'Doe v. Roe'." in messages_of(page)
    invitation.refresh_from_db()
    assert invitation.used_by == dana
    assert invitation.used_at is not None

    # the link is used up: a second visitor gets a page saying so
    used = Client().get(link)
    assert used.status_code == 410
    assert "used already" in used.content.decode()


def test_a_link_used_while_another_visitor_fills_the_form_refuses_her_and_makes_no_account(
    matter: Project, owner: User
) -> None:
    link = _invitation_link(client_of(owner), matter)
    first, second = opened(Client(), link), opened(Client(), link)
    first.post(JOIN, {"username": "dana", "password": PASSWORD, "password_again": PASSWORD})

    response = second.post(JOIN, {"username": "eve", "password": PASSWORD, "password_again": PASSWORD})

    assert response.status_code == 410
    assert "used already" in response.content.decode()
    assert not User.objects.filter(username="eve").exists()
    assert list(matter.members.values_list("username", flat=True)) == ["bob", "dana"]


def test_the_join_page_without_an_opened_link_is_a_404() -> None:
    assert Client().get(JOIN).status_code == 404


@pytest.mark.parametrize(
    ("data", "error"),
    [
        ({"username": "dana", "password": "password", "password_again": "password"}, "This password is too common."),
        ({"username": "dana", "password": PASSWORD, "password_again": PASSWORD + "!"}, "The two passwords differ."),
        ({"username": "alice", "password": PASSWORD, "password_again": PASSWORD}, "exists already"),
        ({"username": "no spaces", "password": PASSWORD, "password_again": PASSWORD}, "Enter a valid username."),
    ],
)
def test_a_refused_sign_up_says_why_and_writes_nothing(
    matter: Project, owner: User, data: dict[str, str], error: str
) -> None:
    link = _invitation_link(client_of(owner), matter)
    users = User.objects.count()
    response = opened(Client(), link).post(JOIN, data)
    assert response.status_code == 400
    assert error in response.content.decode()
    assert User.objects.count() == users
    assert Invitation.objects.get().used_at is None
    assert list(matter.members.all()) != []  # bob still, nobody added
    assert not matter.members.filter(username=data["username"]).exists()


def test_someone_signed_in_joins_with_the_button_and_a_get_uses_nothing(matter: Project, owner: User) -> None:
    link = _invitation_link(client_of(owner), matter)
    carol = factories.UserFactory.create(username="carol")
    client = opened(client_of(carol), link)

    assert "Join the matter" in client.get(JOIN).content.decode()
    assert Invitation.objects.get().used_at is None

    response = client.post(JOIN)
    assert response["Location"] == matter_url(matter)
    assert matter.members.filter(pk=carol.pk).exists()
    assert Invitation.objects.get().used_by == carol


def test_a_member_opening_a_link_does_not_use_it_up(matter: Project, owner: User, member: User) -> None:
    link = _invitation_link(client_of(owner), matter)
    response = opened(client_of(member), link).post(JOIN, follow=True)
    assert "You are already in the matter 'Doe v. Roe'." in messages_of(response)
    assert Invitation.objects.get().used_at is None


def test_an_expired_link_is_a_410_saying_so(matter: Project, owner: User, settings: LazySettings) -> None:
    settings.LQAI_INVITATION_DAYS = 2
    link = _invitation_link(client_of(owner), matter)
    invitation = Invitation.objects.get()
    assert invitation.expires_at - invitation.created_at == datetime.timedelta(days=2)
    visitor = opened(Client(), link)
    # (two days later, the visitor submits the form she opened)
    Invitation.objects.update(
        created_at=invitation.created_at - datetime.timedelta(days=2),
        expires_at=invitation.expires_at - datetime.timedelta(days=2),
    )

    response = visitor.post(JOIN, {"username": "dana", "password": PASSWORD, "password_again": PASSWORD})

    assert response.status_code == 410
    assert "This invitation has expired" in response.content.decode()
    assert not User.objects.filter(username="dana").exists()
    assert Client().get(link).status_code == 410


def test_a_revoked_link_is_a_410_and_leaves_the_list(matter: Project, owner: User) -> None:
    client = client_of(owner)
    link = _invitation_link(client, matter)
    invitation = Invitation.objects.get()
    revoke = matter_url(matter, "pages:invitation-revoke", invitation_id=invitation.pk)
    assert revoke in client.get(matter_url(matter)).content.decode()

    client.post(revoke)

    assert revoke not in client.get(matter_url(matter)).content.decode()
    response = Client().get(link)
    assert response.status_code == 410
    assert "withdrawn by the matter&#x27;s owner" in response.content.decode()


def test_an_unknown_link_is_a_404() -> None:
    assert Client().get(reverse("pages:invitation", kwargs={"token": "made-up"})).status_code == 404


def test_a_link_ends_when_its_maker_no_longer_owns_the_matter(matter: Project, owner: User, member: User) -> None:
    made = invitations.create_invitation(project=matter, by=owner)
    Project.objects.filter(pk=matter.pk).update(owner=member)
    with pytest.raises(invitations.InvitationEnded, match="no longer owns the matter"):
        invitations.open_invitation(token=made.token)


def test_the_invitation_constraints_hold_in_the_database(matter: Project, owner: User) -> None:
    made = invitations.create_invitation(project=matter, by=owner)
    with pytest.raises(IntegrityError):
        Invitation.objects.filter(pk=made.invitation.pk).update(used_at=timezone.now())  # used, by nobody


@pytest.mark.postgres
@pytest.mark.django_db(transaction=True)
@pytest.mark.timeout(60)
def test_visitors_signing_up_by_one_link_at_once_make_one_account() -> None:
    from concurrent.futures import ThreadPoolExecutor
    from threading import Barrier

    from django.db import connections

    # Given one live link, and six visitors who submit the sign-up form at the same moment
    owner = factories.UserFactory.create(username="alice")
    matter = factories.ProjectFactory.create(owner=owner)
    token = invitations.create_invitation(project=matter, by=owner).token
    start = Barrier(6)

    def sign_up(n: int) -> str:
        try:
            start.wait()
            invitations.sign_up_with_invitation(token=token, username=f"visitor{n}", password=PASSWORD)
            return "joined"
        except invitations.InvitationEnded:
            return "ended"
        finally:
            connections.close_all()

    with ThreadPoolExecutor(max_workers=6) as pool:
        outcomes = list(pool.map(sign_up, range(6)))

    # Then one joined, the others were told the link was used, and no account was made for them
    assert sorted(outcomes) == ["ended"] * 5 + ["joined"]
    joined = User.objects.exclude(username="alice")
    assert joined.count() == 1
    assert list(matter.members.all()) == list(joined)
    assert Invitation.objects.get().used_by == joined.get()
