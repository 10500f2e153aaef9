"""Services of the chat domain: writes go through here.

:func:`finalize_turn` is the one way a chat turn ends, whatever the view
(single-shot, streamed tool loop, resume) or outcome (complete, interrupted,
failed). It verifies every claimed quote against its source, checks the case
citations written in the answer (``chats.case_citations``), persists the
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

from django.contrib.auth.base_user import AbstractBaseUser
from django.db import transaction
from django.utils import timezone

from chats.case_citations import CheckedCitation, check_case_citations
from chats.models import (
    CaselawOpinion,
    Chat,
    Document,
    Message,
    MessageCaseCitation,
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
    case_citations: list[MessageCaseCitation] = field(default_factory=list)


def create_chat(*, owner: AbstractBaseUser, project: Project | None = None, title: str = "") -> Chat:
    """Open a chat; the caller has checked that ``owner`` may use ``project``."""
    return Chat.objects.create(owner_id=owner.pk, project=project, title=title)


def start_turn(*, chat: Chat, content: str, assistant_status: str = Message.Status.PENDING) -> tuple[Message, Message]:
    """Record the user's message and the assistant message for the turn (``pending``, or
    ``streaming`` for a streamed turn so that a disconnect before the first event leaves a record)."""
    with transaction.atomic():
        user_message = Message.objects.create(
            chat=chat, role=Message.Role.USER, content=content, status=Message.Status.COMPLETE
        )
        assistant_message = Message.objects.create(
            chat=chat, role=Message.Role.ASSISTANT, content="", status=assistant_status
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


def _case_citation_rows(*, message: Message, content: str, now: datetime.datetime) -> list[MessageCaseCitation]:
    """Rows for the case citations of ``content``, checked (see ``chats.case_citations``), except the spans
    the message already has (a resumed turn keeps the rows of what it had written before).

    The check never fails the turn: an error in it is logged and the turn is finalized without rows.
    """
    try:
        checked: list[CheckedCitation] = check_case_citations(content)
    except Exception:
        logger.exception("turn %s: the case-citation check failed; no case citations recorded", message.pk)
        return []
    if not checked:
        return []
    had = (
        set(message.case_citations.values_list("answer_offset_start", flat=True))
        if message.finalized_at is not None  # finalized before: a resume
        else set()
    )
    return [
        MessageCaseCitation(
            message=message,
            answer_offset_start=citation.start,
            answer_offset_end=citation.end,
            kind=citation.kind.value,
            citation=citation.citation[:200],
            case_name=citation.case_name[:500],
            status=citation.status.value,
            detail=citation.detail[:1000],
            opinion=citation.opinion,
            provider=citation.provider[:50],
            created_at=now,
        )
        for citation in checked
        if citation.start not in had
    ]


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
    """End a turn: verify its claimed quotes, check the case citations of its answer, persist the
    assistant message's final content and status with its citation, case-citation and tool-source rows
    in one transaction, then send ``post_finalize``.

    The case-citation check (and any CourtListener lookup it makes) runs before the transaction, so the
    turn's transaction never waits on it.

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
    case_citations = _case_citation_rows(message=message, content=content, now=now)
    with transaction.atomic():
        message.content = content
        message.status = status
        message.finalized_at = now
        message.save(update_fields=["content", "status", "finalized_at"])
        MessageCitation.objects.bulk_create(kb)
        MessageCaselawCitation.objects.bulk_create(caselaw)
        MessageToolSource.objects.bulk_create(sources)
        MessageCaseCitation.objects.bulk_create(case_citations)
        # After commit: receivers (the ledger) can neither roll back the turn nor see a turn
        # that later rolls back; robust, so a failing receiver cannot turn a committed turn into an error.
        transaction.on_commit(lambda: _send_post_finalize(message), robust=True)
    if unverified:
        logger.info("turn %s: %d claimed quote(s) did not verify", message.pk, len(unverified))
    return FinalizedTurn(
        message=message,
        citations=kb,
        caselaw_citations=caselaw,
        tool_sources=sources,
        unverified=unverified,
        case_citations=case_citations,
    )
