"""A document moved to another matter is quoted only there: through the admin's form, its old matter's next
turn finds nothing of it (its passages moved with it, chats.0030)."""

from __future__ import annotations

import pytest
from django.contrib.auth.models import User
from django.test import Client
from django.urls import reverse
from rest_framework.test import APIClient

from chats.models import Project
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


def test_a_document_moved_to_another_matter_is_not_quoted_in_its_old_matter(user: User, other_user: User) -> None:
    alice, bob = user, other_user
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
    # ... and its passages moved with it at once (the admin saves through the document service)
    assert set(document.passages.values_list("project_id", flat=True)) == {matter_b.pk}
    # alice is not a member of B
    assert not Project.objects.filter(pk=matter_b.pk, members=alice).exists()

    # When alice asks in a chat of her matter A
    chat = factories.ChatFactory.create(project=matter_a, owner=alice)
    asked = client_for(alice).post(f"/api/chats/{chat.pk}/messages/", {"content": QUESTION}, format="json")

    # Then the answer holds nothing of matter B's document
    assert asked.status_code == 201
    answer = asked.json()["message"]["content"]
    assert "four million" not in answer
    assert "Hargreave settlement memo" not in answer
    # ... which the same question finds in matter B, where it now is
    in_b = factories.ChatFactory.create(project=matter_b, owner=bob)
    asked = client_for(bob).post(f"/api/chats/{in_b.pk}/messages/", {"content": QUESTION}, format="json")
    assert asked.status_code == 201
    assert "four million" in asked.json()["message"]["content"]
