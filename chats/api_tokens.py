"""API tokens: issued for a username and password, sent as ``Authorization: Bearer <token>``, listed and revoked
by their owner.

Tokens are django-rest-knox's: only a SHA-512 digest of each is stored, and each expires
(``REST_KNOX["TOKEN_TTL"]``, from ``LQAI_TOKEN_TTL_HOURS``). The token itself is shown once, in the answer that
issues it. Issuing is throttled per client address (``LQAI_THROTTLE_TOKEN_REQUESTS``), and a wrong password
counts towards django-axes' lockout of that username from that address, as at the admin's login.

A token is identified in listings by ``id``: the first 16 hex digits of its digest (a digest, not the token,
so a listing reveals nothing that authenticates).
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

from django.conf import settings
from django.contrib.auth import authenticate, get_user_model
from django.contrib.auth.base_user import AbstractBaseUser
from django.core.cache import BaseCache, caches
from django.db import transaction
from django.db.models import QuerySet
from django.http import Http404, HttpRequest
from django.utils import timezone
from drf_spectacular.extensions import OpenApiAuthenticationExtension
from drf_spectacular.utils import OpenApiResponse, extend_schema, extend_schema_view
from knox.models import AuthToken
from knox.views import LoginView
from rest_framework import generics, serializers, status
from rest_framework.permissions import AllowAny, IsAuthenticated
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.throttling import AnonRateThrottle
from rest_framework.views import APIView

from chats.api_fields import StrictCharField
from chats.authentication import BearerTokenAuthentication
from chats.client_address import client_address
from chats.pagination import LIST_BAD_INPUT, ApiPagination

TOKEN_ID_LENGTH = 16


class BearerTokenScheme(OpenApiAuthenticationExtension):
    """How the OpenAPI schema (and so Swagger UI's "Authorize") describes the token scheme."""

    target_class = "chats.authentication.BearerTokenAuthentication"
    name = "bearerAuth"

    def get_security_definition(self, auto_schema: Any) -> dict[str, str]:
        return {
            "type": "http",
            "scheme": "bearer",
            "description": "A token from POST /api/auth/token/, sent as `Authorization: Bearer <token>` "
            "(`Token <token>` is also accepted). Tokens expire; see `expiry`.",
        }


class TokenRequestThrottle(AnonRateThrottle):
    """Token requests per client address, whoever is asking (``LQAI_THROTTLE_TOKEN_REQUESTS``); the counts live in
    the database cache, shared by every server process."""

    scope = "token_requests"

    @property
    def cache(self) -> BaseCache:  # type: ignore[override]
        return caches["token_requests"]

    def get_rate(self) -> str:
        rate: str = settings.LQAI_THROTTLE_TOKEN_REQUESTS
        return rate

    def get_ident(self, request: Request) -> str:
        # The address django-axes counts failed logins by, not DRF's own reading of X-Forwarded-For (which, with
        # no NUM_PROXIES set, trusts whatever the client wrote there).
        return client_address(request._request)

    def get_cache_key(self, request: Request, view: APIView) -> str:
        return self.cache_format % {"scope": self.scope, "ident": self.get_ident(request)}


class TokenRequestSerializer(serializers.Serializer[dict[str, Any]]):
    username = StrictCharField(max_length=150)
    password = StrictCharField(max_length=4096, trim_whitespace=False, style={"input_type": "password"})


class IssuedTokenSerializer(serializers.Serializer[dict[str, Any]]):
    token = serializers.CharField(help_text="Send as `Authorization: Bearer <token>`. Shown only here, once.")
    expiry = serializers.DateTimeField(help_text="When the token stops working.")


class TokenSerializer(serializers.ModelSerializer[AuthToken]):
    """A live token of the requesting user, without the token itself."""

    id = serializers.SerializerMethodField(help_text="Identifies the token in DELETE /api/auth/tokens/{id}/.")
    current = serializers.SerializerMethodField(help_text="Whether this request was authenticated by it.")

    class Meta:
        model = AuthToken
        fields = ["id", "created", "expiry", "current"]
        read_only_fields = fields

    def get_id(self, token: AuthToken) -> str:
        return token_id(token)

    def get_current(self, token: AuthToken) -> bool:
        auth = self.context["request"].auth
        return isinstance(auth, AuthToken) and auth.digest == token.digest


def token_id(token: AuthToken) -> str:
    return str(token.digest[:TOKEN_ID_LENGTH])


def live_tokens_of(user: AbstractBaseUser) -> QuerySet[AuthToken]:
    """The user's tokens that have not expired, newest first."""
    return AuthToken.objects.filter(user=user, expiry__gt=timezone.now()).order_by("-created", "digest")


@contextmanager
def without_session(request: HttpRequest) -> Iterator[None]:
    """The request without its session while the block runs: a token request is not a browser login, so it
    sets no session cookie and writes no session row. knox announces the login (``user_logged_in``), and
    django-axes' receiver, which resets the username's failed attempts, would otherwise create a session to
    record a digest of its key; without one it records none. The session is put back, untouched, after."""
    session = getattr(request, "session", None)
    if session is None:  # no session middleware: nothing to hide
        yield
        return
    del request.session
    try:
        yield
    finally:
        request.session = session


class TokenView(LoginView):
    """``POST``: a new token for a username and password. ``DELETE``: revoke the token of this request."""

    authentication_classes = [BearerTokenAuthentication]
    permission_classes = [AllowAny]
    throttle_classes: list[Any] = []

    def get_throttles(self) -> list[Any]:
        return [TokenRequestThrottle()] if self.request.method == "POST" else []

    @extend_schema(
        summary="Get a token for a username and password",
        description="A new token, shown once; the request needs no credentials and starts no session (no cookie).",
        request=TokenRequestSerializer,
        responses={
            200: IssuedTokenSerializer,
            400: OpenApiResponse(
                description="Missing fields, a field that is not a string, or a wrong username or password."
            ),
            403: OpenApiResponse(description="The user already holds LQAI_TOKENS_PER_USER live tokens."),
            429: OpenApiResponse(
                description="Too many token requests from this address, or too many failed passwords for "
                "this username from it (`Retry-After` says when to try again)."
            ),
        },
        auth=[],
    )
    def post(self, request: Request, format: str | None = None) -> Response:
        serializer = TokenRequestSerializer(data=request.data)
        serializer.is_valid(raise_exception=True)
        # The Django request: django-axes counts a failure against this username and address.
        user = authenticate(request._request, **serializer.validated_data)
        if user is None or not user.is_active:
            return Response(
                {"detail": "Unable to log in with the username and password given.", "code": "invalid_credentials"},
                status=status.HTTP_400_BAD_REQUEST,
            )
        request.user = user
        # knox counts the user's live tokens, then creates one: with the user's row locked, concurrent requests
        # take turns, so the cap holds (one consistent lock, the user's, so no deadlock).
        with transaction.atomic(), without_session(request._request):
            get_user_model().objects.select_for_update().filter(pk=user.pk).first()
            response: Response = super().post(request, format=format)
        if response.status_code == status.HTTP_403_FORBIDDEN:
            limit = settings.REST_KNOX["TOKEN_LIMIT_PER_USER"]
            response.data = {
                "detail": f"You already hold {limit} live tokens: revoke one (DELETE /api/auth/tokens/{{id}}/).",
                "code": "too_many_tokens",
            }
        return response

    @extend_schema(
        summary="Revoke the token this request is authenticated with",
        description="It stops working at once.",
        request=None,
        responses={204: None, 401: OpenApiResponse(description="Not authenticated with a token.")},
    )
    def delete(self, request: Request) -> Response:
        if not isinstance(request.auth, AuthToken):
            return Response(
                {"detail": "This request is not authenticated with a token."}, status=status.HTTP_401_UNAUTHORIZED
            )
        request.auth.delete()
        return Response(status=status.HTTP_204_NO_CONTENT)


class NewestFirst(ApiPagination):
    ordering = ("-created", "digest")


@extend_schema_view(
    get=extend_schema(
        summary="List your live tokens, newest first (never the tokens themselves)",
        description="Your tokens that have not expired, page by page.",
        responses={200: TokenSerializer(many=True), 400: OpenApiResponse(description=LIST_BAD_INPUT)},
    )
)
class TokenListView(generics.ListAPIView[AuthToken]):
    """The requesting user's live tokens, page by page (``GET``); revoke them all (``DELETE``)."""

    permission_classes = [IsAuthenticated]
    serializer_class = TokenSerializer
    pagination_class = NewestFirst

    def get_queryset(self) -> QuerySet[AuthToken]:
        if getattr(self, "swagger_fake_view", False):  # schema generation: no request user
            return AuthToken.objects.none()
        return live_tokens_of(self.request.user)  # type: ignore[arg-type]  # IsAuthenticated

    @extend_schema(
        summary="Revoke all your tokens",
        description="Every token of yours stops working at once, this request's too.",
        request=None,
        responses={204: None},
        operation_id="auth_tokens_destroy_all",
    )
    def delete(self, request: Request) -> Response:
        AuthToken.objects.filter(user=request.user).delete()
        return Response(status=status.HTTP_204_NO_CONTENT)


class TokenDetailView(APIView):
    """Revoke one of the requesting user's tokens by its ``id``; another user's token, or none, is a 404."""

    permission_classes = [IsAuthenticated]

    @extend_schema(
        summary="Revoke one of your tokens",
        request=None,
        responses={204: None, 404: OpenApiResponse(description="You hold no token with this id.")},
    )
    def delete(self, request: Request, token_id: str) -> Response:
        if len(token_id) != TOKEN_ID_LENGTH:
            raise Http404
        deleted, _ = AuthToken.objects.filter(user=request.user, digest__startswith=token_id).delete()
        if not deleted:
            raise Http404
        return Response(status=status.HTTP_204_NO_CONTENT)
