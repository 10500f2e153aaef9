"""Serializers of the ledger trace API: an entry resolved to its source identity, the passage
read from the content layer, its verification and its provenance. Read-only.

Entries must be read through ``citations.selectors.with_sources`` (the passage is an annotation
of that query, and the source rows are joined in by it).
"""

from __future__ import annotations

from typing import Any

from drf_spectacular.utils import extend_schema_field
from rest_framework import serializers

from chats.models import CaseCitation, CaselawOpinion, Document, MessageToolSource
from chats.serializers import (
    ANSWER_START_HELP,
    ANSWER_UNPLACED_HELP,
    PAGES_FIELD,
    PAGES_HELP,
    PIN_CITE_FIELD,
    PIN_CITE_HELP,
    StatuteCitationSerializer,
    answer_unplaced_reason,
    quote_pages,
    quote_pin_cite,
)
from citations import selectors
from citations.models import CitationLedgerEntry


class ChatLedgerQuerySerializer(serializers.Serializer[None]):
    """The query string of ``GET /api/chats/{chat_id}/ledger/``."""

    message = serializers.UUIDField(
        required=False,
        help_text="Only the entries of this turn (an assistant message id). "
        "A message that is not in this chat yields an empty list.",
    )


class DocumentRefSerializer(serializers.ModelSerializer[Document]):
    class Meta:
        model = Document
        fields = ("id", "title")
        read_only_fields = fields


class OpinionRefSerializer(serializers.ModelSerializer[CaselawOpinion]):
    url = serializers.CharField(source="absolute_url", read_only=True)

    class Meta:
        model = CaselawOpinion
        fields = ("id", "case_name", "citation", "court", "date_filed", "url")
        read_only_fields = fields


class ToolSourceRefSerializer(serializers.ModelSerializer[MessageToolSource]):
    class Meta:
        model = MessageToolSource
        fields = ("id", "tool", "label", "subtitle", "url", "external_ref")
        read_only_fields = fields


class CaseCitationRefSerializer(serializers.ModelSerializer[CaseCitation]):
    """A case citation written in the answer, as checked: where it stands in the answer, what it says, what the
    check found (``status``, ``detail``) and the case it really is (``opinion``, for verified and
    name_mismatch)."""

    answer_start = serializers.IntegerField(source="answer_offset_start", read_only=True)
    answer_end = serializers.IntegerField(source="answer_offset_end", read_only=True)
    opinion = OpinionRefSerializer(read_only=True, allow_null=True)

    class Meta:
        model = CaseCitation
        fields = (
            "id",
            "kind",
            "citation",
            "case_name",
            "status",
            "detail",
            "pin",
            "pin_status",
            "answer_start",
            "answer_end",
            "opinion",
        )
        read_only_fields = fields


class PassageSerializer(serializers.Serializer[selectors.Passage]):
    start = serializers.IntegerField(read_only=True, help_text="Offset of the first character in the source.")
    end = serializers.IntegerField(read_only=True, help_text="Offset just past the last character.")
    text = serializers.CharField(read_only=True, help_text="source[start:end], read from the source now.")


class AlterationSerializer(serializers.Serializer[dict[str, Any]]):
    kind = serializers.CharField(
        read_only=True,
        help_text="bracket, letter ([t]he), sic, ellipsis (an omission), quote_mark (double for single or back), "
        "case (the passage matched only case-insensitively), parenthetical (a trailing Bluebook parenthetical "
        "such as (emphasis added)), emphasis (emphasis markup the quote added).",
    )
    detail = serializers.CharField(
        read_only=True,
        help_text="For a bracket: what it stands for (same, form, reference, shortened, insertion, letters, "
        "substitution); else empty.",
    )
    quote_text = serializers.CharField(read_only=True, help_text="The alteration as the quote wrote it.")
    source_start = serializers.IntegerField(
        read_only=True,
        help_text="Offset in the source of the text it stands for or omits (equal to source_end for an insertion).",
    )
    source_end = serializers.IntegerField(read_only=True, help_text="Offset just past that text.")
    alters = serializers.CharField(
        read_only=True,
        default="",
        help_text="Why this alteration may change what the source says (the quote is then 'altered'); empty when "
        "it cannot.",
    )


class ContextFlagSerializer(serializers.Serializer[dict[str, Any]]):
    flag = serializers.CharField(
        read_only=True,
        help_text="limited_after (the source goes on with a limiting continuation: unless, except, in part ...), "
        "negated_before (the passage starts after a negation of its own clause), limited_before (after a "
        "limiting word such as only).",
    )
    source_start = serializers.IntegerField(read_only=True, help_text="Offset in the source of the limiting text.")
    source_end = serializers.IntegerField(read_only=True, help_text="Offset just past it.")


class TurnSealSerializer(serializers.Serializer[selectors.TurnSealState]):
    sequence = serializers.IntegerField(read_only=True, help_text="Its place in its matter's chain of seals, from 1.")
    late = serializers.BooleanField(
        read_only=True,
        help_text="Sealed after the turn was finalized (by `seal_turns`): the seal proves the record from "
        "`sealed_at` on, not before.",
    )
    sealed_at = serializers.DateTimeField(read_only=True)


class LedgerEntrySerializer(serializers.Serializer[CitationLedgerEntry]):
    """One ledger entry. At most one of ``document``, ``opinion``, ``tool_source``, ``case_citation`` and
    ``statute_citation`` is set (none only for a failed claim naming no quotable source); ``passage`` and
    ``passage_intact`` are set for verified quotes (a statute quote's: in the section's text) and null for failed
    claims, consulted sources, checked case citations and statute citations."""

    id = serializers.UUIDField(read_only=True)
    message_id = serializers.UUIDField(read_only=True)
    created_at = serializers.DateTimeField(read_only=True)
    source_kind = serializers.CharField(read_only=True)
    source_row_id = serializers.UUIDField(
        read_only=True,
        help_text="Id of the row the entry indexes: a KB quote (DocumentQuote), a caselaw quote (OpinionQuote), "
        "a tool source, a case citation (CaseCitation) or a statute citation or quote (StatuteCitation).",
    )
    document = serializers.SerializerMethodField()
    opinion = serializers.SerializerMethodField()
    tool_source = serializers.SerializerMethodField()
    case_citation = serializers.SerializerMethodField()
    statute_citation = serializers.SerializerMethodField()
    passage = serializers.SerializerMethodField()
    pages = serializers.SerializerMethodField(help_text=PAGES_HELP)
    pin_cite = serializers.SerializerMethodField(help_text=PIN_CITE_HELP)
    alterations = serializers.SerializerMethodField(
        help_text="Each alteration and omission of a quote, in quote order, with the source span it stands for: "
        "empty for an exact quote and a failed claim; null for a consulted source."
    )
    context_flags = serializers.SerializerMethodField(
        help_text="What the source says right next to an altered quote's passage that may limit it, with its "
        "source span: empty for other quotes; null for a consulted source or a case citation."
    )
    passage_intact = serializers.SerializerMethodField(
        help_text="Whether the passage read now is the one that was verified: its SHA-256 equals the digest "
        "stored with the quote. False means the source text changed below the application. Null for "
        "consulted sources and for quotes stored before digests were recorded."
    )
    verification_status = serializers.CharField(
        read_only=True,
        help_text="How the quote was verified (exact_match, tolerant_match, or altered: found, but an alteration, "
        "an omission or the quote's edges may change what the source says), 'unverified' for a claim that did "
        "not verify (no passage, no confidence), 'unchecked' for a quotation nothing could check (no source, no "
        "passage, no confidence: a draft's quotation with no citation or citing a case nothing resolved), "
        "'provenance' for a consulted source, or a case citation's "
        "check (verified, name_mismatch, not_found, ambiguous, unchecked), or a statute row's: statute_verified, "
        "statute_not_found, statute_unchecked for a citation, statute_quote_verified, statute_quote_altered, "
        "statute_quote_found_elsewhere, statute_quote_failed, statute_quote_unchecked for a quote.",
    )
    unverified_reason = serializers.SerializerMethodField(
        help_text="Why an 'unverified' claim failed, or what would check an 'unchecked' quotation; else null."
    )
    confidence = serializers.FloatField(read_only=True, allow_null=True)
    answer_start = serializers.SerializerMethodField(help_text=ANSWER_START_HELP + " Null for a consulted source.")
    answer_end = serializers.SerializerMethodField()
    answer_unplaced_reason = serializers.SerializerMethodField(help_text=ANSWER_UNPLACED_HELP)
    provider = serializers.CharField(read_only=True, allow_null=True)
    retrieved_at = serializers.DateTimeField(read_only=True, allow_null=True)
    turn_seal = serializers.SerializerMethodField(
        help_text="The seal of the entry's turn (of its last finalize): its record signed and chained with the "
        "other turns of its matter, which the matter's export (`GET /api/projects/{id}/export/`) lets anyone "
        "check offline. Null while the turn is not sealed."
    )

    @staticmethod
    def _answer_span(entry: CitationLedgerEntry) -> tuple[int | None, int | None, str | None]:
        """The answer span of the entry's claim or case citation; none, and no reason, for a consulted source."""
        quote = entry.message_citation or entry.message_caselaw_citation
        if quote is not None:
            return quote.answer_offset_start, quote.answer_offset_end, answer_unplaced_reason(quote)
        case = entry.message_case_citation or entry.message_statute_citation
        if case is not None:
            return case.answer_offset_start, case.answer_offset_end, None
        return None, None, None

    @extend_schema_field(serializers.IntegerField(allow_null=True))
    def get_answer_start(self, entry: CitationLedgerEntry) -> int | None:
        return self._answer_span(entry)[0]

    @extend_schema_field(serializers.IntegerField(allow_null=True))
    def get_answer_end(self, entry: CitationLedgerEntry) -> int | None:
        return self._answer_span(entry)[1]

    @extend_schema_field(serializers.CharField(allow_null=True))
    def get_answer_unplaced_reason(self, entry: CitationLedgerEntry) -> str | None:
        return self._answer_span(entry)[2]

    @extend_schema_field(DocumentRefSerializer(allow_null=True))
    def get_document(self, entry: CitationLedgerEntry) -> dict[str, Any] | None:
        quote = entry.message_citation
        return None if quote is None or quote.document is None else DocumentRefSerializer(quote.document).data

    @extend_schema_field(OpinionRefSerializer(allow_null=True))
    def get_opinion(self, entry: CitationLedgerEntry) -> dict[str, Any] | None:
        quote = entry.message_caselaw_citation
        return None if quote is None or quote.opinion is None else OpinionRefSerializer(quote.opinion).data

    @extend_schema_field(serializers.CharField(allow_null=True))
    def get_unverified_reason(self, entry: CitationLedgerEntry) -> str | None:
        quote = entry.message_citation or entry.message_caselaw_citation
        return quote.unverified_reason if quote is not None and quote.unverified_reason else None

    @extend_schema_field(ToolSourceRefSerializer(allow_null=True))
    def get_tool_source(self, entry: CitationLedgerEntry) -> dict[str, Any] | None:
        source = entry.message_tool_source
        return None if source is None else ToolSourceRefSerializer(source).data

    @extend_schema_field(CaseCitationRefSerializer(allow_null=True))
    def get_case_citation(self, entry: CitationLedgerEntry) -> dict[str, Any] | None:
        case = entry.message_case_citation
        return None if case is None else CaseCitationRefSerializer(case).data

    @extend_schema_field(StatuteCitationSerializer(allow_null=True))
    def get_statute_citation(self, entry: CitationLedgerEntry) -> dict[str, Any] | None:
        row = entry.message_statute_citation
        return None if row is None else StatuteCitationSerializer(row).data

    @extend_schema_field(PassageSerializer(allow_null=True))
    def get_passage(self, entry: CitationLedgerEntry) -> dict[str, Any] | None:
        span = selectors.passage(entry)
        return None if span is None else PassageSerializer(span).data

    @extend_schema_field(ContextFlagSerializer(many=True, allow_null=True))
    def get_context_flags(self, entry: CitationLedgerEntry) -> list[dict[str, Any]] | None:
        quote = entry.message_citation or entry.message_caselaw_citation or entry.message_statute_citation
        return None if quote is None else [ContextFlagSerializer(f).data for f in quote.context_flags]

    @extend_schema_field(PAGES_FIELD)
    def get_pages(self, entry: CitationLedgerEntry) -> list[str] | None:
        quote = entry.message_citation or entry.message_caselaw_citation
        return None if quote is None else quote_pages(quote)

    @extend_schema_field(PIN_CITE_FIELD)
    def get_pin_cite(self, entry: CitationLedgerEntry) -> str | None:
        quote = entry.message_citation or entry.message_caselaw_citation
        return None if quote is None else quote_pin_cite(quote)

    @extend_schema_field(AlterationSerializer(many=True, allow_null=True))
    def get_alterations(self, entry: CitationLedgerEntry) -> list[dict[str, Any]] | None:
        quote = entry.message_citation or entry.message_caselaw_citation or entry.message_statute_citation
        return None if quote is None else [AlterationSerializer(a).data for a in quote.alterations]

    @extend_schema_field(TurnSealSerializer(allow_null=True))
    def get_turn_seal(self, entry: CitationLedgerEntry) -> dict[str, Any] | None:
        """From the context's ``turn_seals`` (``citations.selectors.turn_seals`` of the entries' turns)."""
        seal = self.context.get("turn_seals", {}).get(entry.message_id)
        return None if seal is None else dict(TurnSealSerializer(seal).data)

    def get_passage_intact(self, entry: CitationLedgerEntry) -> bool | None:
        span = selectors.passage(entry)
        return None if span is None else span.intact
