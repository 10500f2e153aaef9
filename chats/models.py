"""The chat domain: matters (projects), chats, messages, the sources a turn can
quote (knowledge-base documents and materialized caselaw opinions), and the
three per-turn artifact tables that record what a turn quoted or consulted.

Table names are explicit because the citation ledger, the backfill's raw SQL
and the benchmarks name them.
"""

from __future__ import annotations

import uuid
from decimal import Decimal

from django.conf import settings
from django.db import models
from django.db.models import Q
from django.utils import timezone


class Project(models.Model):
    """A matter: the unit of access control. Its owner and members see its chats."""

    id = models.UUIDField(primary_key=True, default=uuid.uuid4, editable=False)
    name = models.CharField(max_length=200)
    owner = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="owned_projects")
    members = models.ManyToManyField(
        settings.AUTH_USER_MODEL, related_name="projects", blank=True, db_table="project_members"
    )
    created_at = models.DateTimeField(default=timezone.now, editable=False)

    class Meta:
        db_table = "projects"
        ordering = ["name"]
        constraints = [
            # A matter needs a name a lawyer can recognise in a list.
            models.CheckConstraint(
                condition=~Q(name=""), name="projects_name_not_empty", violation_error_message="A project needs a name."
            ),
        ]

    def __str__(self) -> str:
        return self.name


class Chat(models.Model):
    id = models.UUIDField(primary_key=True, default=uuid.uuid4, editable=False)
    # A chat may be matter-less; deleting a matter deletes its chats (and, by
    # cascade, their messages, artifacts and ledger entries).
    project = models.ForeignKey(Project, on_delete=models.CASCADE, null=True, blank=True, related_name="chats")
    owner = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="chats")
    title = models.CharField(max_length=200, blank=True)
    created_at = models.DateTimeField(default=timezone.now, editable=False)

    class Meta:
        db_table = "chats"
        ordering = ["-created_at"]

    def __str__(self) -> str:
        return self.title or f"Chat {self.id}"


class Message(models.Model):
    class Role(models.TextChoices):
        USER = "user"
        ASSISTANT = "assistant"

    class Status(models.TextChoices):
        PENDING = "pending"
        STREAMING = "streaming"
        INTERRUPTED = "interrupted"
        COMPLETE = "complete"
        FAILED = "failed"

    id = models.UUIDField(primary_key=True, default=uuid.uuid4, editable=False)
    chat = models.ForeignKey(Chat, on_delete=models.CASCADE, related_name="messages")
    role = models.CharField(max_length=16, choices=Role.choices)
    content = models.TextField(blank=True)
    status = models.CharField(max_length=16, choices=Status.choices, default=Status.PENDING)
    finalized_at = models.DateTimeField(null=True, blank=True)
    created_at = models.DateTimeField(default=timezone.now, editable=False)

    class Meta:
        db_table = "messages"
        ordering = ["created_at", "id"]
        indexes = [
            # The chat views list a chat's messages in order; the backfill's
            # --chat filter walks one chat's messages in creation order.
            models.Index(fields=["chat", "created_at"], name="messages_chat_created_idx"),
            # The ledger backfill walks messages in creation order, keyset-paginated on (created_at, id).
            models.Index(fields=["created_at", "id"], name="messages_created_idx"),
        ]
        constraints = [
            # Only the two speakers of a turn exist; anything else is a bug upstream.
            models.CheckConstraint(
                condition=Q(role__in=["user", "assistant"]),
                name="messages_role_valid",
                violation_error_message="Role must be 'user' or 'assistant'.",
            ),
            # The turn lifecycle is closed: an unknown status would be invisible to every view.
            models.CheckConstraint(
                condition=Q(status__in=["pending", "streaming", "interrupted", "complete", "failed"]),
                name="messages_status_valid",
                violation_error_message="Status must be one of pending, streaming, interrupted, complete, failed.",
            ),
        ]

    def __str__(self) -> str:
        return f"{self.role} message {self.id}"


class Document(models.Model):
    """A knowledge-base document of a matter; quotes are verified against ``content``."""

    id = models.UUIDField(primary_key=True, default=uuid.uuid4, editable=False)
    project = models.ForeignKey(Project, on_delete=models.CASCADE, related_name="documents")
    title = models.CharField(max_length=300)
    content = models.TextField()
    created_at = models.DateTimeField(default=timezone.now, editable=False)

    class Meta:
        db_table = "documents"
        ordering = ["title"]

    def __str__(self) -> str:
        return self.title


class CaselawOpinion(models.Model):
    """External opinion text, materialized so that quotes from it stay verifiable later."""

    id = models.UUIDField(primary_key=True, default=uuid.uuid4, editable=False)
    provider = models.CharField(max_length=50)
    cluster_id = models.CharField(max_length=100, blank=True)
    opinion_id = models.CharField(max_length=100)
    case_name = models.CharField(max_length=500)
    citation = models.CharField(max_length=200, blank=True)
    court = models.CharField(max_length=200, blank=True)
    date_filed = models.DateField(null=True, blank=True)
    absolute_url = models.URLField(max_length=500, blank=True)
    text = models.TextField()
    retrieved_at = models.DateTimeField(default=timezone.now)

    class Meta:
        db_table = "caselaw_opinions"
        ordering = ["case_name"]
        constraints = [
            # One materialized copy per provider opinion: re-fetching updates, never duplicates.
            models.UniqueConstraint(
                fields=["provider", "opinion_id"],
                name="caselaw_opinions_provider_opinion_uniq",
                violation_error_message="This provider's opinion is already materialized.",
            ),
        ]

    def __str__(self) -> str:
        return self.case_name


def _offsets_and_method_constraints(table: str) -> list[models.BaseConstraint]:
    """The rules shared by both quote tables: a quote is a real, ordered span of its source."""
    return [
        # Offsets index into the source text: negative offsets cannot point anywhere.
        models.CheckConstraint(
            condition=Q(source_offset_start__gte=0),
            name=f"{table}_offset_start_non_negative",
            violation_error_message="source_offset_start must be >= 0.",
        ),
        # source[start:end] must be a forward span, or the passage cannot be read back.
        models.CheckConstraint(
            condition=Q(source_offset_end__gte=models.F("source_offset_start")),
            name=f"{table}_offsets_ordered",
            violation_error_message="source_offset_end must be >= source_offset_start.",
        ),
        # A stored quote was verified somehow; an empty method would hide how.
        models.CheckConstraint(
            condition=~Q(verification_method=""),
            name=f"{table}_method_not_empty",
            violation_error_message="verification_method must not be empty.",
        ),
        # Confidence is a probability-like score; outside 0..1 it means nothing.
        models.CheckConstraint(
            condition=Q(verification_confidence__gte=0) & Q(verification_confidence__lte=1),
            name=f"{table}_confidence_range",
            violation_error_message="verification_confidence must be within 0..1.",
        ),
    ]


class MessageCitation(models.Model):
    """A quote from a KB document, verified against the document's content."""

    id = models.UUIDField(primary_key=True, default=uuid.uuid4, editable=False)
    message = models.ForeignKey(Message, on_delete=models.CASCADE, related_name="citations")
    # A cited document cannot be deleted on its own (the citation would become
    # unverifiable); it goes only together with the citing turn or matter.
    document = models.ForeignKey(Document, on_delete=models.RESTRICT, related_name="citations")
    quote = models.TextField()
    source_offset_start = models.IntegerField()
    source_offset_end = models.IntegerField()
    verification_method = models.CharField(max_length=32)
    verification_confidence = models.DecimalField(max_digits=4, decimal_places=3, default=Decimal("1.000"))
    created_at = models.DateTimeField(default=timezone.now, editable=False)

    class Meta:
        db_table = "message_citations"
        ordering = ["created_at", "id"]
        constraints = _offsets_and_method_constraints("message_citations")

    def __str__(self) -> str:
        return f"KB quote {self.id}"


class MessageCaselawCitation(models.Model):
    """A quote from a materialized caselaw opinion, verified against its text."""

    id = models.UUIDField(primary_key=True, default=uuid.uuid4, editable=False)
    message = models.ForeignKey(Message, on_delete=models.CASCADE, related_name="caselaw_citations")
    opinion = models.ForeignKey(CaselawOpinion, on_delete=models.RESTRICT, related_name="citations")
    quote = models.TextField()
    source_offset_start = models.IntegerField()
    source_offset_end = models.IntegerField()
    verification_method = models.CharField(max_length=32)
    verification_confidence = models.FloatField(default=1.0)
    created_at = models.DateTimeField(default=timezone.now, editable=False)

    class Meta:
        db_table = "message_caselaw_citations"
        ordering = ["created_at", "id"]
        constraints = _offsets_and_method_constraints("message_caselaw_citations")

    def __str__(self) -> str:
        return f"Caselaw quote {self.id}"


class MessageToolSource(models.Model):
    """A source a tool consulted during the turn ("sources consulted"): provenance, not a quote."""

    class SourceKind(models.TextChoices):
        CASELAW = "caselaw"
        MCP = "mcp"

    id = models.UUIDField(primary_key=True, default=uuid.uuid4, editable=False)
    message = models.ForeignKey(Message, on_delete=models.CASCADE, related_name="tool_sources")
    # Extensible on purpose: new tool kinds flow into the ledger with no schema change.
    source_kind = models.CharField(max_length=32)
    tool = models.CharField(max_length=100)
    provider = models.CharField(max_length=50, null=True, blank=True)  # noqa: DJ001 - null means "no provider"
    label = models.CharField(max_length=500)
    subtitle = models.CharField(max_length=500, blank=True)
    url = models.URLField(max_length=500, blank=True)
    external_ref = models.CharField(max_length=200, blank=True)
    created_at = models.DateTimeField(default=timezone.now, editable=False)

    class Meta:
        db_table = "message_tool_sources"
        ordering = ["created_at", "id"]
        constraints = [
            # The ledger copies source_kind; an empty kind would be an unclassifiable entry.
            models.CheckConstraint(
                condition=~Q(source_kind=""),
                name="message_tool_sources_kind_not_empty",
                violation_error_message="source_kind must not be empty.",
            ),
        ]

    def __str__(self) -> str:
        return f"{self.source_kind} source {self.label}"


class MessageCaseCitation(models.Model):
    """A case citation written in an assistant's answer, as checked at finalize (``chats.case_citations``):
    one row per citation span of the answer, with what the check found."""

    class Kind(models.TextChoices):
        FULL = "full"
        SHORT = "short"
        ID = "id"
        SUPRA = "supra"
        REFERENCE = "reference"
        STATUTE = "statute"
        OTHER = "other"

    class Status(models.TextChoices):
        VERIFIED = "verified"
        NAME_MISMATCH = "name_mismatch"
        NOT_FOUND = "not_found"
        AMBIGUOUS = "ambiguous"
        UNCHECKED = "unchecked"

    id = models.UUIDField(primary_key=True, default=uuid.uuid4, editable=False)
    message = models.ForeignKey(Message, on_delete=models.CASCADE, related_name="case_citations")
    answer_offset_start = models.IntegerField()
    answer_offset_end = models.IntegerField()
    kind = models.CharField(max_length=16, choices=Kind.choices)
    citation = models.CharField(max_length=200)  # normalized: "570 U.S. 297"
    case_name = models.CharField(max_length=500, blank=True)  # as written in the answer
    status = models.CharField(max_length=16, choices=Status.choices)
    detail = models.CharField(max_length=1000, blank=True)
    # The case the citation really is (also for a name mismatch). An opinion a turn cites cannot be
    # deleted on its own, or the check could not be shown again.
    opinion = models.ForeignKey(
        CaselawOpinion, on_delete=models.RESTRICT, null=True, blank=True, related_name="case_citations"
    )
    provider = models.CharField(max_length=50, blank=True)  # where the citation was looked up
    created_at = models.DateTimeField(default=timezone.now, editable=False)

    class Meta:
        db_table = "message_case_citations"
        ordering = ["created_at", "answer_offset_start"]
        constraints = [
            # Only the statuses the checker gives: the verdict and the ledger read them.
            models.CheckConstraint(
                condition=Q(status__in=["verified", "name_mismatch", "not_found", "ambiguous", "unchecked"]),
                name="message_case_citations_status_valid",
                violation_error_message="status must be one of verified, name_mismatch, not_found, ambiguous, "
                "unchecked.",
            ),
            # Only the kinds the checker gives.
            models.CheckConstraint(
                condition=Q(kind__in=["full", "short", "id", "supra", "reference", "statute", "other"]),
                name="message_case_citations_kind_valid",
                violation_error_message="kind must be one of full, short, id, supra, reference, statute, other.",
            ),
            # Offsets index the answer: negative ones point nowhere.
            models.CheckConstraint(
                condition=Q(answer_offset_start__gte=0),
                name="message_case_citations_offset_start_non_negative",
                violation_error_message="answer_offset_start must be >= 0.",
            ),
            # A citation is a non-empty span of the answer, or it cannot be shown.
            models.CheckConstraint(
                condition=Q(answer_offset_end__gt=models.F("answer_offset_start")),
                name="message_case_citations_offsets_ordered",
                violation_error_message="answer_offset_end must be > answer_offset_start.",
            ),
            # Verified and name_mismatch are statements about a case: they name it; the others have none.
            models.CheckConstraint(
                condition=(Q(status__in=["verified", "name_mismatch"]) & Q(opinion__isnull=False))
                | (~Q(status__in=["verified", "name_mismatch"]) & Q(opinion__isnull=True)),
                name="message_case_citations_opinion_iff_resolved",
                violation_error_message="verified and name_mismatch need the opinion; other statuses have none.",
            ),
            # One row per citation span: a resumed turn adds only the spans it did not have.
            models.UniqueConstraint(
                fields=["message", "answer_offset_start"],
                name="message_case_citations_message_start_uniq",
                violation_error_message="This message already has a case citation at this offset.",
            ),
        ]

    def __str__(self) -> str:
        return f"{self.citation} ({self.status})"
