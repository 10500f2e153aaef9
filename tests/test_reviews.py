"""Review of a turn's claims by people: roles in a matter (owner, reviewer, member), and per-claim decisions
sealed into the matter's record (issue 52)."""

from __future__ import annotations

from typing import Any

import pytest
from django.contrib.auth.models import User
from rest_framework.test import APIClient

from chats.models import Project, ProjectMembership, Role
from tests import factories


def client_of(user: User) -> APIClient:
    client = APIClient()
    client.force_authenticate(user=user)
    return client


@pytest.fixture
def matter(user: User) -> Project:
    return factories.ProjectFactory.create(owner=user, name="Ballot matter")


def roles_of(body: dict[str, Any]) -> dict[str, str]:
    return {person["username"]: person["role"] for person in body["roles"]}


# --- roles ---------------------------------------------------------------------------------------------------


def test_the_owner_adds_a_reviewer_and_changes_her_role(user: User, other_user: User, matter: Project) -> None:
    owner = client_of(user)

    added = owner.post(
        f"/api/projects/{matter.pk}/members/", {"username": other_user.username, "role": "reviewer"}, format="json"
    )
    assert added.status_code == 201
    assert roles_of(added.json()) == {user.username: "owner", other_user.username: "reviewer"}

    changed = owner.patch(
        f"/api/projects/{matter.pk}/members/{other_user.username}/", {"role": "member"}, format="json"
    )
    assert changed.status_code == 200
    assert roles_of(changed.json())[other_user.username] == "member"
    assert ProjectMembership.objects.get(project=matter, user=other_user).role == Role.MEMBER


def test_a_new_member_is_a_member_and_re_adding_keeps_her_role(user: User, other_user: User, matter: Project) -> None:
    owner = client_of(user)
    assert (
        owner.post(f"/api/projects/{matter.pk}/members/", {"username": other_user.username}, format="json").status_code
        == 201
    )
    owner.patch(f"/api/projects/{matter.pk}/members/{other_user.username}/", {"role": "reviewer"}, format="json")

    again = owner.post(f"/api/projects/{matter.pk}/members/", {"username": other_user.username}, format="json")

    assert again.status_code == 200
    assert roles_of(again.json())[other_user.username] == "reviewer"


def test_only_the_owner_changes_roles(user: User, other_user: User, matter: Project) -> None:
    third = factories.UserFactory.create(username="carol")
    matter.members.add(other_user, through_defaults={"role": Role.REVIEWER})
    matter.members.add(third)
    reviewer = client_of(other_user)

    promote = reviewer.patch(
        f"/api/projects/{matter.pk}/members/{third.username}/", {"role": "reviewer"}, format="json"
    )
    add = reviewer.post(f"/api/projects/{matter.pk}/members/", {"username": "carol", "role": "reviewer"}, format="json")
    outsider = client_of(factories.UserFactory.create(username="eve")).patch(
        f"/api/projects/{matter.pk}/members/{third.username}/", {"role": "reviewer"}, format="json"
    )

    assert (promote.status_code, add.status_code, outsider.status_code) == (403, 403, 404)
    assert ProjectMembership.objects.get(project=matter, user=third).role == Role.MEMBER


@pytest.mark.parametrize("role", ["owner", "judge", "", None, ["reviewer"]])
def test_a_role_is_reviewer_or_member(user: User, other_user: User, matter: Project, role: Any) -> None:
    matter.members.add(other_user)

    answer = client_of(user).patch(
        f"/api/projects/{matter.pk}/members/{other_user.username}/", {"role": role}, format="json"
    )

    assert answer.status_code == 400
    assert "role" in answer.json()
    assert ProjectMembership.objects.get(project=matter, user=other_user).role == Role.MEMBER


def test_the_database_refuses_a_membership_role_it_does_not_know(other_user: User, matter: Project) -> None:
    from django.core.exceptions import ValidationError
    from django.db import IntegrityError, transaction

    membership = ProjectMembership(project=matter, user=other_user, role="owner")
    with pytest.raises(ValidationError):
        membership.full_clean()
    with pytest.raises(IntegrityError), transaction.atomic():
        membership.save()
