"""``manage.py backfill_ledger``: write the missing citation-ledger entries (see :mod:`citations.backfill`).

Parses and validates the options, calls :func:`citations.backfill.backfill_ledger`, shows progress and
prints the one-line summary. ``--check`` is the monitoring mode: exit status 1 when a source row lacks its
entry or the ledger and the turns disagree (:mod:`citations.agreement`), each disagreement printed with
its message id.
"""

from __future__ import annotations

import sys
from collections.abc import Callable
from datetime import datetime
from typing import Any
from uuid import UUID

from django.core.management.base import BaseCommand, CommandError, CommandParser
from django.db import OperationalError
from django.utils import timezone
from tqdm import tqdm

from chats.models import Chat, Project
from citations.backfill import (
    DEFAULT_BATCH_SIZE,
    DEFAULT_STATEMENT_TIMEOUT,
    BackfillResult,
    BackfillScope,
    LogProgress,
    ProgressCallback,
    backfill_ledger,
    estimated_source_rows,
)
from citations.models import SourceKind

NAME = "backfill_ledger"


def format_kinds(counts: dict[str, int]) -> str:
    """``kb_document=a caselaw=b mcp=c``, always those three, then any other tool kind by name."""
    kinds = [k.value for k in SourceKind] + sorted(set(counts) - {k.value for k in SourceKind})
    return " ".join(f"{kind}={counts.get(kind, 0)}" for kind in kinds)


def format_summary(result: BackfillResult) -> str:
    verb = "would create" if result.dry_run else "created"
    return (
        f"{NAME}: {verb} {result.total_created} entries ({format_kinds(result.created)}) "
        f"for {result.messages} messages; {result.already_present} already present; {result.seconds:.1f} s"
    )


class Command(BaseCommand):
    help = (
        "Write the citation-ledger entries missing for existing source rows (KB quotes, caselaw quotes, "
        "tool sources, checked case citations: the four source tables), exactly as finalizing the turn would "
        "have. Set-based, in batches of messages, each its own short transaction; safe next to live traffic "
        "and other runs; idempotent, so stopping it (even with SIGKILL) and running it again completes the "
        "job. Rows the ledger cannot hold are skipped and counted."
    )

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument(
            "--batch-size",
            type=int,
            default=DEFAULT_BATCH_SIZE,
            help=f"messages per batch (in creation order, with all their source rows, one transaction each; "
            f"default {DEFAULT_BATCH_SIZE})",
        )
        mode = parser.add_mutually_exclusive_group()
        mode.add_argument("--dry-run", action="store_true", help="count what would be written; write nothing")
        mode.add_argument(
            "--check",
            action="store_true",
            help="write nothing; exit with status 1 if any source row lacks its entry (printing the counts by "
            "kind) or an entry, a verdict or a position disagrees with the turn's rows (printing each, with its "
            "message id)",
        )
        parser.add_argument("--project", metavar="UUID", help="only messages of chats of this project (matter)")
        parser.add_argument("--chat", metavar="UUID", help="only messages of this chat")
        parser.add_argument(
            "--since",
            metavar="WHEN",
            help="only messages created at or after WHEN (inclusive): an ISO date (2024-05-01, meaning midnight) "
            "or datetime (2024-05-01T13:30, 2024-05-01T13:30:00+02:00); without an offset, in UTC (TIME_ZONE)",
        )
        parser.add_argument(
            "--until", metavar="WHEN", help="only messages created before WHEN (exclusive); same format as --since"
        )
        parser.add_argument(
            "--sleep", type=float, default=0.0, metavar="SECONDS", help="pause between batches (throttle; default 0)"
        )
        parser.add_argument(
            "--statement-timeout",
            type=float,
            default=DEFAULT_STATEMENT_TIMEOUT,
            metavar="SECONDS",
            help=f"abort a batch statement running longer (PostgreSQL; default {DEFAULT_STATEMENT_TIMEOUT:g})",
        )

    def handle(self, *args: Any, **options: Any) -> None:
        batch_size: int = options["batch_size"]
        sleep: float = options["sleep"]
        statement_timeout: float = options["statement_timeout"]
        if batch_size < 1:
            raise CommandError(f"--batch-size must be at least 1, not {batch_size}.")
        if sleep < 0:
            raise CommandError(f"--sleep must not be negative, not {sleep:g}.")
        if statement_timeout <= 0:
            raise CommandError(f"--statement-timeout must be positive, not {statement_timeout:g}.")
        scope = self._scope(options)
        check = options["check"]
        progress, close_progress = self._progress(scope)
        try:
            result = backfill_ledger(
                scope=scope,
                batch_size=batch_size,
                dry_run=options["dry_run"],
                check=check,
                sleep=sleep,
                statement_timeout=statement_timeout,
                on_batch=progress,
            )
        except OperationalError as exc:
            reason = (str(exc).strip().splitlines() or [type(exc).__name__])[0]  # the first line, not the CONTEXT
            raise CommandError(
                f"{NAME} stopped: {reason}. The batches committed so far are kept: run it again to finish "
                "(with a smaller --batch-size if a batch hit the statement timeout)."
            ) from exc
        finally:
            close_progress()
        if result.total_skipped:
            self.stderr.write(
                self.style.WARNING(
                    f"{NAME}: skipped {result.total_skipped} source rows the ledger cannot hold ("
                    + " ".join(f"{table}={n}" for table, n in sorted(result.skipped.items()) if n)
                    + "): quotes with no verification method, method 'provenance' or a confidence outside 0..1, "
                    "tool sources with no kind; they stay without an entry"
                )
            )
        if not check:
            self.stdout.write(format_summary(result))
            return
        for disagreement in result.disagreements:
            self.stdout.write(f"{NAME} --check: message {disagreement.message_id}: {disagreement.what}")
        if result.total_created:
            self.stdout.write(
                f"{NAME} --check: {result.total_created} source rows lack their ledger entry "
                f"({format_kinds(result.created)}); run `manage.py {NAME}` to write them"
            )
        if result.disagreements:
            self.stdout.write(
                f"{NAME} --check: {len(result.disagreements)} disagreements between the ledger and the turns"
            )
        if result.total_created or result.disagreements:
            sys.exit(1)
        self.stdout.write(
            f"{NAME} --check: every source row in scope has its ledger entry ({result.already_present} present), "
            "and the entries, verdicts and positions agree with the turns"
        )

    def _scope(self, options: dict[str, Any]) -> BackfillScope:
        project_id = _uuid_option("--project", options["project"])
        chat_id = _uuid_option("--chat", options["chat"])
        since = _moment_option("--since", options["since"])
        until = _moment_option("--until", options["until"])
        if since is not None and until is not None and since >= until:
            raise CommandError(f"--since ({since.isoformat()}) must be before --until ({until.isoformat()}).")
        if project_id is not None and not Project.objects.filter(pk=project_id).exists():
            raise CommandError(f"--project {project_id}: no such project.")
        if chat_id is not None:
            chat = Chat.objects.filter(pk=chat_id).only("project_id").first()
            if chat is None:
                raise CommandError(f"--chat {chat_id}: no such chat.")
            if project_id is not None and chat.project_id != project_id:
                raise CommandError(f"--chat {chat_id} is not a chat of --project {project_id}.")
        return BackfillScope(project_id=project_id, chat_id=chat_id, since=since, until=until)

    def _progress(self, scope: BackfillScope) -> tuple[ProgressCallback, Callable[[], None]]:
        """A progress bar on a terminal, periodic log lines otherwise; and how to close it."""
        if not self.stderr.isatty():
            return LogProgress(), lambda: None
        bar = tqdm(total=estimated_source_rows(scope), unit="rows", unit_scale=True, desc=NAME, file=sys.stderr)

        def update(totals: BackfillResult, batch_rows: int) -> None:
            bar.set_postfix(created=totals.total_created, present=totals.already_present, refresh=False)
            bar.update(batch_rows)

        return update, bar.close


def _uuid_option(option: str, value: str | None) -> UUID | None:
    if value is None:
        return None
    try:
        return UUID(value)
    except ValueError:
        raise CommandError(f"{option} {value!r} is not an id (a UUID such as 3f2b9c1e-...).") from None


def _moment_option(option: str, value: str | None) -> datetime | None:
    if value is None:
        return None
    try:
        moment = datetime.fromisoformat(value)
    except ValueError:
        raise CommandError(
            f"{option} {value!r} is not an ISO date or datetime (e.g. 2024-05-01 or 2024-05-01T13:30:00+00:00)."
        ) from None
    return timezone.make_aware(moment, timezone.get_default_timezone()) if timezone.is_naive(moment) else moment
