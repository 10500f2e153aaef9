"""Reads of the chat domain that more than one view needs, starting with access control."""

from __future__ import annotations

import datetime

from django.conf import settings
from django.contrib.auth import get_user_model
from django.contrib.auth.models import AbstractBaseUser, AnonymousUser
from django.db.models import Count, Q, QuerySet
from django.utils import timezone

from chats.models import VERIFIED_METHODS, Chat, Document, Invitation, Message, Project, ProjectMembership, Role


def projects_visible_to(user: AbstractBaseUser | AnonymousUser) -> QuerySet[Project]:
    """Matters the user owns or is a member of now."""
    if not user.is_authenticated:
        return Project.objects.none()
    return Project.objects.filter(Q(owner=user) | Q(members=user)).distinct()


def chats_visible_to(user: AbstractBaseUser | AnonymousUser) -> QuerySet[Chat]:
    """The one access rule of the chat API: access is the matter's.

    A chat in a matter is visible to the matter's current owner and members only; its creator
    (``Chat.owner``) sees it only while she is one of them. A matter-less chat is visible to its
    owner only. Membership is read at each call, so a removal takes effect on the caller's next
    request. Every chat endpoint, the single-shot and streamed turns, the resume and the ledger
    trace look their chat up through here: anything outside it is answered with 404.
    """
    if not user.is_authenticated:
        return Chat.objects.none()
    visible_projects = Project.objects.filter(Q(owner=user) | Q(members=user)).values("pk")
    return Chat.objects.filter(Q(project__isnull=True, owner=user) | Q(project__in=visible_projects))


def role_in_chat(user: AbstractBaseUser | AnonymousUser, chat: Chat) -> Role | None:
    """The user's role where ``chat`` is, as of now: in its matter (``owner``, ``reviewer`` or ``member``), or
    ``owner`` of her own matter-less chat; ``None`` for anyone else. One query at most (none for a matter-less
    chat). Callers look the chat up through :func:`chats_visible_to` first (others get 404, not a role)."""
    if not user.is_authenticated:
        return None
    if chat.project_id is None:
        return Role.OWNER if chat.owner_id == user.pk else None
    if chat.project is not None and chat.project.owner_id == user.pk:  # the matter read with the chat
        return Role.OWNER
    role = ProjectMembership.objects.filter(project_id=chat.project_id, user=user.pk).values_list("role", flat=True)
    found = role.first()
    return Role(found) if found is not None else None


def documents_of(project: Project) -> QuerySet[Document]:
    """The matter's KB documents, each with ``citation_count``: the quotes of answers that cite it and verified
    (a failed claim naming it does not count). One query."""
    verified = Count("citations", filter=Q(citations__verification_method__in=VERIFIED_METHODS))
    return Document.objects.filter(project=project).annotate(citation_count=verified)


def open_invitations_of(project: Project) -> QuerySet[Invitation]:
    """The matter's invitation links that can still be used (unused, not revoked, not expired), newest first."""
    return Invitation.objects.filter(
        project=project, used_at__isnull=True, revoked_at__isnull=True, expires_at__gt=timezone.now()
    ).order_by("-created_at", "-id")


def users_visible_to(user: AbstractBaseUser | AnonymousUser) -> QuerySet[AbstractBaseUser]:
    """The user and everyone who owns or is a member of a matter the user owns or is a member of now."""
    users = get_user_model().objects
    if not user.is_authenticated:
        return users.none()
    visible_projects = projects_visible_to(user).values("pk")
    return users.filter(
        Q(pk=user.pk) | Q(owned_projects__in=visible_projects) | Q(projects__in=visible_projects)
    ).distinct()


def stale_before() -> datetime.datetime:
    """A ``pending``/``streaming`` turn whose last progress is older than this has stopped (its worker died)."""
    return timezone.now() - datetime.timedelta(seconds=settings.LQAI_STALE_TURN_SECONDS)


def stopped() -> Q:
    """An answer left ``pending`` or ``streaming`` with no progress for ``LQAI_STALE_TURN_SECONDS``: its run is
    dead (its worker was killed, or not even a ``failed`` turn could be written), as of now."""
    return Q(
        role=Message.Role.ASSISTANT,
        status__in=[Message.Status.PENDING, Message.Status.STREAMING],
        updated_at__lt=stale_before(),
    )


def stopped_turns() -> QuerySet[Message]:
    """The answers whose run is dead (:func:`stopped`), oldest progress first: ``manage.py end_stopped_turns``
    ends them. Read through the partial index ``messages_unfinished_idx``."""
    return Message.objects.filter(stopped()).order_by("updated_at", "id")


def open_streams_of(user: AbstractBaseUser, *, progressed_since: datetime.datetime) -> QuerySet[Message]:
    """The user's answers still streaming, with progress since ``progressed_since`` (older ones have stopped)."""
    return Message.objects.filter(
        author=user.pk, role=Message.Role.ASSISTANT, status=Message.Status.STREAMING, updated_at__gte=progressed_since
    )
