"""API authentication: django-rest-knox's tokens, sent as ``Authorization: Bearer <token>``.

Kept apart from the token views (``chats.api_tokens``): DRF imports authentication classes while it loads its
own views, so this module imports nothing of them.
"""

from __future__ import annotations

from typing import Any

from knox.auth import TokenAuthentication as KnoxTokenAuthentication
from rest_framework import exceptions
from rest_framework.authentication import get_authorization_header
from rest_framework.request import Request

# The prefix DRF's own tokens used: still accepted, so that clients written for it keep working.
LEGACY_PREFIX = b"token"


class BearerTokenAuthentication(KnoxTokenAuthentication):
    """knox's token authentication, for ``Authorization: Bearer <token>`` (knox's ``AUTH_HEADER_PREFIX``) and for
    the older ``Authorization: Token <token>``. Challenges with ``WWW-Authenticate: Bearer``."""

    def authenticate(self, request: Request) -> tuple[Any, Any] | None:
        header = get_authorization_header(request).split()
        if not header or header[0].lower() != LEGACY_PREFIX:
            result: tuple[Any, Any] | None = super().authenticate(request)
            return result
        if len(header) != 2:
            raise exceptions.AuthenticationFailed("Invalid token header: send `Bearer <token>`.")
        legacy: tuple[Any, Any] = self.authenticate_credentials(header[1])
        return legacy
