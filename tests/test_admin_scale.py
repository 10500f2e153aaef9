"""The ledger changelist's reads stay bounded whatever the table's size (issue 25): the paginator never
counts every matching entry, the date hierarchy never takes MIN/MAX over every matching entry, a search by
an id is an equality on indexed columns, and (on PostgreSQL) each filter's query is served by its index."""

from __future__ import annotations

import datetime
import itertools
import re
import uuid
from collections.abc import Iterator

import pytest
from django.contrib.auth.models import Permission
from django.db import connection
from django.test import Client
from django.test.utils import CaptureQueriesContext
from django.urls import reverse
from django.utils import timezone

from chats.models import Chat
from citations import ledger
from citations.admin import CitationLedgerEntryAdmin
from citations.models import CitationLedgerEntry
from tests import factories

pytestmark = pytest.mark.django_db

CHANGELIST = "admin:citations_citationledgerentry_changelist"
LEDGER = CitationLedgerEntry._meta.db_table


def _ledger_queries(client: Client, **query: str) -> list[str]:
    """The SQL of every query the changelist runs over the ledger for ``query``."""
    with CaptureQueriesContext(connection) as captured:
        response = client.get(reverse(CHANGELIST), query)
    assert response.status_code == 200
    return [q["sql"] for q in captured.captured_queries if f'FROM "{LEDGER}"' in q["sql"]]


def _limit(sql: str) -> int:
    """The LIMIT of a capped read (a count or the date span: ``... LIMIT n) subquery``)."""
    found = re.search(r"LIMIT (\d+)\) subquery", sql)
    assert found, sql
    return int(found.group(1))


def _page_query(queries: list[str]) -> str:
    """The query of the page's keys (its rows are then read by those keys)."""
    pages = [sql for sql in queries if sql.startswith(f'SELECT "{LEDGER}"."id" AS "pk"')]
    assert len(pages) == 1, queries
    return pages[0]


@pytest.mark.parametrize(
    "query", [{}, {"verification_status": "unverified"}, {"source_kind": "caselaw"}, {"q": "memo"}]
)
def test_the_paginator_counts_no_more_than_its_cap(admin_client: Client, query: dict[str, str]) -> None:
    factories.assembled_turn()

    queries = _ledger_queries(admin_client, **query)

    counts = [sql for sql in queries if "COUNT(" in sql.upper() and "MIN(" not in sql.upper()]
    assert counts  # the page says how many it has (up to the cap)
    for sql in counts:  # one count, or one per span of months walked, each within what is left of the cap
        assert 0 < _limit(sql) <= CitationLedgerEntryAdmin.count_cap + 1, sql
    # and no other aggregate reads every matching entry either
    assert all(" LIMIT " in sql for sql in queries if "COUNT(" in sql.upper()), queries


def test_past_the_cap_the_changelist_says_more_than(admin_client: Client, monkeypatch: pytest.MonkeyPatch) -> None:
    # Given more entries than the count's cap
    monkeypatch.setattr(CitationLedgerEntryAdmin, "count_cap", 2)
    monkeypatch.setattr(CitationLedgerEntryAdmin, "list_per_page", 2)
    factories.assembled_turn()  # 3 entries

    response = admin_client.get(reverse(CHANGELIST))

    # Then it says "more than" the cap, and still pages
    html = response.content.decode()
    assert '<span class="capped-count">more than 2 citation ledger entries</span>' in html
    assert len(response.context["cl"].result_list) == 2
    assert response.context["cl"].multi_page


def test_below_the_cap_the_count_is_exact(admin_client: Client) -> None:
    factories.assembled_turn()

    response = admin_client.get(reverse(CHANGELIST))

    assert response.context["cl"].result_count == 3
    assert "3 citation ledger entries" in response.content.decode()


@pytest.mark.parametrize("query", [{}, {"verification_status": "exact_match"}, {"q": "memo"}])
def test_the_date_hierarchy_reads_a_bounded_span(admin_client: Client, query: dict[str, str]) -> None:
    message = factories.assembled_turn()

    queries = _ledger_queries(admin_client, **query) + _ledger_queries(admin_client, q=str(message.pk))

    spans = [sql for sql in queries if "MIN(" in sql.upper()]
    assert spans
    for sql in spans:
        assert 0 < _limit(sql) <= CitationLedgerEntryAdmin.date_span_cap + 1, sql


def test_past_the_span_cap_the_date_hierarchy_offers_a_fixed_range(
    admin_client: Client, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Given more matching entries than the span's cap, the first in 2023
    monkeypatch.setattr(CitationLedgerEntryAdmin, "date_span_cap", 2)
    for month in (3, 4, 5):
        factories.CitationLedgerEntryFactory.create(
            tool_source=True, created_at=datetime.datetime(2023, month, 1, 12, tzinfo=datetime.UTC)
        )

    response = admin_client.get(reverse(CHANGELIST))
    in_2023 = admin_client.get(reverse(CHANGELIST), {"created_at__year": "2023"})

    # Then it offers every year from the ledger's first entry to now, and every month of a year from the first
    years = [choice["title"] for choice in response.context["ledger_date_hierarchy"]["choices"]]
    assert years == [str(year) for year in range(2023, timezone.now().year + 1)]
    months = [choice["title"] for choice in in_2023.context["ledger_date_hierarchy"]["choices"]]
    assert months[0] == "March 2023"
    assert months[-1] == "December 2023"


def test_a_staff_users_fixed_range_starts_at_their_first_chat(client: Client, monkeypatch: pytest.MonkeyPatch) -> None:
    # Given a staff user whose matter's chat began in 2024, and an older entry of another matter
    monkeypatch.setattr(CitationLedgerEntryAdmin, "date_span_cap", 0)
    factories.CitationLedgerEntryFactory.create(
        tool_source=True, created_at=datetime.datetime(2020, 1, 1, tzinfo=datetime.UTC)
    )
    staff = factories.UserFactory.create(is_staff=True)
    staff.user_permissions.add(Permission.objects.get(codename="view_citationledgerentry"))
    message = factories.MessageFactory.create(chat__project__owner=staff)
    factories.MessageToolSourceFactory.create(message=message)
    ledger.assemble(message)
    Chat.objects.filter(pk=message.chat_id).update(created_at=datetime.datetime(2024, 6, 1, tzinfo=datetime.UTC))
    client.force_login(staff)

    response = client.get(reverse(CHANGELIST))

    # Then the years start at their chat's, not at the other matter's entry
    years = [choice["title"] for choice in response.context["ledger_date_hierarchy"]["choices"]]
    assert years == [str(year) for year in range(2024, timezone.now().year + 1)]


def test_a_search_by_id_finds_the_ids_table_first_then_the_entries(admin_client: Client) -> None:
    # Given two turns in one chat, and another chat's
    message = factories.assembled_turn()
    other = factories.MessageFactory.create(chat=message.chat)
    factories.MessageToolSourceFactory.create(message=other)
    ledger.assemble(other)
    factories.assembled_turn()
    entry = CitationLedgerEntry.objects.filter(message=message).first()
    assert entry is not None
    of_message = set(CitationLedgerEntry.objects.filter(message=message).values_list("pk", flat=True))
    of_chat = set(CitationLedgerEntry.objects.filter(chat=message.chat).values_list("pk", flat=True))
    assert len(of_chat) > len(of_message) > 1

    for term, expected, page_condition in (
        # a message's entries are those of its rows, each at its row's time (as the text search finds them)
        (message.pk, of_message, '"message_citation_id" IN ('),
        (entry.pk, {entry.pk}, f'WHERE "{LEDGER}"."id" = '),
        (message.chat_id, of_chat, f'WHERE "{LEDGER}"."chat_id" = '),
    ):
        queries = _ledger_queries(admin_client, q=str(term))
        response = admin_client.get(reverse(CHANGELIST), {"q": str(term)})

        # Then the entries shown are those the id names, found without an OR over every id column of the ledger
        assert {shown.pk for shown in response.context["cl"].result_list} == expected, term
        assert page_condition in _page_query(queries), (term, queries)
        compared = f'"{LEDGER}"."message_case_citation_id" = \'{term.hex}'
        assert not any(compared in sql for sql in queries), queries
        assert not any("LIKE" in sql.upper() for sql in queries)


def test_a_search_by_an_unknown_id_finds_nothing(admin_client: Client) -> None:
    factories.assembled_turn()

    response = admin_client.get(reverse(CHANGELIST), {"q": str(uuid.uuid4())})

    assert list(response.context["cl"].result_list) == []


def test_a_search_finds_an_entry_by_its_source_row_id_and_its_own_id(admin_client: Client) -> None:
    message = factories.assembled_turn()
    factories.assembled_turn()
    entry = CitationLedgerEntry.objects.filter(message=message).first()
    assert entry is not None

    for term in (entry.pk, entry.source_row_id):
        response = admin_client.get(reverse(CHANGELIST), {"q": str(term)})
        assert [shown.pk for shown in response.context["cl"].result_list] == [entry.pk]


def test_a_text_search_matches_entries_by_source_keys_not_by_text(admin_client: Client) -> None:
    factories.assembled_turn()

    page = _page_query(_ledger_queries(admin_client, q="memo"))

    assert "LIKE" not in page.upper()


# --- PostgreSQL: the plans ----------------------------------------------------------------------------------------


@pytest.fixture
def no_seqscan() -> Iterator[None]:
    """Plans as on a large table, where reading or sorting every entry costs what it does: a tiny test table
    would otherwise be read whole and sorted whatever its indexes."""
    with connection.cursor() as cursor:
        cursor.execute("SET enable_seqscan = off")
        cursor.execute("SET enable_sort = off")
    yield
    with connection.cursor() as cursor:
        cursor.execute("RESET enable_seqscan")
        cursor.execute("RESET enable_sort")


def _plan(sql: str) -> str:
    with connection.cursor() as cursor:
        cursor.execute(f"EXPLAIN {sql}")
        return "\n".join(row[0] for row in cursor.fetchall())


@pytest.mark.postgres
@pytest.mark.usefixtures("no_seqscan")
@pytest.mark.parametrize(
    ("query", "index"),
    [
        ({"verification_status": "exact_match"}, "ledger_status_created_idx"),
        ({"source_kind": "caselaw"}, "ledger_kind_created_idx"),
        ({"provider": "courtlistener"}, "ledger_provider_created_idx"),
        ({}, "ledger_created_idx"),
        ({"created_at__year": "{year}"}, "ledger_created_idx"),
        (
            {"created_at__year": "{year}", "created_at__month": "{month}", "created_at__day": "{day}"},
            "ledger_created_idx",
        ),
    ],
)
def test_each_filters_page_and_count_use_its_index(
    admin_client: Client, query: dict[str, str], index: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(CitationLedgerEntryAdmin, "list_per_page", 1)  # pages, read in date order
    factories.assembled_turn()
    today = timezone.localdate()
    query = {key: value.format(year=today.year, month=today.month, day=today.day) for key, value in query.items()}

    queries = _ledger_queries(admin_client, **query)

    # Then the page walks the filter's index in date order, and the count (or span) stops at its LIMIT
    page_plan = _plan(_page_query(queries))
    assert index in page_plan, page_plan
    assert f"Seq Scan on {LEDGER}" not in page_plan, page_plan
    aggregates = [sql for sql in queries if "COUNT(" in sql.upper()]
    assert aggregates
    for sql in aggregates:
        plan = _plan(sql)
        assert "Limit" in plan, plan
        assert f"Seq Scan on {LEDGER}" not in plan, plan
        if query and "created_at__year" not in query:
            assert index in plan, plan


@pytest.mark.postgres
@pytest.mark.usefixtures("no_seqscan")
def test_a_search_by_id_is_served_by_the_id_indexes(admin_client: Client) -> None:
    message = factories.assembled_turn()
    with connection.cursor() as cursor:
        cursor.execute("RESET enable_sort")  # the few entries an id finds are sorted, as on a large table

    for term in (message.pk, message.chat_id, CitationLedgerEntry.objects.filter(message=message).first()):
        queries = _ledger_queries(admin_client, q=str(getattr(term, "pk", term)))

        assert queries
        for sql in queries:
            plan = _plan(sql)
            assert not _walks_every_entry_in_date_order(plan), plan
            assert f"Seq Scan on {LEDGER}" not in plan, plan


@pytest.mark.postgres
def test_a_search_by_a_messages_id_reads_only_its_rows_months(admin_client: Client) -> None:
    # Given a ledger with this month's partition and the next two, and a turn this month
    from citations import partitions

    partitions.ensure_partitions(ahead=2)
    message = factories.assembled_turn()
    this_month = timezone.now().date().replace(day=1)
    others = (partitions.partition_name(partitions.next_month(this_month)), partitions.DEFAULT_PARTITION)

    queries = _ledger_queries(admin_client, q=str(message.pk))

    # Then every read of the ledger (the count, the page, the dates) names the month of the message's rows only
    assert len(queries) >= 3, queries
    for sql in queries:
        plan = _plan(sql)
        assert partitions.partition_name(this_month) in plan, plan
        for name in others:
            assert name not in plan, plan


def _walks_every_entry_in_date_order(plan: str) -> bool:
    """Whether a plan reads ``ledger_created_idx`` without bounding ``created_at`` on both sides (the page's
    rows are read within their own dates, ``selectors.page_of``: a range of one page, not a walk) or to one
    value (an entry at its row's time)."""
    lines = plan.splitlines()
    for at, line in enumerate(lines):
        if "ledger_created_idx" in line:
            condition = next((text for text in lines[at + 1 : at + 3] if "Index Cond" in text), "")
            if not ("created_at >=" in condition and "created_at <=" in condition) and "created_at =" not in condition:
                return True
    return False


@pytest.mark.postgres
@pytest.mark.usefixtures("no_seqscan")
def test_a_search_by_a_matters_id_walks_the_matters_index(admin_client: Client) -> None:
    message = factories.assembled_turn()

    queries = _ledger_queries(admin_client, q=str(message.chat.project_id))

    keys = [sql for sql in queries if sql.startswith(f'SELECT "{LEDGER}"."id" AS "pk"')]
    assert keys
    plan = _plan(keys[0])
    assert "ledger_project_created_idx" in plan, plan


@pytest.mark.postgres
@pytest.mark.usefixtures("no_seqscan")
def test_a_text_search_finds_documents_and_opinions_through_their_trigram_indexes(admin_client: Client) -> None:
    factories.assembled_turn()

    with CaptureQueriesContext(connection) as captured:
        assert admin_client.get(reverse(CHANGELIST), {"q": "Memo 7"}).status_code == 200

    # The titles, case names and citations are matched through pg_trgm (chats.0026), not read row by row
    lookups = {
        table: [q["sql"] for q in captured.captured_queries if q["sql"].startswith(f'SELECT "{table}"."id" AS "pk"')]
        for table in ("documents", "caselaw_opinions")
    }
    for table, index in (
        ("documents", "documents_title_trgm"),
        ("caselaw_opinions", "caselaw_opinions_name_citation_trgm"),
    ):
        (sql,) = lookups[table]
        plan = _plan(sql)
        assert index in plan, plan
        assert f"Seq Scan on {table}" not in plan, plan


@pytest.mark.postgres
def test_a_pages_rows_are_read_from_its_own_months_partitions_only(admin_client: Client) -> None:
    # Given a ledger with this month's partition and the next two (as the nightly ledger_partitions keeps them)
    from citations import partitions

    partitions.ensure_partitions(ahead=2)
    factories.assembled_turn()
    this_month = timezone.now().date().replace(day=1)
    later = [partitions.partition_name(partitions.next_month(this_month))]
    later.append(partitions.partition_name(partitions.next_month(partitions.next_month(this_month))))

    queries = _ledger_queries(admin_client)

    # Then the query of the page's rows (with their joins) is bounded by the page's dates, so the planner
    # prunes every other month before planning the joins; by its ids alone it would plan them for each
    (rows,) = [sql for sql in queries if not sql.startswith(f'SELECT "{LEDGER}"."id" AS') and '"id" IN (' in sql]
    plan = _plan(rows)
    assert partitions.partition_name(this_month) in plan, plan
    for name in (*later, partitions.DEFAULT_PARTITION):
        assert name not in plan, plan


@pytest.mark.postgres
def test_a_text_search_reads_only_the_months_of_the_rows_it_found(admin_client: Client) -> None:
    # Given a ledger with this month's partition and the next two, and a turn quoting a memo this month
    from citations import partitions

    partitions.ensure_partitions(ahead=2)
    message = factories.assembled_turn()
    this_month = timezone.now().date().replace(day=1)
    next_month = partitions.next_month(this_month)

    queries = _ledger_queries(admin_client, q="memo")

    # Then the page's keys are looked for in the found rows' own month only, not in every month's date index
    plan = _plan(_page_query(queries))
    assert partitions.partition_name(this_month) in plan, plan
    for name in (partitions.partition_name(next_month), partitions.DEFAULT_PARTITION):
        assert name not in plan, plan
    response = admin_client.get(reverse(CHANGELIST), {"q": "memo"})
    quote = message.citations.get()
    assert [entry.message_citation_id for entry in response.context["cl"].result_list] == [quote.pk]


@pytest.mark.postgres
def test_a_text_search_finds_an_entry_that_is_not_at_its_rows_time(admin_client: Client) -> None:
    # Given a quote whose entry was written by hand 40 days after the row (the trigger lists it off time)
    message = factories.MessageFactory.create()
    quote = factories.DocumentQuoteFactory.create(message=message)
    CitationLedgerEntry.objects.create(
        project_id=message.chat.project_id,
        chat_id=message.chat_id,
        message=message,
        source_kind="kb_document",
        message_citation=quote,
        verification_status=quote.verification_method,
        confidence=quote.verification_confidence,
        created_at=quote.created_at + datetime.timedelta(days=40),
    )

    assert quote.document is not None
    response = admin_client.get(reverse(CHANGELIST), {"q": quote.document.title})

    # Then the search still finds it, by the row's id alone
    assert [entry.message_citation_id for entry in response.context["cl"].result_list] == [quote.pk]


def test_a_filter_that_matches_nothing_reads_no_dates(admin_client: Client) -> None:
    factories.assembled_turn()

    queries = _ledger_queries(admin_client, verification_status="ambiguous")
    response = admin_client.get(reverse(CHANGELIST), {"verification_status": "ambiguous"})

    # Then the count found none, and the date hierarchy offers no dates without reading them again
    assert response.context["cl"].result_count == 0
    assert response.context["ledger_date_hierarchy"]["choices"] == []
    assert [sql for sql in queries if "COUNT(" in sql.upper()]
    assert not [sql for sql in queries if "MIN(" in sql.upper()], queries


# --- PostgreSQL: the months walked newest first ---------------------------------------------------------------------


def _months_before(month: datetime.date, count: int) -> datetime.date:
    index = month.year * 12 + month.month - 1 - count
    return datetime.date(index // 12, index % 12 + 1, 1)


def _is_first_entry_lookup(sql: str) -> bool:
    """The date hierarchy's fixed range starts at the ledger's first entry: that lookup walks oldest first."""
    return sql.startswith(f'SELECT "{LEDGER}"."created_at" AS "created_at" FROM') and sql.endswith("ASC LIMIT 1")


@pytest.mark.postgres
def test_time_chunks_tile_all_time_newest_first_in_growing_runs_of_months() -> None:
    from citations import partitions, selectors

    this_month = timezone.now().date().replace(day=1)
    partitions.ensure_partitions(ahead=8, today=_months_before(this_month, 3))  # 9 months, 3 before this one

    chunks = selectors.time_chunks()
    oldest_first = selectors.time_chunks(newest_first=False)

    first, last = partitions.month_start(_months_before(this_month, 3)), partitions.months()[-1][1]
    # after the last month; the last month; the two before; the four before; then the rest and the time before
    assert chunks[0] == (last, None)
    assert chunks[-1][0] is None
    for newer, older in itertools.pairwise(chunks):
        assert older[1] == newer[0]  # no gap, no overlap
    months_in = [
        sum(1 for start, end in partitions.months() if (a is None or start >= a) and (b is None or end <= b))
        for a, b in chunks
    ]
    assert months_in == [0, 2, 4, 3]
    assert oldest_first[0] == (None, first)
    assert oldest_first[-1][1] is None


def test_time_chunks_are_all_time_on_a_plain_table() -> None:
    from citations import partitions, selectors

    if partitions.is_partitioned():
        pytest.skip("on PostgreSQL the ledger is partitioned")
    assert selectors.time_chunks() == [(None, None)]


@pytest.mark.postgres
def test_the_first_pages_reads_stop_at_the_months_that_fill_them(
    admin_client: Client, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Given a year of months before this one, and more entries this month than the count's and the span's caps
    from citations import partitions

    this_month = timezone.now().date().replace(day=1)
    year_ago = _months_before(this_month, 12)
    partitions.ensure_partitions(ahead=14, today=year_ago)
    monkeypatch.setattr(CitationLedgerEntryAdmin, "count_cap", 1)
    monkeypatch.setattr(CitationLedgerEntryAdmin, "date_span_cap", 1)
    monkeypatch.setattr(CitationLedgerEntryAdmin, "list_per_page", 1)
    factories.assembled_turn()  # 3 entries

    queries = _ledger_queries(admin_client)
    response = admin_client.get(reverse(CHANGELIST))

    # Then the page is the newest entry, "more than 1", and no read of the page names the year-old month:
    # the count, the page and the dates stop at the months that had enough (the fixed range's start, the
    # ledger's first entry, is looked for oldest first)
    newest = CitationLedgerEntry.objects.order_by("-created_at", "id").first()
    assert [entry.pk for entry in response.context["cl"].result_list] == [getattr(newest, "pk", None)]
    assert "more than 1 citation ledger entr" in response.content.decode()
    walked = [sql for sql in queries if not _is_first_entry_lookup(sql)]
    assert len(walked) < len(queries)
    for sql in walked:
        plan = _plan(sql)
        assert partitions.partition_name(year_ago) not in plan, plan


@pytest.mark.postgres
@pytest.mark.parametrize("order", ["", "-0", "0"])  # the changelist's own order; by the date column, either way
def test_pages_read_month_by_month_are_the_pages_of_one_ordered_read(
    admin_client: Client, monkeypatch: pytest.MonkeyPatch, order: str
) -> None:
    # Given entries in three months, two in one, each month with its partition, pages of one entry
    from citations import partitions

    this_month = timezone.now().date().replace(day=1)
    partitions.ensure_partitions(ahead=0, today=_months_before(this_month, 4))
    partitions.ensure_partitions(ahead=4, today=_months_before(this_month, 4))
    monkeypatch.setattr(CitationLedgerEntryAdmin, "list_per_page", 1)
    for months, day in ((4, 3), (4, 20), (2, 9), (0, 1)):
        month = _months_before(this_month, months)
        factories.CitationLedgerEntryFactory.create(
            tool_source=True, created_at=datetime.datetime(month.year, month.month, day, 12, tzinfo=datetime.UTC)
        )
    ordering = ("created_at", "id") if order == "0" else ("-created_at", "id")
    expected = list(CitationLedgerEntry.objects.order_by(*ordering).values_list("pk", flat=True))

    # Then page after page, the entries are those of one read in the changelist's order
    shown = []
    for page in range(1, len(expected) + 1):
        query = {"p": str(page), **({"o": order} if order else {})}
        response = admin_client.get(reverse(CHANGELIST), query)
        shown += [entry.pk for entry in response.context["cl"].result_list]
    assert shown == expected
