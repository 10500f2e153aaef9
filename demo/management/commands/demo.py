"""``manage.py demo``: seed the demo matter, run real turns through the API, repair older turns
with ``backfill_ledger``, print each turn's ledger entries, then seal, check, export and verify the matter's
record offline. Safe to run again.

It creates (or resets) a superuser whose password is published in the README, so it refuses to run
unless ``DEBUG`` is on: a development database, never a deployment's."""

from __future__ import annotations

import io
from collections.abc import Iterator
from typing import Any
from uuid import UUID

from django.conf import settings
from django.core.management.base import BaseCommand, CommandError

from chats.models import Message
from citations.models import CitationLedgerEntry
from demo import seed as demo


class Command(BaseCommand):
    help = (
        "Run the demo: seed a matter, run chat turns through the API, backfill older turns, print the ledger, "
        "then seal, check, export and verify the matter's record offline."
    )

    def handle(self, *args: Any, **options: Any) -> None:
        if not settings.DEBUG:
            raise CommandError(
                "The demo creates a superuser with a published password, so it runs only with DEBUG on "
                "(a development database). Run it with `make demo`, or set DEBUG=1. Nothing was created."
            )
        previous = demo.purge_previous_run()
        matter = demo.seed()
        try:
            self._run(matter, previous)
        finally:
            # Whether the run ended or stopped half-way, all its matter holds so far is the demo's.
            demo.record_made(project=matter.project)

    def _run(self, matter: demo.DemoMatter, previous: demo.PreviousRuns) -> None:
        out = self.stdout
        out.write(self.style.MIGRATE_HEADING("Demo matter"))
        out.write(f"  project: {matter.project.name} ({matter.project.pk})")
        out.write(
            f"  KB documents: {matter.project.documents.count()}; login: {demo.DEMO_USERNAME} / {demo.DEMO_PASSWORD}"
        )
        for purged in previous.purged:
            out.write(
                f"  (replaced the previous run's demo chats: matter {purged.project_id} purged with its "
                f"{purged.chats} chats, {purged.messages} messages and {purged.ledger_entries} ledger entries; "
                f"tombstone {purged.pk})"
            )
        for kept in previous.kept:
            for line in self._kept(kept, fresh=matter.project.pk):
                out.write(line)
        expiry = f" (expires {matter.token_expiry:%Y-%m-%d %H:%M} UTC)" if matter.token_expiry else ""
        out.write(f"  API token{expiry}: {matter.token}")
        out.write(
            f'  try it (after `make serve`): curl -H "Authorization: Bearer {matter.token}" '
            "http://127.0.0.1:8000/api/projects/"
        )

        out.write(self.style.MIGRATE_HEADING("Chat turns through the HTTP API"))
        turns, chat = demo.run_turns(matter)
        for turn in turns:
            out.write("")
            for line in demo.describe_turn(turn):
                out.write(line)

        out.write("")
        out.write(self.style.MIGRATE_HEADING("Older turns without ledger entries, repaired by backfill_ledger"))
        older = demo.create_turns_without_ledger(matter)
        missing = CitationLedgerEntry.objects.filter(chat=older).count()
        older_turns = older.messages.filter(role=Message.Role.ASSISTANT).count()
        out.write(f"  {older_turns} older turns; ledger entries before: {missing}")
        out.write("  " + demo.command_summary("backfill_ledger", chat=str(older.pk), stderr=io.StringIO()))
        for message in older.messages.filter(role=Message.Role.ASSISTANT).order_by("created_at"):
            out.write(f"  Turn {message.created_at:%Y-%m-%d} ({message.pk}):")
            for line in demo.ledger_table(message):
                out.write(line)

        out.write("")
        out.write(self.style.MIGRATE_HEADING("The record proves itself: sealed, checked, exported, verified offline"))
        proven = demo.prove_record(matter)
        for line in proven.lines:
            out.write(f"  {line}")
        if proven.offline_exit != 0:
            raise CommandError(f"The demo matter's export did not verify offline (exit {proven.offline_exit}).")
        out.write(
            "  a recipient runs, after `pip install ./lqai_verify`: "
            f"python -m lqai_verify {proven.export} --public-key {proven.fingerprint}"
        )
        if not settings.LQAI_LEDGER_KEY:
            out.write("  (signed with the development key; a deployment sets LQAI_LEDGER_KEY: `manage.py ledger_key`)")

        total = CitationLedgerEntry.objects.filter(project=matter.project).count()
        out.write("")
        out.write(self.style.SUCCESS(f"Demo done: {total} ledger entries in the demo matter."))
        out.write(
            "Next: `make serve`, then log in as shown above and read the demo chat, every claim beside its source:"
        )
        out.write(f"  {demo.page_url(chat)}")
        out.write(f"  only what needs review: {demo.page_url(chat)}?review=1")
        out.write("  operators: http://127.0.0.1:8000/admin/ (the citation ledger)")

    def _kept(self, kept: demo.KeptMatter, *, fresh: UUID) -> Iterator[str]:
        """What the rerun kept of a previous demo matter, and where this run's demo went."""
        yield self.style.WARNING(
            f"  kept the previous demo matter {kept.project.pk} whole (renamed {kept.project.name!r}), as it holds "
            "what the demo has no record of making:"
        )
        for chat, messages in kept.chats:
            held = f"{messages} message(s)" if messages else "the chat itself"
            yield f"    chat {chat.title or chat.pk!s}: {held}: {demo.page_url(chat)}"
        if kept.documents:
            yield f"    {kept.documents} document(s) besides the demo's own"
        if kept.legal_hold:
            yield "    it is on legal hold"
        yield f"  this run's demo is in a fresh matter, {demo.DEMO_PROJECT} ({fresh})"
