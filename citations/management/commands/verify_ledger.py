"""``manage.py verify_ledger [--matter ID] [--extends EXPORT.zip ...]``: check the sealed record (see
:mod:`citations.integrity`)."""

from __future__ import annotations

import sys
import time
from contextlib import ExitStack
from pathlib import Path
from typing import Any
from uuid import UUID

from django.core.management.base import BaseCommand, CommandError, CommandParser
from tqdm import tqdm

from chats.models import Project
from citations.integrity import DEFAULT_BATCH_SIZE, HeldSeal, sealed_in_scope, verify_record
from lqai_verify.bundle import BundleError, verify_bundle
from lqai_verify.record import FACTS_FORMAT_1

# Below this many seals a run takes a moment: no progress bar.
PROGRESS_FROM = 10_000


class Command(BaseCommand):
    help = (
        "Recompute every turn seal and chain link, compare every sealed turn's current facts with its seal and "
        "every ledger entry with its sealed row, and list unsealed turns. Exit 0 when the record is intact, 1 "
        "naming the first broken turn and what differs. Reads only."
    )

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("--matter", type=UUID, help="check only this matter's chain (a project id)")
        parser.add_argument("--batch-size", type=int, default=DEFAULT_BATCH_SIZE, help="seals read per batch")
        parser.add_argument(
            "--all-signatures",
            action="store_true",
            help="check every seal's signature, not only each chain's last (which covers the rest)",
        )
        parser.add_argument("--limit", type=int, default=20, help="problems listed at most (default 20)")
        parser.add_argument(
            "--extends",
            type=Path,
            action="append",
            default=[],
            metavar="EXPORT.zip",
            help="an earlier export of a matter (repeatable): the record must still hold its chain unchanged, "
            "which shows a chain cut back or rewritten below the application since",
        )

    def handle(self, *args: Any, **options: Any) -> None:
        matter: UUID | None = options["matter"]
        if matter is not None and not Project.objects.filter(pk=matter).exists():
            raise CommandError(f"No matter {matter}: pass a project id (see the admin's Projects).")
        if options["batch_size"] < 1 or options["limit"] < 1:
            raise CommandError("--batch-size and --limit must be at least 1.")
        held = [self._held(path) for path in options["extends"]]
        started = time.monotonic()
        total = sealed_in_scope(matter).count()
        with ExitStack() as stack:
            bars: dict[str, tqdm[Any]] = {}

            def progress(stage: str, seals: int) -> None:
                if stage not in bars:  # one bar a pass: the chains, then the turns
                    bars[stage] = stack.enter_context(
                        tqdm(
                            total=total,
                            unit="seal",
                            disable=total < PROGRESS_FROM or None,
                            file=sys.stderr,
                            desc=f"verify_ledger: {stage}",
                        )
                    )
                bars[stage].update(seals)

            result = verify_record(
                matter_id=matter,
                batch_size=options["batch_size"],
                all_signatures=options["all_signatures"],
                limit=options["limit"],
                on_batch=progress,
                held=[seal for seal in held if seal is not None],
            )
        summary = (
            f"{result.seals} seals in {result.chains} chain(s), {result.turns} turns, {result.rows} rows, "
            f"{result.entries} ledger entries, {result.signatures} signatures checked; {result.unsealed} unsealed; "
            + (f"{result.dropped} rows' entries dropped with their months (tombstones); " if result.dropped else "")
            + (
                f"{result.first_format} turn(s) sealed in {FACTS_FORMAT_1} (a quote's place and context flags "
                "and a pin cite not sealed: docs/export.md); "
                if result.first_format
                else ""
            )
            + (f"{result.decisions} review decision(s) checked; " if result.decisions else "")
            + (f"{len(held)} earlier export(s) held; " if held else "")
            + f"{time.monotonic() - started:.1f} s"
        )
        if result.intact:
            self.stdout.write(f"verify_ledger: intact: {summary}")
            return
        first = result.problems[0]
        self.stderr.write(f"verify_ledger: BROKEN at {first}")
        for problem in result.problems[1:]:
            self.stderr.write(f"  also {problem}")
        if result.problem_count > len(result.problems):
            self.stderr.write(f"  ... and {result.problem_count - len(result.problems)} more")
        self.stderr.write(f"verify_ledger: {result.problem_count} problem(s): {summary}")
        sys.exit(1)

    @staticmethod
    def _held(path: Path) -> HeldSeal | None:
        """The last seal of the export at ``path``, which must verify on its own (``None``: its chain was
        empty). ``CommandError`` if it is no export or does not verify."""
        try:
            checked = verify_bundle(path)
        except (BundleError, ValueError) as exc:
            raise CommandError(f"--extends {path}: {exc}") from None
        if not checked.ok:
            raise CommandError(
                f"--extends {path}: the export does not verify ({len(checked.problems)} problem(s), the first: "
                f"{checked.problems[0]}); `python -m lqai_verify {path}` lists them"
            )
        if checked.head is None:
            return None
        sequence, digest = checked.head
        return HeldSeal(checked.chain, sequence, digest, source=f"the export {path} (exported {checked.exported_at})")
