"""The admin respects the record and the matter: nothing of a finalized turn can be changed there (superusers
included); a staff user who is not a superuser sees only the matters they belong to, in every admin model
that belongs to a matter; no API token of any kind is listed."""

from __future__ import annotations

import pytest
from django.apps import apps
from django.contrib import admin
from django.contrib.auth.models import Permission, User
from django.db.models import Model
from django.test import Client
from django.urls import reverse

from chats.models import (
    CaseCitation,
    Chat,
    Document,
    DocumentQuote,
    Message,
    MessageToolSource,
    OpinionQuote,
    Project,
)
from citations import ledger
from citations.models import CitationLedgerEntry
from tests import factories

pytestmark = pytest.mark.django_db

MATTER_MODELS: tuple[type[Model], ...] = (
    Project,
    Chat,
    Message,
    Document,
    DocumentQuote,
    OpinionQuote,
    CaseCitation,
    MessageToolSource,
    CitationLedgerEntry,
)


def _url(model: type[Model], view: str, *args: object) -> str:
    return reverse(f"admin:{model._meta.app_label}_{model._meta.model_name}_{view}", args=args)


def _staff(username: str) -> User:
    """A staff user (not a superuser) who may view every model of the admin and change matters and documents."""
    user = factories.UserFactory.create(username=username, is_staff=True)
    codenames = [f"view_{model._meta.model_name}" for model in MATTER_MODELS]
    codenames += ["change_project", "change_document", "change_chat", "delete_project", "change_message"]
    user.user_permissions.add(*Permission.objects.filter(codename__in=codenames))
    return user


def _matter_turn(owner: User) -> Message:
    """A finalized turn in a new matter of ``owner``, with a row in every per-turn table and their entries."""
    chat = factories.ChatFactory.create(project__owner=owner)
    message = factories.MessageFactory.create(chat=chat, verdict="fail")
    factories.DocumentQuoteFactory.create(message=message)
    factories.OpinionQuoteFactory.create(message=message)
    factories.MessageToolSourceFactory.create(message=message)
    factories.CaseCitationFactory.create(message=message)
    ledger.assemble(message)
    return message


def _row_of(model: type[Model], message: Message) -> Model:
    assert message.chat.project_id is not None
    if model is Project:
        return Project.objects.get(pk=message.chat.project_id)
    if model is Chat:
        return message.chat
    if model is Message:
        return message
    if model is Document:
        return Document.objects.get(project_id=message.chat.project_id)
    row = model._default_manager.filter(message=message).order_by("pk").first()
    assert row is not None
    return row


@pytest.fixture
def two_matters() -> tuple[Client, Message, Message]:
    """Anne (staff, member of matter A) logged in; a turn of matter A and one of matter B (Bob's)."""
    anne, bob = _staff("anne"), _staff("bob")
    turn_a, turn_b = _matter_turn(anne), _matter_turn(bob)
    client = Client()
    client.force_login(anne)
    return client, turn_a, turn_b


@pytest.mark.parametrize("model", MATTER_MODELS, ids=lambda m: m._meta.model_name)
def test_a_staff_member_of_matter_a_sees_nothing_of_matter_b(
    model: type[Model], two_matters: tuple[Client, Message, Message]
) -> None:
    client, turn_a, turn_b = two_matters
    mine, theirs = _row_of(model, turn_a), _row_of(model, turn_b)

    listed = client.get(_url(model, "changelist"))
    assert listed.status_code == 200
    shown = {row.pk for row in listed.context["cl"].result_list}
    assert mine.pk in shown
    assert theirs.pk not in shown
    # the page of a row of matter B is as if it did not exist
    assert client.get(_url(model, "change", mine.pk)).status_code == 200
    other = client.get(_url(model, "change", theirs.pk))
    assert other.status_code == 302
    assert other["Location"] == reverse("admin:index")


def test_a_membership_counts_and_is_read_each_time(two_matters: tuple[Client, Message, Message]) -> None:
    client, _, turn_b = two_matters
    anne = User.objects.get(username="anne")
    matter_b = turn_b.chat.project
    assert matter_b is not None
    url = _url(Message, "change", turn_b.pk)
    assert client.get(url).status_code == 302

    matter_b.members.add(anne)
    assert client.get(url).status_code == 200
    matter_b.members.remove(anne)
    assert client.get(url).status_code == 302


def test_a_staff_user_cannot_move_a_document_or_chat_into_a_matter_they_do_not_belong_to(
    two_matters: tuple[Client, Message, Message],
) -> None:
    client, turn_a, turn_b = two_matters
    # A chat without turns (a chat holding turns keeps its matter whoever asks: test_permanent_record)
    chat = factories.ChatFactory.create(project=turn_a.chat.project, owner=turn_a.chat.owner)
    matter_b = turn_b.chat.project_id

    response = client.post(
        _url(Chat, "change", chat.pk), {"project": matter_b, "owner": chat.owner_id, "title": "moved"}
    )

    assert response.status_code == 200  # the form again, with its error
    assert "project" in response.context["adminform"].form.errors
    chat.refresh_from_db()
    assert chat.project_id == turn_a.chat.project_id


def test_a_superuser_sees_every_matter(admin_client: Client, two_matters: tuple[Client, Message, Message]) -> None:
    _, turn_a, turn_b = two_matters
    listed = admin_client.get(_url(CitationLedgerEntry, "changelist"))
    shown = {row.message_id for row in listed.context["cl"].result_list}
    assert {turn_a.pk, turn_b.pk} <= shown


# --- the record is read-only, superusers included -----------------------------------------------------------------


@pytest.mark.parametrize("model", [Message, DocumentQuote, OpinionQuote, CaseCitation, MessageToolSource])
def test_nothing_of_a_finalized_turn_can_be_changed_in_the_admin(admin_client: Client, model: type[Model]) -> None:
    turn = _matter_turn(factories.UserFactory.create())
    row = _row_of(model, turn)

    page = admin_client.get(_url(model, "change", row.pk))
    assert page.status_code == 200
    assert 'name="_save"' not in page.content.decode()  # shown read-only: nothing to submit
    assert (
        admin_client.post(_url(model, "change", row.pk), {"content": "rewritten", "verdict": "pass"}).status_code == 403
    )
    assert admin_client.post(_url(model, "delete", row.pk), {"post": "yes"}).status_code == 403
    assert admin_client.get(_url(model, "add")).status_code == 403
    assert type(row)._default_manager.filter(pk=row.pk).exists()
    turn.refresh_from_db()
    assert turn.verdict == "fail"


def test_a_cited_documents_text_matter_and_title_are_read_only_in_the_admin(admin_client: Client) -> None:
    turn = _matter_turn(factories.UserFactory.create())
    assert turn.chat.project_id is not None
    document = Document.objects.get(project_id=turn.chat.project_id)
    title = document.title
    elsewhere = factories.ProjectFactory.create()

    page = admin_client.get(_url(Document, "change", document.pk)).content.decode()
    assert 'name="content"' not in page
    assert 'name="project"' not in page
    assert 'name="title"' not in page
    admin_client.post(
        _url(Document, "change", document.pk),
        {"title": "Renamed", "content": "rewritten", "project": elsewhere.pk},
    )

    document.refresh_from_db()
    assert (document.title, document.content, document.project_id) == (
        title,
        factories.TEXT,
        turn.chat.project_id,
    )


# --- tokens ---------------------------------------------------------------------------------------------------------


def test_no_api_token_of_any_kind_is_registered_in_the_admin(admin_client: Client) -> None:
    tokens = [
        model
        for model in apps.get_models(include_auto_created=True)
        if "token" in (model._meta.model_name or "") or model._meta.app_label in {"authtoken", "knox"}
    ]
    assert tokens, "no token model is installed: this test would prove nothing"
    assert not [model for model in tokens if admin.site.is_registered(model)]
    assert not [model for model in admin.site._registry if "token" in (model._meta.model_name or "")]
    index = admin_client.get(reverse("admin:index")).content.decode()
    assert "authtoken" not in index
    assert "Tokens" not in index


# --- users ----------------------------------------------------------------------------------------------------------


def _user_admin_staff(username: str) -> User:
    """A staff user (not a superuser) who may view, add and change users (Django's own permissions)."""
    user = factories.UserFactory.create(username=username, is_staff=True)
    user.user_permissions.add(
        *Permission.objects.filter(codename__in=["view_user", "change_user", "add_user", "view_project"])
    )
    return user


@pytest.fixture
def people() -> dict[str, User]:
    """Anne (staff, may manage users) owns matter A with Carl as a member; Bob and Dora share matter B."""
    anne, carl, bob, dora = (
        _user_admin_staff("anne"),
        factories.UserFactory.create(username="carl"),
        factories.UserFactory.create(username="bob"),
        factories.UserFactory.create(username="dora"),
    )
    factories.ProjectFactory.create(owner=anne).members.add(carl)
    factories.ProjectFactory.create(owner=bob).members.add(dora)
    return {"anne": anne, "carl": carl, "bob": bob, "dora": dora}


def test_a_staff_user_sees_only_the_people_of_their_matters(people: dict[str, User]) -> None:
    client = Client()
    client.force_login(people["anne"])

    listed = client.get(_url(User, "changelist"))

    assert listed.status_code == 200
    assert {user.username for user in listed.context["cl"].result_list} == {"anne", "carl"}
    assert client.get(_url(User, "change", people["carl"].pk)).status_code == 200
    other = client.get(_url(User, "change", people["dora"].pk))
    assert other.status_code == 302
    assert other["Location"] == reverse("admin:index")


def test_a_staff_user_cannot_grant_access_or_take_over_an_account(people: dict[str, User]) -> None:
    anne, carl = people["anne"], people["carl"]
    client = Client()
    client.force_login(anne)

    page = client.get(_url(User, "change", anne.pk)).content.decode()
    assert 'name="is_superuser"' not in page
    assert 'name="user_permissions"' not in page
    client.post(
        _url(User, "change", anne.pk),
        {
            "username": "anne",
            "is_active": "on",
            "is_staff": "on",
            "is_superuser": "on",
            "date_joined_0": "2026-01-01",
            "date_joined_1": "00:00:00",
        },
    )
    anne.refresh_from_db()
    assert not anne.is_superuser

    # a colleague's password is a superuser's to set; one's own is one's own
    url = reverse("admin:auth_user_password_change", args=[carl.pk])
    taken = client.post(url, {"password1": "Taken-over-9", "password2": "Taken-over-9"})
    assert taken.status_code == 403
    carl.refresh_from_db()
    assert not carl.check_password("Taken-over-9")
    assert client.get(reverse("admin:auth_user_password_change", args=[anne.pk])).status_code == 200

    assert client.get(_url(User, "add")).status_code == 403


def test_a_superuser_manages_every_user(admin_client: Client, people: dict[str, User]) -> None:
    listed = admin_client.get(_url(User, "changelist"))
    assert {"anne", "bob", "carl", "dora"} <= {user.username for user in listed.context["cl"].result_list}
    assert 'name="is_superuser"' in admin_client.get(_url(User, "change", people["dora"].pk)).content.decode()
    assert admin_client.get(_url(User, "add")).status_code == 200


def _staff_with(username: str, *codenames: str) -> User:
    """A staff user (not a superuser) with just these permissions."""
    user = factories.UserFactory.create(username=username, is_staff=True)
    user.user_permissions.add(*Permission.objects.filter(codename__in=codenames))
    return user


# A raw-id picker (Django's looks the id up in the whole table) names only rows the staff user may see.


def test_the_admin_chat_form_does_not_name_a_matter_the_staff_user_is_not_in() -> None:
    alice, bob = factories.UserFactory.create(username="alice"), factories.UserFactory.create(username="bob")
    # Given anne, staff and member of matter A only, and bob's matter B
    anne = _staff_with("anne", "view_chat", "change_chat")
    matter_a = factories.ProjectFactory.create(owner=alice, members=[anne], name="Matter A")
    matter_b = factories.ProjectFactory.create(owner=bob, name="Hargreave v. Crown Holdings (confidential)")
    chat = factories.ChatFactory.create(project=matter_a, owner=alice, title="Intake")
    client = Client()
    client.force_login(anne)

    # When she submits her chat's form with matter B's id (refused: not one of hers)
    response = client.post(
        reverse("admin:chats_chat_change", args=[chat.pk]),
        {"project": str(matter_b.pk), "owner": alice.pk, "title": "Intake"},
    )
    assert response.status_code == 200
    assert "project" in response.context["adminform"].form.errors
    assert Chat.objects.get(pk=chat.pk).project_id == matter_a.pk

    # Then the form shown again does not name matter B (as if it did not exist)
    assert "Hargreave" not in response.content.decode()


def test_the_admin_names_no_user_outside_the_staff_users_matters() -> None:
    alice = factories.UserFactory.create(username="alice")
    # Given anne, staff, member of alice's matter only; zoe belongs to none of anne's matters
    anne = _staff_with("anne", "view_chat", "add_chat", "view_user")
    factories.ProjectFactory.create(owner=alice, members=[anne])
    zoe = factories.UserFactory.create(username="zoe-outsider")
    client = Client()
    client.force_login(anne)
    # zoe's user page is as if she did not exist (users_visible_to)
    assert client.get(reverse("admin:auth_user_change", args=[zoe.pk])).status_code == 302

    # When anne opens the add form of a chat with zoe's id as the owner (the admin's ?field= initial values)
    response = client.get(reverse("admin:chats_chat_add") + f"?owner={zoe.pk}")

    # Then the page does not name zoe
    assert response.status_code == 200
    assert "zoe-outsider" not in response.content.decode()
