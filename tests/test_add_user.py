"""``manage.py add_user``: an administrator creates a colleague's account, which then signs in and gets a token;
a taken username, a weak password or an invalid username is a CommandError and writes nothing."""

from __future__ import annotations

import io

import pytest
from django.contrib.auth import authenticate
from django.contrib.auth.models import User
from django.core.management import CommandError, call_command
from rest_framework.test import APIClient

pytestmark = pytest.mark.django_db


def _add_user(*args: str, stdin: str = "") -> str:
    out = io.StringIO()
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr("sys.stdin", io.StringIO(stdin))
        call_command("add_user", *args, stdout=out)
    return out.getvalue()


def test_a_new_account_gets_a_password_shown_once_and_signs_in() -> None:
    output = _add_user("colleague")

    password = output.split("shown once; give it to her in person): ")[1].strip()
    user = User.objects.get(username="colleague")
    assert (user.is_active, user.is_staff, user.is_superuser) == (True, False, False)
    assert authenticate(username="colleague", password=password) == user
    token = APIClient().post("/api/auth/token/", {"username": "colleague", "password": password}, format="json")
    assert token.status_code == 200


def test_the_password_can_be_read_from_standard_input() -> None:
    output = _add_user("colleague", "--password-stdin", stdin="a long passphrase of hers\n")

    assert "password" not in output.replace("add_user", "")
    assert authenticate(username="colleague", password="a long passphrase of hers") is not None


@pytest.mark.parametrize(
    ("args", "stdin", "says"),
    [
        (["colleague", "--password-stdin"], "123\n", "too short"),
        (["colleague", "--password-stdin"], "password\n", "too common"),
        (["col league"], "", "Enter a valid username"),
        ([""], "", "1 to 150 characters"),
    ],
)
def test_a_bad_username_or_password_is_refused_and_writes_nothing(args: list[str], stdin: str, says: str) -> None:
    with pytest.raises(CommandError, match=says):
        _add_user(*args, stdin=stdin)
    assert not User.objects.exists()


def test_a_taken_username_is_refused_and_its_account_left_alone() -> None:
    existing = User.objects.create_user("colleague", password="her own passphrase")

    with pytest.raises(CommandError, match="exists already"):
        _add_user("colleague")

    existing.refresh_from_db()
    assert existing.check_password("her own passphrase")
