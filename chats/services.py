"""Services of the chat domain: writes go through here.

:func:`finalize_turn` is the one way a chat turn ends, whatever the view
(single-shot, streamed tool loop, resume) or outcome (complete, interrupted,
failed). It verifies every claimed quote against its source, persists the
assistant message and its per-turn rows in one transaction, and then (after
commit) sends :data:`chats.signals.post_finalize` so that layers built on top
(the citation ledger) see every turn.
"""

from __future__ import annotations

import datetime
import hashlib
import logging
from collections.abc import Sequence
from dataclasses import dataclass, field
from decimal import ROUND_HALF_UP, Decimal
from uuid import UUID

from django.contrib.auth.base_user import AbstractBaseUser
from django.db import connection, transaction
from django.utils import timezone

from chats.models import (
    CaselawOpinion,
    Chat,
    Document,
    Message,
    MessageCaselawCitation,
    MessageCitation,
    MessageToolSource,
    Project,
)
from chats.signals import post_finalize
from chats.verification import NormalizedSource

logger = logging.getLogger(__name__)

FINAL_STATUSES = frozenset({Message.Status.COMPLETE, Message.Status.INTERRUPTED, Message.Status.FAILED})


@dataclass(frozen=True, slots=True)
class ClaimedCitation:
    """A quote the assistant claims, and the source it claims: a KB document or a caselaw opinion."""

    quote: str
    document_id: UUID | None = None
    opinion_id: UUID | None = None


@dataclass(frozen=True, slots=True)
class ConsultedSource:
    """A source a tool consulted during the turn (provenance, not a quote)."""

    source_kind: str
    tool: str
    label: str
    provider: str | None = None
    subtitle: str = ""
    url: str = ""
    external_ref: str = ""


@dataclass(frozen=True, slots=True)
class UnverifiedQuote:
    quote: str
    reason: str


@dataclass(slots=True)
class FinalizedTurn:
    message: Message
    citations: list[MessageCitation] = field(default_factory=list)
    caselaw_citations: list[MessageCaselawCitation] = field(default_factory=list)
    tool_sources: list[MessageToolSource] = field(default_factory=list)
    unverified: list[UnverifiedQuote] = field(default_factory=list)


def create_chat(*, owner: AbstractBaseUser, project: Project | None = None, title: str = "") -> Chat:
    """Open a chat; the caller has checked that ``owner`` may use ``project``."""
    return Chat.objects.create(owner_id=owner.pk, project=project, title=title)


def start_turn(*, chat: Chat, content: str, assistant_status: str = Message.Status.PENDING) -> tuple[Message, Message]:
    """Record the user's message and the assistant message that answers it (``reply_to``), ``pending``,
    or ``streaming`` for a streamed turn so that a disconnect before the first event leaves a record."""
    with transaction.atomic():
        user_message = Message.objects.create(
            chat=chat, role=Message.Role.USER, content=content, status=Message.Status.COMPLETE
        )
        assistant_message = Message.objects.create(
            chat=chat, role=Message.Role.ASSISTANT, content="", status=assistant_status, reply_to=user_message
        )
    return user_message, assistant_message


def reopen_interrupted_turn(*, message: Message) -> bool:
    """Claim an ``interrupted`` assistant message for a resume by moving it to ``streaming``.

    A conditional update, so that of two concurrent resumes exactly one wins; returns False
    (and changes nothing) if the message is not interrupted any more.
    """
    claimed = Message.objects.filter(
        pk=message.pk, role=Message.Role.ASSISTANT, status=Message.Status.INTERRUPTED
    ).update(status=Message.Status.STREAMING)
    if claimed:
        message.status = Message.Status.STREAMING
    return bool(claimed)


def _confidence_decimal(value: float) -> Decimal:
    return Decimal(str(value)).quantize(Decimal("0.001"), rounding=ROUND_HALF_UP)


def passage_sha256(passage: str) -> str:
    """The digest a quote row stores of the passage it verified (hex SHA-256 of its UTF-8 bytes); the
    trace recomputes it from the passage it reads to tell whether the text is still the one verified."""
    return hashlib.sha256(passage.encode("utf-8")).hexdigest()


def _hold_source_texts(*, document_ids: set[UUID], opinion_ids: set[UUID]) -> None:
    """On PostgreSQL, lock the quoted sources' rows ``FOR SHARE`` until the turn's transaction ends, so
    that their text cannot change between verification and the commit of the citation rows (from then
    on the immutability trigger refuses any change). Other turns quoting the same sources are not held
    up (the lock is shared); an edit of such a source waits for the turn. A no-op elsewhere: SQLite
    runs one writer at a time.
    """
    if connection.vendor != "postgresql":
        return
    with connection.cursor() as cursor:
        for model, ids in ((Document, document_ids), (CaselawOpinion, opinion_ids)):
            if ids:
                table = model._meta.db_table
                cursor.execute(
                    f"SELECT 1 FROM {table} WHERE id = ANY(%(ids)s) ORDER BY id FOR SHARE",  # noqa: S608
                    {"ids": sorted(ids)},
                )


def _verify_claims(
    *, message: Message, claims: Sequence[ClaimedCitation]
) -> tuple[list[MessageCitation], list[MessageCaselawCitation], list[UnverifiedQuote]]:
    """Verify each claim against its source's text; sources are loaded and normalized once per turn.

    A KB document only counts if it belongs to the chat's matter: a quote claimed from another
    matter's document is unverified, never a citation. Each citation carries the digest of
    ``source[start:end]`` as verified here (:func:`passage_sha256`). Runs inside the turn's
    transaction: the sources' texts are read under :func:`_hold_source_texts`.
    """
    document_ids = {c.document_id for c in claims if c.document_id is not None}
    opinion_ids = {c.opinion_id for c in claims if c.opinion_id is not None}
    _hold_source_texts(document_ids=document_ids, opinion_ids=opinion_ids)
    project_id = message.chat.project_id
    documents = (
        {d.pk: d for d in Document.objects.filter(pk__in=document_ids, project_id=project_id)}
        if document_ids and project_id is not None
        else {}
    )
    opinions = {o.pk: o for o in CaselawOpinion.objects.filter(pk__in=opinion_ids)} if opinion_ids else {}
    normalized: dict[UUID, NormalizedSource] = {}

    def source_for(key: UUID, text: str) -> NormalizedSource:
        if key not in normalized:
            normalized[key] = NormalizedSource.build(text)
        return normalized[key]

    now = timezone.now()
    kb: list[MessageCitation] = []
    caselaw: list[MessageCaselawCitation] = []
    unverified: list[UnverifiedQuote] = []
    for claim in claims:
        if claim.document_id is not None and claim.opinion_id is None:
            document = documents.get(claim.document_id)
            if document is None:
                unverified.append(UnverifiedQuote(claim.quote, "unknown document"))
                continue
            match = source_for(document.pk, document.content).verify(claim.quote)
            if match is None:
                unverified.append(UnverifiedQuote(claim.quote, "not found in the document"))
                continue
            kb.append(
                MessageCitation(
                    message=message,
                    document=document,
                    quote=claim.quote,
                    source_offset_start=match.start,
                    source_offset_end=match.end,
                    verification_method=match.method,
                    verification_confidence=_confidence_decimal(match.confidence),
                    passage_sha256=passage_sha256(document.content[match.start : match.end]),
                    created_at=now,
                )
            )
        elif claim.opinion_id is not None and claim.document_id is None:
            opinion = opinions.get(claim.opinion_id)
            if opinion is None:
                unverified.append(UnverifiedQuote(claim.quote, "unknown opinion"))
                continue
            match = source_for(opinion.pk, opinion.text).verify(claim.quote)
            if match is None:
                unverified.append(UnverifiedQuote(claim.quote, "not found in the opinion"))
                continue
            caselaw.append(
                MessageCaselawCitation(
                    message=message,
                    opinion=opinion,
                    quote=claim.quote,
                    source_offset_start=match.start,
                    source_offset_end=match.end,
                    verification_method=match.method,
                    verification_confidence=match.confidence,
                    passage_sha256=passage_sha256(opinion.text[match.start : match.end]),
                    created_at=now,
                )
            )
        else:
            unverified.append(UnverifiedQuote(claim.quote, "the claim must name exactly one source"))
    return kb, caselaw, unverified


def _tool_source_rows(
    *, message: Message, consulted: Sequence[ConsultedSource], now: datetime.datetime
) -> list[MessageToolSource]:
    """Rows for the consulted sources, fitted to the columns: tool metadata must never cost the turn.

    Over-long values are cut to their column; a source with no kind cannot be classified and is
    dropped with a warning (the table refuses an empty kind).
    """
    rows = []
    for source in consulted:
        kind = source.source_kind.strip()[:32]
        if not kind:
            logger.warning("turn %s: dropped a consulted source with no kind (tool %r)", message.pk, source.tool)
            continue
        rows.append(
            MessageToolSource(
                message=message,
                source_kind=kind,
                tool=source.tool[:100],
                provider=source.provider[:50] if source.provider else None,
                label=source.label[:500],
                subtitle=source.subtitle[:500],
                url=source.url[:500],
                external_ref=source.external_ref[:200],
                created_at=now,
            )
        )
    return rows


def _send_post_finalize(message: Message) -> None:
    for receiver, result in post_finalize.send_robust(sender=Message, message=message):
        if isinstance(result, Exception):
            logger.error("post_finalize receiver %r failed for message %s", receiver, message.pk, exc_info=result)


def finalize_turn(
    *,
    message: Message,
    content: str,
    status: str,
    claimed_citations: Sequence[ClaimedCitation] = (),
    tool_sources: Sequence[ConsultedSource] = (),
) -> FinalizedTurn:
    """End a turn: verify its claimed quotes, persist the assistant message's final content and
    status with its citation and tool-source rows in one transaction, then send ``post_finalize``.

    Unverified quotes are returned (for the response), never stored as citations. Can be called
    again on an ``interrupted`` message (resume): new rows are added and the signal fires again.
    A ``complete`` or ``failed`` turn is final and is refused.
    """
    if status not in FINAL_STATUSES:
        raise ValueError(f"finalize_turn needs a final status, not {status!r}")
    if message.role != Message.Role.ASSISTANT:
        raise ValueError("only an assistant message ends a turn")
    if message.status in {Message.Status.COMPLETE, Message.Status.FAILED}:
        raise ValueError(f"message {message.pk} is already {message.status}; only an interrupted turn goes on")
    now = timezone.now()
    sources = _tool_source_rows(message=message, consulted=tool_sources, now=now)
    with transaction.atomic():
        # Verified inside the transaction: a quoted text cannot change before its citation commits.
        kb, caselaw, unverified = _verify_claims(message=message, claims=claimed_citations)
        message.content = content
        message.status = status
        message.finalized_at = now
        message.save(update_fields=["content", "status", "finalized_at"])
        MessageCitation.objects.bulk_create(kb)
        MessageCaselawCitation.objects.bulk_create(caselaw)
        MessageToolSource.objects.bulk_create(sources)
        # After commit: receivers (the ledger) can neither roll back the turn nor see a turn
        # that later rolls back; robust, so a failing receiver cannot turn a committed turn into an error.
        transaction.on_commit(lambda: _send_post_finalize(message), robust=True)
    if unverified:
        logger.info("turn %s: %d claimed quote(s) did not verify", message.pk, len(unverified))
    return FinalizedTurn(
        message=message, citations=kb, caselaw_citations=caselaw, tool_sources=sources, unverified=unverified
    )
