"""``manage.py ledger_partitions``: the ledger's monthly partitions on PostgreSQL (see :mod:`citations.partitions`).

Without options it lists the partitions. ``--ahead N`` creates this month's and the next N months'
partitions (and those of any month with entries in the default partition, moving them): idempotent, for
cron. ``--drop-before YYYY-MM`` drops the months before that one, refused while any of their entries
belongs to a matter on legal hold, leaving a tombstone per month; without ``--confirm`` it prints what
would go and writes nothing. On SQLite the ledger is a plain table and the command says so.
"""

from __future__ import annotations

import getpass
import sys
from datetime import date, datetime
from typing import Any

from django.core.management.base import BaseCommand, CommandError, CommandParser
from django.db import OperationalError
from tqdm import tqdm

from chats.record import LegalHoldError
from citations import partitions
from citations.partitions import PartitionError

# SQLSTATE of a lock wait that ran past lock_timeout.
LOCK_NOT_AVAILABLE = "55P03"


def _month(value: str) -> date:
    try:
        return datetime.strptime(value, "%Y-%m").date()  # noqa: DTZ007 - a calendar month, no time of day
    except ValueError:
        raise CommandError(f"{value!r} is not a month: write it YYYY-MM (e.g. 2025-01).") from None


class Command(BaseCommand):
    help = (
        "List, create ahead, or drop the citation ledger's monthly partitions (PostgreSQL). --ahead N creates "
        "the next N months' partitions and moves entries out of the default partition into them (for cron); "
        "--drop-before YYYY-MM drops whole months before that one, refused for a matter on legal hold, "
        "leaving a tombstone per month (with --confirm; without, only prints what would go)."
    )

    def add_arguments(self, parser: CommandParser) -> None:
        action = parser.add_mutually_exclusive_group()
        action.add_argument("--ahead", type=int, help="create this month's and the next N months' partitions")
        action.add_argument("--drop-before", help="drop the partitions of the months before this one (YYYY-MM)")
        parser.add_argument("--confirm", action="store_true", help="with --drop-before: really drop")
        parser.add_argument(
            "--keep-detached",
            action="store_true",
            help="with --drop-before: detach the months and keep them as plain tables instead of dropping them",
        )
        parser.add_argument(
            "--by", dest="dropped_by", default="", help="who drops (recorded on the tombstones); default: the OS user"
        )
        parser.add_argument(
            "--lock-timeout",
            type=float,
            default=partitions.DEFAULT_LOCK_TIMEOUT,
            help="seconds to wait for a lock before giving up (default %(default)s)",
        )
        parser.add_argument("--no-progress", action="store_true", help="no progress bar")

    def handle(self, *args: Any, **options: Any) -> None:
        if not partitions.is_partitioned():
            raise CommandError(
                "The ledger is partitioned on PostgreSQL only (citations.0014); on this database it is a plain "
                "table: there are no partitions to list, create or drop."
            )
        if options["lock_timeout"] <= 0:
            raise CommandError("--lock-timeout must be a positive number of seconds.")
        if (options["confirm"] or options["keep_detached"]) and options["drop_before"] is None:
            raise CommandError("--confirm and --keep-detached go with --drop-before.")
        try:
            if options["ahead"] is not None:
                self._ensure(ahead=options["ahead"], options=options)
            elif options["drop_before"] is not None:
                self._drop(before=_month(options["drop_before"]), options=options)
            else:
                self._list()
        except PartitionError as error:
            raise CommandError(str(error)) from None
        except OperationalError as error:
            if getattr(error.__cause__, "sqlstate", None) != LOCK_NOT_AVAILABLE:
                raise
            raise CommandError(
                f"Gave up waiting {options['lock_timeout']} s for a lock on the ledger (a long transaction holds "
                "it); nothing was changed. Run the command again, or with a longer --lock-timeout."
            ) from None

    def _list(self) -> None:
        for partition in partitions.partitions():
            where = (
                f"{partition.start:%Y-%m-%d} .. {partition.end:%Y-%m-%d}"
                if partition.start and partition.end
                else "default"
            )
            self.stdout.write(f"{partition.name}  {where}  ~{partition.estimated_rows} entries")

    def _ensure(self, *, ahead: int, options: dict[str, Any]) -> None:
        if ahead < 0 or ahead > 120:
            raise CommandError("--ahead takes a number of months from 0 to 120.")
        bars: dict[str, tqdm[Any]] = {}

        def progress(name: str, done: int, total: int) -> None:
            bar = bars.get(name)
            if bar is None:
                bar = bars[name] = tqdm(
                    total=total,
                    unit="entry",
                    desc=f"moving into {name}",
                    file=sys.stderr,
                    disable=options["no_progress"],
                )
            bar.update(done - bar.n)

        try:
            result = partitions.ensure_partitions(ahead=ahead, lock_timeout=options["lock_timeout"], progress=progress)
        finally:
            for bar in bars.values():
                bar.close()
        for name in result.created:
            moved = result.moved.get(name, 0)
            self.stdout.write(
                f"Created {name}" + (f", moving {moved} entries out of the default partition" if moved else "")
            )
        self.stdout.write(
            f"{len(result.created)} partition(s) created, {sum(result.moved.values())} entries moved; "
            "every month up to "
            f"{ahead} month(s) ahead has its partition."
        )

    def _drop(self, *, before: date, options: dict[str, Any]) -> None:
        plan = partitions.drop_plan(before=before)
        if not plan.months:
            self.stdout.write(f"No month before {before:%Y-%m} has a partition. Nothing to drop.")
            return
        what = ", ".join(f"{p.name} ({count} entries)" for p, count in plan.months)
        verb = "detach" if options["keep_detached"] else "drop"
        if not options["confirm"]:
            self.stdout.write(f"Would {verb} {what}. Nothing was written; run again with --confirm to {verb}.")
            return
        try:
            tombstones = partitions.drop_months_before(
                before=before,
                dropped_by=options["dropped_by"] or getpass.getuser(),
                keep_detached=options["keep_detached"],
                lock_timeout=options["lock_timeout"],
            )
        except LegalHoldError as error:
            raise CommandError(
                f"Refused: {error}. Their owners or an operator must lift the holds first. Nothing was dropped."
            ) from None
        done = "Detached (kept as plain tables)" if options["keep_detached"] else "Dropped"
        self.stdout.write(
            f"{done} {len(tombstones)} month(s), {sum(t.ledger_entries for t in tombstones)} entries; "
            f"tombstones {', '.join(str(t.pk) for t in tombstones)}."
        )
