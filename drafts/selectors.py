"""Reads of checked drafts, through the chat domain's one access rule."""

from __future__ import annotations

from django.contrib.auth.models import AbstractBaseUser, AnonymousUser
from django.db.models import Count, OuterRef, QuerySet, Subquery

from chats.models import Project
from chats.selectors import chats_visible_to
from drafts.models import DraftCheck


def draft_checks_visible_to(user: AbstractBaseUser | AnonymousUser) -> QuerySet[DraftCheck]:
    """The checks of drafts in chats the user sees (:func:`chats.selectors.chats_visible_to`: the matter's owner
    and members), each with its turn's message."""
    return DraftCheck.objects.filter(chat__in=chats_visible_to(user).values("pk")).select_related("message")


def last_checks_of(project: Project) -> QuerySet[DraftCheck]:
    """The last check of each draft of ``project`` (one per draft's chat), newest first, each with its turn's
    message and ``checks_count``, how many checks its draft has had. One query (the matter's page)."""
    latest = DraftCheck.objects.filter(chat=OuterRef("chat")).order_by("-created_at", "-id").values("pk")[:1]
    counted = (
        DraftCheck.objects.filter(chat=OuterRef("chat")).order_by().values("chat").annotate(n=Count("pk")).values("n")
    )
    return (
        DraftCheck.objects.filter(project=project, pk=Subquery(latest))
        .select_related("message")
        .annotate(checks_count=Subquery(counted))
        .order_by("-created_at", "-id")
    )
