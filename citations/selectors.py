"""Reads of the citation ledger: entries resolved to their source row and to the passage they point at.

The passage of a quote is ``source[start:end]``: the document's content or the opinion's text,
sliced at the offsets of the citation row. It is read from the content layer whenever an entry
is read, never stored in the ledger. It is cut on the database side (``SUBSTR``, 1-based) so
that only the passage leaves the database, not a 100KB text per entry; the text columns
themselves are deferred. The quote row's ``passage_sha256`` (the digest of the passage as it was
verified; a digest, not content) tells whether the passage read now is still that one
(:attr:`Passage.intact`). The trace API and the admin both read entries through here.
"""

from __future__ import annotations

from dataclasses import dataclass
from uuid import UUID

from django.db.models import F, QuerySet
from django.db.models.functions import Coalesce, Substr

from chats.models import Chat
from chats.services import passage_sha256
from citations.models import CitationLedgerEntry

# Annotation names set by with_sources() and read by passage().
_START = "passage_start"
_END = "passage_end"
_TEXT = "passage_text"
_DIGEST = "passage_digest"

_QUOTE_SOURCES = (
    # (relation from the entry to the quote row, the text column it quotes, relative to that row)
    ("message_citation", "document__content"),
    ("message_caselaw_citation", "opinion__text"),
)


@dataclass(frozen=True, slots=True)
class Passage:
    """The span of the source a quote points at, and its text read at that span."""

    start: int
    end: int
    text: str
    # The digest the quote row stored at verification; empty for quotes stored before digests existed.
    verified_sha256: str = ""

    @property
    def intact(self) -> bool | None:
        """Whether ``text``, read now, is the passage that was verified (its SHA-256 equals the stored
        digest); ``None`` when no digest was stored."""
        if not self.verified_sha256:
            return None
        return passage_sha256(self.text) == self.verified_sha256


def _sliced(quote: str, text: str) -> Substr:
    start = F(f"{quote}__source_offset_start")
    return Substr(f"{quote}__{text}", start + 1, F(f"{quote}__source_offset_end") - start)


def with_sources(entries: QuerySet[CitationLedgerEntry]) -> QuerySet[CitationLedgerEntry]:
    """``entries`` with their source row joined in (a quote with its document or opinion, minus the
    text; or the tool source), and the passage of each quote (read it with :func:`passage`).

    One query whatever the number of entries.
    """
    return (
        entries.select_related(
            "message_citation__document",
            "message_caselaw_citation__opinion",
            "message_tool_source",
            "message_case_citation__opinion",
        )
        .defer(
            "message_citation__quote",
            "message_citation__document__content",
            "message_caselaw_citation__quote",
            "message_caselaw_citation__opinion__text",
            "message_case_citation__opinion__text",
        )
        .annotate(
            **{
                _START: Coalesce(*(F(f"{quote}__source_offset_start") for quote, _ in _QUOTE_SOURCES)),
                _END: Coalesce(*(F(f"{quote}__source_offset_end") for quote, _ in _QUOTE_SOURCES)),
                # Null for a tool-source entry: a consulted source was not quoted.
                _TEXT: Coalesce(*(_sliced(quote, text) for quote, text in _QUOTE_SOURCES)),
                _DIGEST: Coalesce(*(F(f"{quote}__passage_sha256") for quote, _ in _QUOTE_SOURCES)),
            }
        )
    )


def passage(entry: CitationLedgerEntry) -> Passage | None:
    """The passage of an entry read through :func:`with_sources`; ``None`` for a consulted source."""
    text = getattr(entry, _TEXT)
    if text is None:
        return None
    return Passage(
        start=getattr(entry, _START), end=getattr(entry, _END), text=text, verified_sha256=getattr(entry, _DIGEST)
    )


def chat_ledger(*, chat: Chat, message_id: UUID | None = None) -> QuerySet[CitationLedgerEntry]:
    """The entries of ``chat`` (of one turn with ``message_id``; none if that turn is not in ``chat``),
    in the order they were written, resolved with :func:`with_sources`."""
    entries = CitationLedgerEntry.objects.filter(chat=chat)
    if message_id is not None:
        entries = entries.filter(message_id=message_id)
    # created_at then id: the (chat, created_at) index serves it, and pages are stable.
    return with_sources(entries.order_by("created_at", "id"))


def entry_with_source(entry_id: UUID) -> CitationLedgerEntry:
    """One entry resolved with :func:`with_sources` (raises ``DoesNotExist``)."""
    return with_sources(CitationLedgerEntry.objects.filter(pk=entry_id)).get()
