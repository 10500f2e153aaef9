"""Services of the chat domain: writes go through here.

:func:`finalize_turn` is the one way a chat turn ends, whatever the view
(single-shot, streamed tool loop, resume) or outcome (complete, interrupted,
failed). It verifies every claimed quote against its source, checks the case
citations written in the answer (``chats.case_citations``), persists the
assistant message and its per-turn rows in one transaction, and sends
:data:`chats.signals.post_finalize` inside that transaction, after the rows are
written, so that records built on top (the citation ledger) commit with the turn.
A turn is finalized exactly once: each run holds an attempt number, and the finalize checks it with the
message's row locked (:class:`TurnSuperseded` for a run that is no longer the turn's).
"""

from __future__ import annotations

import datetime
import hashlib
import logging
from collections.abc import Callable, Collection, Sequence
from dataclasses import dataclass, field
from typing import Any
from uuid import UUID

from django.conf import settings
from django.contrib.auth import get_user_model
from django.contrib.auth.base_user import AbstractBaseUser
from django.db import connection, transaction
from django.db.models import F, Q
from django.utils import timezone

from authorities import selectors as authority_library
from chats.answer_positions import place_claims
from chats.case_citations import CheckedCitation, StreamedCitations, check_case_citations
from chats.case_citations.pins import check_pins_against_quoted_passages
from chats.models import (
    UNCHECKED,
    UNVERIFIED,
    VERIFIED_METHODS,
    CaseCitation,
    CaselawOpinion,
    Chat,
    Document,
    DocumentQuote,
    Message,
    MessageToolSource,
    OpinionQuote,
    Project,
    SourceKind,
    StatuteCitation,
    Verdict,
    fit,
    fit_count,
)
from chats.selectors import open_streams_of, stale_before, stopped, stopped_turns
from chats.signals import post_finalize
from lqai_verify import verdict as verdict_rule
from lqai_verify.verification import NormalizedSources, QuoteMatch, alterations_record, context_flags_record

logger = logging.getLogger(__name__)

FINAL_STATUSES = frozenset({Message.Status.COMPLETE, Message.Status.INTERRUPTED, Message.Status.FAILED})


@dataclass(frozen=True, slots=True)
class ClaimedCitation:
    """A quote the assistant claims, and the source it claims: a KB document or a caselaw opinion.
    ``named_source`` is what the assistant called a source that the turn did not provide (the claim then
    names neither), kept for the failed claim's reason. ``unchecked_reason``: a quotation nothing could check
    (it names no source: a draft's quotation with no citation, or citing a case nothing resolved), recorded as an
    ``unchecked`` row with this reason, saying what would check it; the assistant's claims never have one."""

    quote: str
    document_id: UUID | None = None
    opinion_id: UUID | None = None
    named_source: str = ""
    unchecked_reason: str = ""


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
class TurnUsage:
    """What a model spent on a turn: the model that answered, the tokens of all of the turn's
    requests (None when the server did not report them) and the time spent waiting on it."""

    model_name: str
    prompt_tokens: int | None = None
    completion_tokens: int | None = None
    latency_ms: int | None = None


@dataclass(frozen=True, slots=True)
class UnverifiedQuote:
    """A claimed quote that did not verify, as recorded: its row's kind and id, and why it failed."""

    quote: str
    reason: str
    kind: str
    id: UUID
    # Where the claim stands in the answer, or None and why (chats.answer_positions).
    answer_start: int | None = None
    answer_end: int | None = None
    answer_unplaced_reason: str = ""


@dataclass(slots=True)
class FinalizedTurn:
    """What a finalize recorded: its verified quotes, the consulted sources, the claims that failed
    (stored too, as ``unverified`` rows of their quote table) and the quotations nothing could check (``unchecked``
    rows)."""

    message: Message
    citations: list[DocumentQuote] = field(default_factory=list)
    caselaw_citations: list[OpinionQuote] = field(default_factory=list)
    tool_sources: list[MessageToolSource] = field(default_factory=list)
    unverified: list[UnverifiedQuote] = field(default_factory=list)
    unchecked: list[DocumentQuote] = field(default_factory=list)
    case_citations: list[CaseCitation] = field(default_factory=list)
    statute_citations: list[StatuteCitation] = field(default_factory=list)


def create_chat(*, owner: AbstractBaseUser, project: Project | None = None, title: str = "") -> Chat:
    """Open a chat; the caller has checked that ``owner`` may use ``project``."""
    return Chat.objects.create(owner_id=owner.pk, project=project, title=title)


def set_legal_hold(*, project: Project, held: bool, by: AbstractBaseUser) -> Project:
    """Put matter ``project`` on legal hold, or lift it; the caller has checked that ``by`` may (its owner,
    or an operator in the admin). While held, the database refuses deleting the matter, its chats and its
    messages (rule ``lqai_legal_hold``). Logged with who did it."""
    updated = Project.objects.filter(pk=project.pk).update(legal_hold=held)
    if not updated:
        raise Project.DoesNotExist(f"no matter {project.pk}")
    project.legal_hold = held
    logger.info("matter %s: legal hold %s by user %s", project.pk, "set" if held else "lifted", by.pk)
    return project


class TurnSuperseded(Exception):
    """A run's finalize was refused: the turn is no longer this run's (a resume took it over, with a later
    attempt) or it is already final. Nothing of that run was written; the turn's current answer stands."""

    def __init__(self, *, message_id: UUID, attempt: int, current_attempt: int, status: str) -> None:
        super().__init__(
            f"turn {message_id}: attempt {attempt} is superseded (the turn is {status}, attempt {current_attempt}); "
            "nothing of it was written"
        )
        self.message_id = message_id
        self.attempt = attempt
        self.current_attempt = current_attempt
        self.status = status


class TooManyStreams(Exception):
    """The user already has ``settings.LQAI_MAX_CONCURRENT_STREAMS`` streams open."""

    def __init__(self, limit: int) -> None:
        super().__init__(f"You already have {limit} answers streaming; wait for one to finish.")
        self.limit = limit


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
    kind: str = Message.Kind.ANSWER,
) -> tuple[Message, Message]:
    """Record the user's message and the assistant message that answers it (``reply_to``), ``pending``,
    or ``streaming`` for a streamed turn so that a disconnect before the first event leaves a record. ``kind``:
    both messages' (a checked draft's turn is ``draft``).

    A streamed turn counts against its author's concurrent streams: :class:`TooManyStreams` at the cap,
    and nothing is recorded.
    """
    author_id = author.pk if author is not None else None
    with transaction.atomic():
        if assistant_status == Message.Status.STREAMING:
            _reserve_stream(author)
        user_message = Message.objects.create(
            chat=chat,
            role=Message.Role.USER,
            content=content,
            status=Message.Status.COMPLETE,
            author_id=author_id,
            kind=kind,
        )
        assistant_message = Message.objects.create(
            chat=chat,
            role=Message.Role.ASSISTANT,
            content="",
            status=assistant_status,
            reply_to=user_message,
            author_id=author_id,
            attempt=1,  # the claim of this first run (see finalize_turn)
            kind=kind,
        )
    return user_message, assistant_message


def reopen_interrupted_turn(*, message: Message, resumed_by: AbstractBaseUser | None = None) -> bool:
    """Claim an assistant message for a resume by moving it to ``streaming``: an ``interrupted`` one,
    or a ``pending``/``streaming`` one whose progress stopped :data:`LQAI_STALE_TURN_SECONDS` ago (its
    worker was killed).

    A conditional update, so that of two concurrent resumes exactly one wins; returns False
    (and changes nothing) if the message is not resumable (any more). The winner takes the next attempt
    number (``message.attempt`` is set to it): the run it starts is then the only one whose finalize is
    accepted, and a superseded run writes nothing. A finalize's transaction holds the message's row lock,
    so a resume arriving then waits for it and is refused (the turn is final). The resumed stream counts against
    ``resumed_by``'s concurrent streams (:class:`TooManyStreams`).
    """
    resumable = Q(status=Message.Status.INTERRUPTED) | stopped()
    with transaction.atomic():
        _reserve_stream(resumed_by)
        return _claim_turn(message, resumable)


def _claim_turn(message: Message, claimable: Q) -> bool:
    """Take the next attempt of ``message`` if it is ``claimable``, moving it to ``streaming`` (call inside a
    transaction): one conditional update, so that of two concurrent claims exactly one wins; the winner's
    ``message`` holds the attempt taken. False (nothing changed) if the message is not claimable (any more)."""
    now = timezone.now()
    mine = Message.objects.filter(pk=message.pk, role=Message.Role.ASSISTANT)
    status = Message.Status.STREAMING
    claimed = mine.filter(claimable).update(status=status, updated_at=now, attempt=F("attempt") + 1)
    if not claimed:
        return False
    # Read inside the transaction: the update holds the row's lock, so the attempt read is the one taken.
    message.attempt = mine.values_list("attempt", flat=True).get()
    message.status = status
    message.updated_at = now
    return True


def end_stopped_turn(*, message: Message) -> FinalizedTurn | None:
    """End, as ``interrupted``, a turn left ``pending`` or ``streaming`` by a run that stopped without ending
    it (its worker was killed, or not even a ``failed`` turn could be written): no progress for
    ``LQAI_STALE_TURN_SECONDS``. The turn takes the next attempt, as a resume would, so that the dead run, if
    it ever comes back, writes nothing (:class:`TurnSuperseded`); it is finalized through
    :func:`finalize_turn` with the answer as stored (the text a run streams is stored only when it
    ends), so it gets its seal and ledger entries like any turn, and can be resumed like any interrupted
    turn. None, with nothing written, if the turn is not stopped (any more): it progressed, ended, or a
    resume took it first."""
    with transaction.atomic():
        if not _claim_turn(message, stopped()):
            return None
    message.refresh_from_db()
    try:
        return finalize_turn(
            message=message, content=message.content, status=Message.Status.INTERRUPTED, attempt=message.attempt
        )
    except TurnSuperseded:  # a resume took the turn between the claim and the finalize: its run ends it
        return None


@dataclass
class StoppedTurnsEnded:
    """What :func:`end_stopped_turns` did: turns ended ``interrupted``, turns that moved on before their turn
    came (progressed, ended, resumed), and turns whose finalize failed (logged with the message id)."""

    ended: int = 0
    moved_on: int = 0
    failed: list[UUID] = field(default_factory=list)


def end_stopped_turns(*, batch_size: int = 100, on_turn: Callable[[int], object] | None = None) -> StoppedTurnsEnded:
    """End every turn whose run is dead (:func:`chats.selectors.stopped_turns`) with :func:`end_stopped_turn`,
    reading them in batches keyset-paginated on (updated_at, id), one transaction per turn. A turn whose
    finalize fails is logged and counted, and the others go on (it is retried by the next run, once stopped
    again). ``on_turn(1)`` after each turn (a progress bar)."""
    summary = StoppedTurnsEnded()
    after: Q | None = None
    while batch := list(stopped_turns().filter(after or Q())[:batch_size]):
        # Taken before the turns are ended (ending one moves its updated_at): each batch starts past the last.
        last_updated, last_id = batch[-1].updated_at, batch[-1].pk
        for message in batch:
            try:
                ended = end_stopped_turn(message=message)
            except Exception:
                logger.exception("turn %s: ending the stopped turn failed; it stays unfinished", message.pk)
                summary.failed.append(message.pk)
            else:
                if ended is None:
                    summary.moved_on += 1
                else:
                    summary.ended += 1
            if on_turn is not None:
                on_turn(1)
        after = Q(updated_at__gt=last_updated) | Q(updated_at=last_updated, pk__gt=last_id)
    return summary


def passage_sha256(passage: str) -> str:
    """The digest a quote row stores of the passage it verified (hex SHA-256 of its UTF-8 bytes); the
    trace recomputes it from the passage it reads to tell whether the text is still the one verified."""
    return hashlib.sha256(passage.encode("utf-8")).hexdigest()


def _hold_source_texts(*, document_ids: set[UUID], opinion_ids: set[UUID]) -> None:
    """On PostgreSQL, lock the quoted sources' rows ``FOR SHARE`` until the turn's transaction ends, so
    that their text cannot change between verification and the commit of the quote rows (from then
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


def record_progress(*, message: Message) -> None:
    """Note that an unfinished turn is alive (see :attr:`Message.updated_at`): a running stream calls it
    now and then, so that it is neither resumed as stuck nor left out of its author's open streams."""
    now = timezone.now()
    # Only while the turn is still this run's (its attempt): a superseded run must not keep it looking alive.
    Message.objects.filter(
        pk=message.pk, attempt=message.attempt, status__in=[Message.Status.PENDING, Message.Status.STREAMING]
    ).update(updated_at=now)
    message.updated_at = now


@dataclass(slots=True)
class _ClaimSources:
    """The sources a turn's claims name, loaded once per turn: the chat's matter's documents and the opinions
    among them, each text normalized once (on first use) for the verifier."""

    documents: dict[UUID, Document]
    opinions: dict[UUID, CaselawOpinion]
    normalized: NormalizedSources = field(default_factory=NormalizedSources)

    def verify(self, key: UUID, text: str, quote: str) -> tuple[QuoteMatch | None, str]:
        """``quote`` verified against ``text`` (the source ``key``): the match, or None and why not."""
        return self.normalized.verify_detailed(key, text, quote)


def _claim_sources(*, message: Message, claims: Sequence[ClaimedCitation]) -> _ClaimSources:
    """The sources ``claims`` name, their texts held until the turn's transaction ends
    (:func:`_hold_source_texts`). A KB document counts only if it belongs to the chat's matter."""
    document_ids = {c.document_id for c in claims if c.document_id is not None}
    opinion_ids = {c.opinion_id for c in claims if c.opinion_id is not None}
    _hold_source_texts(document_ids=document_ids, opinion_ids=opinion_ids)
    project_id = message.chat.project_id
    documents = (
        Document.objects.filter(pk__in=document_ids, project_id=project_id)
        if document_ids and project_id is not None
        else []
    )
    opinions = CaselawOpinion.objects.filter(pk__in=opinion_ids) if opinion_ids else []
    return _ClaimSources(documents={d.pk: d for d in documents}, opinions={o.pk: o for o in opinions})


def _claimed_source(
    claim: ClaimedCitation, sources: _ClaimSources
) -> tuple[type[DocumentQuote] | type[OpinionQuote], Document | CaselawOpinion | None, str]:
    """The quote table of a claim (caselaw if it names an opinion only, KB otherwise) and the source it names,
    or None and why it cannot verify: a claim naming no source, or both kinds, fails as a KB claim (a quotation
    nothing could check is a KB row too, with its ``unchecked_reason``); a document counts only if it is of the
    chat's matter."""
    if claim.unchecked_reason:
        return DocumentQuote, None, claim.unchecked_reason
    if claim.opinion_id is not None and claim.document_id is None:
        opinion = sources.opinions.get(claim.opinion_id)
        return OpinionQuote, opinion, "" if opinion is not None else "unknown opinion"
    if claim.document_id is None and claim.opinion_id is None and claim.named_source:
        return DocumentQuote, None, f"unknown source {claim.named_source[:100]!r}: not a source of this turn"
    if claim.document_id is None or claim.opinion_id is not None:
        return DocumentQuote, None, "the claim must name exactly one source"
    document = sources.documents.get(claim.document_id)
    return (
        DocumentQuote,
        document,
        "" if document is not None else "unknown document: not a document of this chat's matter",
    )


def _quote_row(
    *, message: Message, claim: ClaimedCitation, sources: _ClaimSources, now: datetime.datetime
) -> DocumentQuote | OpinionQuote:
    """The row of one claim (unsaved, unnumbered): a quote verified against its source's text, with its span,
    how it verified, the digest of the passage (:func:`passage_sha256`), its alterations and context flags;
    or a failed (``unverified``) row saying why, naming its source only if the claim named a quotable one; or,
    for a quotation nothing could check, an ``unchecked`` row with the claim's reason."""
    row_class, source, reason = _claimed_source(claim, sources)
    fields: dict[str, Any] = {"message": message, "quote": claim.quote, "created_at": now}
    if claim.unchecked_reason:
        return row_class(
            **fields, verification_method=UNCHECKED, unverified_reason=fit(row_class, "unverified_reason", reason)
        )
    if source is None:
        return row_class(**fields, verification_method=UNVERIFIED, unverified_reason=reason)
    kind, text = ("opinion", source.text) if isinstance(source, CaselawOpinion) else ("document", source.content)
    fields[kind] = source
    match, why = sources.verify(source.pk, text, claim.quote)
    if match is None:
        return row_class(**fields, verification_method=UNVERIFIED, unverified_reason=_reason(why, kind))
    return row_class(
        **fields,
        source_offset_start=match.start,
        source_offset_end=match.end,
        verification_method=match.method,
        verification_confidence=match.confidence,
        passage_sha256=passage_sha256(text[match.start : match.end]),
        alterations=alterations_record(match),
        context_flags=context_flags_record(match),
    )


def _verify_claims(
    *, message: Message, claims: Sequence[ClaimedCitation], now: datetime.datetime, first_position: int = 0
) -> tuple[list[DocumentQuote], list[OpinionQuote]]:
    """The quote rows of the claims (KB, caselaw), unsaved: each verified against its source's text, or a
    failed (``unverified``) row saying why (:func:`_quote_row`). Rows are numbered in claim order from
    ``first_position`` (KB and caselaw claims together). At most ``LQAI_MAX_CLAIMS_PER_TURN`` claims are
    verified; the rest are recorded as one failed claim (the first of them) saying how many were dropped.
    Call inside the turn's transaction: the sources' texts are held until it ends."""
    limit = max(settings.LQAI_MAX_CLAIMS_PER_TURN, 0)
    dropped = claims[limit:]
    claims = claims[:limit]
    sources = _claim_sources(message=message, claims=claims)
    kb: list[DocumentQuote] = []
    caselaw: list[OpinionQuote] = []
    for position, claim in enumerate(claims, start=first_position):
        row = _quote_row(message=message, claim=claim, sources=sources, now=now)
        row.position = position
        if isinstance(row, OpinionQuote):
            caselaw.append(row)
        else:
            kb.append(row)
    if dropped:
        reason = (
            f"{len(dropped)} claimed quote(s) from here on were not verified: a turn verifies at most {limit} "
            "(LQAI_MAX_CLAIMS_PER_TURN)"
        )
        failed = DocumentQuote(
            message=message,
            quote=dropped[0].quote,
            verification_method=UNVERIFIED,
            unverified_reason=reason,
            created_at=now,
            position=first_position + len(claims),
        )
        kb.append(failed)
    return kb, caselaw


def _reason(why: str, source: str) -> str:
    """The verifier's reason a quote failed, naming the kind of source ("not found in the opinion")."""
    return (why or "not found in the source").replace("the source", f"the {source}")


def turn_verdict(*, methods: Collection[str], case_statuses: Collection[str] = ()) -> str:
    """The verdict of a turn's quote rows (their verification methods) and case citations (their statuses), by
    the one rule (:func:`lqai_verify.verdict.verdict_of`, see :class:`chats.models.Verdict`): ``fail`` when a
    claim failed, ``review`` when none failed but one needs a person (an ``altered`` quote, a case not checked,
    any status the rule does not know), ``pass`` when every claim verified, ``none`` without a claim.
    ``backfill_ledger --check`` holds stored verdicts to it."""
    return verdict_rule.verdict_of(methods=methods, case_statuses=case_statuses)


def _tool_source_rows(
    *, message: Message, consulted: Sequence[ConsultedSource], now: datetime.datetime, resumed: bool
) -> list[MessageToolSource]:
    """Rows for the consulted sources, fitted to the columns: tool metadata must never cost the turn. Numbered
    in order, on a resumed turn after the sources it already has.

    Over-long values are cut to their column; a source with no kind cannot be classified and is
    dropped with a warning (the table refuses an empty kind).
    """
    first_position = message.tool_sources.count() if resumed else 0
    rows = []
    for position, source in enumerate(consulted, start=first_position):
        kind = fit(MessageToolSource, "source_kind", source.source_kind.strip())
        if not kind:
            logger.warning("turn %s: dropped a consulted source with no kind (tool %r)", message.pk, source.tool)
            continue
        rows.append(
            MessageToolSource(
                message=message,
                source_kind=kind,
                tool=fit(MessageToolSource, "tool", source.tool),
                provider=fit(MessageToolSource, "provider", source.provider) or None,
                label=fit(MessageToolSource, "label", source.label),
                subtitle=fit(MessageToolSource, "subtitle", source.subtitle),
                url=fit(MessageToolSource, "url", source.url),
                external_ref=fit(MessageToolSource, "external_ref", source.external_ref),
                position=position,
                created_at=now,
            )
        )
    return rows


def _case_citation_rows(
    *,
    message: Message,
    content: str,
    now: datetime.datetime,
    resumed: bool,
    streamed: StreamedCitations | None,
    statutes_recorded: bool = False,
) -> list[CaseCitation]:
    """Rows for the case citations of ``content``, checked (see ``chats.case_citations``), except, on a
    resumed turn, the spans the message already has (it keeps the rows of what it had written before), and,
    when ``statutes_recorded`` (the authority library checked the answer: :func:`_statute_rows`), the statute
    citations, which are then statute rows; otherwise they stay unchecked case-citation rows, as before.

    The check never fails the turn: an error in it is logged and the turn is finalized without rows.
    """
    try:
        checked: list[CheckedCitation] = check_case_citations(content, streamed=streamed)
    except Exception:
        logger.exception("turn %s: the case-citation check failed; no case citations recorded", message.pk)
        return []
    if not checked:
        return []
    had = set(message.case_citations.values_list("answer_offset_start", flat=True)) if resumed else set()
    return [
        CaseCitation(
            message=message,
            answer_offset_start=citation.start,
            answer_offset_end=citation.end,
            kind=citation.kind.value,
            citation=fit(CaseCitation, "citation", citation.citation),
            case_name=fit(CaseCitation, "case_name", citation.case_name),
            status=citation.status.value,
            detail=fit(CaseCitation, "detail", citation.detail),
            opinion=citation.opinion,
            provider=fit(CaseCitation, "provider", citation.provider),
            pin=fit(CaseCitation, "pin", citation.pin),
            pin_status=citation.pin_status,
            created_at=now,
        )
        for citation in checked
        if citation.start not in had and not (statutes_recorded and citation.kind.value == CaseCitation.Kind.STATUTE)
    ]


def _statute_fields(check: authority_library.StatuteCitationCheck) -> dict[str, Any]:
    """The columns a statute row takes from the citation it is of: as written, where, the section and the
    release checked."""
    found, release = check.citation, check.release
    identifier = check.identifier
    if found.pin and identifier.endswith(f"/{found.pin}"):
        identifier = identifier[: -len(found.pin) - 1]
    return {
        "citation": fit(StatuteCitation, "citation", found.written),
        "answer_offset_start": found.start,
        "answer_offset_end": found.end,
        "cited": fit(StatuteCitation, "cited", check.cited),
        "identifier": identifier,
        "pin": fit(StatuteCitation, "pin", found.pin),
        "code": release.code if release else "",
        "title": release.title if release else None,
        "release_point": release.release_point if release else "",
        "release_label": release.label if release else "",
        "release_official": release.official if release else None,
    }


def _statute_rows(
    *, message: Message, content: str, now: datetime.datetime, resumed: bool
) -> list[StatuteCitation] | None:
    """Rows for the statute and regulation citations of ``content`` and the quotations attributed to them, as
    the authority library checks them (``authorities.selectors.check_statutes``): citations first, then quotes,
    each in answer order, numbered on from a resumed turn's rows, whose spans (and quotes) it already has are
    left out. None when the check raised (logged): the turn is finalized, its statute citations recorded as
    unchecked case citations instead (:func:`_case_citation_rows`). Reads the library only: call before the
    turn's transaction."""
    try:
        checks = authority_library.check_statutes(text=content)
    except Exception:
        logger.exception("turn %s: the statute check failed; statute citations recorded as unchecked", message.pk)
        return None
    had: set[tuple[str, int, str]] = set()
    first = 0
    if resumed:
        stored = list(message.statute_citations.values_list("kind", "answer_offset_start", "quote"))
        had, first = set(stored), len(stored)
    rows: list[StatuteCitation] = []
    for check in checks.citations:
        key = (StatuteCitation.Kind.CITATION.value, check.citation.start, "")
        if key in had:
            continue
        rows.append(
            StatuteCitation(
                message=message,
                kind=StatuteCitation.Kind.CITATION,
                status=check.status,
                reason=fit(StatuteCitation, "reason", check.reason),
                section_id=check.section_id,
                created_at=now,
                **_statute_fields(check),
            )
        )
    for quote in checks.quotes:
        key = (StatuteCitation.Kind.QUOTE.value, quote.check.citation.start, quote.quote)
        if key in had:
            continue
        found = quote.start is not None and quote.end is not None
        fields = _statute_fields(quote.check)
        if found:
            fields["identifier"] = quote.identifier
        rows.append(
            StatuteCitation(
                message=message,
                kind=StatuteCitation.Kind.QUOTE,
                status=quote.status,
                reason=fit(StatuteCitation, "reason", quote.reason),
                quote=quote.quote,
                section_id=quote.section_id if found else None,
                verification_method=quote.method if found else "",
                verification_confidence=quote.confidence if found else None,
                source_offset_start=quote.start,
                source_offset_end=quote.end,
                passage_sha256=passage_sha256(quote.passage) if found else "",
                alterations=quote.alterations,
                context_flags=quote.context_flags,
                found_in=fit(StatuteCitation, "found_in", quote.found_in),
                created_at=now,
                **fields,
            )
        )
    for position, row in enumerate(rows, start=first):
        row.position = position
    return rows


def statute_claim_statuses(rows: Sequence[StatuteCitation]) -> list[str]:
    """The claim status of each statute row, as the verdict rule and the review count read them
    (``statute_verified``, ``statute_quote_failed``, ...)."""
    return [verdict_rule.statute_claim_status(row.kind, row.status) for row in rows]


def finalize_turn(
    *,
    message: Message,
    content: str,
    status: str,
    claimed_citations: Sequence[ClaimedCitation] = (),
    tool_sources: Sequence[ConsultedSource] = (),
    usage: TurnUsage | None = None,
    attempt: int | None = None,
    case_citations_streamed: StreamedCitations | None = None,
) -> FinalizedTurn:
    """End a turn with ``content`` and a final ``status``: its claims verified, its rows built, the message and
    its rows persisted and ``post_finalize`` sent, in one transaction; returns what was recorded. ``attempt``:
    the run's claim on the turn (default: ``message.attempt`` as loaded); :class:`TurnSuperseded`, nothing
    written, if the turn is no longer the run's or is final. ``ValueError`` for a status that is not final or a
    message that cannot end a turn. ``case_citations_streamed``: what the run read of the answer's case
    citations while it streamed. Locking and resume rules: docs/architecture-turns.md, "Finalize"."""
    _check_final(message=message, status=status)
    _check_claims(claimed_citations)
    now = timezone.now()
    resumed = message.finalized_at is not None  # finalized before (interrupted): its rows go on
    # Before the transaction: the case-citation check may call CourtListener, and the turn never waits on it;
    # the statute check reads the authority library, which the turn's rows only reference.
    statutes = _statute_rows(message=message, content=content, now=now, resumed=resumed)
    case_citations = _case_citation_rows(
        message=message,
        content=content,
        now=now,
        resumed=resumed,
        streamed=case_citations_streamed,
        statutes_recorded=statutes is not None,
    )
    statutes = statutes or []
    with transaction.atomic():
        # 1. Lock the turn's row and check that this run still holds it, until the commit.
        stored = _lock_turn(message=message, attempt=attempt, resumed=resumed)
        # 2. Verify the claims, in the transaction: a quoted text cannot change before its citation commits.
        first_claim = message.citations.count() + message.caselaw_citations.count() if resumed else 0
        kb, caselaw = _verify_claims(message=message, claims=claimed_citations, now=now, first_position=first_claim)
        # 3. Build the rows: each claim placed in the answer (then each pin cite checked against the page of the
        # passage quoted with it), the consulted sources, the message's final state.
        place_claims([*kb, *caselaw], content)
        check_pins_against_quoted_passages(citations=case_citations, quotes=caselaw, answer=content)
        sources = _tool_source_rows(message=message, consulted=tool_sources, now=now, resumed=resumed)
        verdict = turn_verdict(
            methods={row.verification_method for row in [*kb, *caselaw]},
            case_statuses={verdict_rule.case_claim_status(case.status, case.pin_status) for case in case_citations}
            | set(statute_claim_statuses(statutes)),
        )
        update_fields = _final_state(
            message, stored, content=content, status=status, verdict=verdict, now=now, usage=usage
        )
        # 4. Persist them, then send post_finalize: its receivers (the ledger, the seal) write with the turn.
        _persist(
            message,
            update_fields=update_fields,
            kb=kb,
            caselaw=caselaw,
            sources=sources,
            case_citations=case_citations,
            statutes=statutes,
        )
    finalized = _finalized(message=message, kb=kb, caselaw=caselaw, tool_sources=sources, case_citations=case_citations)
    finalized.statute_citations = statutes
    return finalized


def _persist(
    message: Message,
    *,
    update_fields: list[str],
    kb: list[DocumentQuote],
    caselaw: list[OpinionQuote],
    sources: list[MessageToolSource],
    case_citations: list[CaseCitation],
    statutes: list[StatuteCitation],
) -> None:
    """Save ``message``'s ``update_fields`` and insert its new rows (one statement a table), then send
    ``post_finalize``: what its receivers write commits with the turn, and a receiver that raises rolls the
    whole turn back. Call inside the turn's transaction."""
    message.save(update_fields=update_fields)
    DocumentQuote.objects.bulk_create(kb)
    OpinionQuote.objects.bulk_create(caselaw)
    MessageToolSource.objects.bulk_create(sources)
    CaseCitation.objects.bulk_create(case_citations)
    StatuteCitation.objects.bulk_create(statutes)
    post_finalize.send(sender=Message, message=message)


def _check_claims(claims: Sequence[ClaimedCitation]) -> None:
    """``ValueError`` for a claim both unchecked and naming a source: what names a source is checked against it."""
    for claim in claims:
        if claim.unchecked_reason and (claim.document_id or claim.opinion_id or claim.named_source):
            raise ValueError("a quotation nothing could check names no source (unchecked_reason, and a source)")


def _check_final(*, message: Message, status: str) -> None:
    """``ValueError`` unless ``status`` is final and ``message`` is an assistant message not yet complete or
    failed (as the caller loaded it)."""
    if status not in FINAL_STATUSES:
        raise ValueError(f"finalize_turn needs a final status, not {status!r}")
    if message.role != Message.Role.ASSISTANT:
        raise ValueError("only an assistant message ends a turn")
    if message.status in {Message.Status.COMPLETE, Message.Status.FAILED}:
        raise ValueError(f"message {message.pk} is already {message.status}; only an interrupted turn goes on")


def _lock_turn(*, message: Message, attempt: int | None, resumed: bool) -> Message:
    """Lock ``message``'s row (``SELECT ... FOR UPDATE``, until the caller's transaction ends) and return its
    stored state, if this run may finalize it: the stored attempt is the run's claim (``attempt``, or the
    loaded message's), the turn is not final, a run's own attempt has not finalized it already, and the
    caller's copy is not out of date. Otherwise log the refusal and raise :class:`TurnSuperseded`."""
    claim = message.attempt if attempt is None else attempt
    stored = Message.objects.select_for_update().only("status", "attempt", "finalized_at", "verdict").get(pk=message.pk)
    if (
        stored.attempt == claim
        and stored.status not in {Message.Status.COMPLETE, Message.Status.FAILED}
        and not (attempt is not None and stored.status == Message.Status.INTERRUPTED)
        and (stored.finalized_at is not None) == resumed
    ):
        return stored
    logger.warning(
        "turn %s: the finalize of attempt %s is refused (the turn is %s, attempt %s); nothing of it written",
        message.pk,
        claim,
        stored.status,
        stored.attempt,
    )
    raise TurnSuperseded(message_id=message.pk, attempt=claim, current_attempt=stored.attempt, status=stored.status)


def _final_state(
    message: Message,
    stored: Message,
    *,
    content: str,
    status: str,
    verdict: str,
    now: datetime.datetime,
    usage: TurnUsage | None,
) -> list[str]:
    """Set ``message``'s final answer, status, verdict (the worse of ``verdict`` and the ``stored`` one: a
    resumed turn never gets better than its earlier run) and finalize time, and ``usage`` if given (each count
    fitted to its column: one no column can hold is dropped, and logged); return the fields set, to save."""
    message.content = content
    message.status = status
    message.verdict = Verdict.worst(stored.verdict, verdict)
    message.finalized_at = message.updated_at = now
    update_fields = ["content", "status", "finalized_at", "updated_at", "verdict"]
    if usage is None:
        return update_fields
    message.model_name = fit(Message, "model_name", usage.model_name)
    message.prompt_tokens = fit_count(Message, "prompt_tokens", usage.prompt_tokens)
    message.completion_tokens = fit_count(Message, "completion_tokens", usage.completion_tokens)
    message.latency_ms = fit_count(Message, "latency_ms", usage.latency_ms)
    if (message.prompt_tokens, message.completion_tokens) != (usage.prompt_tokens, usage.completion_tokens):
        logger.warning("turn %s: the model reported token counts that cannot be true: %s", message.pk, usage)
    return [*update_fields, "model_name", "prompt_tokens", "completion_tokens", "latency_ms"]


def _finalized(
    *,
    message: Message,
    kb: list[DocumentQuote],
    caselaw: list[OpinionQuote],
    tool_sources: list[MessageToolSource],
    case_citations: list[CaseCitation],
) -> FinalizedTurn:
    """What a finalize recorded, as returned: the verified quotes apart from the claims that failed (each
    with its row's kind and id, for the response; their count logged) and the quotations nothing could check."""
    unverified = [
        UnverifiedQuote(
            quote=row.quote,
            reason=row.unverified_reason,
            kind=kind,
            id=row.pk,
            answer_start=row.answer_offset_start,
            answer_end=row.answer_offset_end,
            answer_unplaced_reason=row.answer_unplaced_reason,
        )
        for kind, rows in ((SourceKind.KB_DOCUMENT, kb), (SourceKind.CASELAW, caselaw))
        for row in rows
        if row.verification_method == UNVERIFIED
    ]
    if unverified:
        logger.info("turn %s: %d claimed quote(s) did not verify", message.pk, len(unverified))
    return FinalizedTurn(
        message=message,
        citations=[row for row in kb if row.verification_method in VERIFIED_METHODS],
        caselaw_citations=[row for row in caselaw if row.verification_method in VERIFIED_METHODS],
        tool_sources=tool_sources,
        unverified=unverified,
        unchecked=[row for row in kb if row.verification_method == UNCHECKED],
        case_citations=case_citations,
    )
