"""Reads of the citation ledger: entries resolved to their source row and to the passage they point at.

The passage of a quote is ``source[start:end]``: the document's content or the opinion's text,
sliced at the offsets of the quote row. It is read from the content layer whenever an entry
is read, never stored in the ledger. It is cut on the database side (``SUBSTR``, 1-based) so
that only the passage leaves the database, not a whole source text per entry; the text columns
themselves are deferred. The quote row's ``passage_sha256`` (the digest of the passage as it was
verified; a digest, not content) tells whether the passage read now is still that one
(:attr:`Passage.intact`). The trace API and the admin both read entries through here.
"""

from __future__ import annotations

import datetime
import re
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass
from typing import Any
from uuid import UUID

from django.db import connection
from django.db.models import Case, Count, Expression, F, IntegerField, Max, Min, Model, Q, QuerySet, Value, When
from django.db.models.functions import Coalesce, Greatest, Substr
from django.utils import timezone

from chats.models import CaseCitation, CaselawOpinion, Chat, Document, DocumentQuote, Message, OpinionQuote, Project
from chats.services import passage_sha256
from citations import partitions
from citations.ledger import OFF_TIME_TABLE, SOURCE_MAPPINGS
from citations.models import CitationLedgerEntry, TurnSeal
from lqai_verify.passage_html import Excerpt

# Annotation names set by with_sources() and read by passage().
_START = "passage_start"
_END = "passage_end"
_TEXT = "passage_text"
_DIGEST = "passage_digest"
_CONTEXT_START = "passage_context_start"
_CONTEXT_TEXT = "passage_context_text"
_QUOTE = "claimed_quote"

# Characters of the source shown on each side of a passage on a ledger entry's admin page.
CONTEXT_CHARS = 200

_QUOTE_SOURCES = (
    # (relation from the entry to the quote row, the text column it quotes, relative to that row)
    ("message_citation", "document__content"),
    ("message_caselaw_citation", "opinion__text"),
    # A statute quote found in a section's text (a statute citation has no offsets, hence no passage).
    ("message_statute_citation", "section__text"),
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
            "message_statute_citation",
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


# A passage and the source text around it, as the one renderer draws it (lqai_verify.passage_html).
PassageInContext = Excerpt


def entry_in_context(
    entry_id: UUID, *, context_chars: int = CONTEXT_CHARS
) -> tuple[CitationLedgerEntry, PassageInContext | None]:
    """One entry resolved with :func:`with_sources`, and its passage with ``context_chars`` characters of the
    source on each side (``None`` for a consulted source or a failed claim). One query: the context is cut on
    the database side like the passage, so only it leaves the database (raises ``DoesNotExist``)."""

    # From the passage's offsets as with_sources() reads them: GREATEST ignores NULLs on PostgreSQL (not on
    # SQLite), so it must not see the other quote table's (NULL) offsets.
    source_text = Coalesce(*(F(f"{quote}__{text}") for quote, text in _QUOTE_SOURCES))
    window = context_window(start=F(_START), end=F(_END), text=source_text, context_chars=context_chars)
    entry = (
        with_sources(CitationLedgerEntry.objects.filter(pk=entry_id))
        .annotate(**{_CONTEXT_START: window["context_start"], _CONTEXT_TEXT: window["context_text"]})
        # The quote as claimed (with_sources() defers it): the entry page shows it, also for a failed claim.
        .annotate(**{_QUOTE: Coalesce(*(F(f"{quote}__quote") for quote, _ in _QUOTE_SOURCES))})
        .get()
    )
    span = passage(entry)
    text = getattr(entry, _CONTEXT_TEXT)
    if span is None or text is None:
        return entry, None
    return entry, context_around(span, start=getattr(entry, _CONTEXT_START), text=text, context_chars=context_chars)


def claimed_quote(entry: CitationLedgerEntry) -> str | None:
    """The quote as claimed, of an entry read through :func:`entry_in_context`; ``None`` unless it is a quote."""
    quote: str | None = getattr(entry, _QUOTE, None)
    return quote


def context_window(
    *, start: Expression | F, end: Expression | F, text: str | Expression, context_chars: int = CONTEXT_CHARS
) -> dict[str, Any]:
    """Annotations that cut, on the database side, ``context_chars`` characters of the source column ``text`` on
    each side of the span ``[start, end)``: ``context_start`` and ``context_text`` (null without a span). Read
    them with :func:`context_around`. For querysets of quote rows (``start=F("source_offset_start")``, ...)."""
    context_start = Greatest(start - context_chars, Value(0), output_field=IntegerField())
    return {
        "context_start": context_start,
        "context_text": Substr(text, context_start + 1, end + context_chars - context_start),
    }


def context_around(span: Passage, *, start: int, text: str, context_chars: int = CONTEXT_CHARS) -> PassageInContext:
    """The passage ``span`` in ``text`` (``source[start:start + len(text)]``, cut with ``context_chars`` characters
    on each side of the span), trimmed to whole words at either edge, never into the passage."""
    more_before = start > 0
    # The whole length asked for came back: the source (most likely) goes on after it.
    more_after = start + len(text) == span.end + context_chars
    # Whole words only: drop a word cut at either edge of the context, never any of the passage.
    if more_before:
        first_space = re.search(r"\s", text[: span.start - start])
        if first_space is not None:
            start, text = start + first_space.end(), text[first_space.end() :]
    if more_after:
        after = span.end - start
        gap = max(text.rfind(" ", after), text.rfind("\n", after))
        if gap >= 0:
            text = text[:gap]
    return PassageInContext(passage=span, start=start, text=text, more_before=more_before, more_after=more_after)


_SOURCES = (
    "message_citation",
    "message_caselaw_citation",
    "message_case_citation",
    "message_statute_citation",
    "message_tool_source",
)


def in_turn_order(entries: QuerySet[CitationLedgerEntry]) -> QuerySet[CitationLedgerEntry]:
    """``entries`` in the order of the turns they record, whenever they were written (by the turn, or later
    by a backfill): turn by turn as the questions were asked; within a turn, run by run (a resumed turn's
    later rows after the first run's), the quotes in the order they were claimed, then the case citations in
    the order of the answer, then the statute citations and quotes in their order, then the sources the tools
    consulted in the order reported. The id comes last,
    so that pages are stable."""
    return entries.order_by(
        "message__created_at",
        "message_id",
        Coalesce(*(F(f"{source}__created_at") for source in _SOURCES)),
        Case(
            When(message_case_citation__isnull=False, then=Value(1)),
            When(message_statute_citation__isnull=False, then=Value(2)),
            When(message_tool_source__isnull=False, then=Value(3)),
            default=Value(0),
        ),
        Coalesce(
            F("message_citation__position"),
            F("message_caselaw_citation__position"),
            F("message_case_citation__answer_offset_start"),
            F("message_statute_citation__position"),
            F("message_tool_source__position"),
        ),
        "id",
    )


# How long before its turn began an entry may be dated: an entry is dated at its row's ``created_at``
# (``citations.ledger``), written by the server running the turn after the turn's message was, so only a
# difference between two servers' clocks can date it earlier. The bound prunes whole months, so a wide margin
# costs nothing.
TURN_CLOCK_MARGIN = datetime.timedelta(days=1)


@dataclass(frozen=True)
class TurnSealState:
    """The seal of a turn's last finalize (``citations.seals``): its place in its chain, whether it was sealed
    late (after the turn was finalized, by ``seal_turns``: it proves the record from ``sealed_at`` on)."""

    sequence: int
    late: bool
    sealed_at: datetime.datetime


def turn_seals(message_ids: Iterable[UUID]) -> dict[UUID, TurnSealState]:
    """The seal of each given turn's last finalize, by message id; a turn whose last finalize has no seal is
    absent. One query (the seals' message index, joined with their messages), apart from the read that
    chose the turns: as a subquery of that read, its cost estimate tipped the trace API's plan into parallel
    workers, whose start-up cost more than the read (docs/scale.md, "The trace API")."""
    ids = set(message_ids)
    if not ids:
        return {}
    rows = (
        TurnSeal.objects.filter(message_id__in=ids, finalized_at=F("message__finalized_at"))
        .order_by("message_id", "finalize_number")
        .values_list("message_id", "sequence", "late", "sealed_at")
    )
    # The last seal of a finalize wins (a finalize has one; ordered all the same).
    return {message_id: TurnSealState(sequence, late, sealed_at) for message_id, sequence, late, sealed_at in rows}


def chat_ledger(*, chat: Chat, message_id: UUID | None = None) -> QuerySet[CitationLedgerEntry]:
    """The entries of ``chat`` (of one turn with ``message_id``; none if that turn is not in ``chat``),
    in the order of its turns (:func:`in_turn_order`), resolved with :func:`with_sources`.

    Bounded below by when the chat's first turn (or that turn) began, less :data:`TURN_CLOCK_MARGIN`: on
    PostgreSQL the ledger is partitioned by month on ``created_at`` (``citations.0014``), and a bound the
    planner sees prunes the months before the chat, where without one it plans the joins of every month kept
    (most of the request's time was planning; docs/scale.md, "The trace API")."""
    entries = CitationLedgerEntry.objects.filter(chat=chat)
    turns = Message.objects.filter(chat=chat)
    if message_id is not None:
        entries = entries.filter(message_id=message_id)
        turns = turns.filter(pk=message_id)
    began = turns.aggregate(first=Min("created_at"))["first"]
    if began is None:
        return with_sources(in_turn_order(entries.none()))
    return with_sources(in_turn_order(entries.filter(created_at__gte=began - TURN_CLOCK_MARGIN)))


# --- The admin changelist's bounded reads (issue 25: constant in the ledger's size) --------------------------------


def page_of(
    queryset: QuerySet[CitationLedgerEntry], *, bottom: int, top: int, whole: bool = False, by_month: bool = True
) -> list[CitationLedgerEntry]:
    """Entries ``bottom:top`` of ``queryset`` in its order, in two queries or more: first their keys alone, then
    the entries with their joins by those keys. A page's joins are then made for its rows only: in one query the
    planner, to join only as many rows as a page has, prefers walking the order's index (every entry, in
    date order) and testing each against the filter, which for a filter matching a thousand old entries
    reads nearly the whole index. ``whole``: the rows are all of ``queryset`` (it has at most ``top``), so
    their keys are read in no order, through the filter's index.

    Ordered by ``created_at`` first (the changelist's own order), and ``by_month``, the keys are read month by
    month in that order (:func:`in_time_chunks`), stopping once ``top`` are found, so a page of recent entries
    names only the months it comes from. The keys are ``(id, created_at)``, and the second query is bounded by the
    page's first and last ``created_at`` as well as by its ids: on PostgreSQL the ledger is partitioned by
    month on ``created_at`` (``citations.0014``), and a bound the planner can see prunes every other month
    before it plans the joins, where ids alone make it plan them for every partition."""
    if top <= bottom:
        return []
    newest_first = _time_order(queryset) if by_month and not whole else None
    if newest_first is None:
        keys_of = queryset.order_by() if whole else queryset
        keys = list(keys_of.values_list("pk", "created_at")[bottom:top])
    else:
        keys = []
        for chunk in in_time_chunks(queryset, newest_first=newest_first):
            keys += chunk.values_list("pk", "created_at")[: top - len(keys)]
            if len(keys) >= top:
                break
        keys = keys[bottom:top]
    if not keys:
        return []
    times = [created_at for _, created_at in keys]
    return list(queryset.filter(pk__in=[pk for pk, _ in keys], created_at__gte=min(times), created_at__lte=max(times)))


def _time_order(queryset: QuerySet[Any]) -> bool | None:
    """Whether ``queryset`` is ordered newest first (True) or oldest first (False) by ``created_at`` before
    anything else; None when its order starts with something else."""
    order = queryset.query.order_by or (queryset.model._meta.ordering if queryset.query.default_ordering else ())
    first = order[0] if order else None
    if first == "-created_at":
        return True
    if first == "created_at":
        return False
    return None


Span = tuple[datetime.datetime | None, datetime.datetime | None]


def time_chunks(*, newest_first: bool = True) -> list[Span]:
    """Spans of ``created_at``, ``[start, end)`` (None: unbounded), that together cover all time without
    overlapping, in time order (newest first or oldest first): on a partitioned ledger, runs of its months
    (the times before, between and after them are spans of their own, those of the default partition),
    one span at the near end of the walk, then twice as many in each next one, so that a walk through every
    month takes a few queries, and one that stops early names only the months it read. Elsewhere (SQLite),
    one span: all time."""
    months = partitions.months()
    if not months:
        return [(None, None)]
    # Every span in time order: before the first month, each month and each gap, after the last.
    spans: list[Span] = [(None, months[0][0])]
    for at, (start, end) in enumerate(months):
        if at and months[at - 1][1] != start:
            spans.append((months[at - 1][1], start))
        spans.append((start, end))
    spans.append((months[-1][1], None))
    if newest_first:
        spans.reverse()
    chunks = []
    at, size = 0, 1
    while at < len(spans):
        run = spans[at : at + size]
        first, last = (run[-1], run[0]) if newest_first else (run[0], run[-1])
        chunks.append((first[0], last[1]))
        at, size = at + size, size * 2
    return chunks


def in_time_chunks(
    queryset: QuerySet[Any], *, newest_first: bool = True, by_month: bool = True
) -> Iterator[QuerySet[Any]]:
    """``queryset`` bounded to each span of :func:`time_chunks` in turn: a query of one names only the
    partitions of its months (the planner prunes the others before planning). Not ``by_month``: ``queryset``
    alone, once."""
    if not by_month:
        yield queryset
        return
    for start, end in time_chunks(newest_first=newest_first):
        chunk = queryset
        if start is not None:
            chunk = chunk.filter(created_at__gte=start)
        if end is not None:
            chunk = chunk.filter(created_at__lt=end)
        yield chunk


def capped_count(queryset: QuerySet[Any], *, cap: int, by_month: bool = True) -> int:
    """The number of rows of ``queryset``, up to ``cap + 1`` (``cap + 1`` means "more than ``cap``"): a
    ``COUNT(*)`` over a ``LIMIT`` subquery in each span of :func:`time_chunks`, newest first, stopping once
    more than ``cap`` are counted, so it reads at most ``cap + 1`` index entries whatever the table's size,
    and names only the months it needed (every month only when fewer than ``cap`` rows match). Not
    ``by_month``: one such count over all time."""
    counted = 0
    for chunk in in_time_chunks(queryset.order_by(), by_month=by_month):
        counted += chunk[: cap + 1 - counted].count()
        if counted > cap:
            break
    return counted


@dataclass(frozen=True, slots=True)
class DateSpan:
    """The first and last ``created_at`` the date hierarchy offers; ``exact`` when they are those of the
    matching entries themselves, not a wider fixed range."""

    first: datetime.datetime | None
    last: datetime.datetime | None
    exact: bool


NO_DATES = DateSpan(first=None, last=None, exact=True)


def created_at_span(
    queryset: QuerySet[CitationLedgerEntry],
    *,
    fallback_from: Callable[[], datetime.datetime | None],
    cap: int,
    by_month: bool = True,
) -> DateSpan:
    """The dates the changelist's date hierarchy offers for ``queryset`` (the filtered, scoped entries),
    from a bounded read: MIN and MAX over at most ``cap + 1`` matching rows (found through whichever index
    serves the filter, in each span of :func:`time_chunks`, newest first, until more than ``cap`` are
    found). At most ``cap`` rows match: exactly their span. More: a fixed range from ``fallback_from()``
    (called only then: the earliest date the user's entries can have) to now, never a MIN/MAX over the whole
    ``created_at`` index (which, for a filter matching only old rows, walks it from the far end). Not
    ``by_month``: one such read over all time."""
    first: datetime.datetime | None = None
    last: datetime.datetime | None = None
    rows = 0
    for chunk in in_time_chunks(queryset.order_by(), by_month=by_month):
        span = chunk.values("created_at")[: cap + 1 - rows].aggregate(
            first=Min("created_at"), last=Max("created_at"), rows=Count("*")
        )
        if span["rows"]:
            first = span["first"] if first is None else min(first, span["first"])
            last = span["last"] if last is None else max(last, span["last"])
        rows += span["rows"]
        if rows > cap:
            return DateSpan(first=fallback_from() or first, last=timezone.now(), exact=False)
    return DateSpan(first=first, last=last, exact=True)


def first_entry_at() -> datetime.datetime | None:
    """When the ledger's first entry was written: a lookup at the end of ``ledger_created_idx`` in each span of
    :func:`time_chunks`, oldest first, until one has an entry."""
    for chunk in in_time_chunks(CitationLedgerEntry.objects.order_by("created_at"), newest_first=False):
        found: datetime.datetime | None = chunk.values_list("created_at", flat=True).first()
        if found is not None:
            return found
    return None


def first_visible_chat_at(chats: QuerySet[Chat]) -> datetime.datetime | None:
    """When the first of ``chats`` (the chats a staff user sees) began: no entry of theirs is older."""
    return chats.aggregate(first=Min("created_at"))["first"]


@dataclass(frozen=True, slots=True)
class CitingRows:
    """The source rows whose entries a text search finds, as ``(id, created_at)`` by the ledger's column for
    their table (each lookup capped); ``truncated`` when a lookup reached its cap."""

    rows: dict[str, list[tuple[UUID, datetime.datetime]]]
    truncated: bool

    def entries(self, queryset: QuerySet[CitationLedgerEntry]) -> QuerySet[CitationLedgerEntry]:
        """``queryset``'s entries of these rows: equalities on the per-source unique columns, OR-ed (a
        ``BitmapOr`` of their indexes on PostgreSQL).

        On PostgreSQL each row's entry is also looked for at the row's own ``created_at``, which is the
        entry's (``citations.ledger``): the planner then prunes the ledger's monthly partitions to the months
        of the rows found. Without it, it plans the page as a walk of every month's date index, testing each
        entry against the ids (seconds on a ledger of ten million entries; docs/scale.md). The rows whose
        entry is not at their time (written before the partitions, listed in ``citation_ledger_off_time``)
        are looked up by id alone."""
        condition = Q()
        for column, found in self.rows.items():
            ids = [pk for pk, _ in found]
            if not ids:
                continue
            if connection.vendor != "postgresql":
                condition |= Q(**{f"{column}__in": ids})
                continue
            condition |= Q(**{f"{column}__in": ids, "created_at__in": sorted({at for _, at in found})})
            off_time = _off_time_rows(_LEDGER_COLUMNS[column], ids)
            if off_time:
                condition |= Q(**{f"{column}__in": off_time})
        return queryset.filter(condition) if condition else queryset.none()


# The ledger's column naming a row, by its foreign key's name (``citations.ledger``'s mappings).
_LEDGER_COLUMNS = {mapping.entry_field: mapping.column for mapping in SOURCE_MAPPINGS}


def _off_time_rows(source_column: str, ids: list[UUID]) -> list[UUID]:
    """Which of ``ids`` (rows of the table the ledger names in ``source_column``) have an entry not at the
    row's time (PostgreSQL: ``citation_ledger_off_time``, by its primary key)."""
    with connection.cursor() as cursor:
        cursor.execute(
            f"SELECT source_id FROM {OFF_TIME_TABLE} WHERE source_column = %s AND source_id = ANY(%s)",  # noqa: S608
            [source_column, ids],
        )
        return [row[0] for row in cursor.fetchall()]


def rows_citing(term: str, *, documents: QuerySet[Document], cap: int) -> CitingRows:
    """The quotes of documents whose title contains ``term`` (among ``documents``: the matters' documents a
    user sees), and the quotes and case citations of opinions whose case name or citation contains it (case
    does not matter). The small tables (documents, opinions) are searched by text; the per-turn tables only
    by those rows' keys, through their foreign-key indexes; each lookup reads at most ``cap`` rows."""
    # Unordered (.order_by()): any ``cap`` rows, through the foreign-key index, not a sort of every match.
    document_ids = list(documents.filter(title__icontains=term).order_by().values_list("pk", flat=True)[:cap])
    opinion_ids = list(
        CaselawOpinion.objects.filter(Q(case_name__icontains=term) | Q(citation__icontains=term))
        .order_by()
        .values_list("pk", flat=True)[:cap]
    )
    # An empty list of ids matches nothing without a query (Django's ``__in`` of nothing).
    rows = {
        "message_citation": _row_keys(DocumentQuote, cap, document__in=document_ids),
        "message_caselaw_citation": _row_keys(OpinionQuote, cap, opinion__in=opinion_ids),
        "message_case_citation": _row_keys(CaseCitation, cap, opinion__in=opinion_ids),
    }
    truncated = len(document_ids) >= cap or len(opinion_ids) >= cap or any(len(found) >= cap for found in rows.values())
    return CitingRows(rows=rows, truncated=truncated)


def _row_keys(model: type[Model], cap: int, **lookup: Any) -> list[tuple[UUID, datetime.datetime]]:
    """The ``(id, created_at)`` of at most ``cap`` rows of a per-turn table matching ``lookup``, unordered:
    any ``cap`` of them, through the looked-up column's index, not a sort of every match."""
    return list(model._default_manager.filter(**lookup).order_by().values_list("pk", "created_at")[:cap])


def entries_with_id(
    queryset: QuerySet[CitationLedgerEntry], value: UUID, *, cap: int
) -> tuple[QuerySet[CitationLedgerEntry], bool]:
    """``queryset``'s entries that an id names: a message's (those of its rows), a source row's, a chat's, a
    matter's, or the entry with that id. Which of them ``value`` is, is found first in the tables that hold
    it, which are not partitioned (a lookup by primary key each, in that order); the entries are then found
    as the text search finds them (:class:`CitingRows`: at their rows' months) for a message or a row, and by
    their indexed column (walked newest month first by the changelist's reads) for a chat or a matter. Only an
    id found in none of them is looked up among the entries, by their own id. At most ``cap`` rows of each
    table a message has are looked up: the flag says that some table had that many (the entries shown are then
    those of the first ``cap``)."""
    if Message.objects.filter(pk=value).exists():
        rows = {mapping.entry_field: _row_keys(mapping.model, cap, message_id=value) for mapping in SOURCE_MAPPINGS}
        citing = CitingRows(rows=rows, truncated=any(len(found) >= cap for found in rows.values()))
        return citing.entries(queryset), citing.truncated
    for mapping in SOURCE_MAPPINGS:
        row = mapping.model._default_manager.filter(pk=value).values_list("pk", "created_at").first()
        if row is not None:
            return CitingRows(rows={mapping.entry_field: [row]}, truncated=False).entries(queryset), False
    if Chat.objects.filter(pk=value).exists():
        return queryset.filter(chat_id=value), False
    if Project.objects.filter(pk=value).exists():
        return queryset.filter(project_id=value), False
    return queryset.filter(pk=value), False
