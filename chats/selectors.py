"""Reads of the chat domain that more than one view needs, starting with access control."""

from __future__ import annotations

import datetime

from django.contrib.auth.models import AbstractBaseUser, AnonymousUser
from django.db.models import Q, QuerySet

from chats.models import Chat, Message, Project


def projects_visible_to(user: AbstractBaseUser | AnonymousUser) -> QuerySet[Project]:
    """Matters the user owns or is a member of."""
    if not user.is_authenticated:
        return Project.objects.none()
    return Project.objects.filter(Q(owner=user) | Q(members=user)).distinct()


def chats_visible_to(user: AbstractBaseUser | AnonymousUser) -> QuerySet[Chat]:
    """Chats the user owns, or chats of matters the user owns or is a member of.

    Every API object is scoped through this: anything outside it is answered with 404.
    """
    if not user.is_authenticated:
        return Chat.objects.none()
    visible_projects = Project.objects.filter(Q(owner=user) | Q(members=user)).values("pk")
    return Chat.objects.filter(Q(owner=user) | Q(project__in=visible_projects))


def open_streams_of(user: AbstractBaseUser, *, progressed_since: datetime.datetime) -> QuerySet[Message]:
    """The user's answers still streaming, with progress since ``progressed_since`` (older ones have stopped)."""
    return Message.objects.filter(
        author=user.pk, role=Message.Role.ASSISTANT, status=Message.Status.STREAMING, updated_at__gte=progressed_since
    )
