"""``manage.py load_authorities PATH...``: load USLM files (U.S. Code titles, CFR volumes) into the library, and
case-law JSON (CourtListener, CAP) into the opinions, through the loader ``LQAI_CASELAW_LOADER`` names."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from django.core.management.base import BaseCommand, CommandError, CommandParser
from tqdm import tqdm

from authorities.loading import load_authority_file


class Command(BaseCommand):
    help = (
        "Load USLM XML files into the authority library: U.S. Code titles as OLRC publishes them (usc09.xml) and "
        "annual CFR volumes as GPO publishes them (CFR-2017-title27-vol3.xml). A file loaded whole before is "
        "skipped; a load that stopped part-way is finished by running the same command again. Case law in bulk: "
        "CourtListener clusters with their opinions and Caselaw Access Project cases, as JSON (.json: one, an "
        "array or an API page; .jsonl: one a line); an opinion stored before is left as it is."
    )

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("paths", nargs="+", type=Path, metavar="PATH", help="USLM XML files, case-law JSON files")
        parser.add_argument("--dry-run", action="store_true", help="read the files whole, write nothing")

    def handle(self, *args: Any, paths: list[Path], dry_run: bool, **options: Any) -> None:
        missing = [str(p) for p in paths if not p.is_file()]
        if missing:
            raise CommandError(f"not a file: {', '.join(missing)}")
        for path in paths:
            with tqdm(
                total=path.stat().st_size, unit="B", unit_scale=True, desc=path.name, disable=options["verbosity"] < 1
            ) as bar:

                def advance(position: int, bar: tqdm[Any] = bar) -> None:
                    bar.update(position - bar.n)

                try:
                    loaded = load_authority_file(path=path, progress=advance, dry_run=dry_run)
                except ValueError as exc:  # the loader's error names the line, item or element and why
                    raise CommandError(f"{path}: {exc}") from None
            self.stdout.write(loaded.line())
