"""Reads of the trace pages: a member's matters and chats, and a chat's turns with every claim of each answer.

A claim is a quote the answer claimed from a KB document or an opinion (verified or failed) or a case
citation the answer wrote (as checked). Each gets a card: its source, page cites, its status in words
(:mod:`lqai_verify.statuses`), the passage in context with its alterations (:mod:`citations.passages`), and a
numbered marker at its place in the answer (:mod:`pages.answer`). Each turn says whether its record is sealed
(and if late, since when).

A chat page is a constant number of queries whatever the number of turns and claims: the messages, one
query per kind of claim row (the passage and its context cut on the database side, never the whole source
text), and the consulted sources. Page cites come from the sources' stored pages (``chats.pages``), as in
the API and the export.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from datetime import datetime
from uuid import UUID

from django.contrib.auth.models import AbstractBaseUser, AnonymousUser
from django.db.models import Count, F, OuterRef, Prefetch, QuerySet, Subquery
from django.db.models.functions import Length
from django.utils.safestring import SafeString

from chats.models import (
    UNCHECKED,
    CaseCitation,
    CaselawOpinion,
    Chat,
    Document,
    DocumentQuote,
    Invitation,
    Message,
    MessageToolSource,
    OpinionQuote,
    Project,
    ProjectMembership,
    StatuteCitation,
)
from chats.pages import span_pin_cite
from chats.selectors import chats_visible_to, documents_of, open_invitations_of, projects_visible_to
from citations.models import Certificate, ReviewDecision
from citations.passages import passage_in_context_html
from citations.selectors import Passage, TurnSealState, context_around, context_window, turn_seals
from lqai_verify.statuses import StatusInWords, VerdictInWords, status_in_words, verdict_in_words
from lqai_verify.verdict import case_claim_status, statute_claim_status, verdict_of
from lqai_verify.verification.page_cites import pin_in_source
from pages import answer as answer_text

QUOTE, CASE = "quote", "case"
# A statute or regulation cited (resolved to its section in a release), and a quote attributed to one.
STATUTE, STATUTE_QUOTE = "statute", "statute_quote"
# Characters of the source shown on each side of a quoted passage on a card (the admin shows more).
CARD_CONTEXT_CHARS = 120


@dataclass
class Claim:
    """One card of a turn, and its marker in the answer."""

    id: UUID
    kind: str  # QUOTE | CASE | STATUTE | STATUTE_QUOTE
    status: StatusInWords
    source: str
    pages: str = ""
    source_after: str = ""  # what follows the pin cite: the case's parenthetical (``pin_in_source``)
    passage_html: SafeString | None = None
    quote: str = ""
    reason: str = ""
    source_url: str = ""
    # A case citation: the name and citation as the answer wrote them, and the case found at that citation.
    name_written: str = ""
    name_found: str = ""
    citation: str = ""
    detail: str = ""
    # Its current review decision (``citations.reviews``), if a person decided on it.
    decision: ReviewDecision | None = None
    # Where its marker goes in the answer; None when the answer does not write it.
    answer_offset: int | None = None
    order: int = 0  # the claim's place among its turn's claims of its kind
    number: int = 0

    @property
    def anchor(self) -> str:
        return f"claim-{self.id}"

    @property
    def marker_anchor(self) -> str:
        return f"marker-{self.id}"


@dataclass
class Turn:
    answer: Message
    question: Message | None
    verdict: VerdictInWords
    # None: a finalized turn whose last finalize has no seal (or a turn not finalized yet).
    seal: TurnSealState | None = None
    claims: list[Claim] = field(default_factory=list)
    parts: list[answer_text.Part[Claim]] = field(default_factory=list)
    consulted: list[MessageToolSource] = field(default_factory=list)
    # The turn's latest certificate of verification, if one was issued.
    certificate: Certificate | None = None

    @property
    def anchor(self) -> str:
        return f"turn-{self.answer.pk}"

    @property
    def unplaced(self) -> list[Claim]:
        """Claims whose place in the answer is not known: listed after it."""
        return [claim for claim in self.claims if claim.answer_offset is None]

    @property
    def review_count(self) -> int:
        return sum(claim.status.needs_review for claim in self.claims)


@dataclass(frozen=True)
class ChatSummary:
    chat: Chat
    latest_verdict: VerdictInWords | None
    latest_at: datetime | None


@dataclass
class MatterSummary:
    project: Project | None
    chats: list[ChatSummary] = field(default_factory=list)


def _chat_summaries(chats: QuerySet[Chat]) -> list[ChatSummary]:
    """``chats`` newest first, each with its latest turn's verdict and time. One query."""
    latest = Message.objects.filter(chat=OuterRef("pk"), role=Message.Role.ASSISTANT).order_by("-created_at", "-id")
    annotated = chats.annotate(
        latest_verdict=Subquery(latest.values("verdict")[:1]),
        latest_status=Subquery(latest.values("status")[:1]),
        latest_at=Subquery(latest.values("created_at")[:1]),
    ).order_by("-created_at", "-id")
    return [
        ChatSummary(
            chat=chat,
            latest_verdict=None
            if chat.latest_status is None
            else verdict_in_words(chat.latest_verdict, status=chat.latest_status),
            latest_at=chat.latest_at,
        )
        for chat in annotated
    ]


def matters_of(user: AbstractBaseUser | AnonymousUser) -> list[MatterSummary]:
    """The user's matters (owned or a member of, now), each with its chats newest first and each chat's latest
    verdict; then the user's chats outside any matter. Two queries."""
    matters = {project.pk: MatterSummary(project) for project in projects_visible_to(user).order_by("name", "id")}
    outside = MatterSummary(None)
    for summary in _chat_summaries(chats_visible_to(user)):
        matter = matters.get(summary.chat.project_id) if summary.chat.project_id else outside
        if matter is not None:
            matter.chats.append(summary)
    return [*matters.values(), *([outside] if outside.chats else [])]


def visible_matter(user: AbstractBaseUser | AnonymousUser, project_id: UUID) -> Project | None:
    """The matter, with its owner, if ``user`` owns it or is a member of it now (the API's rule)."""
    return projects_visible_to(user).select_related("owner").filter(pk=project_id).first()


@dataclass(frozen=True)
class MatterPage:
    """What a matter's page shows: its chats, its documents (without their text; ``content_length``,
    ``citation_count`` and ``claim_count`` annotated), its members, and, for its owner, its open invitation
    links."""

    project: Project
    chats: list[ChatSummary]
    documents: list[Document]
    members: list[ProjectMembership]  # each with its user
    invitations: list[Invitation]


def matter_page(project: Project, *, for_owner: bool) -> MatterPage:
    """The matter's page (:class:`MatterPage`); the invitations only ``for_owner``. Four queries."""
    # claim_count: every quote row naming the document, failed claims too (each keeps it: delete_document).
    documents = (
        documents_of(project)
        .defer("content")
        .annotate(content_length=Length("content"), claim_count=Count("citations"))
        .order_by("title", "id")
    )
    return MatterPage(
        project=project,
        chats=_chat_summaries(Chat.objects.filter(project=project)),
        documents=list(documents),
        members=list(
            ProjectMembership.objects.filter(project=project).select_related("user").order_by("user__username")
        ),
        invitations=list(open_invitations_of(project).select_related("created_by")) if for_owner else [],
    )


def matter_document(project: Project, document_id: UUID) -> Document | None:
    """A document of ``project`` with ``citation_count`` (:func:`chats.selectors.documents_of`), or None."""
    return documents_of(project).filter(pk=document_id).first()


def document_pages(document: Document) -> list[tuple[str, str]]:
    """The document's text cut at its pages, as ``(label, text)``; one part labelled ``""`` without pages."""
    starts = [(int(start), str(label)) for start, label in document.pages]
    if not starts:
        return [("", document.content)]
    ends = [start for start, _ in starts[1:]] + [len(document.content)]
    head = [("", document.content[: starts[0][0]])] if starts[0][0] > 0 else []
    return head + [(label, document.content[start:end]) for (start, label), end in zip(starts, ends, strict=True)]


def visible_chat(user: AbstractBaseUser | AnonymousUser, chat_id: UUID) -> Chat | None:
    """The chat, if ``user`` may read it now (the API's rule: :func:`chats.selectors.chats_visible_to`)."""
    return chats_visible_to(user).select_related("project").filter(pk=chat_id).first()


def _quote_rows(model: type[DocumentQuote] | type[OpinionQuote], source: str, text: str) -> Prefetch:
    window = context_window(
        start=F("source_offset_start"),
        end=F("source_offset_end"),
        text=f"{source}__{text}",
        context_chars=CARD_CONTEXT_CHARS,
    )
    return Prefetch(
        "citations" if model is DocumentQuote else "caselaw_citations",
        queryset=model.objects.select_related(source).defer(f"{source}__{text}").annotate(**window),
    )


def _messages(messages: QuerySet[Message]) -> list[Message]:
    """The messages with their claim rows."""
    return list(
        messages.order_by("created_at", "id").prefetch_related(
            _quote_rows(DocumentQuote, "document", "content"),
            _quote_rows(OpinionQuote, "opinion", "text"),
            Prefetch("case_citations", queryset=CaseCitation.objects.select_related("opinion").defer("opinion__text")),
            "tool_sources",
            Prefetch(
                "statute_citations",
                queryset=StatuteCitation.objects.annotate(
                    **context_window(
                        start=F("source_offset_start"),
                        end=F("source_offset_end"),
                        text="section__text",
                        context_chars=CARD_CONTEXT_CHARS,
                    )
                ),
            ),
        )
    )


def chat_turns(chat: Chat, *, answer_id: UUID | None = None) -> list[Turn]:
    """The turns of ``chat`` in order (only the one answering with ``answer_id``, if given), each answer's
    claims numbered in the order of the answer."""
    messages = Message.objects.filter(chat=chat)
    if answer_id is not None:
        answer = Message.objects.filter(pk=answer_id, chat=chat).values("reply_to_id")
        messages = messages.filter(pk=answer_id) | messages.filter(pk__in=Subquery(answer))
    # A question and its answer stored at the same instant (older turns): the question first.
    rows = sorted(_messages(messages), key=lambda m: (m.created_at, m.role == Message.Role.ASSISTANT))
    seals = turn_seals(message.pk for message in rows if message.role == Message.Role.ASSISTANT)
    questions = {message.pk: message for message in rows if message.role == Message.Role.USER}
    turns: list[Turn] = []
    unanswered: list[Message] = []
    for message in rows:
        if message.role == Message.Role.USER:
            unanswered.append(message)
            continue
        # Its own question; for a turn stored before answers pointed at them, the question asked before it.
        question = (
            questions.get(message.reply_to_id) if message.reply_to_id else (unanswered[-1] if unanswered else None)
        )
        if question in unanswered:
            unanswered.remove(question)
        turns.append(_turn(message, question, seal=seals.get(message.pk)))
    _with_reviews(turns)
    return turns


def _with_reviews(turns: list[Turn]) -> None:
    """Each claim's current decision and each turn's latest certificate: two queries for all the turns."""
    ids = [turn.answer.pk for turn in turns]
    current = {
        decision.claim_id: decision
        for decision in ReviewDecision.objects.filter(message_id__in=ids).order_by("sequence")
    }
    certificates = {
        certificate.message_id: certificate
        for certificate in Certificate.objects.filter(message_id__in=ids)
        .order_by("sequence")
        .defer("statement", "text")
    }
    for turn in turns:
        turn.certificate = certificates.get(turn.answer.pk)
        for claim in turn.claims:
            claim.decision = current.get(claim.id)


def _turn(message: Message, question: Message | None, *, seal: TurnSealState | None) -> Turn:
    content = message.content
    claims: list[Claim] = []
    taken: dict[str, set[int]] = {}
    quotes: list[DocumentQuote | OpinionQuote] = [
        *message.citations.all(),
        *message.caselaw_citations.all(),
    ]
    for order, row in enumerate(quotes):
        claim = _quote_claim(row)
        claim.order = order
        claim.answer_offset = _quote_marker_offset(row, content, taken=taken.setdefault(row.quote, set()))
        claims.append(claim)
    for order, case in enumerate(message.case_citations.all()):
        claim = _case_claim(case)
        claim.order = order
        if case.answer_offset_end <= len(content):
            claim.answer_offset = answer_text.marker_offset(content, case.answer_offset_end)
        claims.append(claim)
    for order, statute in enumerate(message.statute_citations.all()):
        claim = _statute_claim(statute)
        claim.order = order
        if statute.kind == StatuteCitation.Kind.QUOTE:
            claim.answer_offset = _quote_marker_offset(statute, content, taken=taken.setdefault(statute.quote, set()))
        elif statute.answer_offset_end <= len(content):
            claim.answer_offset = answer_text.marker_offset(content, statute.answer_offset_end)
        claims.append(claim)
    # Numbered in the order of the answer; claims it does not write last, in their turn's order.
    claims.sort(key=lambda c: (math.inf if c.answer_offset is None else c.answer_offset, c.kind == CASE, c.order))
    for number, claim in enumerate(claims, start=1):
        claim.number = number
    placed = [(claim.answer_offset, claim) for claim in claims if claim.answer_offset is not None]
    return Turn(
        answer=message,
        question=question,
        verdict=verdict_in_words(
            message.verdict,
            status=message.status,
            claims=verdict_of(
                methods={row.verification_method for row in quotes},
                case_statuses={case_claim_status(c.status, c.pin_status) for c in message.case_citations.all()}
                | {statute_claim_status(s.kind, s.status) for s in message.statute_citations.all()},
            ),
        ),
        seal=seal,
        claims=claims,
        parts=answer_text.with_markers(content, placed),
        consulted=list(message.tool_sources.all()),
    )


def _quote_marker_offset(
    row: DocumentQuote | OpinionQuote | StatuteCitation, content: str, *, taken: set[int]
) -> int | None:
    """Where a quote's marker goes in the answer ``content``: after the quote's span of the answer. The one place
    that places a quote: the span the row records (``answer_offset_end``, once quote rows record it; a statute
    quote records its citation's, so it is placed where the answer writes it) or else the place the answer writes
    the quote (:func:`pages.answer.quote_span`); ``None`` when neither is known."""
    recorded: int | None = None if isinstance(row, StatuteCitation) else getattr(row, "answer_offset_end", None)
    if recorded is not None and 0 < recorded <= len(content):
        return answer_text.marker_offset(content, recorded)
    span = answer_text.quote_span(content, row.quote, taken=taken)
    return None if span is None else answer_text.marker_offset(content, span[1])


def _passage_html(row: DocumentQuote | OpinionQuote | StatuteCitation) -> SafeString | None:
    """A verified quote's passage in its context, as the card shows it (alterations and context flags marked), from
    the context the selector read with the row (``context_start``, ``context_text``); None when there is none (a
    failed claim, a row read without its context)."""
    start, end = row.source_offset_start, row.source_offset_end
    context_start: int | None = getattr(row, "context_start", None)
    context_text: str | None = getattr(row, "context_text", None)
    if start is None or end is None or context_start is None or context_text is None:
        return None
    span = Passage(
        start=start,
        end=end,
        text=context_text[start - context_start : end - context_start],
        verified_sha256=row.passage_sha256,
    )
    return passage_in_context_html(
        context_around(span, start=context_start, text=context_text, context_chars=CARD_CONTEXT_CHARS),
        row.alterations,
        offsets=False,
        context_flags=row.context_flags,
    )


def _quote_claim(row: DocumentQuote | OpinionQuote) -> Claim:
    claim = Claim(
        id=row.pk,
        kind=QUOTE,
        status=status_in_words(row.verification_method, alterations=row.alterations, reason=row.unverified_reason),
        source=_source_label(row),
        quote=row.quote,
        reason=row.unverified_reason,
    )
    if isinstance(row, OpinionQuote) and row.opinion is not None:
        claim.source_url = _http_only(row.opinion.absolute_url)
    claim.passage_html = _passage_html(row)
    start, end = row.source_offset_start, row.source_offset_end
    if claim.passage_html is None or start is None or end is None:
        return claim
    # A document's own pages ("p. 4"); an opinion's Bluebook pin cite ("590 F. Supp. 3d at 870", "slip op. at 5").
    source = row.document if isinstance(row, DocumentQuote) else row.opinion
    if source is not None:
        citation = source.citation if isinstance(source, CaselawOpinion) else None
        pin = span_pin_cite(source.pages, start, end, citation=citation) or ""
        # "590 F. Supp. 3d 850, 870 (M.D.N.C. 2022)": a case's pin after its first page, not its citation twice.
        claim.source, claim.pages, claim.source_after = pin_in_source(claim.source, pin)
    return claim


def _source_label(row: DocumentQuote | OpinionQuote) -> str:
    if row.verification_method == UNCHECKED:
        return "nothing the checks could read"
    if isinstance(row, DocumentQuote):
        return row.document.title if row.document is not None else "no document of this matter"
    if row.opinion is None:
        return "no opinion known to the product"
    return ", ".join(part for part in (row.opinion.case_name, row.opinion.citation) if part)


def _case_claim(case: CaseCitation) -> Claim:
    found = case.opinion
    return Claim(
        id=case.pk,
        kind=CASE,
        status=status_in_words(case_claim_status(case.status, case.pin_status)),
        source=", ".join(part for part in (case.case_name, case.citation) if part),
        name_written=case.case_name,
        name_found=found.case_name if found is not None else "",
        citation=case.citation,
        detail=case.detail,
        source_url=_http_only(found.absolute_url) if found is not None else "",
    )


def _statute_claim(row: StatuteCitation) -> Claim:
    """A statute citation or quote as a card: cited as a lawyer does with the release checked
    (``9 U.S.C. § 2 (Online@117-80)``), its status in words and its reason; a quote found in a section's text with
    its passage there, in context."""
    claim = Claim(
        id=row.pk,
        kind=STATUTE_QUOTE if row.kind == StatuteCitation.Kind.QUOTE else STATUTE,
        status=status_in_words(statute_claim_status(row.kind, row.status), alterations=row.alterations),
        source=row.cited or row.citation,
        quote=row.quote,
        reason=row.reason,
        citation=row.citation,
        detail=row.reason,
    )
    claim.passage_html = _passage_html(row)
    return claim


def _http_only(url: str) -> str:
    # A link only to http(s): a stored url is data from outside, and href="javascript:..." must not run.
    return url if url.startswith(("https://", "http://")) else ""


def review_count(turns: list[Turn]) -> int:
    """How many claims of ``turns`` need review (the filter's count)."""
    return sum(turn.review_count for turn in turns)
