"""Services for invitations: a matter's owner makes a one-time link for a colleague, who opens it and joins the
matter, making her account on the way if she has none.

The link carries a random token; only its SHA-256 is stored (:class:`chats.models.Invitation`), so the link is
shown once, to the owner who made it, and a copy of the database opens no matter. A link works until
``LQAI_INVITATION_DAYS`` after it was made, once, and not after the owner revoked it. Joining goes through
:func:`chats.matters.add_member`, as the owner's own act: the link is hers, and ends if she no longer owns the
matter.
"""

from __future__ import annotations

import datetime
import hashlib
import secrets
from dataclasses import dataclass

from django.conf import settings
from django.contrib.auth.base_user import AbstractBaseUser
from django.contrib.auth.models import User
from django.db import transaction
from django.utils import timezone

from chats.accounts import create_account
from chats.matters import NotTheOwner, add_member
from chats.models import Invitation, Project


class NoSuchInvitation(LookupError):
    """No invitation has this token (a mistyped or made-up link)."""


class InvitationEnded(ValueError):
    """The invitation exists but can no longer be used; the message says why, in words for the visitor."""


class AlreadyInTheMatter(ValueError):
    """The user opening the link owns the matter or is a member of it already; the link stays unused."""


@dataclass(frozen=True)
class NewInvitation:
    invitation: Invitation
    token: str  # shown once, in the link; never stored


def token_digest(token: str) -> str:
    return hashlib.sha256(token.encode("utf-8")).hexdigest()


def create_invitation(*, project: Project, by: AbstractBaseUser) -> NewInvitation:
    """A new one-time link to ``project``, made by its owner (:class:`chats.matters.NotTheOwner` otherwise),
    working for ``LQAI_INVITATION_DAYS``."""
    if project.owner_id != by.pk:
        raise NotTheOwner("Only the matter's owner can invite colleagues.")
    token = secrets.token_urlsafe(32)
    now = timezone.now()
    invitation = Invitation.objects.create(
        project=project,
        created_by_id=by.pk,
        token_sha256=token_digest(token),
        created_at=now,
        expires_at=now + datetime.timedelta(days=settings.LQAI_INVITATION_DAYS),
    )
    return NewInvitation(invitation=invitation, token=token)


def revoke_invitation(*, invitation: Invitation, by: AbstractBaseUser) -> None:
    """End an unused link of a matter ``by`` owns (:class:`NotTheOwner` otherwise); revoking an ended link
    changes nothing."""
    if invitation.project.owner_id != by.pk:
        raise NotTheOwner("Only the matter's owner can revoke its invitations.")
    Invitation.objects.filter(pk=invitation.pk, used_at__isnull=True, revoked_at__isnull=True).update(
        revoked_at=timezone.now()
    )


def _why_ended(invitation: Invitation) -> str | None:
    if invitation.used_at is not None:
        return "This invitation has been used already: each link lets one person join, once."
    if invitation.revoked_at is not None:
        return "This invitation was withdrawn by the matter's owner."
    if invitation.expires_at <= timezone.now():
        return "This invitation has expired: ask the matter's owner for a new link."
    if invitation.project.owner_id != invitation.created_by_id:
        return "The person who made this invitation no longer owns the matter: ask its owner for a new link."
    return None


def open_invitation(*, token: str, lock: bool = False) -> Invitation:
    """The invitation with this token, with its matter, if it can still be used: :class:`NoSuchInvitation` if
    none has it, :class:`InvitationEnded` (saying why) if used, revoked, expired or no longer its owner's.
    ``lock``: the row is locked for the caller's transaction, so two visitors cannot both use it."""
    invitations = Invitation.objects.select_related("project", "project__owner")
    if lock:
        invitations = invitations.select_for_update(of=("self",))
    invitation = invitations.filter(token_sha256=token_digest(token)).first()
    if invitation is None:
        raise NoSuchInvitation("There is no such invitation.")
    why = _why_ended(invitation)
    if why is not None:
        raise InvitationEnded(why)
    return invitation


def accept_invitation(*, token: str, user: User) -> Project:
    """``user`` joins the invitation's matter and the link is used up; returns the matter.
    :class:`AlreadyInTheMatter` (the link stays unused) if she owns it or is a member already."""
    with transaction.atomic():
        invitation = open_invitation(token=token, lock=True)
        project = invitation.project
        if user.pk == project.owner_id or project.members.filter(pk=user.pk).exists():
            raise AlreadyInTheMatter(f"You are already in the matter {project.name!r}.")
        add_member(project=project, user=user, by=invitation.created_by)
        Invitation.objects.filter(pk=invitation.pk).update(used_at=timezone.now(), used_by=user)
    return project


def sign_up_with_invitation(*, token: str, username: str, password: str) -> tuple[User, Project]:
    """Make the account of a colleague who has none (:func:`chats.accounts.create_account`: its
    ``ValidationError`` and ``AccountExists`` pass through) and let her join the invitation's matter, in one
    transaction: a refused username or password, or a link that ended, writes nothing."""
    with transaction.atomic():
        open_invitation(token=token, lock=True)
        user = create_account(username=username, password=password)
        project = accept_invitation(token=token, user=user)
    return user, project
