"""``manage.py export_matter MATTER_ID --out FILE``: write a matter's signed export (see :mod:`citations.export`);
``export_matter --chat CHAT_ID --out FILE``: a matter-less chat's."""

from __future__ import annotations

import os
import sys
import tempfile
from pathlib import Path
from typing import Any
from uuid import UUID

from django.core.management.base import BaseCommand, CommandError, CommandParser
from tqdm import tqdm

from chats.models import Chat, Project
from citations import export

# A progress bar (on a terminal only) from this many turns; a smaller matter exports in seconds.
PROGRESS_FROM = 2_000


class Command(BaseCommand):
    help = (
        "Write the signed export of a matter: its turns, rows, ledger entries and seals, the quoted passages, a "
        "printable report, a manifest of SHA-256 digests and its Ed25519 signature. A recipient checks it with "
        "`python -m lqai_verify FILE --public-key FINGERPRINT`. Reads only; the file appears whole or not at all. "
        "With --chat instead of a matter: the export of a chat outside any matter."
    )

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("matter", type=UUID, nargs="?", help="the matter (project) id")
        parser.add_argument(
            "--chat", type=UUID, help="instead of a matter: a chat outside any matter (its turns chain on their own)"
        )
        parser.add_argument("--out", type=Path, required=True, help="the zip file to write")

    def handle(self, *args: Any, **options: Any) -> None:
        of = self._subject(matter=options["matter"], chat=options["chat"])
        out: Path = options["out"]
        if not out.parent.is_dir():
            raise CommandError(f"--out {out}: the directory {out.parent} does not exist.")
        # Written beside the target and renamed into place: an interrupted export leaves no half-written file.
        with tempfile.NamedTemporaryFile(dir=out.parent, prefix=f".{out.name}.", delete=False) as partial_file:
            try:
                total = export.finalized_turns_of(of).count()
                with tqdm(
                    total=total,
                    unit="turn",
                    disable=total < PROGRESS_FROM or None,
                    file=sys.stderr,
                    desc="export_matter",
                ) as bar:
                    summary = export.export_record(of=of, out=partial_file, on_batch=bar.update)
            except BaseException:
                os.unlink(partial_file.name)
                raise
        os.replace(partial_file.name, out)
        warning = " (DEVELOPMENT KEY: proves nothing)" if summary.development_key else ""
        self.stdout.write(
            f"export_matter: {out}: {summary.turns} turns ({summary.unsealed} unsealed, {summary.late} sealed late), "
            f"{summary.rows} rows, {summary.entries} ledger entries, {summary.seals} seals, {summary.passages} "
            f"passages; signed by {summary.fingerprint}{warning}"
        )

    def _subject(self, *, matter: UUID | None, chat: UUID | None) -> Project | Chat:
        """The matter, or the chat outside any matter, to export."""
        if (matter is None) == (chat is None):
            raise CommandError("Pass a matter id, or --chat and a chat id, not both.")
        if chat is not None:
            the_chat = Chat.objects.filter(pk=chat).first()
            if the_chat is None:
                raise CommandError(f"No chat {chat}: pass a chat id (see the admin's Chats).")
            if the_chat.project_id is not None:
                raise CommandError(f"{export.ChatOfAMatter(the_chat)} (export_matter {the_chat.project_id} --out FILE)")
            return the_chat
        assert matter is not None  # noqa: S101 - exactly one of the two, checked above
        project = Project.objects.filter(pk=matter).first()
        if project is None:
            raise CommandError(f"No matter {matter}: pass a project id (see the admin's Projects).")
        return project
