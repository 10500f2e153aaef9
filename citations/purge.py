"""Purging a matter: the one way a matter's record (its chats, turns, per-turn rows and ledger entries)
leaves the database, on purpose, leaving a tombstone (:class:`citations.models.MatterPurge`).

Lives on the ledger's side because the tombstone counts ledger entries (``citations`` may import
``chats``, never the reverse).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from uuid import UUID

from django.db import connection, transaction

from chats.models import Chat, Document, Message, Project
from chats.record import LegalHoldError, purging
from citations.ledger import OFF_TIME_TABLE, SOURCE_MAPPINGS
from citations.models import CitationLedgerEntry, MatterPurge

# Chats deleted per statement batch: bounds what Django's cascade collects in memory at once.
CHATS_PER_BATCH = 50

# PostgreSQL: the matter's source rows of one table in the off-time list (citations.0014), through their entries.
_FORGET_OFF_TIME_SQL = f"""
DELETE FROM {OFF_TIME_TABLE} o USING {CitationLedgerEntry._meta.db_table} e
 WHERE e.project_id = %s AND o.source_column = '{{column}}' AND o.source_id = e.{{column}}
"""  # noqa: S608 - table and column names from the code, the matter as a parameter


@dataclass(frozen=True, slots=True)
class PurgePlan:
    """What a purge of ``project`` removes."""

    project: Project
    chats: int
    messages: int
    ledger_entries: int
    documents: int


def purge_plan(*, project: Project) -> PurgePlan:
    """Count what purging ``project`` would remove; writes nothing."""
    return PurgePlan(
        project=project,
        chats=Chat.objects.filter(project=project).count(),
        messages=Message.objects.filter(chat__project=project).count(),
        ledger_entries=CitationLedgerEntry.objects.filter(chat__project=project).count(),
        documents=Document.objects.filter(project=project).count(),
    )


def purge_matter(
    *, project_id: UUID, purged_by: str, progress: Callable[[int, int], None] | None = None
) -> MatterPurge:
    """Delete matter ``project_id`` with its whole record, and write its tombstone, in one transaction:
    either all of it goes and the tombstone says so, or nothing does.

    The matter's row is locked first (``FOR UPDATE``), so that its hold cannot be set, nor a chat added to
    it, while it goes. A matter on legal hold is refused (:class:`chats.record.LegalHoldError`), an unknown
    one raises ``Project.DoesNotExist``. Chats go ``CHATS_PER_BATCH`` at a time, each batch reported to
    ``progress(done, total)``; on PostgreSQL the append-only triggers accept these deletes because the
    transaction is marked as this matter's purge (:func:`chats.record.purging`), and the matter's rows leave
    the ledger's off-time list (``citation_ledger_off_time``) too.
    """
    with transaction.atomic():
        project = Project.objects.select_for_update().get(pk=project_id)
        if project.legal_hold:
            raise LegalHoldError(f"matter {project.pk} is on legal hold: it cannot be purged")
        plan = purge_plan(project=project)
        with purging(project.pk):
            if connection.vendor == "postgresql":
                # Ids only, but of rows that go now: nothing of the matter outlives it but its tombstone.
                with connection.cursor() as cursor:
                    for mapping in SOURCE_MAPPINGS:
                        cursor.execute(_FORGET_OFF_TIME_SQL.format(column=mapping.column), [project.pk])
            chat_ids = list(Chat.objects.filter(project=project).order_by("pk").values_list("pk", flat=True))
            for start in range(0, len(chat_ids), CHATS_PER_BATCH):
                batch = chat_ids[start : start + CHATS_PER_BATCH]
                Chat.objects.filter(pk__in=batch).delete()
                if progress is not None:
                    progress(start + len(batch), len(chat_ids))
            project.delete()
        return MatterPurge.objects.create(
            project_id=project_id,
            project_name=project.name,
            purged_by=purged_by[:150],
            chats=plan.chats,
            messages=plan.messages,
            ledger_entries=plan.ledger_entries,
            documents=plan.documents,
        )
