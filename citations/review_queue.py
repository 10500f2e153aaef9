"""The "needs review" queue of a matter (issue 52, item 4): its answered turns that a person must still look at
(verdict ``review`` or ``fail``) and that no certificate of verification covers yet, oldest first, each with what
is still open (``citations.certificates.open_claims``).

One page is a constant number of queries whatever the matter's size (the turns of the page by keyset on
``(finalized_at, id)``, then their questions, claims, decisions and seals, each in one query), so a matter of
10,000 turns reads one page at a time (``make bench``; benchmarks/RESULTS.md).
"""

from __future__ import annotations

import datetime
from collections import defaultdict
from dataclasses import dataclass
from typing import Any
from uuid import UUID

from django.db.models import Exists, OuterRef, Q

from chats.models import Message, Verdict
from citations.certificates import OpenClaim, open_claims
from citations.claims import CLAIM_KINDS, Claim
from citations.models import Certificate, ReviewDecision, TurnSeal

PAGE_SIZE = 25


@dataclass(frozen=True, slots=True)
class QueueItem:
    """One turn of the queue: the answer (with its chat), its question, its claims and what keeps it open."""

    answer: Message
    question: str
    claims: list[Claim]
    open: list[OpenClaim]

    @property
    def cursor(self) -> str:
        """The keyset after this item (the next page's ``after``)."""
        finalized_at = self.answer.finalized_at
        return f"{finalized_at.isoformat() if finalized_at else ''},{self.answer.pk}"


@dataclass(frozen=True, slots=True)
class QueuePage:
    items: list[QueueItem]
    next_after: str | None  # None: the last page


def parse_after(value: str | None) -> tuple[datetime.datetime, UUID] | None:
    """A page's ``after`` (``<finalized_at ISO>,<turn id>``); ``None`` for none or a value that is not one."""
    if not value or "," not in value:
        return None
    at, _, turn = value.rpartition(",")
    try:
        moment = datetime.datetime.fromisoformat(at)
        return (moment, UUID(turn)) if moment.tzinfo is not None else None
    except ValueError:
        return None


def claims_of_turns(messages: list[Message]) -> dict[UUID, list[Claim]]:
    """The claims of each of ``messages`` with their current decisions (``citations.claims.claims_of`` for many
    turns): one query per kind of claim and one for the decisions, whatever the number of turns."""
    ids = [message.pk for message in messages]
    current: dict[str, ReviewDecision] = {}
    for decision in ReviewDecision.objects.filter(message_id__in=ids).order_by("sequence"):
        current[f"{decision.claim_table}:{decision.claim_id}"] = decision
    claims: dict[UUID, list[Claim]] = defaultdict(list)
    for kind in CLAIM_KINDS.values():
        order = ("position", "id") if kind.quote else ("answer_offset_start", "id")
        rows: list[Any] = list(kind.model._default_manager.filter(message_id__in=ids).order_by("message_id", *order))
        for row in rows:
            claims[row.message_id].append(Claim(kind=kind, row=row, decision=current.get(f"{kind.table}:{row.pk}")))
    return claims


def review_queue(*, project_id: UUID, after: tuple[datetime.datetime, UUID] | None = None) -> QueuePage:
    """A page of the matter's review queue (:data:`PAGE_SIZE` turns after the keyset ``after``)."""
    certified = Certificate.objects.filter(message_id=OuterRef("pk"))
    turns = (
        Message.objects.filter(
            chat__project_id=project_id,
            role=Message.Role.ASSISTANT,
            finalized_at__isnull=False,
            verdict__in=[Verdict.REVIEW, Verdict.FAIL],
        )
        .exclude(Exists(certified))
        .select_related("chat")
        .defer("content")
        .order_by("finalized_at", "id")
    )
    if after is not None:
        turns = turns.filter(Q(finalized_at__gt=after[0]) | Q(finalized_at=after[0], id__gt=after[1]))
    page = list(turns[: PAGE_SIZE + 1])
    more, page = len(page) > PAGE_SIZE, page[:PAGE_SIZE]
    questions = dict(
        Message.objects.filter(pk__in=[m.reply_to_id for m in page if m.reply_to_id]).values_list("id", "content")
    )
    claims = claims_of_turns(page)
    seals = dict(
        TurnSeal.objects.filter(message_id__in=[m.pk for m in page])
        .order_by("message_id", "finalize_number")
        .values_list("message_id", "seal_sha256")
    )
    items = [
        QueueItem(
            answer=message,
            question=questions.get(message.reply_to_id, "") if message.reply_to_id else "",
            claims=claims.get(message.pk, []),
            open=open_claims(claims.get(message.pk, []), turn_seal=seals.get(message.pk), status=message.status),
        )
        for message in page
    ]
    return QueuePage(items=items, next_after=items[-1].cursor if more and items else None)
