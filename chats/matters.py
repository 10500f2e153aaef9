"""Services for matters (``Project``): create one, add or remove its members, give each her role.

The owner manages the members and their roles (reviewer or member: ``chats.models.Role``); a member's access
ends with her removal, and a role change takes effect, on her next request (``chats.selectors`` reads
membership at each call).
"""

from __future__ import annotations

from dataclasses import dataclass

from django.contrib.auth.base_user import AbstractBaseUser
from django.contrib.auth.models import User
from django.db import transaction

from chats.models import Project, ProjectMembership, Role


class NotTheOwner(PermissionError):
    """Only the matter's owner manages its members."""


class NoSuchMember(LookupError):
    """The user is not a member of the matter."""


class NotAMemberRole(ValueError):
    """A membership's role is reviewer or member: the owner is the matter's owner, not a role to give."""


def create_project(*, owner: User, name: str) -> Project:
    return Project.objects.create(owner=owner, name=name)


def _check_owner(project: Project, by: AbstractBaseUser) -> None:
    if project.owner_id != by.pk:
        raise NotTheOwner("Only the matter's owner can change its members.")


def add_member(*, project: Project, user: User, by: AbstractBaseUser) -> bool:
    """Make ``user`` a member of ``project`` (the owner is always one), as a ``member`` if she was not one
    already (her role is kept if she was); whether she was not one already."""
    if user.pk == project.owner_id:
        _check_owner(project, by)
        return False
    return set_member_role(project=project, user=user, role=None, by=by).added


@dataclass(frozen=True, slots=True)
class RoleChange:
    """What :func:`set_member_role` did: whether ``user`` joined the matter, and her role now."""

    added: bool
    role: str


def set_member_role(*, project: Project, user: User, role: str | None, by: AbstractBaseUser) -> RoleChange:
    """Add ``user`` to ``project`` with ``role`` (``reviewer`` or ``member``), or change her role if she is a
    member already; ``role=None`` adds her as a member and keeps the role of one already in. The one service
    for both, called by the API and the pages.

    Raises :class:`NotTheOwner` unless ``by`` owns the matter, :class:`NotAMemberRole` for any other role
    (``owner`` included: the owner is the matter's owner, and her role never changes here, nor does anyone
    become owner)."""
    _check_owner(project, by)
    if role is not None and role not in (Role.REVIEWER, Role.MEMBER):
        raise NotAMemberRole(f"A member's role is {Role.REVIEWER!r} or {Role.MEMBER!r}, not {role!r}.")
    if user.pk == project.owner_id:
        raise NotAMemberRole("The matter's owner is its owner: her role does not change.")
    with transaction.atomic():
        membership, created = ProjectMembership.objects.select_for_update().get_or_create(
            project=project, user=user, defaults={"role": role or Role.MEMBER}
        )
        if not created and role is not None and membership.role != role:
            membership.role = role
            membership.save(update_fields=["role"])
    return RoleChange(added=created, role=membership.role)


def remove_member(*, project: Project, username: str, by: AbstractBaseUser) -> None:
    """End ``username``'s membership of ``project``; :class:`NoSuchMember` if she has none."""
    _check_owner(project, by)
    member = project.members.filter(username=username).first()
    if member is None:
        raise NoSuchMember(f"{username!r} is not a member of this matter.")
    project.members.remove(member)
