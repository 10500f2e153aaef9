"""Admin of the citation ledger: read-only for everyone, superusers included.

Entries are written only by ``citations.ledger`` (``assemble`` and the backfill); the admin shows
them, links each to the row it indexes and to its message and chat, and shows a message's
entries inline on the message's page, with the passage each quote points at read from the
content layer at render time. An entry's own page shows the passage highlighted in the source
text around it, with each alteration and omission of the quote marked in place and listed.

Built for a table of millions of rows: the changelist joins only the chat and the message,
never counts the whole table twice, computes no facets, searches by exact id only, and neither
its filters nor its date hierarchy run ``SELECT DISTINCT`` over every entry.
"""

from __future__ import annotations

import datetime
from collections.abc import Iterator
from typing import Any, ClassVar

from django.contrib import admin
from django.contrib.admin.views.main import ChangeList
from django.db.models import Max, Min, Model, QuerySet
from django.http import HttpRequest, HttpResponse
from django.template.response import TemplateResponse
from django.utils import formats, timezone
from django.utils.html import format_html, format_html_join
from django.utils.safestring import SafeString, mark_safe
from django.utils.text import capfirst

from chats.admin import MessageAdmin, ReadOnlyAdminMixin, UUIDSearchAdmin, admin_link
from chats.models import (
    UNVERIFIED,
    Chat,
    Message,
    MessageCaseCitation,
    MessageCaselawCitation,
    MessageCitation,
    MessageToolSource,
    Project,
)
from chats.models import (
    CaseCitationStatus as CaseStatus,
)
from chats.verification import EXACT_MATCH, TOLERANT_MATCH
from chats.verification.results import CASE, ELLIPSIS
from citations import selectors
from citations.models import PROVENANCE, CitationLedgerEntry, SourceKind

# The row an entry indexes: (its foreign-key column on the entry, its model, how to name it).
_SOURCES: tuple[tuple[str, type[Model], str], ...] = (
    ("message_citation_id", MessageCitation, "KB quote"),
    ("message_caselaw_citation_id", MessageCaselawCitation, "Caselaw quote"),
    ("message_tool_source_id", MessageToolSource, "Consulted source"),
    ("message_case_citation_id", MessageCaseCitation, "Case citation"),
)


def date_drilldown(cl: ChangeList) -> dict[str, Any]:
    """The context of ``admin/date_hierarchy.html`` for ``cl``, as Django's ``{% date_hierarchy %}``
    builds it, but from the MIN and MAX of ``created_at`` (two index lookups) instead of a
    ``SELECT DISTINCT`` over every matching entry (slow on a large ledger). It offers every
    year, month or day between the first and the last matching entry."""
    field = str(cl.date_hierarchy)
    year, month, day = (cl.params.get(f"{field}__{part}") for part in ("year", "month", "day"))

    def link(filters: dict[str, object]) -> str:
        return cl.get_query_string(filters, [f"{field}__"])

    span = cl.queryset.aggregate(first=Min(field), last=Max(field))
    if span["first"] is None:
        # Nothing matches: no dates to offer, only the way back up if the user had drilled down.
        return {"show": bool(year), "back": {"link": link({}), "title": "All dates"}, "choices": []}
    first, last = timezone.localtime(span["first"]), timezone.localtime(span["last"])
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
        days = [datetime.date(int(year), int(month), d) for d in range(first.day, last.day + 1)]
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
        months = [datetime.date(int(year), m, 1) for m in range(first.month, last.month + 1)]
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
    failed = entry.message_citation or entry.message_caselaw_citation
    if failed is not None:
        return format_html("<strong>not verified</strong>: {}", failed.unverified_reason or "-")
    source = entry.message_tool_source
    if source is None:
        return "-"
    # Only http(s) becomes a link: a tool's url is data from outside, and href="javascript:..." must not run.
    if source.url.startswith(("https://", "http://")):
        return format_html('{} <a href="{}" rel="noopener noreferrer">{}</a>', source.label, source.url, source.url)
    return format_html("{} {}", source.label, source.url)


def _describe(alteration: dict[str, Any], replaced: str) -> str:
    """An alteration in words: its kind (and detail), what the quote wrote, the source text ``replaced`` it
    stands for or omits."""
    kind = alteration["kind"] + (f" ({alteration['detail']})" if alteration["detail"] else "")
    if alteration["kind"] == ELLIPSIS:
        return f"omission: the quote's \u201c{alteration['quote_text']}\u201d omits \u201c{replaced}\u201d"
    if alteration["kind"] == CASE:
        return "case: the passage matches the quote only when case is ignored"
    if alteration["source_start"] == alteration["source_end"]:
        return f"{kind}: the quote adds \u201c{alteration['quote_text']}\u201d"
    return f"{kind}: the quote's \u201c{alteration['quote_text']}\u201d stands for \u201c{replaced}\u201d"


def _marked(context: selectors.PassageInContext, start: int, end: int, alterations: list[dict[str, Any]]) -> str:
    """The source text ``[start, end)`` of ``context`` with ``alterations`` (inside it, in order, disjoint)
    marked: each a ``span`` titled with the alteration in words, holding the source text it replaces or omits
    struck out (``<del>``) and, for a bracket, the quote's text (``<ins>``). Escaped."""
    parts: list[str] = []
    at = start
    for alteration in alterations:
        a, b = alteration["source_start"], alteration["source_end"]
        replaced = context.slice(a, b)
        added = "" if alteration["kind"] == ELLIPSIS else format_html("<ins>{}</ins>", alteration["quote_text"])
        parts.append(
            format_html(
                '{}<span class="alteration" data-kind="{}" title="{}">{}{}</span>',
                context.slice(at, a),
                alteration["kind"],
                _describe(alteration, replaced),
                format_html("<del>{}</del>", replaced) if a < b else "",
                added,
            )
        )
        at = b
    parts.append(format_html("{}", context.slice(at, end)))
    return "".join(parts)


def passage_in_context_html(entry: CitationLedgerEntry, context: selectors.PassageInContext | None) -> SafeString | str:
    """The ledger entry page's view of what an entry points at (``selectors.entry_in_context``): the passage
    highlighted (``<mark>``) in the source text around it, each alteration and omission marked in place
    (``_marked``) and listed below with its source offsets. A failed claim or a consulted source as
    :func:`passage_html` shows it."""
    quote = entry.message_citation or entry.message_caselaw_citation
    if context is None or quote is None:
        return passage_html(entry)
    span = context.passage
    alterations = sorted(quote.alterations, key=lambda a: (a["source_start"], a["source_end"]))
    # Marked in place: each alteration wholly inside the passage or wholly beside it, not overlapping the one
    # before (a case-only match spans the whole passage: it is listed, not marked).
    segments: list[list[dict[str, Any]]] = [[], [], []]  # before, inside, after the passage
    at = context.start
    for alteration in alterations:
        a, b = alteration["source_start"], alteration["source_end"]
        if alteration["kind"] == CASE or a < at or b > context.end:
            continue
        if span.start <= a and b <= span.end:
            segments[1].append(alteration)
        elif b <= span.start:
            segments[0].append(alteration)
        elif a >= span.end:
            segments[2].append(alteration)
        else:
            continue
        at = b
    listed = format_html_join(
        "",
        '<li data-kind="{}">{} <small>[{}:{}]</small></li>',
        (
            (
                a["kind"],
                _describe(a, context.slice(a["source_start"], a["source_end"])),
                a["source_start"],
                a["source_end"],
            )
            for a in alterations
        ),
    )
    return format_html(
        '<div class="passage-in-context" style="white-space: pre-wrap">{}{}<mark title="{}">{}</mark>{}{}</div>'
        "<small>passage [{}:{}] of the source, with the text around it</small>{}{}",
        "\u2026 " if context.more_before else "",
        mark_safe(_marked(context, context.start, span.start, segments[0])),  # noqa: S308 - escaped by _marked
        f"the verified passage [{span.start}:{span.end}]",
        mark_safe(_marked(context, span.start, span.end, segments[1])),  # noqa: S308 - escaped by _marked
        mark_safe(_marked(context, span.end, context.end, segments[2])),  # noqa: S308 - escaped by _marked
        " \u2026" if context.more_after else "",
        span.start,
        span.end,
        _changed_flag(span),
        format_html('<ol class="alterations">{}</ol>', listed) if alterations else "",
    )


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
        (UNVERIFIED, "unverified (a claim that did not verify)"),
        (CaseStatus.VERIFIED, "case citation verified"),
        (CaseStatus.NAME_MISMATCH, "case citation under another case's name"),
        (CaseStatus.NOT_FOUND, "case citation to no case"),
        (CaseStatus.AMBIGUOUS, "case citation matching several cases"),
        (CaseStatus.UNCHECKED, "case citation not checked"),
        (PROVENANCE, "provenance (consulted, not quoted)"),
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


@admin.register(CitationLedgerEntry)
class CitationLedgerEntryAdmin(ReadOnlyAdminMixin, UUIDSearchAdmin):
    list_display = (
        "created_at",
        "source_kind",
        "verification_status",
        "confidence",
        "provider",
        "chat_link",
        "message_column",
    )
    list_filter = (SourceKindFilter, VerificationStatusFilter, ProviderFilter)
    date_hierarchy = "created_at"
    search_fields = ("chat_id", "message_id", "project_id")
    search_help_text = "An exact chat, message or project id (UUID)."
    list_select_related = ("chat", "message")
    show_full_result_count = False
    show_facets = admin.ShowFacets.NEVER
    # Draws the date hierarchy from date_drilldown() instead of Django's {% date_hierarchy %}.
    change_list_template = "admin/citations/citationledgerentry/change_list.html"
    fields = (
        "id",
        "created_at",
        "source_kind",
        "source_link",
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
    readonly_fields = ("source_link", "passage", "project_link", "chat_link", "message_link")

    def changelist_view(self, request: HttpRequest, extra_context: dict[str, Any] | None = None) -> HttpResponse:
        response = super().changelist_view(request, extra_context)
        context = getattr(response, "context_data", None)  # a redirect (bad lookup parameters) has none
        if isinstance(response, TemplateResponse) and context and "cl" in context:
            context["ledger_date_hierarchy"] = date_drilldown(context["cl"])
        return response

    def get_queryset(self, request: HttpRequest) -> QuerySet[CitationLedgerEntry]:
        # Chat and message are named on every row: joined, without the message's text.
        return super().get_queryset(request).select_related("chat", "message").defer("message__content")

    @admin.display(description="source")
    def source_link(self, entry: CitationLedgerEntry) -> SafeString | str:
        return source_link(entry)

    @admin.display(description="passage")
    def passage(self, entry: CitationLedgerEntry) -> SafeString | str:
        # The entry page only (one query): the changelist never reads the content layer.
        return passage_in_context_html(*selectors.entry_in_context(entry.pk))

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
        # A narrow column: the role and the id's first block (the whole id is the search key, and the link).
        return admin_link(Message, entry.message_id, f"{entry.message.role} {str(entry.message_id)[:8]}…")


class LedgerEntryInline(ReadOnlyAdminMixin, admin.TabularInline):
    """A message's ledger entries, each with the passage it points at, on the message's page."""

    model = CitationLedgerEntry
    fk_name = "message"
    fields = ("source_kind", "source", "passage", "verification_status", "confidence", "provider", "retrieved_at")
    readonly_fields = ("source", "passage")
    extra = 0
    can_delete = False
    show_change_link = True
    verbose_name_plural = "citation ledger entries"

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
