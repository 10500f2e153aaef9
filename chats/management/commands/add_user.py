"""``manage.py add_user USERNAME``: create a colleague's account, so that a matter's owner can add her."""

from __future__ import annotations

import sys
from typing import Any

from django.core.exceptions import ValidationError
from django.core.management.base import BaseCommand, CommandError, CommandParser

from chats.accounts import AccountExists, create_account, new_password


class Command(BaseCommand):
    help = (
        "Create an active user account (neither staff nor superuser) that signs in to the pages and gets API "
        "tokens. Without --password-stdin a random password is made and printed once. A matter's owner then "
        'adds her: POST /api/projects/{id}/members/ {"username"}.'
    )

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("username", help="her username")
        parser.add_argument(
            "--password-stdin",
            action="store_true",
            help="read the password from the first line of standard input (kept out of the shell history)",
        )

    def handle(self, *args: Any, **options: Any) -> None:
        given = options["password_stdin"]
        password = sys.stdin.readline().rstrip("\r\n") if given else new_password()
        try:
            user = create_account(username=options["username"], password=password)
        except AccountExists as exc:
            raise CommandError(str(exc)) from None
        except ValidationError as exc:
            raise CommandError(f"{options['username']!r}: {' '.join(exc.messages)}") from None
        self.stdout.write(f"add_user: created {user.username!r}")
        if not given:
            self.stdout.write(f"her password (shown once; give it to her in person): {password}")
