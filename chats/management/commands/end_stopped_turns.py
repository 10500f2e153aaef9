"""``manage.py end_stopped_turns``: end, as ``interrupted``, the turns whose run is dead (see
:func:`chats.services.end_stopped_turn`); meant for cron."""

from __future__ import annotations

import sys
from typing import Any

from django.conf import settings
from django.core.management.base import BaseCommand, CommandError, CommandParser
from tqdm import tqdm

from chats.selectors import stopped_turns
from chats.services import end_stopped_turns


class Command(BaseCommand):
    help = (
        "End, as interrupted, every answer left pending or streaming with no progress for LQAI_STALE_TURN_SECONDS "
        "(its worker was killed): each is finalized (sealed, with its ledger entries) and can be resumed like any "
        "interrupted turn. --dry-run counts and writes nothing."
    )

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("--batch-size", type=int, default=100, help="turns read per query")
        parser.add_argument("--dry-run", action="store_true", help="count the stopped turns; write nothing")

    def handle(self, *args: Any, **options: Any) -> None:
        if options["batch_size"] < 1:
            raise CommandError("--batch-size must be at least 1.")
        total = stopped_turns().count()
        window = f"no progress for {settings.LQAI_STALE_TURN_SECONDS:g} s"
        if options["dry_run"]:
            self.stdout.write(f"end_stopped_turns: would end {total} stopped turn(s) ({window})")
            return
        with tqdm(
            total=total, unit="turn", disable=total < 1_000 or None, file=sys.stderr, desc="end_stopped_turns"
        ) as bar:
            summary = end_stopped_turns(batch_size=options["batch_size"], on_turn=bar.update)
        self.stdout.write(
            f"end_stopped_turns: ended {summary.ended} turn(s) as interrupted ({window}); "
            f"{summary.moved_on} moved on meanwhile"
        )
        if summary.failed:
            raise CommandError(
                f"{len(summary.failed)} stopped turn(s) could not be ended (logged with their message ids), "
                f"the first {summary.failed[0]}: they stay unfinished until the next run"
            )
