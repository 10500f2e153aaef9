"""The ledger changelist's reads stay bounded whatever the table's size (issue 25): the paginator never
counts every matching entry, the date hierarchy never takes MIN/MAX over every matching entry, a search by
an id is an equality on indexed columns, and (on PostgreSQL) each filter's query is served by its index."""

from __future__ import annotations

import datetime
import re
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
    for sql in counts:
        assert re.search(rf"LIMIT {CitationLedgerEntryAdmin.count_cap + 1}\b", sql), sql
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
        assert re.search(rf"LIMIT {CitationLedgerEntryAdmin.date_span_cap + 1}\b", sql), sql


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


def _id_lookup(queries: list[str]) -> str:
    """The query that finds which id column holds the searched id."""
    lookups = [sql for sql in queries if f'"{LEDGER}"."message_case_citation_id" = ' in sql and "LIMIT 1" in sql]
    assert len(lookups) == 1, queries
    return lookups[0]


def test_a_search_by_id_is_an_equality_on_each_id_column(admin_client: Client) -> None:
    message = factories.assembled_turn()
    entry = CitationLedgerEntry.objects.filter(message=message).first()
    assert entry is not None

    for term, column in ((message.pk, "message_id"), (entry.pk, "id"), (message.chat_id, "chat_id")):
        queries = _ledger_queries(admin_client, q=str(term))
        # Then one lookup compares the id with each id column, and the page lists the entries by the one it is in
        lookup = _id_lookup(queries)
        for each in ("id", "message_id", "chat_id", "project_id", "message_citation_id", "message_tool_source_id"):
            assert re.search(rf'"{LEDGER}"\."{each}" = ', lookup), (each, lookup)
        assert not any("LIKE" in sql.upper() for sql in queries)
        assert re.search(rf'WHERE "{LEDGER}"\."{column}" = ', _page_query(queries))


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

    queries = _ledger_queries(admin_client, q=str(message.pk))

    lookup = _plan(_id_lookup(queries))
    assert "BitmapOr" in lookup, lookup
    for sql in queries:
        plan = _plan(sql)
        assert not _walks_every_entry_in_date_order(plan), plan
        assert f"Seq Scan on {LEDGER}" not in plan, plan


def _walks_every_entry_in_date_order(plan: str) -> bool:
    """Whether a plan reads ``ledger_created_idx`` without bounding ``created_at`` on both sides (the page's
    rows are read within their own dates, ``selectors.page_of``: a range of one page, not a walk)."""
    lines = plan.splitlines()
    for at, line in enumerate(lines):
        if "ledger_created_idx" in line:
            condition = next((text for text in lines[at + 1 : at + 3] if "Index Cond" in text), "")
            if not ("created_at >=" in condition and "created_at <=" in condition):
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
