"""The certificate of verification of a turn (issue 52, item 3): issued by the matter's owner or a reviewer once
no claim is open, sealed in the transaction that issues it.

:func:`open_claims` says what stands in the way (a claim that needs review without a decision; a failed claim
not removed or corrected; a turn not sealed). :func:`issue_certificate` is the one writer: in one savepoint it
locks the matter's chain head (``citations.seals.lock_heads``, the lock every seal and decision of the matter
takes, so no decision lands between the read of the claims and the certificate), reads the turn's claims with
their current decisions, refuses with :class:`ClaimsOpen` if any is open, builds the statement (plain data:
what the machine found, the sealed decisions it names, what nobody checked, the court's wording), renders its
text (``lqai_verify.certificates.render_text``, which the offline verifier runs again), and inserts it as the
next link of the matter's certificates chain, signed. A constant number of queries whatever the matter's size.
:func:`certificate_problems` is ``verify_ledger``'s check; :func:`certificate_lines` the export's
``certificates.jsonl``.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

from django.conf import settings
from django.contrib.auth.base_user import AbstractBaseUser
from django.db import transaction
from django.utils import timezone

from chats.models import DECIDING_ROLES, CaseCitation, CaselawOpinion, Chat, Document, Message, StatuteCitation
from chats.selectors import role_in_chat
from citations import keys
from citations.claims import Claim, claims_of
from citations.ledger import bounded_waits
from citations.models import Certificate, Decision, ReviewDecision, TurnSeal
from citations.reviews import NOT_CHECKED as CORRECTION_NOT_CHECKED
from citations.reviews import SOURCE_GONE, NotAReviewer, chain_pages, decision_line, move_review_head
from citations.seals import chain_of, iso, lock_heads
from lqai_verify import certificates as sealed
from lqai_verify import record
from lqai_verify.statuses import status_in_words
from lqai_verify.verdict import FAIL, verdict_of
from lqai_verify.verification import VERIFIER_VERSION

KIND_WORDS = {
    "kb_quote": "Quotation of a document",
    "caselaw_quote": "Quotation of an opinion",
    "case_citation": "Case cited",
}


@dataclass(frozen=True, slots=True)
class OpenClaim:
    """What stands in the way of a certificate: a claim (``claim`` None: the turn itself) and why, in words."""

    claim: Claim | None
    why: str


class ClaimsOpen(Exception):
    """The certificate cannot be issued yet: ``open`` says which claims are open and why."""

    def __init__(self, open_claims: list[OpenClaim]) -> None:
        super().__init__(f"{len(open_claims)} claim(s) of this turn are open: {open_claims[0].why}")
        self.open = open_claims


def _failed(claim: Claim) -> bool:
    if claim.kind.quote:
        return verdict_of(methods=[claim.status]) == FAIL
    return verdict_of(methods=[], case_statuses=[claim.status]) == FAIL


def open_claims(
    claims: list[Claim], *, turn_seal: str | None, status: str = Message.Status.COMPLETE
) -> list[OpenClaim]:
    """What keeps a certificate from being issued: an answer that did not complete (``status``), a turn whose
    record is not sealed (``turn_seal`` None), each claim that needs review and has no current decision, and each
    failed claim whose current decision neither removes nor corrects it. Empty: a certificate can be issued."""
    found = []
    if status != Message.Status.COMPLETE:
        found.append(OpenClaim(None, f"the answer did not complete ({status}): there is no whole answer to certify"))
    if not turn_seal:
        found.append(OpenClaim(None, "the turn's record is not sealed yet (manage.py seal_turns)"))
    for claim in claims:
        decision = claim.decision
        if _failed(claim) and (decision is None or decision.decision == Decision.CONFIRMED):
            found.append(
                OpenClaim(
                    claim,
                    "the machine found it wrong "
                    f"({status_in_words(claim.status).words}): it must be corrected or removed before it is filed",
                )
            )
        elif claim.needs_review and decision is None:
            found.append(
                OpenClaim(claim, f"it needs review ({status_in_words(claim.status).words}) and nobody decided on it")
            )
    return found


def _held_from(provider: str) -> str:
    if provider == "courtlistener":
        return "its text as lqai fetched it from CourtListener"
    if provider == "local":
        return "its text as loaded into lqai's opinion store"
    return f"its text as lqai holds it, from {provider}"


def _statute_source(row: StatuteCitation) -> str:
    """The release of the code a statute row was checked against, in words (an official edition, or not: a U.S.
    Code release point is the Law Revision Counsel's current text, not the printed official edition); or that none
    was found."""
    if not row.release_point:
        return "no release of this code held by lqai's authority library"
    official = "official edition" if row.release_official else "not the official edition"
    section = row.identifier or row.citation
    return f"{section} in {row.release_label or row.release_point} ({official}), as lqai's authority library holds it"


def _labels(claims: list[Claim]) -> dict[str, str]:
    """Each claim's source in words, by claim key: the document's title, the opinion's name and citation, or a
    case citation as checked. Two queries at most (the titles of the documents and opinions quoted)."""
    document_ids = {claim.row.document_id for claim in claims if getattr(claim.row, "document_id", None)}
    opinion_ids = {
        claim.row.opinion_id
        for claim in claims
        if getattr(claim.row, "opinion_id", None) and not isinstance(claim.row, CaseCitation)
    }
    case_opinions = {claim.row.opinion_id for claim in claims if isinstance(claim.row, CaseCitation)} - {None}
    titles = dict(Document.objects.filter(pk__in=document_ids).values_list("id", "title")) if document_ids else {}
    opinions = (
        {
            o["id"]: ", ".join(p for p in (o["case_name"], o["citation"]) if p) + f" ({_held_from(o['provider'])})"
            for o in CaselawOpinion.objects.filter(pk__in=opinion_ids | case_opinions).values(
                "id", "case_name", "citation", "provider"
            )
        }
        if opinion_ids | case_opinions
        else {}
    )
    labels = {}
    for claim in claims:
        row = claim.row
        if isinstance(row, CaseCitation):
            found = opinions.get(row.opinion_id) if row.opinion_id else None
            labels[claim.key] = found or "none found by lqai"
        elif isinstance(row, StatuteCitation):
            labels[claim.key] = _statute_source(row)
        elif getattr(row, "document_id", None):
            labels[claim.key] = f"the matter's document {titles.get(row.document_id, '(gone)')!r}"
        elif getattr(row, "opinion_id", None):
            labels[claim.key] = f"the opinion {opinions.get(row.opinion_id, '(gone)')}"
        else:
            labels[claim.key] = "no source held by lqai"
    return labels


def _detail(claim: Claim) -> str:
    """The machine's own reason, where it gave one: a case citation's check, or why a quote failed."""
    if isinstance(claim.row, CaseCitation):
        return str(claim.row.detail)
    if isinstance(claim.row, StatuteCitation):
        return str(claim.row.reason)
    return str(getattr(claim.row, "unverified_reason", "") or "")


def _correction_words(check: dict[str, Any]) -> str:
    status = check.get("status", "")
    if status == CORRECTION_NOT_CHECKED:
        return f"not checked by the machine ({check.get('detail', '')})"
    if status == SOURCE_GONE:
        return "not checked: the source's text is not held"
    return status_in_words(status).words + (f" ({check['detail']})" if check.get("detail") else "")


def _decision_named(decision: ReviewDecision) -> dict[str, Any]:
    return {
        "id": str(decision.pk),
        "seal_sha256": decision.seal_sha256,
        "decision": decision.decision,
        "source": decision.source,
        "corrected_text": decision.corrected_text,
        "note": decision.note,
        "reviewer": decision.reviewer,
        "role": decision.role,
        "decided_at": iso(decision.decided_at),
    }


def statement_of(*, message: Message, claims: list[Claim], turn_seal: tuple[int, str], question: str) -> dict[str, Any]:
    """The certificate's data for ``message`` (its chat and matter read with it): each claim with what the
    machine found and its current decision (named by id and digest, with its sealed words), what nobody checked,
    the matter's court template and judge's wording."""
    chat: Chat = message.chat
    project = chat.project
    court = sealed.COURTS[project.certificate_court if project is not None else sealed.DEFAULT_COURT]
    labels = _labels(claims)
    listed = []
    for number, claim in enumerate(claims, start=1):
        words = status_in_words(claim.status).words
        entry: dict[str, Any] = {
            "number": number,
            "claim": claim.key,
            "kind": claim.kind.name,
            "kind_words": KIND_WORDS.get(claim.kind.name, claim.kind.name),
            "text": claim.text,
            "source": labels[claim.key],
            "machine": f"{words}{f' ({detail})' if (detail := _detail(claim)) else ''}",
            "decision": None if claim.decision is None else _decision_named(claim.decision),
        }
        if claim.decision is not None and claim.decision.decision == Decision.CORRECTED:
            entry["correction_check"] = _correction_words(claim.decision.correction_check)
        listed.append(entry)
    return {
        "subject": {
            "matter": project.name if project is not None else None,
            "chat": chat.title,
            "turn": str(message.pk),
            "question": question,
            "answered_at": iso(message.finalized_at),
            "turn_seal_sequence": turn_seal[0],
            "turn_seal_sha256": turn_seal[1],
        },
        "court": {"key": court.key, "name": court.name, "certification": court.certification},
        "judge_wording": project.judge_wording if project is not None else "",
        "verifier_version": VERIFIER_VERSION,
        "claims": listed,
        "not_checked": list(sealed.NOT_CHECKED),
    }


def issue_certificate(*, message: Message, by: AbstractBaseUser) -> Certificate:
    """Issue ``by``'s certificate of verification of the finalized turn ``message`` (whose chat, with its
    matter, the caller found through ``chats_visible_to``), sealed as the next link of its matter's certificates
    chain in the same savepoint. A later certificate of the same turn supersedes it; both stay.

    Raises :class:`citations.reviews.NotAReviewer` unless ``by`` owns the matter or reviews it (a matter-less
    chat: its owner), :class:`ClaimsOpen` naming every open claim (:func:`open_claims`). Nothing is written then.
    """
    chat: Chat = message.chat
    role = role_in_chat(by, chat)
    if role not in DECIDING_ROLES:
        raise NotAReviewer("Only the matter's owner and its reviewers issue its certificates.")
    turn_chain = chain_of(project_id=str(chat.project_id) if chat.project_id else None, chat_id=str(chat.pk))
    with transaction.atomic(), bounded_waits(settings.LQAI_LEDGER_TIMEOUT):
        lock_heads({turn_chain: {"project": chat.project_id, "chat": chat.pk}})
        claims = claims_of(message)
        seal = (
            TurnSeal.objects.filter(message_id=message.pk)
            .order_by("-finalize_number")
            .values_list("sequence", "seal_sha256")
            .first()
        )
        blocking = open_claims(claims, turn_seal=seal[1] if seal else None, status=message.status)
        if blocking or seal is None:  # open_claims() names an unsealed turn
            raise ClaimsOpen(blocking)
        question = (
            Message.objects.filter(pk=message.reply_to_id).values_list("content", flat=True).first()
            if message.reply_to_id
            else None
        ) or ""
        chain = sealed.certificates_chain(turn_chain)
        last = Certificate.objects.filter(chain=chain).order_by("-sequence").values("sequence", "seal_sha256")
        previous = last.first() or {"sequence": 0, "seal_sha256": ""}
        issued_at = timezone.now()
        row = Certificate(
            message_id=message.pk,
            statement=statement_of(message=message, claims=claims, turn_seal=seal, question=question),
            issued_by_id=by.pk,
            issuer=by.get_username(),
            role=str(role),
            issued_at=issued_at,
            turn_seal_sha256=seal[1],
            chain=chain,
            sequence=previous["sequence"] + 1,
            previous_sha256=previous["seal_sha256"],
            key_fingerprint=keys.current_fingerprint(),
        )
        row.text = sealed.render_text(
            row.statement,
            issuer=row.issuer,
            role=row.role,
            issued_at=iso(issued_at) or "",
            key_fingerprint=row.key_fingerprint,
        )
        fields = certificate_fields(row)
        row.seal_sha256 = sealed.certificate_sha256(fields)
        row.signature = record.sign(keys.signing_key(), sealed.certificate_payload(fields))
        row.save(force_insert=True)
        move_review_head(chain=chain, sequence=row.sequence, digest=row.seal_sha256, chat=chat)
    return row


def certificate_fields(row: Certificate) -> dict[str, Any]:
    """A certificate as sealed (``lqai_verify.certificates``): its fields and link, without digest and signature."""
    return {
        "id": str(row.pk),
        "message": str(row.message_id),
        "turn_seal_sha256": row.turn_seal_sha256,
        "issuer": row.issuer,
        "role": row.role,
        "issued_at": iso(row.issued_at),
        "statement": row.statement,
        "text": row.text,
        "chain": row.chain,
        "sequence": row.sequence,
        "previous_sha256": row.previous_sha256,
        "key_fingerprint": row.key_fingerprint,
    }


def certificate_line(row: Certificate) -> dict[str, Any]:
    """A certificate as the export's ``certificates.jsonl`` and the checks read it."""
    return {**certificate_fields(row), "seal_sha256": row.seal_sha256, "signature": row.signature}


def certificate_lines(turn_chain: str, *, batch_size: int = 500) -> Iterator[dict[str, Any]]:
    """The certificates of the turn chain's matter (or matter-less chat), in chain order, as exported."""
    for page in chain_pages(Certificate, sealed.certificates_chain(turn_chain), batch_size=batch_size):
        yield from map(certificate_line, page)


def certificate_problems(
    *, turn_chain: str | None = None, batch_size: int = 500
) -> Iterator[tuple[dict[str, Any], str]]:
    """``verify_ledger``'s check of the certificates (of one matter's chain, or of all): each recomputed from its
    row, its text rendered again from its statement, its link and signature checked, and each decision it names
    checked against the sealed decision row; yields ``(certificate line, problem)``."""
    public_keys = keys.public_keys()
    only = None if turn_chain is None else sealed.certificates_chain(turn_chain)
    last: dict[str, Any] | None = None
    for page in chain_pages(Certificate, only, batch_size=batch_size):
        lines = [certificate_line(row) for row in page]
        named_ids = {
            named["id"] for line in lines for _, named in sealed.named_decisions(line["statement"]) if "id" in named
        }
        held = {str(d.pk): decision_line(d) for d in ReviewDecision.objects.filter(pk__in=named_ids)}
        for line in lines:
            after = last if last is not None and last["chain"] == line["chain"] else None
            for bad, what in sealed.chain_problems([line], key_of=public_keys.get, after=after):
                yield dict(bad), what
            for claim, named in sealed.named_decisions(line["statement"]):
                for what in sealed.decision_differences(named, claim, held.get(str(named.get("id")))):
                    yield line, what
            last = line


def certificates_count(turn_chain: str | None = None) -> int:
    certificates = Certificate.objects.all()
    if turn_chain is not None:
        certificates = certificates.filter(chain=sealed.certificates_chain(turn_chain))
    return certificates.count()


def latest_certificate(message: Message) -> Certificate | None:
    """The turn's latest certificate, if any. One query."""
    return Certificate.objects.filter(message_id=message.pk).order_by("-sequence").first()
