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
from datetime import UTC, datetime
from functools import reduce
from typing import Any, ClassVar

from django.conf import settings
from django.db import IntegrityError, models
from django.db.models import Q
from django.utils import timezone

from chats.ids import uuid7
from chats.models import (
    ALTERED_MAX_CONFIDENCE,
    STATUTE_CITATION_STATUSES,
    STATUTE_QUOTE_FOUND,
    STATUTE_QUOTE_STATUSES,
    UNVERIFIED,
    CaseCitation,
    Chat,
    DocumentQuote,
    Message,
    MessageToolSource,
    OpinionQuote,
    Project,
    SourceKind,
    StatuteCitation,
    VerificationMethod,
)
from chats.record import AppendOnlyError, AppendOnlyModel, AppendOnlyQuerySet, purge_in_progress
from lqai_verify import verdict as verdict_rule

PROVENANCE = "provenance"
# A checked case citation's status is the check's outcome (verified, name_mismatch, not_found, ...).
CASE_CITATION_STATUSES = tuple(CaseCitation.Status.values)
# The statuses without a verification score: a consulted source (not quoted), a claim that did not hold,
# and the outcomes of a case-citation check (a lookup, not a scored match; ``unchecked`` among them, also the
# status of a quote nothing could check).
UNSCORED_STATUSES = (PROVENANCE, UNVERIFIED, *CASE_CITATION_STATUSES)
# A quote's status is how it fared against its source (exact_match, tolerant_match, altered, unverified), or
# ``unchecked`` when nothing could check it.
QUOTE_STATUSES = tuple(VerificationMethod.values)
# The case-citation statuses no quote has (a quote nothing could check is ``unchecked``, as a case citation can be).
CASE_ONLY_STATUSES = tuple(status for status in CASE_CITATION_STATUSES if status not in QUOTE_STATUSES)
# A statute row's entry status: ``statute_<status>`` for a citation, ``statute_quote_<status>`` for a quote
# (lqai_verify.verdict.statute_claim_status), so that it never reads as a case citation's or a quote's status.
STATUTE_STATUSES = tuple(
    verdict_rule.statute_claim_status(kind, status)
    for kind, statuses in ((StatuteCitation.Kind.CITATION, STATUTE_CITATION_STATUSES),
                           (StatuteCitation.Kind.QUOTE, STATUTE_QUOTE_STATUSES))
    for status in statuses
)  # fmt: skip
# The statute entries with a score: a quote found in a section's text (its match's confidence).
STATUTE_SCORED_STATUSES = tuple(
    verdict_rule.statute_claim_status(StatuteCitation.Kind.QUOTE, status) for status in STATUTE_QUOTE_FOUND
)
UNSCORED_STATUSES = (*UNSCORED_STATUSES, *(s for s in STATUTE_STATUSES if s not in STATUTE_SCORED_STATUSES))


SOURCE_FIELDS = (
    "message_citation",
    "message_caselaw_citation",
    "message_tool_source",
    "message_case_citation",
    "message_statute_citation",
)

# Exactly one of the four source foreign keys is set.
_exactly_one_source = reduce(
    operator.or_,
    (Q(**{f"{field}__isnull": field != chosen for field in SOURCE_FIELDS}) for chosen in SOURCE_FIELDS),
)


class LedgerQuerySet(AppendOnlyQuerySet["CitationLedgerEntry"]):
    """Entries are never updated, except that the reserved ``treatment_id`` may be set once, from NULL."""

    def update(self, **kwargs: Any) -> int:
        if set(kwargs) == {"treatment_id"} and kwargs["treatment_id"] is not None:
            if self.filter(treatment_id__isnull=False).exists():
                raise AppendOnlyError("citation_ledger_entry.treatment_id is set once only")
            return models.QuerySet.update(self, **kwargs)
        return super().update(**kwargs)


class CitationLedgerEntry(AppendOnlyModel):
    """An entry of the ledger. Append-only (``chats.record``): never updated but for ``treatment_id``,
    set once from NULL; deleted only by a matter purge (on PostgreSQL, by trigger too)."""

    settable_once: ClassVar[tuple[str, ...]] = ("treatment_id",)

    # Time-ordered (chats.ids): new entries append to the right edge of every index (docs/scale.md).
    id = models.UUIDField(primary_key=True, default=uuid7, editable=False)
    # Deleting a matter deletes its chats and so their entries; cascading here
    # too means no entry can ever point at a deleted project. Indexed by ledger_project_created_idx
    # (project_id first), which serves the cascade and the admin's search by a matter's id.
    project = models.ForeignKey(
        Project, on_delete=models.CASCADE, null=True, blank=True, related_name="+", db_index=False
    )
    # Indexed by ledger_chat_created_idx (chat_id first), which serves lookups and cascades by chat: a
    # plain chat_id index would only cost every entry one more index write.
    chat = models.ForeignKey(Chat, on_delete=models.CASCADE, related_name="ledger_entries", db_index=False)
    message = models.ForeignKey(Message, on_delete=models.CASCADE, related_name="ledger_entries")
    source_kind = models.CharField(max_length=32)
    # The source: exactly one of these five is set. The fields keep the names of the tables they point at
    # (message_citations, ...), so their columns and constraints are those of the seed design. The unique
    # constraints below index these four columns; a second plain index would be redundant.
    message_citation = models.ForeignKey(
        DocumentQuote, on_delete=models.CASCADE, null=True, blank=True, db_index=False, related_name="+"
    )
    message_caselaw_citation = models.ForeignKey(
        OpinionQuote, on_delete=models.CASCADE, null=True, blank=True, db_index=False, related_name="+"
    )
    message_tool_source = models.ForeignKey(
        MessageToolSource, on_delete=models.CASCADE, null=True, blank=True, db_index=False, related_name="+"
    )
    message_case_citation = models.ForeignKey(
        CaseCitation, on_delete=models.CASCADE, null=True, blank=True, db_index=False, related_name="+"
    )
    # A statute or regulation citation, or a quote of one, checked by the authority library.
    message_statute_citation = models.ForeignKey(
        StatuteCitation, on_delete=models.CASCADE, null=True, blank=True, db_index=False, related_name="+"
    )
    verification_status = models.CharField(max_length=32)
    confidence = models.FloatField(null=True, blank=True)
    provider = models.CharField(max_length=50, null=True, blank=True)  # noqa: DJ001 - null means "no provider"
    retrieved_at = models.DateTimeField(null=True, blank=True)
    # Reserved for a later treatment layer (how a later court treated the authority); always null for now.
    treatment_id = models.UUIDField(null=True, blank=True, editable=False)
    created_at = models.DateTimeField(default=timezone.now, editable=False)

    objects = LedgerQuerySet.as_manager()

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
            # The admin changelist's filters (citations.admin), each listing its newest entries first, and their
            # capped count (a LIMIT over the same index): one index range per filter value, whatever the size.
            models.Index(fields=["verification_status", "-created_at", "id"], name="ledger_status_created_idx"),
            models.Index(fields=["source_kind", "-created_at", "id"], name="ledger_kind_created_idx"),
            models.Index(fields=["provider", "-created_at", "id"], name="ledger_provider_created_idx"),
            # The admin's search by a matter's id lists its entries newest first.
            models.Index(fields=["project", "-created_at", "id"], name="ledger_project_created_idx"),
        ]
        constraints = [
            # An entry indexes exactly one underlying row, or it is not traceable.
            models.CheckConstraint(
                condition=_exactly_one_source,
                name="citation_ledger_entry_exactly_one_source",
                violation_error_message="Exactly one of message_citation, message_caselaw_citation, "
                "message_tool_source, message_case_citation and message_statute_citation must be set.",
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
                violation_error_message="An entry for a document quote must have source_kind 'kb_document'.",
            ),
            # A caselaw quote is a caselaw entry.
            models.CheckConstraint(
                condition=Q(message_caselaw_citation__isnull=True) | Q(source_kind=SourceKind.CASELAW),
                name="citation_ledger_entry_caselaw_kind",
                violation_error_message="An entry for an opinion quote must have source_kind 'caselaw'.",
            ),
            # A case citation written in an answer is a caselaw entry.
            models.CheckConstraint(
                condition=Q(message_case_citation__isnull=True) | Q(source_kind=SourceKind.CASELAW),
                name="citation_ledger_entry_case_citation_kind",
                violation_error_message="An entry for a case citation must have source_kind 'caselaw'.",
            ),
            # A statute row is a statute entry.
            models.CheckConstraint(
                condition=Q(message_statute_citation__isnull=True) | Q(source_kind=SourceKind.STATUTE),
                name="citation_ledger_entry_statute_kind",
                violation_error_message="An entry for a statute citation or quote must have source_kind 'statute'.",
            ),
            # A statute row's status is the library's outcome (statute_...), and only a statute row has one.
            models.CheckConstraint(
                condition=(Q(message_statute_citation__isnull=True) & ~Q(verification_status__in=STATUTE_STATUSES))
                | (Q(message_statute_citation__isnull=False) & Q(verification_status__in=STATUTE_STATUSES)),
                name="citation_ledger_entry_statute_status",
                violation_error_message="A statute entry has the library's status ("
                + ", ".join(STATUTE_STATUSES)
                + "), and only a statute entry has one.",
            ),
            # A checked case citation's status is the check's outcome, and only a case citation has one (but
            # ``unchecked``, which a quote nothing could check has too: the other checks hold it to quotes).
            models.CheckConstraint(
                condition=(Q(message_case_citation__isnull=True) & ~Q(verification_status__in=CASE_ONLY_STATUSES))
                | (Q(message_case_citation__isnull=False) & Q(verification_status__in=CASE_CITATION_STATUSES)),
                name="citation_ledger_entry_case_citation_status",
                violation_error_message="A case-citation entry has the check's status ("
                + ", ".join(CASE_CITATION_STATUSES)
                + "), and only a case-citation entry has one (but 'unchecked', also a quote's).",
            ),
            # A quote's entry says how the quote fared, by a method the reviewers know (a copy of its row's).
            models.CheckConstraint(
                condition=(Q(message_citation__isnull=True) & Q(message_caselaw_citation__isnull=True))
                | Q(verification_status__in=QUOTE_STATUSES),
                name="citation_ledger_entry_quote_status_known",
                violation_error_message="A quote's entry has a quote's status (" + ", ".join(QUOTE_STATUSES) + ").",
            ),
            # What the verifier cannot vouch for is never scored like what it can (as on the quote rows).
            models.CheckConstraint(
                condition=~Q(verification_status=VerificationMethod.ALTERED)
                | Q(confidence__lte=ALTERED_MAX_CONFIDENCE),
                name="citation_ledger_entry_altered_confidence_capped",
                violation_error_message=f"An altered quote's confidence must be at most {ALTERED_MAX_CONFIDENCE}.",
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
                violation_error_message="This document quote already has a ledger entry.",
            ),
            models.UniqueConstraint(
                fields=["message_caselaw_citation"],
                name="citation_ledger_entry_caselaw_citation_uniq",
                violation_error_message="This opinion quote already has a ledger entry.",
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
            models.UniqueConstraint(
                fields=["message_statute_citation"],
                name="citation_ledger_entry_statute_citation_uniq",
                violation_error_message="This statute citation or quote already has a ledger entry.",
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
            or self.message_statute_citation_id
        )


class TombstoneQuerySet(AppendOnlyQuerySet[Any]):
    """A tombstone table's queryset: neither updated nor deleted, with no purge exception."""

    def delete(self) -> tuple[int, dict[str, int]]:
        raise AppendOnlyError(f"{self.model._meta.db_table} rows cannot be deleted")


class MatterPurge(AppendOnlyModel):
    """The tombstone of a purged matter (``manage.py purge_matter``): which matter went, who purged it,
    when, and how much of its record went with it. Append-only, with no purge exception: a tombstone is
    never updated nor deleted (on PostgreSQL, by trigger too). It keeps the matter's id and name only,
    no content, and no foreign key (the matter is gone)."""

    id = models.UUIDField(primary_key=True, default=uuid.uuid4, editable=False)
    project_id = models.UUIDField()
    project_name = models.CharField(max_length=200)
    # The username given to the command (--by), or the operating-system user who ran it.
    purged_by = models.CharField(max_length=150)
    purged_at = models.DateTimeField(default=timezone.now)
    chats = models.PositiveIntegerField()
    messages = models.PositiveIntegerField()
    ledger_entries = models.PositiveIntegerField()
    documents = models.PositiveIntegerField()

    objects = TombstoneQuerySet.as_manager()

    class Meta:
        db_table = "matter_purges"
        ordering = ["-purged_at"]
        constraints = [
            # A matter is purged once: its tombstone is the one record that it existed.
            models.UniqueConstraint(
                fields=["project_id"],
                name="matter_purges_project_uniq",
                violation_error_message="This matter already has a tombstone.",
            ),
        ]

    def __str__(self) -> str:
        return f"purge of {self.project_name} ({self.project_id})"

    def delete(self, *args: Any, **kwargs: Any) -> tuple[int, dict[str, int]]:
        raise AppendOnlyError("matter_purges rows cannot be deleted")


class LedgerPartitionDrop(AppendOnlyModel):
    """The tombstone of a month of the ledger dropped (or detached) on PostgreSQL (``manage.py
    ledger_partitions --drop-before``): which month's entries went, who let them go, when, and how many.

    Written in the transaction that detaches the month's partition; append-only like a matter's tombstone
    (never updated nor deleted; on PostgreSQL by trigger too). The ledger's writers read it: a source row
    of a dropped month gets no entry again (``citations.ledger``), and ``verify_ledger`` counts such rows'
    missing entries as dropped, not missing.

    So a tombstone is only ever what ``drop_months_before`` writes: ``save()`` refuses a new one unless its
    range is one whole month in UTC, ending no later than the start of the current month (rule
    ``lqai_ledger_tombstone``, an ``IntegrityError``); on PostgreSQL a trigger (``citations.0019``) refuses
    the same from any client, and a partition that is not attached to the ledger with those bounds."""

    class Disposal(models.TextChoices):
        DROPPED = "dropped", "dropped"
        # Detached and kept as a plain table, outside the ledger, under the partition's name.
        DETACHED = "detached", "detached"

    id = models.UUIDField(primary_key=True, default=uuid.uuid4, editable=False)
    # The month's entries: created_at in [range_start, range_end).
    range_start = models.DateTimeField()
    range_end = models.DateTimeField()
    partition = models.CharField(max_length=63)
    disposal = models.CharField(max_length=16, choices=Disposal.choices)
    ledger_entries = models.PositiveBigIntegerField()
    # The username given to the command (--by), or the operating-system user who ran it.
    dropped_by = models.CharField(max_length=150)
    dropped_at = models.DateTimeField(default=timezone.now)

    objects = TombstoneQuerySet.as_manager()

    class Meta:
        db_table = "ledger_partition_drops"
        ordering = ["range_start"]
        constraints = [
            # A month goes once: its tombstone is the one record of what it held.
            models.UniqueConstraint(
                fields=["range_start"],
                name="ledger_partition_drops_month_uniq",
                violation_error_message="This month of the ledger already has a tombstone.",
            ),
            # An empty or inverted range would mark nothing, or everything, as dropped.
            models.CheckConstraint(
                condition=Q(range_start__lt=models.F("range_end")),
                name="ledger_partition_drops_range_ordered",
                violation_error_message="A dropped month starts before it ends.",
            ),
        ]

    def __str__(self) -> str:
        return f"{self.disposal} ledger partition {self.partition}"

    def save(self, *args: Any, **kwargs: Any) -> None:
        if self._state.adding or kwargs.get("force_insert"):
            refuse_unless_whole_past_month(self.range_start, self.range_end)
        super().save(*args, **kwargs)

    def delete(self, *args: Any, **kwargs: Any) -> tuple[int, dict[str, int]]:
        raise AppendOnlyError("ledger_partition_drops rows cannot be deleted")


LEDGER_TOMBSTONE = "lqai_ledger_tombstone"


class LedgerTombstoneError(IntegrityError):
    """A ledger tombstone refused: its range is not one whole past month (rule ``lqai_ledger_tombstone``, as
    the PostgreSQL trigger of ``citations.0019`` words it)."""

    def __init__(self, detail: str) -> None:
        super().__init__(f"{LEDGER_TOMBSTONE}: {detail}")


def refuse_unless_whole_past_month(start: datetime, end: datetime) -> None:
    """Raise :class:`LedgerTombstoneError` unless ``[start, end)`` is one whole month in UTC (the ledger
    partitions' bounds) that ended no later than the start of the current month."""
    from citations.partitions import month_start, next_month  # here: citations.partitions imports this module

    whole = False
    if timezone.is_aware(start) and timezone.is_aware(end):
        month = start.astimezone(UTC).date().replace(day=1)
        current = month_start(timezone.now().astimezone(UTC).date())
        following = month_start(next_month(month))
        whole = start == month_start(month) and end == following and end <= current
    if not whole:
        raise LedgerTombstoneError(
            f"a ledger_partition_drops row covers one whole past month (UTC), not [{start}, {end})"
        )


_HEX64 = r"^[0-9a-f]{64}$"


class TurnSeal(AppendOnlyModel):
    """The seal of one finalize of a turn: a digest of its facts, chained per matter and signed.

    Written by ``citations.seals.seal_turn`` in the turn's transaction (a ``post_finalize`` receiver), or
    late by ``manage.py seal_turns``; the byte formats are ``lqai_verify.record``'s. A turn finalized again
    after an interruption gets a second seal (``finalize_number`` 2) further down its chain, over all its
    facts at that time. Holds digests only, never content. Append-only (``chats.record``; on PostgreSQL by
    trigger too, ``citations.0012``): deleted only with its turn, in a matter purge.
    """

    id = models.BigAutoField(primary_key=True)
    # Deleting a matter deletes its turns and so their seals; verify_ledger then sees the gap in the chain.
    # Indexed by turn_seals_message_finalize_uniq (message first), which serves every lookup by message and
    # the cascade: a plain index would be written on every seal for nothing.
    message = models.ForeignKey(Message, on_delete=models.CASCADE, related_name="+", db_index=False)
    # ``matter:<project id>``, or ``chat:<chat id>`` for a matter-less chat.
    chain = models.CharField(max_length=80)
    sequence = models.PositiveBigIntegerField()
    previous_sha256 = models.CharField(max_length=64, blank=True)
    finalize_number = models.PositiveIntegerField()
    # The message's finalized_at when sealed: a later finalize without a seal of its own shows as unsealed.
    finalized_at = models.DateTimeField()
    verifier_version = models.CharField(max_length=40)
    # {"turn": <digest>, "rows": {"<table>:<id>": <digest>}}: so that a mismatch names the row that differs.
    row_digests = models.JSONField()
    facts_sha256 = models.CharField(max_length=64)
    sealed_at = models.DateTimeField()
    # Sealed by ``seal_turns`` after the fact (a turn from before sealing existed, or a sealing failure).
    late = models.BooleanField(default=False)
    key_fingerprint = models.CharField(max_length=64)
    seal_sha256 = models.CharField(max_length=64)
    signature = models.CharField(max_length=100)

    objects = AppendOnlyQuerySet.as_manager()

    class Meta:
        db_table = "turn_seals"
        ordering = ["chain", "sequence"]
        constraints = [
            # A chain is a sequence: two seals at one place would fork it. Also verify_ledger's walk order.
            models.UniqueConstraint(
                fields=["chain", "sequence"],
                name="turn_seals_chain_sequence_uniq",
                violation_error_message="This chain already has a seal at this place.",
            ),
            # One seal per finalize of a turn.
            models.UniqueConstraint(
                fields=["message", "finalize_number"],
                name="turn_seals_message_finalize_uniq",
                violation_error_message="This finalize of the turn is already sealed.",
            ),
            # Only the first seal of a chain has no predecessor.
            models.CheckConstraint(
                condition=(Q(sequence=1) & Q(previous_sha256="")) | (Q(sequence__gt=1) & ~Q(previous_sha256="")),
                name="turn_seals_previous_iff_not_first",
                violation_error_message="A seal names its predecessor, except the first of its chain.",
            ),
            # Digests are hex SHA-256: anything else cannot be recomputed.
            models.CheckConstraint(
                condition=Q(facts_sha256__regex=_HEX64)
                & Q(seal_sha256__regex=_HEX64)
                & Q(key_fingerprint__regex=_HEX64)
                & (Q(previous_sha256="") | Q(previous_sha256__regex=_HEX64)),
                name="turn_seals_digests_hex",
                violation_error_message="Seal digests and the key fingerprint are 64 lowercase hex digits.",
            ),
        ]

    def __str__(self) -> str:
        return f"seal {self.chain} #{self.sequence}"


def _refuse_head_deletion(heads: models.QuerySet[SealChainHead]) -> None:
    """Refuse deleting ``heads`` unless each is of the matter this context purges (``chats.record.purging``),
    as the trigger of ``citations.0018`` refuses it in PostgreSQL; the refusal names a chain kept."""
    purge = purge_in_progress()
    kept = heads if purge is None else heads.exclude(Q(project_id=purge) | Q(chat__project_id=purge))
    chain = kept.values_list("chain", flat=True).first()
    if chain is not None:
        raise AppendOnlyError(
            f"seal_chain_heads rows cannot be deleted (only a matter purge removes them): chain {chain}"
        )


class SealChainHeadQuerySet(models.QuerySet["SealChainHead"]):
    """``delete()`` only in the purge of the heads' matter (:func:`_refuse_head_deletion`). Django's cascades
    go through the base manager, not this queryset: on PostgreSQL the trigger checks those rows too."""

    def delete(self) -> tuple[int, dict[str, int]]:
        _refuse_head_deletion(self)
        return super().delete()


class SealChainHead(models.Model):
    """The last seal of each chain: its row is locked (``SELECT ... FOR UPDATE``) for the final write of a
    seal, so that the seals of one chain are written one after the other, in commit order. Also a check of
    the chain's end: verify_ledger compares it with the chain's last seal, and reports a chain with seals but
    no head. Each seal moves it (an UPDATE), and nothing else may: it only moves forward, to its chain's
    last seal (``citations.0020``, rule ``lqai_seal_chain``); it is deleted only with its matter, in the matter's purge
    (``delete()`` here, a trigger on PostgreSQL: ``citations.0018``), since the chain's next seal would
    otherwise restart at #1, collide with the first, and leave every later turn unsealed."""

    chain = models.CharField(max_length=80, primary_key=True)
    sequence = models.PositiveBigIntegerField(default=0)
    seal_sha256 = models.CharField(max_length=64, blank=True)
    # Whose chain it is: deleting the matter (or the matter-less chat) deletes its seals and its head with
    # them, so that a deletion made through the application leaves no dangling head.
    project = models.ForeignKey(Project, on_delete=models.CASCADE, null=True, blank=True, related_name="+")
    chat = models.ForeignKey(Chat, on_delete=models.CASCADE, null=True, blank=True, related_name="+")

    objects = SealChainHeadQuerySet.as_manager()

    class Meta:
        db_table = "seal_chain_heads"
        constraints = [
            # A chain belongs to a matter or, for a matter-less chat, to the chat: never both, never neither.
            models.CheckConstraint(
                condition=Q(project__isnull=True) ^ Q(chat__isnull=True),
                name="seal_chain_heads_one_owner",
                violation_error_message="A seal chain belongs to a matter or to a matter-less chat.",
            ),
        ]

    def __str__(self) -> str:
        return f"{self.chain} at #{self.sequence}"

    def delete(self, *args: Any, **kwargs: Any) -> tuple[int, dict[str, int]]:
        _refuse_head_deletion(SealChainHead._base_manager.filter(pk=self.pk))
        return super().delete(*args, **kwargs)


class Decision(models.TextChoices):
    """What a person decided about one claim of a turn (issue 52)."""

    CONFIRMED = "confirmed", "confirmed"  # checked against the source; ``source`` says where
    CORRECTED = "corrected", "corrected"  # ``corrected_text`` replaces the claim; checked by the machine if it can
    REMOVED = "removed", "removed"  # the claim will not be filed


# The kinds of claims a decision is about, by their table (``lqai_verify.record``'s names, so that a claim is named
# as its row is in a seal: ``<table>:<id>``). A new kind of claim (statute rows) adds its table here and to
# ``citations.claims.CLAIM_KINDS``.
CLAIM_TABLES = ("message_citations", "message_caselaw_citations", "message_case_citations", "message_statute_citations")


class ReviewDecision(AppendOnlyModel):
    """A person's decision on one claim of a turn: confirmed, corrected or removed, with a note, who and when.

    Append-only: a later decision on the same claim supersedes this one and both stay (the current decision is
    the claim's last, by ``sequence``). Written only by ``citations.reviews.record_decision``, which seals it in
    the transaction that records it: each decision is the next link of its matter's decisions chain
    (``reviews:<the turn chain>``), naming its predecessor's digest, signed with the ledger key, and naming the
    seal of the turn's facts it was made on (``turn_seal_sha256``). The byte format is
    ``lqai_verify.decisions``'; ``verify_ledger`` and the offline verifier recompute it. On both databases,
    triggers refuse an UPDATE, a DELETE outside the matter's purge, and a link that is not its chain's last + 1
    (``citations.0021``)."""

    id = models.UUIDField(primary_key=True, default=uuid7, editable=False)
    # The turn (assistant message) whose claim this is. Deleted only with its turn, in a matter purge.
    message = models.ForeignKey(Message, on_delete=models.CASCADE, related_name="+", db_index=False)
    claim_table = models.CharField(max_length=40)
    claim_id = models.UUIDField()
    decision = models.CharField(max_length=16, choices=Decision.choices)
    # Where the reviewer checked (the reporter, the database, the document): required for a confirmation.
    source = models.TextField(blank=True)
    corrected_text = models.TextField(blank=True)
    # The machine's check of a correction: {"status": ..., "detail": ...} (``citations.reviews``); {} otherwise.
    correction_check = models.JSONField(default=dict, blank=True)
    note = models.TextField(blank=True)
    decided_by = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.PROTECT, related_name="+")
    # Who, as sealed: her username and role at the time (a later change of either does not rewrite it).
    reviewer = models.CharField(max_length=150)
    role = models.CharField(max_length=16)
    decided_at = models.DateTimeField()
    chain = models.CharField(max_length=100)
    sequence = models.PositiveBigIntegerField()
    previous_sha256 = models.CharField(max_length=64, blank=True)
    # The turn's last seal when decided ('' for a turn not sealed yet): what the reviewer saw was that record.
    turn_seal_sha256 = models.CharField(max_length=64, blank=True)
    key_fingerprint = models.CharField(max_length=64)
    seal_sha256 = models.CharField(max_length=64)
    signature = models.CharField(max_length=100)

    objects = AppendOnlyQuerySet.as_manager()

    class Meta:
        db_table = "review_decisions"
        ordering = ["chain", "sequence"]
        indexes = [
            # A turn's claims with their decisions (citations.claims.claims_of), and the current decision of one
            # claim (its last): one index range scan.
            models.Index(fields=["message", "claim_table", "claim_id", "sequence"], name="review_decisions_claim_idx"),
        ]
        constraints = [
            # A chain is a sequence: two decisions at one place would fork it. Also the verifiers' walk order.
            models.UniqueConstraint(
                fields=["chain", "sequence"],
                name="review_decisions_chain_sequence_uniq",
                violation_error_message="This decisions chain already has a decision at this place.",
            ),
            models.CheckConstraint(
                condition=Q(decision__in=Decision.values),
                name="review_decisions_decision_known",
                violation_error_message="A decision is confirmed, corrected or removed.",
            ),
            models.CheckConstraint(
                condition=Q(claim_table__in=CLAIM_TABLES),
                name="review_decisions_claim_table_known",
                violation_error_message="A decision is about a quote, a case citation or a statute row of a turn.",
            ),
            # A confirmation says where it was checked; a correction says what replaces the claim.
            models.CheckConstraint(
                condition=(~Q(decision=Decision.CONFIRMED) | ~Q(source=""))
                & (~Q(decision=Decision.CORRECTED) | ~Q(corrected_text="")),
                name="review_decisions_confirmed_with_source_corrected_with_text",
                violation_error_message="A confirmation names the source checked; a correction gives the text.",
            ),
            models.CheckConstraint(
                condition=(Q(sequence=1) & Q(previous_sha256="")) | (Q(sequence__gt=1) & ~Q(previous_sha256="")),
                name="review_decisions_previous_iff_not_first",
                violation_error_message="A decision names its predecessor, except the first of its chain.",
            ),
            models.CheckConstraint(
                condition=Q(seal_sha256__regex=_HEX64)
                & Q(key_fingerprint__regex=_HEX64)
                & (Q(previous_sha256="") | Q(previous_sha256__regex=_HEX64))
                & (Q(turn_seal_sha256="") | Q(turn_seal_sha256__regex=_HEX64)),
                name="review_decisions_digests_hex",
                violation_error_message="Decision digests and the key fingerprint are 64 lowercase hex digits.",
            ),
        ]

    def __str__(self) -> str:
        return f"{self.decision} {self.claim_table}:{self.claim_id} ({self.chain} #{self.sequence})"


class Certificate(AppendOnlyModel):
    """A certificate of verification of one turn (issue 52, item 3): what the machine checked, what each person
    checked and decided (the sealed decisions it names) and what nobody checked, in the words of a court's
    template, issued by the matter's owner or a reviewer once no claim is open.

    Append-only: a later certificate of the same turn (after later decisions) supersedes it, and both stay. Written
    only by ``citations.certificates.issue_certificate``, which seals it in the transaction that issues it as the
    next link of its matter's certificates chain (``certificates:<the turn chain>``), signed with the ledger key.
    ``statement`` is the data, ``text`` its rendering (``lqai_verify.certificates.render_text``); the byte format is
    ``lqai_verify.certificates``'. The same triggers as the decisions' (``citations.0024``)."""

    id = models.UUIDField(primary_key=True, default=uuid7, editable=False)
    # The turn certified. Deleted only with its turn, in a matter purge.
    message = models.ForeignKey(Message, on_delete=models.CASCADE, related_name="+", db_index=False)
    statement = models.JSONField()
    text = models.TextField()
    issued_by = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.PROTECT, related_name="+")
    # Who, as sealed: her username and role when she issued it.
    issuer = models.CharField(max_length=150)
    role = models.CharField(max_length=16)
    issued_at = models.DateTimeField()
    # The turn's last seal when issued: the record the certificate is of.
    turn_seal_sha256 = models.CharField(max_length=64)
    chain = models.CharField(max_length=100)
    sequence = models.PositiveBigIntegerField()
    previous_sha256 = models.CharField(max_length=64, blank=True)
    key_fingerprint = models.CharField(max_length=64)
    seal_sha256 = models.CharField(max_length=64)
    signature = models.CharField(max_length=100)

    objects = AppendOnlyQuerySet.as_manager()

    class Meta:
        db_table = "review_certificates"
        ordering = ["chain", "sequence"]
        indexes = [
            # A turn's latest certificate (the API, the pages, the review queue's NOT EXISTS).
            models.Index(fields=["message", "sequence"], name="review_certificates_turn_idx"),
        ]
        constraints = [
            # A chain is a sequence: two certificates at one place would fork it. Also the verifiers' walk order.
            models.UniqueConstraint(
                fields=["chain", "sequence"],
                name="review_certificates_chain_sequence_uniq",
                violation_error_message="This certificates chain already has a certificate at this place.",
            ),
            models.CheckConstraint(
                condition=(Q(sequence=1) & Q(previous_sha256="")) | (Q(sequence__gt=1) & ~Q(previous_sha256="")),
                name="review_certificates_previous_iff_not_first",
                violation_error_message="A certificate names its predecessor, except the first of its chain.",
            ),
            # A certificate is of a sealed record: it names the seal of the turn it certifies.
            models.CheckConstraint(
                condition=Q(seal_sha256__regex=_HEX64)
                & Q(key_fingerprint__regex=_HEX64)
                & Q(turn_seal_sha256__regex=_HEX64)
                & (Q(previous_sha256="") | Q(previous_sha256__regex=_HEX64)),
                name="review_certificates_digests_hex",
                violation_error_message="Certificate digests and the key fingerprint are 64 lowercase hex digits.",
            ),
        ]

    def __str__(self) -> str:
        return f"certificate of {self.message_id} ({self.chain} #{self.sequence})"


class ReviewChainHead(models.Model):
    """Where a matter's decisions chain (``reviews:<turn chain>``) or certificates chain (``certificates:<turn
    chain>``) ends: its last link's number and digest, moved by ``citations.reviews.record_decision`` and
    ``citations.certificates.issue_certificate`` in the transaction that writes the link. A check of the chain's
    end, as ``SealChainHead`` is of a seal chain's: ``verify_ledger`` compares it with the chain's last link, so
    that a last decision (or certificate) removed below the application is named. Triggers (``citations.0025``,
    both databases) let it only be created at, or move strictly forward to, its chain's last link, and be deleted
    only in its matter's purge."""

    chain = models.CharField(max_length=100, primary_key=True)
    sequence = models.PositiveBigIntegerField()
    seal_sha256 = models.CharField(max_length=64)
    # Whose chain it is (a matter, or a matter-less chat): it goes with it, in its purge.
    project = models.ForeignKey(Project, on_delete=models.CASCADE, null=True, blank=True, related_name="+")
    chat = models.ForeignKey(Chat, on_delete=models.CASCADE, null=True, blank=True, related_name="+")

    class Meta:
        db_table = "review_chain_heads"
        constraints = [
            # A chain belongs to a matter or, for a matter-less chat, to the chat: never both, never neither.
            models.CheckConstraint(
                condition=Q(project__isnull=True) ^ Q(chat__isnull=True),
                name="review_chain_heads_one_owner",
                violation_error_message="A review chain belongs to a matter or to a matter-less chat.",
            ),
        ]

    def __str__(self) -> str:
        return f"{self.chain} at #{self.sequence}"
