"""Admin of the citation ledger: read-only for everyone, superusers included; a staff user who is not a
superuser sees only the entries of the matters (and own matter-less chats) they belong to
(``chats.admin.MatterScopedAdmin``).

It shows each entry linked to the row it indexes and its message and chat, a message's entries inline, and an
entry's passage highlighted in its source with each alteration marked. Built for a table of hundreds of
millions of rows partitioned by month: every changelist read looks at a bounded number of rows, months newest
first (``selectors.time_chunks``). How each filter, count, page and search stays bounded:
docs/architecture.md.
"""

from __future__ import annotations

import calendar
import datetime
import uuid
from collections.abc import Callable, Iterator
from typing import Any, ClassVar

from django.contrib import admin, messages
from django.contrib.admin.views.main import SEARCH_VAR, ChangeList
from django.core.paginator import Page, Paginator
from django.db.models import Model, QuerySet
from django.http import HttpRequest, HttpResponse
from django.template.response import TemplateResponse
from django.urls import reverse
from django.utils import formats, timezone
from django.utils.functional import cached_property
from django.utils.html import format_html
from django.utils.safestring import SafeString
from django.utils.text import capfirst

from chats.admin import MatterScopedAdmin, MessageAdmin, UUIDSearchAdmin, admin_link
from chats.models import (
    UNCHECKED,
    UNVERIFIED,
    CaseCitation,
    Chat,
    Document,
    DocumentQuote,
    Message,
    MessageToolSource,
    OpinionQuote,
    Project,
    StatuteCitation,
)
from chats.models import (
    CaseCitationStatus as CaseStatus,
)
from chats.selectors import chats_visible_to, projects_visible_to
from citations import passages, selectors
from citations.models import (
    PROVENANCE,
    STATUTE_STATUSES,
    Certificate,
    CitationLedgerEntry,
    LedgerPartitionDrop,
    MatterPurge,
    ReviewChainHead,
    ReviewDecision,
    SealChainHead,
    SourceKind,
    TurnSeal,
)
from lqai.admin_mixins import ReadOnlyAdminMixin
from lqai_verify.statuses import StatusInWords, status_in_words
from lqai_verify.verification import ALTERED, EXACT_MATCH, TOLERANT_MATCH

# The row an entry indexes: (its foreign-key column on the entry, its model, how to name it).
_SOURCES: tuple[tuple[str, type[Model], str], ...] = (
    ("message_citation_id", DocumentQuote, "KB quote"),
    ("message_caselaw_citation_id", OpinionQuote, "Caselaw quote"),
    ("message_tool_source_id", MessageToolSource, "Consulted source"),
    ("message_case_citation_id", CaseCitation, "Case citation"),
    ("message_statute_citation_id", StatuteCitation, "Statute citation or quote"),
)


def date_drilldown(
    cl: ChangeList, *, fallback_from: Callable[[], datetime.datetime | None], cap: int, by_month: bool = True
) -> dict[str, Any]:
    """The context of ``admin/date_hierarchy.html`` for ``cl``, as Django's ``{% date_hierarchy %}``
    builds it, but from a bounded read (:func:`citations.selectors.created_at_span`) instead of a
    ``SELECT DISTINCT`` over every matching entry: when few entries match, every year, month or day
    between the first and the last of them (at most ``cap``); when more do, every one from ``fallback_from()``
    to now."""
    field = str(cl.date_hierarchy)
    year, month, day = (cl.params.get(f"{field}__{part}") for part in ("year", "month", "day"))

    def link(filters: dict[str, object]) -> str:
        return cl.get_query_string(filters, [f"{field}__"])

    # No entry matches (the page's count): no dates, and no read to learn it again.
    span = (
        selectors.NO_DATES
        if cl.result_count == 0
        else selectors.created_at_span(cl.queryset, fallback_from=fallback_from, cap=cap, by_month=by_month)
    )
    if span.first is None or span.last is None:
        # Nothing matches: no dates to offer, only the way back up if the user had drilled down.
        return {"show": bool(year), "back": {"link": link({}), "title": "All dates"}, "choices": []}
    first, last = timezone.localtime(span.first), timezone.localtime(span.last)
    if not (year or month or day) and first.year == last.year:
        year = str(first.year)
        if first.month == last.month:
            month = str(first.month)
    if year and month and day:
        chosen = datetime.date(int(year), int(month), int(day))
        return {
            "show": True,
            "back": {"link": link({f"{field}__year": year, f"{field}__month": month}), "title": _year_month(chosen)},
            "choices": [{"title": capfirst(formats.date_format(chosen, "MONTH_DAY_FORMAT"))}],
        }
    if year and month:
        y, m = int(year), int(month)
        # The span is the chosen month's own when exact; a wider fixed range is clamped to the month.
        from_day = first.day if (first.year, first.month) == (y, m) else 1
        to_day = last.day if (last.year, last.month) == (y, m) else calendar.monthrange(y, m)[1]
        days = [datetime.date(y, m, d) for d in range(from_day, to_day + 1)]
        return {
            "show": True,
            "back": {"link": link({f"{field}__year": year}), "title": year},
            "choices": [
                {
                    "link": link({f"{field}__year": year, f"{field}__month": month, f"{field}__day": d.day}),
                    "title": capfirst(formats.date_format(d, "MONTH_DAY_FORMAT")),
                }
                for d in days
            ],
        }
    if year:
        y = int(year)
        from_month = first.month if first.year == y else 1
        to_month = last.month if last.year == y else 12
        months = [datetime.date(y, m, 1) for m in range(from_month, to_month + 1)]
        return {
            "show": True,
            "back": {"link": link({}), "title": "All dates"},
            "choices": [
                {"link": link({f"{field}__year": year, f"{field}__month": m.month}), "title": _year_month(m)}
                for m in months
            ],
        }
    return {
        "show": True,
        "back": None,
        "choices": [
            {"link": link({f"{field}__year": str(y)}), "title": str(y)} for y in range(first.year, last.year + 1)
        ],
    }


def _year_month(date: datetime.date) -> str:
    return capfirst(formats.date_format(date, "YEAR_MONTH_FORMAT"))


def source_link(entry: CitationLedgerEntry) -> SafeString | str:
    """A link to the admin page of the row ``entry`` indexes, from the id alone (no query)."""
    for column, model, name in _SOURCES:
        row_id = getattr(entry, column)
        if row_id is not None:
            return admin_link(model, row_id, f"{name} {row_id}")
    return "-"  # unreachable: a check constraint requires exactly one source


def _changed_flag(span: selectors.Passage) -> SafeString | str:
    """A flag for a passage that is no longer the one verified (its digest differs); nothing otherwise."""
    return format_html(" <strong>{}</strong>", "changed since verified") if span.intact is False else ""


def passage_html(entry: CitationLedgerEntry) -> SafeString | str:
    """What an entry points at, for an entry read through ``selectors.with_sources``: the quoted
    passage ``source[start:end]`` (flagged when it is no longer the passage that was verified), or for
    a consulted source its label and url."""
    span = selectors.passage(entry)
    if span is not None:
        return format_html("<q>{}</q> <small>[{}:{}]</small>{}", span.text, span.start, span.end, _changed_flag(span))
    case = entry.message_case_citation
    if case is not None:
        cited_as = ", ".join(part for part in (case.case_name, case.citation) if part)
        return format_html("<strong>{}</strong>: {} &mdash; {}", case.status, cited_as, case.detail or "-")
    statute = entry.message_statute_citation
    if statute is not None:
        return format_html(
            "<strong>{}</strong>: {} &mdash; {}", statute.status, statute.cited or statute.citation, statute.reason
        )
    failed = entry.message_citation or entry.message_caselaw_citation
    if failed is not None:
        said = "not checked" if failed.verification_method == UNCHECKED else "not verified"
        return format_html("<strong>{}</strong>: {}", said, failed.unverified_reason or "-")
    source = entry.message_tool_source
    if source is None:
        return "-"
    # Only http(s) becomes a link: a tool's url is data from outside, and href="javascript:..." must not run.
    if source.url.startswith(("https://", "http://")):
        return format_html('{} <a href="{}" rel="noopener noreferrer">{}</a>', source.label, source.url, source.url)
    return format_html("{} {}", source.label, source.url)


def passage_in_context_html(entry: CitationLedgerEntry, context: selectors.PassageInContext | None) -> SafeString | str:
    """The ledger entry page's view of what an entry points at (``selectors.entry_in_context``): the passage in
    the source text around it, with its alterations (the one renderer, :mod:`citations.passages`). A failed
    claim or a consulted source as :func:`passage_html` shows it."""
    quote = entry.message_citation or entry.message_caselaw_citation or entry.message_statute_citation
    if context is None or quote is None:
        return passage_html(entry)
    return passages.passage_in_context_html(context, quote.alterations, context_flags=quote.context_flags)


def cited_label(entry: CitationLedgerEntry) -> str:
    """What an entry cites, for an entry whose source rows are joined: the document's title, the case's name
    and citation (for a case citation, as the answer wrote it), or the consulted source's label."""
    if entry.message_citation is not None:
        document = entry.message_citation.document
        return document.title if document is not None else "(no document of the matter)"
    if entry.message_caselaw_citation is not None:
        opinion = entry.message_caselaw_citation.opinion
        if opinion is None:
            return "(no known opinion)"
        return ", ".join(part for part in (opinion.case_name, opinion.citation) if part)
    if entry.message_case_citation is not None:
        case = entry.message_case_citation
        return ", ".join(part for part in (case.case_name, case.citation) if part)
    if entry.message_statute_citation is not None:
        statute = entry.message_statute_citation
        return statute.cited or statute.citation
    if entry.message_tool_source is not None:
        return entry.message_tool_source.label
    return "-"


def status_words(entry: CitationLedgerEntry) -> StatusInWords:
    quote = entry.message_citation or entry.message_caselaw_citation or entry.message_statute_citation
    return status_in_words(entry.verification_status, alterations=quote.alterations if quote is not None else ())


class _FixedValuesFilter(admin.SimpleListFilter):
    """Lists a fixed set of values, so rendering it never queries the table (a field filter runs
    ``SELECT DISTINCT`` over every entry). Any other value still filters when given in the URL."""

    known: ClassVar[tuple[tuple[str, str], ...]] = ()

    def lookups(self, request: HttpRequest, model_admin: admin.ModelAdmin[Any]) -> list[tuple[str, str]]:
        value = self.value()
        unlisted = [(value, value)] if value and value not in dict(self.known) else []
        return [*self.known, *unlisted]

    def queryset(self, request: HttpRequest, queryset: QuerySet[Any]) -> QuerySet[Any]:
        value = self.value()
        return queryset if value is None else queryset.filter(**{str(self.parameter_name): value})


class SourceKindFilter(_FixedValuesFilter):
    title = "source kind"
    parameter_name = "source_kind"
    known = tuple((str(value), str(label)) for value, label in SourceKind.choices)


class VerificationStatusFilter(_FixedValuesFilter):
    title = "verification status"
    parameter_name = "verification_status"
    known = (
        (EXACT_MATCH, "exact match"),
        (TOLERANT_MATCH, "tolerant match"),
        (ALTERED, "altered (found, but may change what the source says)"),
        (UNVERIFIED, "unverified (a claim that did not verify)"),
        (CaseStatus.VERIFIED, "case citation verified"),
        (CaseStatus.NAME_MISMATCH, "case citation under another case's name"),
        (CaseStatus.PIN_MISMATCH, "case citation to a page the case does not have"),
        (CaseStatus.NOT_FOUND, "case citation to no case"),
        (CaseStatus.AMBIGUOUS, "case citation matching several cases"),
        (CaseStatus.UNCHECKED, "not checked (a case citation, or a quotation nothing could check)"),
        (PROVENANCE, "provenance (consulted, not quoted)"),
        *((status, status_in_words(status).words) for status in STATUTE_STATUSES),
    )


class ProviderFilter(_FixedValuesFilter):
    """Providers are open-ended (every MCP server is one), so the value is typed, not listed."""

    title = "provider"
    parameter_name = "provider"
    template = "admin/citations/exact_value_filter.html"

    def lookups(self, request: HttpRequest, model_admin: admin.ModelAdmin[Any]) -> list[tuple[str, str]]:
        return []

    def has_output(self) -> bool:
        return True

    def choices(self, changelist: ChangeList) -> Iterator[Any]:
        name = str(self.parameter_name)
        yield {
            "selected": self.value() is None,
            "query_string": changelist.get_query_string(remove=[name]),
            "parameter_name": name,
            "value": self.value() or "",
            # The form submits only its own field: carry the other filters and the search along.
            "hidden": [(key, v) for key, values in changelist.filter_params.items() if key != name for v in values],
        }


class CappedCountPaginator(Paginator):
    """Counts at most ``cap + 1`` rows (``COUNT(*)`` over a ``LIMIT``), never every matching entry: the
    changelist shows "more than ``cap``", and its pages stop there (a filter or a search narrows further)."""

    def __init__(self, object_list: Any, per_page: int, *, cap: int, by_month: bool = True, **kwargs: Any) -> None:
        super().__init__(object_list, per_page, **kwargs)
        self.cap = cap
        self.by_month = by_month

    def page(self, number: Any) -> Page[Any]:
        # Django's Paginator.page(), but the rows are read by selectors.page_of (keys first, then rows).
        if not isinstance(self.object_list, QuerySet):
            return super().page(number)
        number = self.validate_number(number)
        bottom = (number - 1) * self.per_page
        top = bottom + self.per_page
        if top + self.orphans >= self.count:
            top = self.count
        return Page(selectors.page_of(self.object_list, bottom=bottom, top=top, by_month=self.by_month), number, self)

    @cached_property
    def count(self) -> int:
        if isinstance(self.object_list, QuerySet):
            return selectors.capped_count(self.object_list, cap=self.cap, by_month=self.by_month)
        return min(len(self.object_list), self.cap + 1)


class LedgerChangeList(ChangeList):
    """Reads a single page (or "show all") by ``selectors.page_of`` too, where Django's ChangeList reads the
    filtered queryset whole in one query with its joins."""

    def get_results(self, request: HttpRequest) -> None:
        super().get_results(request)
        if isinstance(self.result_list, QuerySet):
            self.result_list = selectors.page_of(self.queryset, bottom=0, top=self.result_count, whole=True)


# The source rows a changelist row names (what was cited), joined in without their text; search matches in them.
_CITED_ROWS = (
    "message_citation__document",
    "message_caselaw_citation__opinion",
    "message_case_citation__opinion",
    "message_tool_source",
)
_CITED_TEXT_COLUMNS = (
    "message__content",
    "message_citation__quote",
    "message_citation__document__content",
    "message_caselaw_citation__quote",
    "message_caselaw_citation__opinion__text",
    "message_case_citation__opinion__text",
)


@admin.register(CitationLedgerEntry)
class CitationLedgerEntryAdmin(MatterScopedAdmin, ReadOnlyAdminMixin, UUIDSearchAdmin):
    matter_scope = ("chat", "chat")
    list_display = (
        "created_at",
        "cited",
        "status",
        "confidence",
        "source_kind",
        "provider",
        "chat_link",
        "message_column",
    )
    list_filter = (SourceKindFilter, VerificationStatusFilter, ProviderFilter)
    date_hierarchy = "created_at"
    # The columns an id (UUID) can name: it is looked up in the tables that hold it first (get_search_results).
    search_fields = (
        "id",
        "chat_id",
        "message_id",
        "project_id",
        "message_citation_id",
        "message_caselaw_citation_id",
        "message_tool_source_id",
        "message_case_citation_id",
    )
    search_help_text = (
        "An exact entry, chat, message, project or source row id (UUID), or words of a document title, or of the "
        "name or citation of a case in the caselaw."
    )
    # Each read of the changelist looks at a bounded number of rows, whatever the ledger's size (issue 25):
    count_cap = 10_000  # entries counted before the count says "more than"
    date_span_cap = 1_000  # matching entries whose own dates the date hierarchy offers
    search_cap = 1_000  # documents, opinions, and quotes or citations of them, a text search looks up
    list_select_related = ("chat", "message", *_CITED_ROWS)
    show_full_result_count = False
    show_facets = admin.ShowFacets.NEVER
    # Draws the date hierarchy from date_drilldown() instead of Django's {% date_hierarchy %}.
    change_list_template = "admin/citations/citationledgerentry/change_list.html"
    fields = (
        "id",
        "created_at",
        "source_kind",
        "cited",
        "source_link",
        "trace_page_link",
        "status",
        "claimed_quote",
        "passage",
        "verification_status",
        "confidence",
        "provider",
        "retrieved_at",
        "project_link",
        "chat_link",
        "message_link",
        "treatment_id",
    )
    readonly_fields = (
        "cited",
        "source_link",
        "trace_page_link",
        "status",
        "claimed_quote",
        "passage",
        "project_link",
        "chat_link",
        "message_link",
    )

    class Media:
        css = {"all": (passages.STYLESHEET,)}

    def changelist_view(self, request: HttpRequest, extra_context: dict[str, Any] | None = None) -> HttpResponse:
        response = super().changelist_view(request, extra_context)
        context = getattr(response, "context_data", None)  # a redirect (bad lookup parameters) has none
        if isinstance(response, TemplateResponse) and context and "cl" in context:
            context["ledger_date_hierarchy"] = date_drilldown(
                context["cl"],
                fallback_from=lambda: self._first_possible(request),
                cap=self.date_span_cap,
                by_month=_reads_by_month(request),
            )
        return response

    def get_queryset(self, request: HttpRequest) -> QuerySet[CitationLedgerEntry]:
        # Chat, message and what was cited are named on every row: joined, without their text.
        return super().get_queryset(request).select_related("chat", "message", *_CITED_ROWS).defer(*_CITED_TEXT_COLUMNS)

    def get_search_results(
        self, request: HttpRequest, queryset: QuerySet[CitationLedgerEntry], search_term: str
    ) -> tuple[QuerySet[CitationLedgerEntry], bool]:
        """An id (UUID) matches exactly, as everywhere in the admin: a message's, a source row's, a chat's, a matter's
        or an entry's (``selectors.entries_with_id``: its table is found first). Other words match,
        case-insensitively, the title of a document (of the matters the user sees) or the case name or citation of
        an opinion: those small tables are searched first, then the entries by the keys of the rows that quote or
        cite them (``selectors.rows_citing``: bounded lookups through indexes, never a text match over entries)."""
        term = search_term.strip()
        if not term:
            return queryset, False
        if _is_uuid(term):
            # Found first in the table that holds the id (not partitioned), then the entries at their rows' months
            # or by their indexed column: never a lookup of the id in every id column of every month.
            found, truncated = selectors.entries_with_id(queryset, uuid.UUID(term), cap=self.search_cap)
            if truncated:
                self.message_user(
                    request,
                    f"This message has more than {self.search_cap:,} rows of one kind: showing the entries of the "
                    "first.",
                    level=messages.WARNING,
                )
            return found, False
        documents = Document.objects.all()
        if not request.user.is_superuser:
            documents = documents.filter(project__in=projects_visible_to(request.user).values("pk"))
        rows = selectors.rows_citing(term, documents=documents, cap=self.search_cap)
        if rows.truncated:
            self.message_user(
                request,
                f"{term!r} matches more than {self.search_cap:,} documents, opinions or citations of them: "
                "showing the entries of the first; a longer term narrows it.",
                level=messages.WARNING,
            )
        return rows.entries(queryset), False

    def get_changelist(self, request: HttpRequest, **kwargs: Any) -> type[ChangeList]:
        return LedgerChangeList

    def get_paginator(
        self,
        request: HttpRequest,
        queryset: QuerySet[CitationLedgerEntry],
        per_page: int,
        orphans: int = 0,
        allow_empty_first_page: bool = True,
    ) -> CappedCountPaginator:
        return CappedCountPaginator(
            queryset,
            per_page,
            orphans=orphans,
            allow_empty_first_page=allow_empty_first_page,
            cap=self.count_cap,
            by_month=_reads_by_month(request),
        )

    def _first_possible(self, request: HttpRequest) -> datetime.datetime | None:
        # The earliest entry a user can see: the ledger's first (one index lookup) for a superuser; for staff, no
        # earlier than their first chat (not revealing when other matters' entries began).
        if request.user.is_superuser:
            return selectors.first_entry_at()
        return selectors.first_visible_chat_at(chats_visible_to(request.user))

    def _resolved(self, entry: CitationLedgerEntry) -> tuple[CitationLedgerEntry, selectors.PassageInContext | None]:
        # The entry page's fields read one resolved entry: one query, however many fields show it.
        cached: tuple[CitationLedgerEntry, selectors.PassageInContext | None] | None = getattr(
            entry, "_resolved_in_context", None
        )
        if cached is None:
            cached = selectors.entry_in_context(entry.pk)
            entry._resolved_in_context = cached  # type: ignore[attr-defined]
        return cached

    @admin.display(description="cited")
    def cited(self, entry: CitationLedgerEntry) -> str:
        # The changelist's rows have their source rows joined (list_select_related); the entry page resolves them.
        return cited_label(entry)

    @admin.display(description="status")
    def status(self, entry: CitationLedgerEntry) -> SafeString:
        words = status_words(entry)
        return format_html('<span class="status" data-status="{}">{} {}</span>', words.code, words.symbol, words)

    @admin.display(description="claimed quote")
    def claimed_quote(self, entry: CitationLedgerEntry) -> SafeString | str:
        # The quote as the answer claimed it: for a failed claim, the quote that failed.
        quote = selectors.claimed_quote(self._resolved(entry)[0])
        return "-" if quote is None else format_html('<blockquote class="claimed-quote">{}</blockquote>', quote)

    @admin.display(description="source")
    def source_link(self, entry: CitationLedgerEntry) -> SafeString | str:
        return source_link(entry)

    @admin.display(description="on the chat's trace page")
    def trace_page_link(self, entry: CitationLedgerEntry) -> SafeString:
        # A claim has its card on the chat's page (members of the matter only); a consulted source is listed there.
        page = reverse("pages:chat", args=[entry.chat_id])
        anchor = f"turn-{entry.message_id}" if entry.message_tool_source_id else f"claim-{entry.source_row_id}"
        return format_html('<a href="{}#{}">read it as the matter\'s members do</a>', page, anchor)

    @admin.display(description="passage")
    def passage(self, entry: CitationLedgerEntry) -> SafeString | str:
        # The entry page only (one query): the changelist never reads the content layer.
        return passage_in_context_html(*self._resolved(entry))

    @admin.display(description="project")
    def project_link(self, entry: CitationLedgerEntry) -> SafeString | str:
        return "-" if entry.project is None else admin_link(Project, entry.project_id, entry.project)

    @admin.display(description="chat")
    def chat_link(self, entry: CitationLedgerEntry) -> SafeString:
        return admin_link(Chat, entry.chat_id, entry.chat)

    @admin.display(description="message")
    def message_link(self, entry: CitationLedgerEntry) -> SafeString:
        return admin_link(Message, entry.message_id, entry.message)

    @admin.display(description="message")
    def message_column(self, entry: CitationLedgerEntry) -> SafeString:
        # A narrow column: the role and the id's last block (time-ordered ids share their first blocks; the whole
        # id is the search key, and the link).
        return admin_link(Message, entry.message_id, f"{entry.message.role} …{str(entry.message_id)[-8:]}")


def _reads_by_month(request: HttpRequest) -> bool:
    """Whether the changelist's reads walk the ledger's months newest first (``selectors.time_chunks``): yes,
    unless a search or the date hierarchy already bounds them. A search names its entries at their rows'
    months (a message, a source row, words), where a walk would repeat that long condition in each query,
    or by one indexed column (a chat, a matter, an entry); a year, month or day of the date hierarchy names
    its own months. Those are read in one query each."""
    field = CitationLedgerEntryAdmin.date_hierarchy
    return not request.GET.get(SEARCH_VAR, "").strip() and not any(key.startswith(f"{field}__") for key in request.GET)


def _is_uuid(term: str) -> bool:
    try:
        uuid.UUID(term)
    except ValueError:
        return False
    return True


@admin.register(MatterPurge)
class MatterPurgeAdmin(ReadOnlyAdminMixin, admin.ModelAdmin):
    """The tombstones of purged matters (``manage.py purge_matter``): read-only, and for superusers only
    (a purged matter has no members left to scope them by)."""

    list_display = ("project_name", "project_id", "purged_by", "purged_at", "chats", "messages", "ledger_entries")
    search_fields = ("project_name",)

    def has_view_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return bool(request.user.is_superuser)

    def has_module_permission(self, request: HttpRequest) -> bool:
        return bool(request.user.is_superuser)


@admin.register(LedgerPartitionDrop)
class LedgerPartitionDropAdmin(ReadOnlyAdminMixin, admin.ModelAdmin):
    """The tombstones of the ledger's dropped months (``manage.py ledger_partitions --drop-before``):
    read-only, and for superusers only (a month holds every matter's entries)."""

    list_display = ("partition", "range_start", "range_end", "disposal", "ledger_entries", "dropped_by", "dropped_at")

    def has_view_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return bool(request.user.is_superuser)

    def has_module_permission(self, request: HttpRequest) -> bool:
        return bool(request.user.is_superuser)


class LedgerEntryInline(MatterScopedAdmin, ReadOnlyAdminMixin, admin.TabularInline):
    """A message's ledger entries, each with the passage it points at, on the message's page."""

    model = CitationLedgerEntry
    fk_name = "message"
    fields = ("source_kind", "source", "passage", "verification_status", "confidence", "provider", "retrieved_at")
    readonly_fields = ("source", "passage")
    extra = 0
    can_delete = False
    show_change_link = True
    verbose_name_plural = "citation ledger entries"
    matter_scope = ("chat", "chat")

    def get_queryset(self, request: HttpRequest) -> QuerySet[CitationLedgerEntry]:
        # Source rows and passages in the same query: no query per entry; in the order of the turn.
        return selectors.with_sources(selectors.in_turn_order(super().get_queryset(request)))

    @admin.display(description="source")
    def source(self, entry: CitationLedgerEntry) -> SafeString | str:
        return source_link(entry)

    @admin.display(description="passage")
    def passage(self, entry: CitationLedgerEntry) -> SafeString | str:
        return passage_html(entry)


# The message page gains the ledger inline from this side, so that chats never imports citations.
admin.site.unregister(Message)


@admin.register(Message)
class MessageWithLedgerAdmin(MessageAdmin):
    inlines = [*MessageAdmin.inlines, LedgerEntryInline]


@admin.register(TurnSeal)
class TurnSealAdmin(MatterScopedAdmin, ReadOnlyAdminMixin, admin.ModelAdmin):
    """The seals of finalized turns, read-only: written only by sealing, checked by ``verify_ledger``."""

    matter_scope = ("chat", "message__chat")

    list_display = ("chain", "sequence", "message", "finalize_number", "sealed_at", "late", "key_fingerprint")
    list_filter = ("late",)
    list_select_related = ("message",)
    search_fields = ("=chain",)
    ordering = ("chain", "sequence")
    show_full_result_count = False


@admin.register(SealChainHead)
class SealChainHeadAdmin(ReadOnlyAdminMixin, admin.ModelAdmin):
    """Where each seal chain ends (its row is the lock of a chain's final write), read-only, and for superusers
    only (a chain is named by its matter or chat, across every matter)."""

    def has_view_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return bool(request.user.is_superuser)

    def has_module_permission(self, request: HttpRequest) -> bool:
        return bool(request.user.is_superuser)

    list_display = ("chain", "sequence", "seal_sha256")
    search_fields = ("=chain",)
    show_full_result_count = False


@admin.register(ReviewDecision)
class ReviewDecisionAdmin(MatterScopedAdmin, ReadOnlyAdminMixin, admin.ModelAdmin):
    """People's decisions on claims, read-only: written only by ``citations.reviews.record_decision``, sealed,
    checked by ``verify_ledger``; a staff user who is not a superuser sees those of their matters only."""

    matter_scope = ("chat", "message__chat")

    list_display = ("chain", "sequence", "decision", "claim_table", "claim_id", "reviewer", "role", "decided_at")
    list_filter = ("decision",)
    list_select_related = ("message",)
    search_fields = ("=chain",)
    ordering = ("chain", "sequence")
    show_full_result_count = False


@admin.register(Certificate)
class CertificateAdmin(MatterScopedAdmin, ReadOnlyAdminMixin, admin.ModelAdmin):
    """Certificates of verification, read-only: written only by ``citations.certificates.issue_certificate``,
    sealed, checked by ``verify_ledger``; a staff user who is not a superuser sees those of their matters only."""

    matter_scope = ("chat", "message__chat")

    list_display = ("chain", "sequence", "message", "issuer", "role", "issued_at")
    list_select_related = ("message",)
    search_fields = ("=chain",)
    ordering = ("chain", "sequence")
    show_full_result_count = False


@admin.register(ReviewChainHead)
class ReviewChainHeadAdmin(ReadOnlyAdminMixin, admin.ModelAdmin):
    """Where each decisions and certificates chain ends, read-only, and for superusers only (as the seal heads)."""

    def has_view_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return bool(request.user.is_superuser)

    def has_module_permission(self, request: HttpRequest) -> bool:
        return bool(request.user.is_superuser)

    list_display = ("chain", "sequence", "seal_sha256")
    search_fields = ("=chain",)
    show_full_result_count = False
