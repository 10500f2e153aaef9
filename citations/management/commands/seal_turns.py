"""``manage.py seal_turns``: seal the finalized turns that have no seal (see :func:`citations.seals.seal_late`)."""

from __future__ import annotations

import sys
from typing import Any
from uuid import UUID

from django.core.management.base import BaseCommand, CommandError, CommandParser
from tqdm import tqdm

from chats.models import Project
from citations.seals import DEFAULT_LATE_BATCH, seal_late, unsealed_turns


class Command(BaseCommand):
    help = (
        "Seal, marked as sealed late with the time, every finalized turn whose last finalize has no seal: turns "
        "from before sealing existed, and turns whose sealing failed. One transaction per batch of turns; "
        "resumable (a rerun seals only what is still unsealed); --dry-run counts and writes nothing."
    )

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("--matter", type=UUID, help="only this matter's turns (a project id)")
        parser.add_argument("--batch-size", type=int, default=DEFAULT_LATE_BATCH, help="turns per transaction")
        parser.add_argument("--dry-run", action="store_true", help="count the unsealed turns; write nothing")

    def handle(self, *args: Any, **options: Any) -> None:
        matter: UUID | None = options["matter"]
        if matter is not None and not Project.objects.filter(pk=matter).exists():
            raise CommandError(f"No matter {matter}: pass a project id (see the admin's Projects).")
        if options["batch_size"] < 1:
            raise CommandError("--batch-size must be at least 1.")
        total = unsealed_turns(matter).count()
        if options["dry_run"]:
            self.stdout.write(f"seal_turns: would seal {total} turn(s) late")
            return
        with tqdm(total=total, unit="turn", disable=total < 1_000 or None, file=sys.stderr, desc="seal_turns") as bar:
            sealed = seal_late(matter_id=matter, batch_size=options["batch_size"], on_batch=bar.update)
        self.stdout.write(f"seal_turns: sealed {sealed} turn(s) late; {unsealed_turns(matter).count()} unsealed")
