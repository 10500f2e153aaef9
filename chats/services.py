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
import logging
from collections.abc import Sequence
from dataclasses import dataclass, field
from decimal import ROUND_HALF_UP, Decimal
from uuid import UUID

from django.conf import settings
from django.contrib.auth import get_user_model
from django.contrib.auth.base_user import AbstractBaseUser
from django.db import transaction
from django.db.models import Q
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
from chats.selectors import open_streams_of
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


class TooManyStreams(Exception):
    """The user already has ``settings.LQAI_MAX_CONCURRENT_STREAMS`` streams open."""

    def __init__(self, limit: int) -> None:
        super().__init__(f"You already have {limit} answers streaming; wait for one to finish.")
        self.limit = limit


def stale_before() -> datetime.datetime:
    """A ``pending``/``streaming`` turn whose last progress is older than this has stopped (its worker died)."""
    return timezone.now() - datetime.timedelta(seconds=settings.LQAI_STALE_TURN_SECONDS)


def _reserve_stream(author: AbstractBaseUser | None) -> None:
    """Refuse a new stream for ``author`` at the cap; call inside the transaction that opens the stream.

    Counted in the database (the author's ``streaming`` answers with recent progress), so the cap holds
    across server processes; on PostgreSQL the author's row is locked first, so that concurrent starts
    count one after the other (SQLite runs one writing transaction at a time).
    """
    limit = settings.LQAI_MAX_CONCURRENT_STREAMS
    if limit <= 0 or author is None:
        return
    get_user_model().objects.select_for_update().filter(pk=author.pk).exists()
    if open_streams_of(author, progressed_since=stale_before()).count() >= limit:
        raise TooManyStreams(limit)


def start_turn(
    *,
    chat: Chat,
    content: str,
    author: AbstractBaseUser | None = None,
    assistant_status: str = Message.Status.PENDING,
) -> tuple[Message, Message]:
    """Record the user's message and the assistant message for the turn (``pending``, or
    ``streaming`` for a streamed turn so that a disconnect before the first event leaves a record).

    A streamed turn counts against its author's concurrent streams: :class:`TooManyStreams` at the cap,
    and nothing is recorded.
    """
    author_id = author.pk if author is not None else None
    with transaction.atomic():
        if assistant_status == Message.Status.STREAMING:
            _reserve_stream(author)
        user_message = Message.objects.create(
            chat=chat, role=Message.Role.USER, content=content, status=Message.Status.COMPLETE, author_id=author_id
        )
        assistant_message = Message.objects.create(
            chat=chat, role=Message.Role.ASSISTANT, content="", status=assistant_status, author_id=author_id
        )
    return user_message, assistant_message


def reopen_interrupted_turn(*, message: Message, resumed_by: AbstractBaseUser | None = None) -> bool:
    """Claim an assistant message for a resume by moving it to ``streaming``: an ``interrupted`` one,
    or a ``pending``/``streaming`` one whose progress stopped :data:`LQAI_STALE_TURN_SECONDS` ago (its
    worker was killed).

    A conditional update, so that of two concurrent resumes exactly one wins; returns False
    (and changes nothing) if the message is not resumable (any more). The resumed stream counts
    against ``resumed_by``'s concurrent streams (:class:`TooManyStreams`).
    """
    resumable = Q(status=Message.Status.INTERRUPTED) | Q(
        status__in=[Message.Status.PENDING, Message.Status.STREAMING], updated_at__lt=stale_before()
    )
    now = timezone.now()
    with transaction.atomic():
        _reserve_stream(resumed_by)
        claimed = (
            Message.objects.filter(pk=message.pk, role=Message.Role.ASSISTANT)
            .filter(resumable)
            .update(status=Message.Status.STREAMING, updated_at=now)
        )
    if claimed:
        message.status = Message.Status.STREAMING
        message.updated_at = now
    return bool(claimed)


def record_progress(*, message: Message) -> None:
    """Note that an unfinished turn is alive (see :attr:`Message.updated_at`): a running stream calls it
    now and then, so that it is neither resumed as stuck nor left out of its author's open streams."""
    now = timezone.now()
    Message.objects.filter(pk=message.pk, status__in=[Message.Status.PENDING, Message.Status.STREAMING]).update(
        updated_at=now
    )
    message.updated_at = now


def _confidence_decimal(value: float) -> Decimal:
    return Decimal(str(value)).quantize(Decimal("0.001"), rounding=ROUND_HALF_UP)


def _verify_claims(
    *, message: Message, claims: Sequence[ClaimedCitation]
) -> tuple[list[MessageCitation], list[MessageCaselawCitation], list[UnverifiedQuote]]:
    """Verify each claim against its source's text; sources are loaded and normalized once per turn.

    A KB document only counts if it belongs to the chat's matter: a quote claimed from another
    matter's document is unverified, never a citation.
    """
    document_ids = {c.document_id for c in claims if c.document_id is not None}
    opinion_ids = {c.opinion_id for c in claims if c.opinion_id is not None}
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
    kb, caselaw, unverified = _verify_claims(message=message, claims=claimed_citations)
    now = timezone.now()
    sources = _tool_source_rows(message=message, consulted=tool_sources, now=now)
    with transaction.atomic():
        message.content = content
        message.status = status
        message.finalized_at = message.updated_at = now
        message.save(update_fields=["content", "status", "finalized_at", "updated_at"])
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
