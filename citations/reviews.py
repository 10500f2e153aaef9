"""Recording a person's decision on a claim of a turn (issue 52), sealed in the transaction that records it.

Why here (``citations``) and not an app of its own: a decision is sealed into the matter's record, and the
record's chains, keys, ``verify_ledger`` and export are ``citations``'; an app above it would have to be imported
back by ``citations.integrity`` and ``citations.export`` to be checked and exported, an arrow pointing up.

:func:`record_decision` is the one writer. It checks the person's role (owner or reviewer of the turn's matter:
``chats.selectors.role_in_chat``), the input, and, for a corrected quote, re-verifies the correction against
the claim's own source (``lqai_verify.verification``) before the transaction; then, in one savepoint, it locks the
matter's chain head (``citations.seals.lock_heads``, the lock every seal of the matter takes: decisions and seals
of one matter are written one after the other, and a decision is never written between a turn's rows and its
seal), reads its chain's last decision and the turn's last seal, and inserts the decision as the next link,
signed, and moves the chain's head to it (``citations.ReviewChainHead``). A constant number of queries whatever the
matter's size. :func:`decision_problems` is
``verify_ledger``'s check of the decisions chains; :func:`decision_lines` the export's ``decisions.jsonl``.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any, TypeVar
from uuid import UUID

from django.conf import settings
from django.contrib.auth.base_user import AbstractBaseUser
from django.db import transaction
from django.utils import timezone

from authorities.selectors import check_statutes
from chats.case_citations import check_case_citations
from chats.models import DECIDING_ROLES, UNVERIFIED, CaseCitation, Chat, Document, Message, StatuteCitation
from chats.selectors import role_in_chat
from citations import keys
from citations.claims import Claim, claim_of
from citations.ledger import bounded_waits
from citations.models import Certificate, Decision, ReviewChainHead, ReviewDecision, TurnSeal
from citations.seals import chain_of, iso, lock_heads
from lqai_verify import decisions as sealed
from lqai_verify import record
from lqai_verify.verdict import case_claim_status, statute_claim_status
from lqai_verify.verification import verify_quote_detailed

# What a correction's machine check found (``correction_check["status"]``), beside a quote's method.
NOT_CHECKED = "not_checked"
SOURCE_GONE = "source_unavailable"


class NotAReviewer(PermissionError):
    """Only the matter's owner and its reviewers record decisions."""


class NoSuchClaim(LookupError):
    """The turn has no claim with this id."""


class DecisionInvalid(ValueError):
    """The decision's input is wrong: ``errors`` by field, in words."""

    def __init__(self, errors: dict[str, str]) -> None:
        super().__init__("; ".join(f"{name}: {error}" for name, error in errors.items()))
        self.errors = errors


def may_decide(*, user: AbstractBaseUser, chat: Chat) -> bool:
    """Whether ``user`` records decisions on the claims of ``chat``'s turns: its matter's owner or a reviewer
    of it (a matter-less chat: its owner). The one rule, for the API, the pages and :func:`record_decision`."""
    return role_in_chat(user, chat) in DECIDING_ROLES


def _validated(*, decision: str, source: str, corrected_text: str) -> None:
    errors = {}
    if decision not in Decision.values:
        errors["decision"] = f"One of {', '.join(Decision.values)}."
    elif decision == Decision.CONFIRMED and not source.strip():
        errors["source"] = "A confirmation says where the claim was checked (the reporter, database or document)."
    elif decision == Decision.CORRECTED and not corrected_text.strip():
        errors["corrected_text"] = "A correction gives the corrected text."
    if errors:
        raise DecisionInvalid(errors)


def check_correction(claim: Claim, corrected_text: str) -> dict[str, Any]:
    """The machine's check of a correction, as sealed with the decision, with the check the claim's kind gets in an
    answer: a corrected quote (of a document, an opinion or a statute section) re-verified against the claim's own
    source (its method, confidence and passage offsets, or ``unverified`` with the reason); a corrected case
    citation checked as an answer's are (``chats.case_citations``: the local opinions, then CourtListener when a
    token is set), its status as a case claim's; a corrected statute citation resolved in the authority library
    (``statute_<status>``). ``not_checked``, saying why, when the correction holds no citation of the claim's kind
    or the quotation names no source; ``source_unavailable`` when the quoted text is no longer held. May ask
    CourtListener: call it before any transaction."""
    if isinstance(claim.row, CaseCitation):
        return _case_correction(corrected_text)
    if isinstance(claim.row, StatuteCitation) and claim.row.kind == StatuteCitation.Kind.CITATION:
        return _statute_correction(corrected_text)
    if not _names_a_source(claim.row):  # an unchecked quotation, or a failed one naming no source
        return {
            "status": NOT_CHECKED,
            "detail": "the quotation names no source the machine holds: nothing to check the correction against",
        }
    text = _quoted_text(claim.row)
    if not text:
        return {"status": SOURCE_GONE, "detail": "the quoted source's text is not held: nothing to check against"}
    match, reason = verify_quote_detailed(corrected_text, text)
    if match is None:
        return {"status": str(UNVERIFIED), "detail": reason}
    return {
        "status": match.method,
        "confidence": round(float(match.confidence), 6),
        "source_offset_start": match.start,
        "source_offset_end": match.end,
        "detail": "",
    }


def _names_a_source(row: Any) -> bool:
    """Whether a quote row names the text it quotes: a document, an opinion or a statute section."""
    return any(getattr(row, f"{name}_id", None) is not None for name in ("document", "opinion", "section"))


def _quoted_text(row: Any) -> str | None:
    """The text a quote row was checked against: its document's, its opinion's or its statute section's."""
    if isinstance(row, StatuteCitation):
        return row.section.text if row.section is not None else None
    source = getattr(row, "document", None) or getattr(row, "opinion", None)
    return getattr(source, "content", None) if isinstance(source, Document) else getattr(source, "text", None)


def _case_correction(corrected_text: str) -> dict[str, Any]:
    checked = [c for c in check_case_citations(corrected_text) if c.kind != CaseCitation.Kind.STATUTE]
    if not checked:
        return {"status": NOT_CHECKED, "detail": "the correction holds no case citation the machine could read"}
    first = checked[0]
    return {
        "status": case_claim_status(first.status, first.pin_status),
        "citation": first.citation,
        "detail": first.detail,
    }


def _statute_correction(corrected_text: str) -> dict[str, Any]:
    cited = check_statutes(text=corrected_text).citations
    if not cited:
        return {
            "status": NOT_CHECKED,
            "detail": "the correction holds no statute or regulation citation the machine could read",
        }
    first = cited[0]
    return {
        "status": statute_claim_status("citation", first.status),
        "citation": first.cited or first.citation.written,
        "detail": first.reason,
    }


def record_decision(
    *,
    message: Message,
    claim_id: UUID,
    decision: str,
    by: AbstractBaseUser,
    source: str = "",
    corrected_text: str = "",
    note: str = "",
) -> ReviewDecision:
    """Record ``by``'s ``decision`` (``confirmed``, ``corrected`` or ``removed``) on the claim ``claim_id`` of
    the finalized turn ``message`` (whose chat the caller found through ``chats_visible_to``), sealed as the next
    link of its matter's decisions chain in the same savepoint. A later decision on the same claim supersedes
    this one; both stay.

    Raises :class:`NotAReviewer` unless ``by`` owns the matter or reviews it (a matter-less chat: its owner),
    :class:`DecisionInvalid` (by field) for an unknown decision, a confirmation without ``source`` or a
    correction without ``corrected_text``, :class:`NoSuchClaim` if the turn has no such claim. Nothing is
    written then."""
    chat: Chat = message.chat
    role = role_in_chat(by, chat)
    if role not in DECIDING_ROLES:  # may_decide(), with the role kept for the seal
        raise NotAReviewer("Only the matter's owner and its reviewers record decisions on its claims.")
    _validated(decision=decision, source=source, corrected_text=corrected_text)
    claim = claim_of(message, claim_id) if message.finalized_at is not None else None
    if claim is None:
        raise NoSuchClaim(f"This turn has no claim {claim_id}.")
    check = check_correction(claim, corrected_text) if decision == Decision.CORRECTED else {}
    turn_chain = chain_of(project_id=str(chat.project_id) if chat.project_id else None, chat_id=str(chat.pk))
    with transaction.atomic(), bounded_waits(settings.LQAI_LEDGER_TIMEOUT):
        lock_heads({turn_chain: {"project": chat.project_id, "chat": chat.pk}})
        chain = sealed.decisions_chain(turn_chain)
        last = ReviewDecision.objects.filter(chain=chain).order_by("-sequence").values("sequence", "seal_sha256")
        previous = last.first() or {"sequence": 0, "seal_sha256": ""}
        turn_seal = (
            TurnSeal.objects.filter(message_id=message.pk)
            .order_by("-finalize_number")
            .values_list("seal_sha256", flat=True)
            .first()
        )
        row = ReviewDecision(
            message_id=message.pk,
            claim_table=claim.kind.table,
            claim_id=claim.id,
            decision=decision,
            source=source.strip(),
            corrected_text=corrected_text.strip() if decision == Decision.CORRECTED else "",
            correction_check=check,
            note=note.strip(),
            decided_by_id=by.pk,
            reviewer=by.get_username(),
            role=str(role),
            decided_at=timezone.now(),
            chain=chain,
            sequence=previous["sequence"] + 1,
            previous_sha256=previous["seal_sha256"],
            turn_seal_sha256=turn_seal or "",
            key_fingerprint=keys.current_fingerprint(),
        )
        fields = decision_fields(row)
        row.seal_sha256 = sealed.decision_sha256(fields)
        row.signature = record.sign(keys.signing_key(), sealed.decision_payload(fields))
        row.save(force_insert=True)
        move_review_head(chain=chain, sequence=row.sequence, digest=row.seal_sha256, chat=chat)
    return row


def move_review_head(*, chain: str, sequence: int, digest: str, chat: Chat) -> None:
    """Move the head of the decisions or certificates ``chain`` of ``chat``'s matter (or of the matter-less
    ``chat``) to its link just written (#``sequence``, ``digest``), creating it at its first: one upsert, in the
    transaction that wrote the link, under the lock of the matter's turn chain head (``citations.seals.lock_heads``)
    that the writer holds. The triggers of ``citations.0025`` let a head only move forward to its chain's last link."""
    ReviewChainHead.objects.bulk_create(
        [
            ReviewChainHead(
                chain=chain,
                sequence=sequence,
                seal_sha256=digest,
                project_id=chat.project_id,
                chat_id=None if chat.project_id else chat.pk,
            )
        ],
        update_conflicts=True,
        unique_fields=["chain"],
        update_fields=["sequence", "seal_sha256"],
    )


def decision_fields(row: ReviewDecision) -> dict[str, Any]:
    """A decision as sealed (``lqai_verify.decisions``): its fields and its link, without digest and signature."""
    return {
        "id": str(row.pk),
        "message": str(row.message_id),
        "claim": f"{row.claim_table}:{row.claim_id}",
        "decision": row.decision,
        "source": row.source,
        "corrected_text": row.corrected_text,
        "correction_check": row.correction_check,
        "note": row.note,
        "reviewer": row.reviewer,
        "role": row.role,
        "decided_at": iso(row.decided_at),
        "turn_seal_sha256": row.turn_seal_sha256,
        "chain": row.chain,
        "sequence": row.sequence,
        "previous_sha256": row.previous_sha256,
        "key_fingerprint": row.key_fingerprint,
    }


def decision_line(row: ReviewDecision) -> dict[str, Any]:
    """A decision as the export's ``decisions.jsonl`` and the checks read it: sealed fields, digest, signature."""
    return {**decision_fields(row), "seal_sha256": row.seal_sha256, "signature": row.signature}


Link = TypeVar("Link", ReviewDecision, Certificate)


def chain_pages(model: type[Link], chain: str | None, *, batch_size: int) -> Iterator[list[Link]]:
    """The links of ``model`` (decisions or certificates; of one chain, or of every one) in chain order, a keyset
    page at a time (each table's unique ``(chain, sequence)``): memory stays flat."""
    after: tuple[str, int] | None = None
    while True:
        page = model.objects.order_by("chain", "sequence")
        if chain is not None:
            page = page.filter(chain=chain)
        if after is not None:
            page = page.filter(chain__gte=after[0]).exclude(chain=after[0], sequence__lte=after[1])
        rows = list(page[:batch_size])
        if not rows:
            return
        yield rows
        after = (rows[-1].chain, rows[-1].sequence)


def decision_lines(turn_chain: str, *, batch_size: int = 2_000) -> Iterator[dict[str, Any]]:
    """The decisions of the turn chain's matter (or matter-less chat), in chain order, as exported."""
    for page in chain_pages(ReviewDecision, sealed.decisions_chain(turn_chain), batch_size=batch_size):
        yield from map(decision_line, page)


def decision_problems(
    *, turn_chain: str | None = None, batch_size: int = 2_000
) -> Iterator[tuple[dict[str, Any], str]]:
    """``verify_ledger``'s check of the decisions (of one matter's chain, or of all): each one recomputed from
    its row and checked against its link and signature (``lqai_verify.decisions.chain_problems``); yields
    ``(decision line, problem)``. Keyset pages: memory stays flat."""
    public_keys = keys.public_keys()
    only = None if turn_chain is None else sealed.decisions_chain(turn_chain)
    last: dict[str, Any] | None = None
    for page in chain_pages(ReviewDecision, only, batch_size=batch_size):
        lines = [decision_line(row) for row in page]
        start = 0
        while start < len(lines):
            chain = lines[start]["chain"]
            end = start
            while end < len(lines) and lines[end]["chain"] == chain:
                end += 1
            after = last if last is not None and last["chain"] == chain else None
            for line, what in sealed.chain_problems(lines[start:end], key_of=public_keys.get, after=after):
                yield dict(line), what
            last = lines[end - 1]
            start = end


def decisions_count(turn_chain: str | None = None) -> int:
    decisions = ReviewDecision.objects.all()
    if turn_chain is not None:
        decisions = decisions.filter(chain=sealed.decisions_chain(turn_chain))
    return decisions.count()
