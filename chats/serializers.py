"""Serializers of the chat API: input validation and the JSON shapes of chats, messages and turns."""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any, TypeVar

from django.conf import settings
from django.db.models import QuerySet
from django.urls import reverse
from drf_spectacular.utils import extend_schema_field
from rest_framework import serializers

from chats.api_fields import StrictCharField
from chats.matters import JUDGE_WORDING_MAX_CHARS
from chats.models import (
    UNCHECKED,
    UNVERIFIED,
    VERIFIED_METHODS,
    CaseCitation,
    CaselawOpinion,
    Chat,
    DocumentQuote,
    Message,
    MessageToolSource,
    OpinionQuote,
    Project,
    SourceKind,
    StatuteCitation,
)
from chats.pages import pages_of_span, span_pin_cite
from chats.selectors import projects_visible_to
from lqai_verify.certificates import COURTS
from lqai_verify.statuses import review_count, status_in_words
from lqai_verify.verdict import case_claim_status, statute_claim_status

QuoteRow = TypeVar("QuoteRow", DocumentQuote, OpinionQuote)


class VisibleProjectField(serializers.PrimaryKeyRelatedField):
    """A project the requesting user owns or is a member of; any other id reads "unknown project",
    whether or not it exists, so other users' matters are never revealed."""

    default_error_messages = {
        "does_not_exist": "unknown project",
        "incorrect_type": "Must be a valid UUID.",
    }

    def get_queryset(self) -> QuerySet[Project]:
        return projects_visible_to(self.context["request"].user)


class ChatSerializer(serializers.ModelSerializer[Chat]):
    title = StrictCharField(max_length=200, allow_blank=True, required=False, help_text="The chat's title.")
    project = VisibleProjectField(
        pk_field=serializers.UUIDField(), allow_null=True, required=False, help_text="A matter you belong to."
    )

    class Meta:
        model = Chat
        fields = ["id", "title", "project", "created_at"]
        read_only_fields = ["id", "created_at"]


class ChatListQuerySerializer(serializers.Serializer[None]):
    """The query string of ``GET /api/chats/``."""

    project = serializers.UUIDField(
        required=False,
        help_text="Only the chats of this matter. A matter you do not belong to yields an empty list, as one "
        "that does not exist.",
    )


PAGES_HELP = (
    "The pages of the source that the quote spans (a PDF's page numbers, an opinion's reporter pages from its star "
    "paging or bracketed markers, or a slip opinion's own pages, 'slip 5'), in order; null when the source has no "
    "known pages. pin_cite writes them as a lawyer cites them."
)
PAGES_FIELD = serializers.ListField(child=serializers.CharField(), allow_null=True, help_text=PAGES_HELP)


def quote_pages(row: DocumentQuote | OpinionQuote) -> list[str] | None:
    """The pages a quote row spans in its source (``chats.pages``)."""
    source = row.opinion if isinstance(row, OpinionQuote) else row.document
    return None if source is None else pages_of_span(source.pages, row.source_offset_start, row.source_offset_end)


PIN_CITE_HELP = (
    "Where the quote is in its source, as a lawyer cites it: an opinion's Bluebook pin cite in the reporter of its "
    "citation (590 F. Supp. 3d at 870, 134 S.W.3d at 676\u201377) or its slip opinion's pages (slip op. at 5); a "
    "document's own pages (p. 4, pp. 4\u20135); null when no page is known."
)
PIN_CITE_FIELD = serializers.CharField(allow_null=True, help_text=PIN_CITE_HELP)


def quote_pin_cite(row: DocumentQuote | OpinionQuote) -> str | None:
    """The pin cite of a quote row (``page_cites``): an opinion's Bluebook pin cite, a document's ``p. N``."""
    source = row.opinion if isinstance(row, OpinionQuote) else row.document
    if source is None:
        return None
    citation = source.citation if isinstance(source, CaselawOpinion) else None
    return span_pin_cite(source.pages, row.source_offset_start, row.source_offset_end, citation=citation)


CLAIM_POSITION_HELP = (
    "The claim's place, from 0, among the quotes its turn claimed (KB and caselaw together, failed claims too)."
)


ANSWER_START_HELP = "Where the claim stands in the answer text: content[answer_start:answer_end]; null if unplaced."
ANSWER_UNPLACED_HELP = "Why the claim has no place in the answer (its quote is not in the answer text); else null."
# The reason shown for a row stored before answer positions were recorded.
PLACED_BEFORE_POSITIONS = "stored before answer positions were recorded"


class AnswerSpanFields(serializers.Serializer[Any]):
    """A quote row's place in the answer: ``answer_start``/``answer_end``, or null and ``answer_unplaced_reason``."""

    answer_start = serializers.IntegerField(
        source="answer_offset_start", read_only=True, allow_null=True, help_text=ANSWER_START_HELP
    )
    answer_end = serializers.IntegerField(source="answer_offset_end", read_only=True, allow_null=True)
    answer_unplaced_reason = serializers.SerializerMethodField(help_text=ANSWER_UNPLACED_HELP)

    @extend_schema_field(serializers.CharField(allow_null=True))
    def get_answer_unplaced_reason(self, obj: DocumentQuote | OpinionQuote) -> str | None:
        return answer_unplaced_reason(obj)


def answer_unplaced_reason(row: DocumentQuote | OpinionQuote) -> str | None:
    """Why a quote row has no answer span (None when it has one)."""
    if row.answer_offset_start is not None:
        return None
    return row.answer_unplaced_reason or PLACED_BEFORE_POSITIONS


ANSWER_SPAN_FIELDS = ["answer_start", "answer_end", "answer_unplaced_reason"]


METHOD_HELP = (
    "How the quote was found in its source: exact_match, tolerant_match (formatting differences only), or altered "
    "(found, but an alteration, an omission or its edges may change what the source says: a person must check it)."
)


class KBCitationSerializer(AnswerSpanFields, serializers.ModelSerializer[DocumentQuote]):
    """A quote from a matter document, found in it (see ``method``: an altered one needs a person's check)."""

    kind = serializers.SerializerMethodField()
    document_title = serializers.CharField(source="document.title", read_only=True)
    start = serializers.IntegerField(source="source_offset_start", read_only=True)
    end = serializers.IntegerField(source="source_offset_end", read_only=True)
    method = serializers.CharField(source="verification_method", read_only=True, help_text=METHOD_HELP)
    confidence = serializers.FloatField(source="verification_confidence", read_only=True)
    position = serializers.IntegerField(read_only=True, help_text=CLAIM_POSITION_HELP)
    pages = serializers.SerializerMethodField(help_text=PAGES_HELP)
    pin_cite = serializers.SerializerMethodField(help_text=PIN_CITE_HELP)

    class Meta:
        model = DocumentQuote
        fields = [
            "id",
            "kind",
            "position",
            "quote",
            "document",
            "document_title",
            "start",
            "end",
            "pages",
            "pin_cite",
            "method",
            "confidence",
            *ANSWER_SPAN_FIELDS,
        ]
        read_only_fields = fields

    def get_kind(self, obj: DocumentQuote) -> str:
        return SourceKind.KB_DOCUMENT

    @extend_schema_field(PAGES_FIELD)
    def get_pages(self, obj: DocumentQuote) -> list[str] | None:
        return quote_pages(obj)

    @extend_schema_field(PIN_CITE_FIELD)
    def get_pin_cite(self, obj: DocumentQuote) -> str | None:
        return quote_pin_cite(obj)


class CaselawCitationSerializer(AnswerSpanFields, serializers.ModelSerializer[OpinionQuote]):
    """A quote from a court opinion, found in it (see ``method``: an altered one needs a person's check)."""

    kind = serializers.SerializerMethodField()
    case_name = serializers.CharField(source="opinion.case_name", read_only=True)
    citation = serializers.CharField(source="opinion.citation", read_only=True)
    court = serializers.CharField(source="opinion.court", read_only=True)
    provider = serializers.CharField(source="opinion.provider", read_only=True)
    url = serializers.CharField(source="opinion.absolute_url", read_only=True)
    start = serializers.IntegerField(source="source_offset_start", read_only=True)
    end = serializers.IntegerField(source="source_offset_end", read_only=True)
    method = serializers.CharField(source="verification_method", read_only=True, help_text=METHOD_HELP)
    confidence = serializers.FloatField(source="verification_confidence", read_only=True)
    position = serializers.IntegerField(read_only=True, help_text=CLAIM_POSITION_HELP)
    pages = serializers.SerializerMethodField(help_text=PAGES_HELP)
    pin_cite = serializers.SerializerMethodField(help_text=PIN_CITE_HELP)

    class Meta:
        model = OpinionQuote
        fields = [
            "id",
            "kind",
            "position",
            "quote",
            "opinion",
            "case_name",
            "citation",
            "court",
            "provider",
            "url",
            "start",
            "end",
            "pages",
            "pin_cite",
            "method",
            "confidence",
            *ANSWER_SPAN_FIELDS,
        ]
        read_only_fields = fields

    def get_kind(self, obj: OpinionQuote) -> str:
        return SourceKind.CASELAW

    @extend_schema_field(PAGES_FIELD)
    def get_pages(self, obj: OpinionQuote) -> list[str] | None:
        return quote_pages(obj)

    @extend_schema_field(PIN_CITE_FIELD)
    def get_pin_cite(self, obj: OpinionQuote) -> str | None:
        return quote_pin_cite(obj)


class ToolSourceSerializer(serializers.ModelSerializer[MessageToolSource]):
    """A source a tool consulted during the turn (provenance, not a quote)."""

    class Meta:
        model = MessageToolSource
        fields = ["id", "source_kind", "tool", "provider", "label", "subtitle", "url", "external_ref"]
        read_only_fields = fields


class FailedClaimSerializer(AnswerSpanFields):
    """A quote the assistant claimed that did not verify: recorded, with why, and listed apart from citations."""

    id = serializers.UUIDField(read_only=True)
    kind = serializers.SerializerMethodField()
    position = serializers.IntegerField(read_only=True, help_text=CLAIM_POSITION_HELP)
    quote = serializers.CharField(read_only=True)
    reason = serializers.CharField(source="unverified_reason", read_only=True)
    source_id = serializers.SerializerMethodField(
        help_text="The document or opinion claimed, if it is one this turn may quote."
    )

    def get_kind(self, obj: DocumentQuote | OpinionQuote) -> str:
        return SourceKind.CASELAW if isinstance(obj, OpinionQuote) else SourceKind.KB_DOCUMENT

    @extend_schema_field(serializers.UUIDField(allow_null=True))
    def get_source_id(self, obj: DocumentQuote | OpinionQuote) -> str | None:
        source_id = obj.opinion_id if isinstance(obj, OpinionQuote) else obj.document_id
        return None if source_id is None else str(source_id)


class CaseCitationSerializer(serializers.ModelSerializer[CaseCitation]):
    """A case citation written in the answer, as checked at finalize: its span in the answer, the citation
    and the case name as written, the check's ``status`` (verified, name_mismatch, pin_mismatch, not_found,
    ambiguous, unchecked) with its ``detail``, and the case the citation really is (``opinion``,
    ``opinion_case_name``; set for verified, name_mismatch and pin_mismatch)."""

    answer_start = serializers.IntegerField(source="answer_offset_start", read_only=True)
    answer_end = serializers.IntegerField(source="answer_offset_end", read_only=True)
    opinion_case_name = serializers.CharField(source="opinion.case_name", read_only=True, allow_null=True, default=None)

    class Meta:
        model = CaseCitation
        fields = [
            "id",
            "kind",
            "citation",
            "case_name",
            "status",
            "detail",
            "answer_start",
            "answer_end",
            "opinion",
            "opinion_case_name",
            "provider",
        ]
        read_only_fields = fields


class StatuteCitationSerializer(serializers.ModelSerializer[StatuteCitation]):
    """A statute or regulation citation of the answer (``kind`` ``citation``) or a quote attributed to one
    (``quote``), as the authority library checked it at finalize: the citation as written and its span in the
    answer, ``cited`` as a lawyer writes it with the release checked (``9 U.S.C. § 2 (Online@117-80)``), the
    section (``identifier``, ``pin``) and the release (``code``, ``title``, ``release_point``,
    ``release_label``, ``release_official``), its ``status`` (a citation: verified, not_found, unchecked; a
    quote: verified, altered, found_elsewhere, failed, unchecked) in words (``status_words``) with its
    ``reason``; for a quote, the quote, where it is in the section's text (``source_start``/``source_end``),
    the passage's SHA-256, its alterations and context flags, and where else it was found (``found_in``)."""

    answer_start = serializers.IntegerField(source="answer_offset_start", read_only=True)
    answer_end = serializers.IntegerField(source="answer_offset_end", read_only=True)
    source_start = serializers.IntegerField(source="source_offset_start", read_only=True, allow_null=True)
    source_end = serializers.IntegerField(source="source_offset_end", read_only=True, allow_null=True)
    status_words = serializers.SerializerMethodField()

    class Meta:
        model = StatuteCitation
        fields = [
            "id",
            "kind",
            "position",
            "citation",
            "answer_start",
            "answer_end",
            "cited",
            "identifier",
            "pin",
            "code",
            "title",
            "release_point",
            "release_label",
            "release_official",
            "status",
            "status_words",
            "reason",
            "quote",
            "verification_method",
            "verification_confidence",
            "source_start",
            "source_end",
            "passage_sha256",
            "alterations",
            "context_flags",
            "found_in",
        ]
        read_only_fields = fields

    def get_status_words(self, obj: StatuteCitation) -> str:
        return status_in_words(statute_claim_status(obj.kind, obj.status)).words


def _verified(rows: Iterable[QuoteRow]) -> list[QuoteRow]:
    return [row for row in rows if row.verification_method in VERIFIED_METHODS]


class MessageSerializer(serializers.ModelSerializer[Message]):
    """A message; an assistant message carries the id of the question it answers (``reply_to``; null for a
    user message and for answers stored before it was recorded), its verdict, its quotes found in their sources
    (``citations``, ``caselaw_citations``), the claims that did not verify (``unverified_citations``), the
    quotations nothing could check (``unchecked_quotes``, a checked draft's), the sources its tools consulted
    and, when a model answered it, the model's usage (``model_name``, tokens, ``latency_ms``; else empty). Reads
    the prefetched rows: no query per message."""

    citations = serializers.SerializerMethodField()
    caselaw_citations = serializers.SerializerMethodField()
    unverified_citations = serializers.SerializerMethodField()
    unchecked_quotes = serializers.SerializerMethodField()
    tool_sources = ToolSourceSerializer(many=True, read_only=True)
    case_citations = CaseCitationSerializer(many=True, read_only=True)
    statute_citations = StatuteCitationSerializer(many=True, read_only=True)
    review_count = serializers.SerializerMethodField(
        help_text="How many of its claims (quotes, failed or not, case citations, statute citations and quotes) a "
        "person must check."
    )

    class Meta:
        model = Message
        fields = [
            "id",
            "role",
            "kind",
            "reply_to",
            "content",
            "status",
            "created_at",
            "finalized_at",
            "verdict",
            "review_count",
            "model_name",
            "prompt_tokens",
            "completion_tokens",
            "latency_ms",
            "citations",
            "caselaw_citations",
            "unverified_citations",
            "unchecked_quotes",
            "tool_sources",
            "case_citations",
            "statute_citations",
        ]
        read_only_fields = fields

    def get_review_count(self, obj: Message) -> int:
        quotes = (
            row.verification_method for rows in (obj.citations.all(), obj.caselaw_citations.all()) for row in rows
        )
        cases = (case_claim_status(case.status, case.pin_status) for case in obj.case_citations.all())
        statutes = (statute_claim_status(row.kind, row.status) for row in obj.statute_citations.all())
        return review_count([*quotes, *cases, *statutes])

    @extend_schema_field(KBCitationSerializer(many=True))
    def get_citations(self, obj: Message) -> Any:
        return KBCitationSerializer(_verified(obj.citations.all()), many=True).data

    @extend_schema_field(CaselawCitationSerializer(many=True))
    def get_caselaw_citations(self, obj: Message) -> Any:
        return CaselawCitationSerializer(_verified(obj.caselaw_citations.all()), many=True).data

    @extend_schema_field(FailedClaimSerializer(many=True))
    def get_unverified_citations(self, obj: Message) -> Any:
        return FailedClaimSerializer(_failed_claims(obj.citations.all(), obj.caselaw_citations.all()), many=True).data

    @extend_schema_field(FailedClaimSerializer(many=True))
    def get_unchecked_quotes(self, obj: Message) -> Any:
        """The quotations nothing could check (a draft's, ``unchecked``): each with what would check it."""
        rows = [row for row in obj.citations.all() if row.verification_method == UNCHECKED]
        return FailedClaimSerializer(rows, many=True).data


def _failed_claims(kb_rows: Iterable[DocumentQuote], caselaw_rows: Iterable[OpinionQuote]) -> Any:
    return [row for rows in (kb_rows, caselaw_rows) for row in rows if row.verification_method == UNVERIFIED]


def failed_claims_of(message: Message) -> list[DocumentQuote | OpinionQuote]:
    """The claims of ``message`` that did not verify, in the order of its ``unverified_citations`` (two
    queries); serialized by :class:`FailedClaimSerializer`."""
    rows: list[DocumentQuote | OpinionQuote] = _failed_claims(
        DocumentQuote.objects.filter(message=message, verification_method=UNVERIFIED),
        OpinionQuote.objects.filter(message=message, verification_method=UNVERIFIED),
    )
    return rows


class ChatDetailSerializer(ChatSerializer):
    """A chat; its messages are read page by page from ``messages_url``."""

    messages_url = serializers.SerializerMethodField()

    class Meta(ChatSerializer.Meta):
        fields = [*ChatSerializer.Meta.fields, "messages_url"]

    def get_messages_url(self, obj: Chat) -> str:
        path = reverse("chats:message-create", kwargs={"chat_id": obj.pk})
        request = self.context.get("request")
        return request.build_absolute_uri(path) if request is not None else path


class MessageCreateSerializer(serializers.Serializer[dict[str, Any]]):
    content = StrictCharField(
        trim_whitespace=True, help_text="The question; at most LQAI_MAX_MESSAGE_CHARS characters."
    )

    def validate_content(self, value: str) -> str:
        limit = settings.LQAI_MAX_MESSAGE_CHARS
        if len(value) > limit:
            raise serializers.ValidationError(f"Ensure this field has no more than {limit} characters.")
        return value


class TurnSerializer(serializers.Serializer[dict[str, Any]]):
    """The result of a single-shot turn: the answer (its claims that did not verify are its
    ``unverified_citations``) and the id of the question."""

    message = MessageSerializer()
    user_message_id = serializers.UUIDField()


class TurnErrorSerializer(serializers.Serializer[dict[str, Any]]):
    """A turn that did not answer: why (``detail``), ``code`` (backend_error: saved as failed; turn_timeout: saved
    as interrupted, resumable; turn_superseded: a resume took it over; not_saved) and the turn's ``message_id``."""

    detail = serializers.CharField()
    code = serializers.CharField()
    message_id = serializers.UUIDField()


class TurnDoneSerializer(serializers.Serializer[dict[str, Any]]):
    """The data of the stream's final ``done`` event."""

    message_id = serializers.UUIDField()
    status = serializers.CharField()
    verdict = serializers.CharField(
        help_text="pass, review, fail or none: the gate over the turn's claims (review: nothing failed, but a "
        "claim needs a person; a turn finalized under earlier rules may read supported)."
    )
    review_count = serializers.IntegerField(help_text="How many claims of this run a person must check.")
    case_citations = CaseCitationSerializer(many=True, help_text="The case citations of the answer, as checked.")
    statute_citations = StatuteCitationSerializer(
        many=True, help_text="The statute and regulation citations of this run's answer and their quotes, as checked."
    )
    citation_count = serializers.IntegerField(help_text="The verified quotes, each sent as a `citation` event.")
    unverified_citations = FailedClaimSerializer(
        many=True, help_text="The claims that did not verify, as the message lists them."
    )


class ResumeConflictSerializer(serializers.Serializer[dict[str, Any]]):
    detail = serializers.CharField()
    status = serializers.CharField()


class CertificateWordingSerializer(serializers.Serializer[dict[str, Any]]):
    """The wording of a matter's certificates of verification: its court's template and the judge's own words."""

    project_id = serializers.UUIDField(read_only=True)
    court = serializers.ChoiceField(
        choices=sorted(COURTS), help_text="The court whose template words the certificates (`default`: no order)."
    )
    judge_wording = StrictCharField(
        allow_blank=True,
        required=False,
        default="",
        max_length=JUDGE_WORDING_MAX_CHARS,
        help_text="The assigned judge's own wording, added to every certificate of the matter ('' for none).",
    )


class LegalHoldSerializer(serializers.Serializer[dict[str, Any]]):
    """A matter's legal hold: while it is set, neither the matter nor its chats or messages can be deleted."""

    project_id = serializers.UUIDField(read_only=True)
    legal_hold = serializers.BooleanField()
