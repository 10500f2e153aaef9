"""Reads of checked drafts, through the chat domain's one access rule."""

from __future__ import annotations

from django.contrib.auth.models import AbstractBaseUser, AnonymousUser
from django.db.models import QuerySet

from chats.selectors import chats_visible_to
from drafts.models import DraftCheck


def draft_checks_visible_to(user: AbstractBaseUser | AnonymousUser) -> QuerySet[DraftCheck]:
    """The checks of drafts in chats the user sees (:func:`chats.selectors.chats_visible_to`: the matter's owner
    and members), each with its turn's message."""
    return DraftCheck.objects.filter(chat__in=chats_visible_to(user).values("pk")).select_related("message")
