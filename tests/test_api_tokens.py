"""API tokens: issued for a username and password, hashed, expiring, Bearer (and Token), listed and revoked by
their owner only, throttled; failed passwords lock a username out (django-axes), at the API and the admin."""

from __future__ import annotations

import datetime as dt
from typing import Any

import pytest
from axes.models import AccessAttempt
from django.conf import LazySettings
from django.contrib import admin
from django.contrib.auth.models import User
from django.contrib.sessions.models import Session
from django.core.cache import caches
from django.test import Client
from django.utils import timezone
from knox.models import AuthToken
from rest_framework.test import APIClient

from tests import factories

PASSWORD = "correct horse battery staple"  # the factories' password
TOKEN_URL = "/api/auth/token/"


@pytest.fixture(autouse=True)
def _fresh_counts(db: None, axes_on: None) -> None:
    """Lockouts on, as in production; throttle counts of one test must not leak into the next."""
    caches["token_requests"].clear()


def issue(username: str = "alice", password: str = PASSWORD, **extra: Any) -> Any:
    return APIClient().post(TOKEN_URL, {"username": username, "password": password}, format="json", **extra)


def bearer(token: str) -> APIClient:
    client = APIClient()
    client.credentials(HTTP_AUTHORIZATION=f"Bearer {token}")
    return client


def test_a_token_is_issued_for_a_username_and_password_and_works_as_bearer(user: User) -> None:
    response = issue()

    assert response.status_code == 200
    body = response.json()
    assert set(body) == {"token", "expiry"}
    expiry = dt.datetime.fromisoformat(body["expiry"])
    assert timezone.now() + dt.timedelta(days=6) < expiry <= timezone.now() + dt.timedelta(days=7)
    assert bearer(body["token"]).get("/api/chats/").status_code == 200


def test_the_token_is_stored_hashed_never_in_plain_text(user: User) -> None:
    token = issue().json()["token"]

    [row] = AuthToken.objects.filter(user=user)
    assert token not in (row.digest, row.token_key)
    assert len(row.digest) == 128  # SHA-512, hex


def test_the_old_token_prefix_still_works(user: User) -> None:
    client = APIClient()
    client.credentials(HTTP_AUTHORIZATION=f"Token {issue().json()['token']}")
    assert client.get("/api/chats/").status_code == 200


@pytest.mark.parametrize(
    "header", ["Bearer nope", "Bearer", "Bearer a b", "Token 0123456789abcdef0123", "Token a b", "Token"]
)
def test_a_bad_token_is_refused_with_a_bearer_challenge(db: None, header: str) -> None:
    client = APIClient()
    client.credentials(HTTP_AUTHORIZATION=header)
    response = client.get("/api/chats/")
    assert response.status_code == 401
    assert response["WWW-Authenticate"] == "Bearer"
    assert "detail" in response.json()


def test_an_expired_token_is_refused(user: User) -> None:
    token = issue().json()["token"]
    AuthToken.objects.filter(user=user).update(expiry=timezone.now() - dt.timedelta(seconds=1))
    assert bearer(token).get("/api/chats/").status_code == 401


@pytest.mark.parametrize(
    "body",
    [{"username": "alice", "password": "wrong"}, {"username": "nobody", "password": PASSWORD}, {"username": "alice"}],
)
def test_wrong_or_missing_credentials_get_400_and_no_token(user: User, body: dict[str, str]) -> None:
    response = APIClient().post(TOKEN_URL, body, format="json")
    assert response.status_code == 400
    assert AuthToken.objects.count() == 0


def test_an_inactive_user_gets_no_token(user: User) -> None:
    user.is_active = False
    user.save()
    assert issue().status_code == 400


def test_the_owner_lists_her_tokens_without_the_tokens_themselves(user: User, other_user: User) -> None:
    first, second = issue().json()["token"], issue().json()["token"]
    issue("mallory")

    response = bearer(second).get("/api/auth/tokens/")

    assert response.status_code == 200
    body = response.json()
    listed = body["results"]
    assert (body["count"], len(listed)) == (2, 2)
    assert [t["current"] for t in listed].count(True) == 1
    assert first not in response.content.decode()
    assert second not in response.content.decode()
    assert {t["id"] for t in listed} == {row.digest[:16] for row in AuthToken.objects.filter(user=user)}


def test_revoking_the_current_token(user: User) -> None:
    token = issue().json()["token"]
    client = bearer(token)

    assert client.delete(TOKEN_URL).status_code == 204
    assert client.get("/api/chats/").status_code == 401


def test_an_old_prefix_header_in_the_wrong_shape_says_how_to_send_a_token(db: None) -> None:
    client = APIClient()
    client.credentials(HTTP_AUTHORIZATION="Token two parts")

    response = client.get("/api/chats/")

    assert response.status_code == 401
    assert response.json() == {"detail": "Invalid token header: send `Bearer <token>`."}


def test_revoking_the_current_token_needs_a_token(user: User) -> None:
    client = APIClient()
    client.force_login(user)  # a session, not a token

    response = client.delete(TOKEN_URL)

    assert response.status_code == 401
    assert response.json() == {"detail": "This request is not authenticated with a token."}


def test_revoking_one_token_by_id_and_others_cannot(user: User, other_user: User) -> None:
    mine, spare = issue().json()["token"], issue().json()["token"]
    theirs = issue("mallory").json()["token"]
    spare_id = next(t["id"] for t in bearer(mine).get("/api/auth/tokens/").json()["results"] if not t["current"])

    # Given mallory knows the id, she still cannot revoke alice's token
    assert bearer(theirs).delete(f"/api/auth/tokens/{spare_id}/").status_code == 404
    assert bearer(spare).get("/api/chats/").status_code == 200

    assert bearer(mine).delete(f"/api/auth/tokens/{spare_id}/").status_code == 204
    assert bearer(spare).get("/api/chats/").status_code == 401
    assert bearer(mine).get("/api/chats/").status_code == 200
    assert bearer(mine).delete("/api/auth/tokens/short/").status_code == 404


def test_revoking_all_tokens_leaves_other_users_tokens(user: User, other_user: User) -> None:
    mine = [issue().json()["token"] for _ in range(2)]
    theirs = issue("mallory").json()["token"]

    assert bearer(mine[0]).delete("/api/auth/tokens/").status_code == 204

    assert all(bearer(token).get("/api/chats/").status_code == 401 for token in mine)
    assert bearer(theirs).get("/api/chats/").status_code == 200


def test_tokens_are_capped_per_user(user: User, settings: LazySettings) -> None:
    settings.REST_KNOX = {**settings.REST_KNOX, "TOKEN_LIMIT_PER_USER": 2}
    assert issue().status_code == issue().status_code == 200

    response = issue()

    assert response.status_code == 403
    assert response.json()["code"] == "too_many_tokens"


def test_token_requests_are_throttled_per_address(user: User, settings: LazySettings) -> None:
    settings.LQAI_THROTTLE_TOKEN_REQUESTS = "3/min"
    assert [issue().status_code for _ in range(3)] == [200, 200, 200]

    response = issue()

    assert response.status_code == 429
    assert int(response["Retry-After"]) > 0
    assert issue(REMOTE_ADDR="10.0.0.9").status_code == 200


def test_failed_passwords_lock_the_username_out_of_the_api_even_with_the_right_one(
    user: User, settings: LazySettings
) -> None:
    settings.LQAI_THROTTLE_TOKEN_REQUESTS = "100/min"
    settings.AXES_FAILURE_LIMIT = 3
    assert [issue(password="wrong").status_code for _ in range(2)] == [400, 400]

    locked = issue(password="wrong")
    assert locked.status_code == 429
    assert locked.json()["code"] == "locked_out"

    # Then even the right password is refused from that address, and no token is issued
    assert issue().status_code == 429
    assert AuthToken.objects.count() == 0


def test_failed_admin_logins_are_locked_out(user: User, settings: LazySettings) -> None:
    settings.AXES_FAILURE_LIMIT = 3
    user.is_staff = True
    user.save()
    client = Client()

    statuses = [client.post("/admin/login/", {"username": "alice", "password": "wrong"}).status_code for _ in range(3)]
    after = client.post("/admin/login/", {"username": "alice", "password": PASSWORD})

    assert statuses == [200, 200, 429]
    assert after.status_code == 429
    assert "_auth_user_id" not in client.session


def test_a_successful_admin_login_is_not_locked(user: User) -> None:
    user.is_staff = True
    user.save()
    response = Client().post("/admin/login/?next=/admin/", {"username": "alice", "password": PASSWORD})
    assert response.status_code == 302


def test_tokens_are_not_in_the_admin() -> None:
    assert not admin.site.is_registered(AuthToken)


def test_the_token_endpoint_is_not_cached(user: User) -> None:
    assert "no-store" in issue()["Cache-Control"]


def test_a_client_request_with_a_token_made_by_factories(user: User) -> None:
    assert bearer(factories.api_token(user)).get("/api/projects/").status_code == 200


@pytest.mark.postgres
@pytest.mark.django_db(transaction=True)
@pytest.mark.timeout(60)
def test_the_token_cap_holds_under_concurrent_requests(settings: LazySettings) -> None:
    from concurrent.futures import ThreadPoolExecutor

    from django.db import connections

    settings.REST_KNOX = {**settings.REST_KNOX, "TOKEN_LIMIT_PER_USER": 3}
    settings.LQAI_THROTTLE_TOKEN_REQUESTS = "1000/min"
    factories.UserFactory.create(username="alice")
    caches["token_requests"].clear()

    def request_token(_: int) -> int:
        try:
            return int(issue().status_code)
        finally:
            connections.close_all()

    with ThreadPoolExecutor(max_workers=8) as pool:
        statuses = list(pool.map(request_token, range(12)))

    assert sorted(statuses) == [200] * 3 + [403] * 9
    assert AuthToken.objects.count() == 3


def test_a_forged_forwarded_for_evades_neither_the_throttle_nor_the_lockout(user: User, settings: LazySettings) -> None:
    settings.LQAI_THROTTLE_TOKEN_REQUESTS = "3/min"
    statuses = [issue(password="wrong", HTTP_X_FORWARDED_FOR=f"10.0.0.{n}").status_code for n in range(4)]
    assert statuses[-1] == 429


@pytest.mark.parametrize(
    ("proxies", "forwarded", "expected"),
    [
        (0, "1.1.1.1", "127.0.0.1"),
        (1, "6.6.6.6, 1.1.1.1", "1.1.1.1"),
        (2, "6.6.6.6, 1.1.1.1, 10.0.0.2", "1.1.1.1"),
        (3, "1.1.1.1", "1.1.1.1"),
        (1, "", "127.0.0.1"),
    ],
)
def test_the_client_address_behind_proxies(settings: LazySettings, proxies: int, forwarded: str, expected: str) -> None:
    from django.test import RequestFactory

    from chats.client_address import client_address

    settings.LQAI_PROXY_COUNT = proxies
    request = RequestFactory().get("/", REMOTE_ADDR="127.0.0.1", HTTP_X_FORWARDED_FOR=forwarded)
    assert client_address(request) == expected


def test_behind_a_proxy_lockouts_count_the_forwarded_address(user: User, settings: LazySettings) -> None:
    settings.LQAI_PROXY_COUNT = 1
    settings.LQAI_THROTTLE_TOKEN_REQUESTS = "100/min"
    settings.AXES_FAILURE_LIMIT = 2
    assert [issue(password="wrong", HTTP_X_FORWARDED_FOR="1.1.1.1").status_code for _ in range(2)] == [400, 429]
    # Another client behind the same proxy is not locked out by the first one's failures
    assert issue(HTTP_X_FORWARDED_FOR="2.2.2.2").status_code == 200


def test_a_token_request_sets_no_session_cookie_and_writes_no_session(
    user: User, axes_on: None, settings: LazySettings
) -> None:
    settings.AXES_FAILURE_LIMIT = 3
    client = APIClient()
    # Given a failed password from this address
    assert client.post("/api/auth/token/", {"username": "alice", "password": "wrong"}, format="json").status_code == 400

    # When the right one gets a token
    response = client.post("/api/auth/token/", {"username": "alice", "password": PASSWORD}, format="json")

    # Then there is a token, and neither a session cookie nor a session row
    assert response.status_code == 200
    assert "token" in response.json()
    assert settings.SESSION_COOKIE_NAME not in response.cookies
    assert not Session.objects.exists()
    # And the success still cleared the failed attempt (django-axes), as a login does
    assert not AccessAttempt.objects.exists()
