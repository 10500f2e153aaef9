"""Outside review of the scoping rule: every object is scoped by its matter's CURRENT membership, in the API, the
pages and the admin; anyone else gets 404 and never the data.

Each test here is a gap found by the review: it fails on the code as it stands.
"""

from __future__ import annotations

import pytest
from django.contrib.auth.models import Permission, User
from django.test import Client
from django.urls import reverse
from rest_framework.test import APIClient

from chats.models import Chat, Project
from tests import factories

pytestmark = pytest.mark.django_db

SECRET = (
    "The client privately agreed to settle the Hargreave claim for four million dollars. "
    "Nobody outside the Hargreave matter may learn the settlement figure."
)
QUESTION = "What did the client agree to settle the Hargreave claim for?"


def client_for(user: User) -> APIClient:
    client = APIClient()
    client.force_authenticate(user=user)
    return client


@pytest.fixture
def alice(db: None) -> User:
    return factories.UserFactory.create(username="alice")


@pytest.fixture
def bob(db: None) -> User:
    return factories.UserFactory.create(username="bob")


# --- a document moved to another matter stays searchable in its old one ---------------------------------------------


def test_a_document_moved_to_another_matter_is_not_quoted_in_its_old_matter(alice: User, bob: User) -> None:
    # Given a document filed by mistake in alice's matter A, not cited yet
    matter_a = factories.ProjectFactory.create(owner=alice, name="Matter A")
    matter_b = factories.ProjectFactory.create(owner=bob, name="Hargreave")
    document = factories.DocumentFactory.create(project=matter_a, title="Hargreave settlement memo", content=SECRET)
    # ... moved to bob's matter B, where it belongs (as the admin's document page does: a save of its form)
    admin = factories.UserFactory.create(username="root", is_staff=True, is_superuser=True)
    operator = Client()
    operator.force_login(admin)
    response = operator.post(
        reverse("admin:chats_document_change", args=[document.pk]),
        {"project": str(matter_b.pk), "title": document.title, "content": SECRET},
    )
    assert response.status_code == 302, response.content[:2000]
    document.refresh_from_db()
    assert document.project_id == matter_b.pk
    # alice is not a member of B
    assert not Project.objects.filter(pk=matter_b.pk, members=alice).exists()

    # When alice asks in a chat of her matter A
    chat = factories.ChatFactory.create(project=matter_a, owner=alice)
    response = client_for(alice).post(f"/api/chats/{chat.pk}/messages/", {"content": QUESTION}, format="json")

    # Then the answer holds nothing of matter B's document
    assert response.status_code == 201
    answer = response.json()["message"]["content"]
    assert "four million" not in answer
    assert "Hargreave settlement memo" not in answer


# --- the admin names rows of other matters, and users outside the staff user's matters -----------------------------


def _staff(username: str, *codenames: str) -> User:
    user = factories.UserFactory.create(username=username, is_staff=True)
    user.user_permissions.add(*Permission.objects.filter(codename__in=codenames))
    return user


def test_the_admin_chat_form_does_not_name_a_matter_the_staff_user_is_not_in(alice: User, bob: User) -> None:
    # Given anne, staff and member of matter A only, and bob's matter B
    anne = _staff("anne", "view_chat", "change_chat")
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


def test_the_admin_names_no_user_outside_the_staff_users_matters(alice: User) -> None:
    # Given anne, staff, member of alice's matter only; zoe belongs to none of anne's matters
    anne = _staff("anne", "view_chat", "add_chat", "view_user")
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
