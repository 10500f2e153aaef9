"""Services for user accounts: an administrator creates the account of a colleague, who is then added to a
matter by its owner (``POST /api/projects/{id}/members/``)."""

from __future__ import annotations

import secrets

from django.contrib.auth.models import User
from django.contrib.auth.password_validation import validate_password
from django.core.exceptions import ValidationError
from django.db import transaction


class AccountExists(ValueError):
    """A user with this username exists already."""


def new_password() -> str:
    """A random password of 24 URL-safe characters, for an account created without one."""
    return secrets.token_urlsafe(18)


def create_account(*, username: str, password: str) -> User:
    """Create an active account (neither staff nor superuser) that signs in with ``password``.

    Raises :class:`AccountExists` if the username is taken, and Django's ``ValidationError`` if the username
    is not a valid one or the password fails ``AUTH_PASSWORD_VALIDATORS``, its messages by field (``username``
    or ``password``); nothing is written then."""
    username = username.strip()
    field = User._meta.get_field("username")
    if not username or len(username) > field.max_length:  # type: ignore[operator]  # max_length is set
        raise ValidationError({"username": f"A username has 1 to {field.max_length} characters."})
    try:
        field.run_validators(username)
    except ValidationError as invalid:
        raise ValidationError({"username": invalid.messages}) from None
    user = User(username=username, is_active=True)
    try:
        validate_password(password, user=user)
    except ValidationError as invalid:
        raise ValidationError({"password": invalid.messages}) from None
    with transaction.atomic():
        if User.objects.select_for_update().filter(username=username).exists():
            raise AccountExists(f"A user named {username!r} exists already.")
        user.set_password(password)
        user.save()
    return user
