"""Reads of a turn's claims for review (issue 52): each quote, case citation and statute row of a turn, its status
in the machine's check, whether it needs a person (the verdict's own rule, ``lqai_verify.verdict``), and its
current decision (the claim's last ``ReviewDecision``).

A kind of claim is one entry of :data:`CLAIM_KINDS`, by its table (as a seal names its rows): a new kind adds one
entry, with its model and how to read its text and status, and its table to ``citations.models.CLAIM_TABLES``.
Every read here is a constant number of queries, whatever the turn's size.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any
from uuid import UUID

from django.db import models

from chats.models import CaseCitation, DocumentQuote, Message, OpinionQuote, StatuteCitation
from citations.models import ReviewDecision
from lqai_verify import record
from lqai_verify.verdict import PASS, case_claim_status, statute_claim_status, verdict_of


@dataclass(frozen=True, slots=True)
class ClaimKind:
    """One kind of claim: its table (``lqai_verify.record``'s name), its name in the API, its model, and how to
    read a row's text and status; ``quote``: its status is a quote row's method (the verdict rule reads it as
    one; a statute row's status is its own code, read as a citation's)."""

    table: str
    name: str
    model: type[models.Model]
    text: Callable[[Any], str]
    status: Callable[[Any], str]
    quote: bool


def _quote_status(row: DocumentQuote | OpinionQuote) -> str:
    return row.verification_method


def _case_status(row: CaseCitation) -> str:
    return case_claim_status(row.status, row.pin_status)


def _case_text(row: CaseCitation) -> str:
    named = f"{row.case_name}, {row.citation}" if row.case_name else row.citation
    return f"{named}, {row.pin}" if row.pin else named


def _statute_status(row: StatuteCitation) -> str:
    return statute_claim_status(row.kind, row.status)


def _statute_text(row: StatuteCitation) -> str:
    """A statute quote's words; a citation as a lawyer cites it, with the release checked when there is one."""
    return row.quote if row.kind == StatuteCitation.Kind.QUOTE else (row.cited or row.citation)


CLAIM_KINDS: dict[str, ClaimKind] = {
    kind.table: kind
    for kind in (
        ClaimKind(record.KB, "kb_quote", DocumentQuote, lambda row: row.quote, _quote_status, quote=True),
        ClaimKind(record.CASELAW, "caselaw_quote", OpinionQuote, lambda row: row.quote, _quote_status, quote=True),
        ClaimKind(record.CASE, "case_citation", CaseCitation, _case_text, _case_status, quote=False),
        ClaimKind(record.STATUTE, "statute", StatuteCitation, _statute_text, _statute_status, quote=False),
    )
}


def needs_review(kind: ClaimKind, status: str) -> bool:
    """Whether a claim of ``kind`` with ``status`` needs a person: whatever the verdict's rule does not pass on
    its own (an altered or failed quote; a case citation not verified, or whose pin nothing could check)."""
    if kind.quote:
        return verdict_of(methods=[status]) != PASS
    return verdict_of(methods=[], case_statuses=[status]) != PASS


@dataclass(frozen=True, slots=True)
class Claim:
    """One claim of a turn, with its current decision (``None``: nobody decided on it yet)."""

    kind: ClaimKind
    row: Any
    decision: ReviewDecision | None = None

    @property
    def id(self) -> UUID:
        return UUID(str(self.row.pk))

    @property
    def key(self) -> str:
        """The claim as a seal names its row: ``<table>:<id>``."""
        return f"{self.kind.table}:{self.id}"

    @property
    def text(self) -> str:
        return self.kind.text(self.row)

    @property
    def status(self) -> str:
        return self.kind.status(self.row)

    @property
    def needs_review(self) -> bool:
        return needs_review(self.kind, self.status)


def _rows(kind: ClaimKind, message: Message, ids: list[UUID] | None = None) -> list[Any]:
    rows = kind.model._default_manager.filter(message=message)
    if ids is not None:
        rows = rows.filter(pk__in=ids)
    rows = rows.order_by("position", "id") if kind.quote else rows.order_by("answer_offset_start", "id")
    return list(rows)


def current_decisions(message: Message) -> dict[str, ReviewDecision]:
    """The current decision of each decided claim of the turn, by claim key: its last (one query, through
    ``review_decisions_claim_idx``; every decision of the turn is read, superseded ones included)."""
    current: dict[str, ReviewDecision] = {}
    for decision in ReviewDecision.objects.filter(message=message).order_by("sequence"):
        current[f"{decision.claim_table}:{decision.claim_id}"] = decision
    return current


def claims_of(message: Message) -> list[Claim]:
    """The turn's claims, by kind (KB quotes, caselaw quotes, case citations, statute rows), each in answer order,
    with its current decision: one query per kind and one for the decisions."""
    decisions = current_decisions(message)
    claims = []
    for kind in CLAIM_KINDS.values():
        for row in _rows(kind, message):
            claims.append(Claim(kind=kind, row=row, decision=decisions.get(f"{kind.table}:{row.pk}")))
    return claims


def claim_of(message: Message, claim_id: UUID) -> Claim | None:
    """The turn's claim with id ``claim_id`` (of any kind), without its decision; ``None`` if the turn has none.
    One query per kind."""
    for kind in CLAIM_KINDS.values():
        rows = _rows(kind, message, [claim_id])
        if rows:
            return Claim(kind=kind, row=rows[0])
    return None
