"""The record of a checked draft beside its turn: what the turn's rows do not hold.

A checked draft is a turn (``Message.kind`` ``draft``): its text is the answer, its quotations of opinions and
documents are the turn's quote rows (those nothing could check ``unchecked`` rows), its case citations the turn's
case-citation rows, its statute citations and quotes its statute rows, sealed and entered in the ledger like any
turn's. :class:`DraftCheck` keeps, for the same turn, what a draft has and an answer has not: the file's name,
format and digest, its page map, and every finding as the check found it (the JSON of docs/drafts.md, with the
table of authorities).
"""

from __future__ import annotations

from django.db import models
from django.db.models import Q
from django.utils import timezone

from chats.ids import uuid7
from chats.models import Chat, Message, Project


class DraftFormat(models.TextChoices):
    DOCX = "docx"
    PDF = "pdf"
    TEXT = "text"
    MARKDOWN = "markdown"


class DraftCheck(models.Model):
    """One check of one draft file: the turn that records it (``message``, the answer of a ``draft`` turn) and
    its chat, one chat per draft (a revised draft is a new turn in the same chat). Written once, with the turn,
    by :func:`drafts.recording.record_draft`."""

    id = models.UUIDField(primary_key=True, default=uuid7, editable=False)
    message = models.OneToOneField(Message, on_delete=models.CASCADE, related_name="draft_check")
    chat = models.ForeignKey(Chat, on_delete=models.CASCADE, related_name="draft_checks")
    project = models.ForeignKey(Project, on_delete=models.CASCADE, related_name="draft_checks")
    file_name = models.CharField(max_length=255)
    format = models.CharField(max_length=16, choices=DraftFormat.choices)
    file_sha256 = models.CharField(max_length=64)
    # The draft's pages as chats.pages has them ([start, label] pairs), empty without pages.
    pages = models.JSONField(blank=True, default=list)
    # The findings and the table of authorities as checked (drafts.checking.CheckedDraft.record): the JSON of
    # docs/drafts.md, its id and verdict aside (the record's own).
    findings = models.JSONField(default=list)
    authorities = models.JSONField(default=list)
    created_at = models.DateTimeField(default=timezone.now, editable=False)

    class Meta:
        db_table = "draft_checks"
        ordering = ["created_at", "id"]
        indexes = [
            # drafts.recording: a draft's chat by its file name in the matter, and a check's previous one in its chat.
            models.Index(fields=["project", "file_name", "created_at"], name="draft_checks_by_name_idx"),
            models.Index(fields=["chat", "created_at", "id"], name="draft_checks_chat_idx"),
        ]
        constraints = [
            # The readers know these formats only; another would be read as none of them.
            models.CheckConstraint(
                condition=Q(format__in=DraftFormat.values),
                name="draft_checks_format_valid",
                violation_error_message="Format must be docx, pdf, text or markdown.",
            ),
            # A file's digest is hex SHA-256: anything else could not be compared with the file.
            models.CheckConstraint(
                condition=Q(file_sha256__regex=r"^[0-9a-f]{64}$"),
                name="draft_checks_sha256_hex",
                violation_error_message="The file's digest is 64 lowercase hex digits.",
            ),
        ]

    def __str__(self) -> str:
        return f"draft check {self.id} of {self.file_name}"
