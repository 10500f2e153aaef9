"""``manage.py export_matter MATTER_ID --out FILE``: write a matter's signed export (see :mod:`citations.export`)."""

from __future__ import annotations

import os
import sys
import tempfile
from pathlib import Path
from typing import Any
from uuid import UUID

from django.core.management.base import BaseCommand, CommandError, CommandParser
from tqdm import tqdm

from chats.models import Project
from citations.export import export_matter
from citations.seals import finalized_turns

# A progress bar (on a terminal only) from this many turns; a smaller matter exports in seconds.
PROGRESS_FROM = 2_000


class Command(BaseCommand):
    help = (
        "Write the signed export of a matter: its turns, rows, ledger entries and seals, the quoted passages, a "
        "printable report, a manifest of SHA-256 digests and its Ed25519 signature. A recipient checks it with "
        "`python -m lqai_verify FILE --public-key FINGERPRINT`. Reads only; the file appears whole or not at all."
    )

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("matter", type=UUID, help="the matter (project) id")
        parser.add_argument("--out", type=Path, required=True, help="the zip file to write")

    def handle(self, *args: Any, **options: Any) -> None:
        project = Project.objects.filter(pk=options["matter"]).first()
        if project is None:
            raise CommandError(f"No matter {options['matter']}: pass a project id (see the admin's Projects).")
        out: Path = options["out"]
        if not out.parent.is_dir():
            raise CommandError(f"--out {out}: the directory {out.parent} does not exist.")
        # Written beside the target and renamed into place: an interrupted export leaves no half-written file.
        with tempfile.NamedTemporaryFile(dir=out.parent, prefix=f".{out.name}.", delete=False) as partial:
            try:
                total = finalized_turns(project.pk).count()
                with tqdm(
                    total=total,
                    unit="turn",
                    disable=total < PROGRESS_FROM or None,
                    file=sys.stderr,
                    desc="export_matter",
                ) as bar:
                    summary = export_matter(project=project, out=partial, on_batch=bar.update)
            except BaseException:
                os.unlink(partial.name)
                raise
        os.replace(partial.name, out)
        warning = " (DEVELOPMENT KEY: proves nothing)" if summary.development_key else ""
        self.stdout.write(
            f"export_matter: {out}: {summary.turns} turns ({summary.unsealed} unsealed, {summary.late} sealed late), "
            f"{summary.rows} rows, {summary.entries} ledger entries, {summary.seals} seals, {summary.passages} "
            f"passages; signed by {summary.fingerprint}{warning}"
        )
