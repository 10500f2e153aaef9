"""The citation ledger: one metadata-only entry per source a chat turn brought into context.

An entry points at exactly one underlying row (a KB quote or a caselaw quote, verified or
failed; a tool source consulted; or a case citation written in an answer, as checked) and
mirrors how it was verified. It
never holds content: only ids, labels, numbers and timestamps
(``tests/test_transparency_invariants.py`` enforces that).

Sharding note: every unique constraint here is on a single source column so
that it can later be widened to ``(chat_id, <column>)`` if the tables are ever
distributed by ``chat_id`` (e.g. with Citus), where unique constraints must
include the distribution column.
"""

from __future__ import annotations

import operator
import uuid
from functools import reduce

from django.db import models
from django.db.models import Q
from django.utils import timezone

from chats.ids import uuid7
from chats.models import (
    UNVERIFIED,
    Chat,
    Message,
    MessageCaseCitation,
    MessageCaselawCitation,
    MessageCitation,
    MessageToolSource,
    Project,
    SourceKind,
)

PROVENANCE = "provenance"
# A checked case citation's status is the check's outcome (verified, name_mismatch, not_found, ...).
CASE_CITATION_STATUSES = tuple(MessageCaseCitation.Status.values)
# The statuses without a verification score: a consulted source (not quoted), a claim that did not hold,
# and the outcomes of a case-citation check (a lookup, not a scored match).
UNSCORED_STATUSES = (PROVENANCE, UNVERIFIED, *CASE_CITATION_STATUSES)


SOURCE_FIELDS = ("message_citation", "message_caselaw_citation", "message_tool_source", "message_case_citation")

# Exactly one of the four source foreign keys is set.
_exactly_one_source = reduce(
    operator.or_,
    (Q(**{f"{field}__isnull": field != chosen for field in SOURCE_FIELDS}) for chosen in SOURCE_FIELDS),
)


class CitationLedgerEntry(models.Model):
    # Time-ordered (chats.ids): new entries append to the right edge of every index (docs/scale.md).
    id = models.UUIDField(primary_key=True, default=uuid7, editable=False)
    # Deleting a matter deletes its chats and so their entries; cascading here
    # too means no entry can ever point at a deleted project.
    project = models.ForeignKey(Project, on_delete=models.CASCADE, null=True, blank=True, related_name="+")
    # Indexed by ledger_chat_created_idx (chat_id first), which serves lookups and cascades by chat: a
    # plain chat_id index would only cost every entry one more index write.
    chat = models.ForeignKey(Chat, on_delete=models.CASCADE, related_name="ledger_entries", db_index=False)
    message = models.ForeignKey(Message, on_delete=models.CASCADE, related_name="ledger_entries")
    source_kind = models.CharField(max_length=32)
    # The unique constraints below index these four columns; a second plain index would be redundant.
    message_citation = models.ForeignKey(
        MessageCitation, on_delete=models.CASCADE, null=True, blank=True, db_index=False, related_name="+"
    )
    message_caselaw_citation = models.ForeignKey(
        MessageCaselawCitation, on_delete=models.CASCADE, null=True, blank=True, db_index=False, related_name="+"
    )
    message_tool_source = models.ForeignKey(
        MessageToolSource, on_delete=models.CASCADE, null=True, blank=True, db_index=False, related_name="+"
    )
    message_case_citation = models.ForeignKey(
        MessageCaseCitation, on_delete=models.CASCADE, null=True, blank=True, db_index=False, related_name="+"
    )
    verification_status = models.CharField(max_length=32)
    confidence = models.FloatField(null=True, blank=True)
    provider = models.CharField(max_length=50, null=True, blank=True)  # noqa: DJ001 - null means "no provider"
    retrieved_at = models.DateTimeField(null=True, blank=True)
    # Reserved for a later treatment layer (how a later court treated the authority); always null for now.
    treatment_id = models.UUIDField(null=True, blank=True, editable=False)
    created_at = models.DateTimeField(default=timezone.now, editable=False)

    class Meta:
        db_table = "citation_ledger_entry"
        verbose_name = "citation ledger entry"
        verbose_name_plural = "citation ledger entries"
        ordering = ["-created_at", "id"]
        indexes = [
            # The admin changelist orders by created_at and drills down by date (date_hierarchy).
            models.Index(fields=["-created_at", "id"], name="ledger_created_idx"),
            # The trace API lists one chat's entries in turn order.
            models.Index(fields=["chat", "created_at"], name="ledger_chat_created_idx"),
        ]
        constraints = [
            # An entry indexes exactly one underlying row, or it is not traceable.
            models.CheckConstraint(
                condition=_exactly_one_source,
                name="citation_ledger_entry_exactly_one_source",
                violation_error_message="Exactly one of message_citation, message_caselaw_citation, "
                "message_tool_source and message_case_citation must be set.",
            ),
            # Confidence mirrors a verification score; outside 0..1 it means nothing.
            models.CheckConstraint(
                condition=Q(confidence__isnull=True) | Q(confidence__gte=0, confidence__lte=1),
                name="citation_ledger_entry_confidence_range",
                violation_error_message="Confidence must be empty or within 0..1.",
            ),
            # A status is how the source was verified; an empty one would hide that.
            models.CheckConstraint(
                condition=~Q(verification_status="") & ~Q(source_kind=""),
                name="citation_ledger_entry_status_and_kind_not_empty",
                violation_error_message="verification_status and source_kind must not be empty.",
            ),
            # A KB quote is a kb_document entry, whatever the caller says.
            models.CheckConstraint(
                condition=Q(message_citation__isnull=True) | Q(source_kind=SourceKind.KB_DOCUMENT),
                name="citation_ledger_entry_kb_kind",
                violation_error_message="An entry for a message citation must have source_kind 'kb_document'.",
            ),
            # A caselaw quote is a caselaw entry.
            models.CheckConstraint(
                condition=Q(message_caselaw_citation__isnull=True) | Q(source_kind=SourceKind.CASELAW),
                name="citation_ledger_entry_caselaw_kind",
                violation_error_message="An entry for a caselaw citation must have source_kind 'caselaw'.",
            ),
            # A case citation written in an answer is a caselaw entry.
            models.CheckConstraint(
                condition=Q(message_case_citation__isnull=True) | Q(source_kind=SourceKind.CASELAW),
                name="citation_ledger_entry_case_citation_kind",
                violation_error_message="An entry for a case citation must have source_kind 'caselaw'.",
            ),
            # A checked case citation's status is the check's outcome, and only a case citation has one.
            models.CheckConstraint(
                condition=(Q(message_case_citation__isnull=True) & ~Q(verification_status__in=CASE_CITATION_STATUSES))
                | (Q(message_case_citation__isnull=False) & Q(verification_status__in=CASE_CITATION_STATUSES)),
                name="citation_ledger_entry_case_citation_status",
                violation_error_message="A case-citation entry has the check's status ("
                + ", ".join(CASE_CITATION_STATUSES)
                + "), and only a case-citation entry has one.",
            ),
            # A consulted source was not quoted: it is provenance.
            models.CheckConstraint(
                condition=Q(message_tool_source__isnull=True) | Q(verification_status=PROVENANCE),
                name="citation_ledger_entry_tool_source_is_provenance",
                violation_error_message="A tool-source entry must have status 'provenance'.",
            ),
            # A score exists exactly where a quote was verified: empty for provenance, failed claims and
            # case-citation checks, set for every verified quote.
            models.CheckConstraint(
                condition=Q(verification_status__in=UNSCORED_STATUSES, confidence__isnull=True)
                | (~Q(verification_status__in=UNSCORED_STATUSES) & Q(confidence__isnull=False)),
                name="citation_ledger_entry_confidence_exactly_when_verified",
                violation_error_message="Confidence must be empty for 'provenance', 'unverified' and "
                "case-citation entries, and set for every verified quote.",
            ),
            # Only consulted sources are provenance: a quote must say how it was verified.
            models.CheckConstraint(
                condition=Q(message_tool_source__isnull=False) | ~Q(verification_status=PROVENANCE),
                name="citation_ledger_entry_provenance_only_for_tool_sources",
                violation_error_message="Only tool-source entries may have status 'provenance'.",
            ),
            # One entry per underlying row (single-column so it can later include chat_id; see module docstring).
            models.UniqueConstraint(
                fields=["message_citation"],
                name="citation_ledger_entry_message_citation_uniq",
                violation_error_message="This message citation already has a ledger entry.",
            ),
            models.UniqueConstraint(
                fields=["message_caselaw_citation"],
                name="citation_ledger_entry_caselaw_citation_uniq",
                violation_error_message="This caselaw citation already has a ledger entry.",
            ),
            models.UniqueConstraint(
                fields=["message_tool_source"],
                name="citation_ledger_entry_tool_source_uniq",
                violation_error_message="This tool source already has a ledger entry.",
            ),
            models.UniqueConstraint(
                fields=["message_case_citation"],
                name="citation_ledger_entry_case_citation_uniq",
                violation_error_message="This case citation already has a ledger entry.",
            ),
        ]

    def __str__(self) -> str:
        return f"{self.source_kind} {self.verification_status} ({self.id})"

    @property
    def source_row_id(self) -> uuid.UUID | None:
        return (
            self.message_citation_id
            or self.message_caselaw_citation_id
            or self.message_tool_source_id
            or self.message_case_citation_id
        )
