"""Services for matters (``Project``): create one, and add or remove its members.

The owner manages the members; a member's access ends with her removal, on her next request
(``chats.selectors`` reads membership at each call).
"""

from __future__ import annotations

from django.contrib.auth.base_user import AbstractBaseUser
from django.contrib.auth.models import User
from django.db import transaction

from chats.models import Project


class NotTheOwner(PermissionError):
    """Only the matter's owner manages its members."""


class NoSuchMember(LookupError):
    """The user is not a member of the matter."""


def create_project(*, owner: User, name: str) -> Project:
    return Project.objects.create(owner=owner, name=name)


def _check_owner(project: Project, by: AbstractBaseUser) -> None:
    if project.owner_id != by.pk:
        raise NotTheOwner("Only the matter's owner can change its members.")


def add_member(*, project: Project, user: User, by: AbstractBaseUser) -> bool:
    """Make ``user`` a member of ``project`` (the owner is always one); whether she was not one already."""
    _check_owner(project, by)
    if user.pk == project.owner_id:
        return False
    with transaction.atomic():
        if project.members.filter(pk=user.pk).exists():
            return False
        project.members.add(user)
    return True


def remove_member(*, project: Project, username: str, by: AbstractBaseUser) -> None:
    """End ``username``'s membership of ``project``; :class:`NoSuchMember` if she has none."""
    _check_owner(project, by)
    member = project.members.filter(username=username).first()
    if member is None:
        raise NoSuchMember(f"{username!r} is not a member of this matter.")
    project.members.remove(member)
