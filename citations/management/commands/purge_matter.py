"""``manage.py purge_matter MATTER_ID --confirm``: delete a matter and its whole record, leaving a tombstone.

Without ``--confirm`` it prints what would go and writes nothing. A matter on legal hold is refused.
"""

from __future__ import annotations

import getpass
import sys
import uuid
from typing import Any

from django.core.management.base import BaseCommand, CommandError, CommandParser
from tqdm import tqdm

from chats.models import Project
from chats.record import LegalHoldError
from citations.purge import purge_matter, purge_plan


class Command(BaseCommand):
    help = (
        "Delete a matter (project) with its chats, turns, per-turn rows and ledger entries, leaving a tombstone "
        "that says who purged it, when, and how much went. Without --confirm, only prints what would go."
    )

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("matter_id", help="The matter's (project's) id, a UUID.")
        parser.add_argument("--confirm", action="store_true", help="Really delete; without it nothing is written.")
        parser.add_argument(
            "--by",
            dest="purged_by",
            default="",
            help="Who is purging (recorded on the tombstone); default: the OS user.",
        )
        parser.add_argument("--no-progress", action="store_true", help="No progress bar.")

    def handle(self, *args: Any, **options: Any) -> None:
        try:
            matter_id = uuid.UUID(options["matter_id"])
        except ValueError:
            raise CommandError(f"{options['matter_id']!r} is not a matter id (a UUID).") from None
        project = Project.objects.filter(pk=matter_id).first()
        if project is None:
            raise CommandError(f"No matter {matter_id}. Nothing was deleted.")
        if project.legal_hold:
            raise CommandError(
                f"Matter {matter_id} ({project.name}) is on legal hold: it cannot be purged. "
                "Its owner or an operator must lift the hold first. Nothing was deleted."
            )
        plan = purge_plan(project=project)
        what = (
            f"matter {project.pk} ({project.name}): {plan.chats} chats, {plan.messages} messages, "
            f"{plan.ledger_entries} ledger entries, {plan.documents} documents"
        )
        if not options["confirm"]:
            self.stdout.write(f"Would purge {what}. Nothing was written; run again with --confirm to purge.")
            return
        purged_by = options["purged_by"] or getpass.getuser()
        with tqdm(
            total=plan.chats, unit="chat", desc="purging", file=sys.stderr, disable=options["no_progress"]
        ) as bar:

            def progress(done: int, total: int) -> None:
                bar.update(done - bar.n)

            try:
                tombstone = purge_matter(project_id=project.pk, purged_by=purged_by, progress=progress)
            except Project.DoesNotExist:
                raise CommandError(f"Matter {matter_id} was deleted meanwhile. Nothing more was deleted.") from None
            except LegalHoldError:
                raise CommandError(
                    f"Matter {matter_id} was put on legal hold meanwhile: it cannot be purged. Nothing was deleted."
                ) from None
        self.stdout.write(
            f"Purged {what}; tombstone {tombstone.pk} "
            f"(by {tombstone.purged_by}, {tombstone.purged_at:%Y-%m-%d %H:%M:%S %Z})."
        )
