"""The Django admin: every model registered, the ledger and its source rows read-only (superusers
included), the ledger changelist's constant query count, search and filters, and the links and
passages on an entry's page and on a message's page."""

from __future__ import annotations

import datetime
from collections.abc import Callable
from contextlib import AbstractContextManager
from typing import Any

import pytest
from django.apps import apps
from django.contrib import admin
from django.db import connection
from django.db.models import Model
from django.test import Client
from django.test.utils import CaptureQueriesContext
from django.urls import reverse
from django.utils import timezone
from django.utils.html import escape

from chats.models import (
    CaseCitation,
    DocumentQuote,
    Message,
    MessageToolSource,
    OpinionQuote,
)
from citations import ledger
from citations.admin import LedgerEntryInline
from citations.models import CitationLedgerEntry
from citations.selectors import CONTEXT_CHARS
from lqai_verify.verification import alterations_record, verify_quote
from tests import factories

pytestmark = pytest.mark.django_db

AssertNumQueries = Callable[[int], AbstractContextManager[Any]]

CHANGELIST = "admin:citations_citationledgerentry_changelist"


def _url(model: type[Model], view: str, *args: object) -> str:
    return reverse(f"admin:{model._meta.app_label}_{model._meta.model_name}_{view}", args=args)


def _entries(message: Message) -> dict[str, CitationLedgerEntry]:
    """The entries of a turn of ``assembled_turn()``, by the table of their source row."""
    return {
        "kb": CitationLedgerEntry.objects.get(message=message, message_citation__isnull=False),
        "caselaw": CitationLedgerEntry.objects.get(message=message, message_caselaw_citation__isnull=False),
        "tool": CitationLedgerEntry.objects.get(message=message, message_tool_source__isnull=False),
    }


def _changelist(client: Client, **query: str) -> list[CitationLedgerEntry]:
    response = client.get(reverse(CHANGELIST), query)
    assert response.status_code == 200
    return list(response.context["cl"].result_list)


# --- Registration ------------------------------------------------------------------------------------------------


@pytest.mark.parametrize("app_label", ["chats", "citations"])
def test_every_model_is_registered(app_label: str) -> None:
    for model in apps.get_app_config(app_label).get_models():
        assert admin.site.is_registered(model), model


def test_the_message_page_carries_the_ledger_inline() -> None:
    assert LedgerEntryInline in admin.site.get_model_admin(Message).inlines


# --- Read-only means read-only -----------------------------------------------------------------------------------

# (model, a field and a value a POST would try to set)
READ_ONLY = [
    (CitationLedgerEntry, "verification_status", "tampered"),
    (DocumentQuote, "quote", "tampered"),
    (OpinionQuote, "quote", "tampered"),
    (MessageToolSource, "label", "tampered"),
    (CaseCitation, "case_name", "tampered"),
]


def _row(model: type[Model]) -> Model:
    if model is CaseCitation:
        return factories.CaseCitationFactory.create()
    message = factories.assembled_turn()
    if model is CitationLedgerEntry:
        return _entries(message)["kb"]
    return model._default_manager.get(message=message)


@pytest.mark.parametrize(("model", "field", "value"), READ_ONLY, ids=lambda p: getattr(p, "__name__", None))
def test_read_only_admins_refuse_add_change_and_delete_to_a_superuser(
    admin_client: Client, model: type[Model], field: str, value: str
) -> None:
    # Given a row and a superuser
    row = _row(model)
    before = model._default_manager.count()
    original = getattr(row, field)

    # When they try to add, change or delete it through the admin
    add_get = admin_client.get(_url(model, "add"))
    add_post = admin_client.post(_url(model, "add"), {field: value})
    change_get = admin_client.get(_url(model, "change", row.pk))
    change_post = admin_client.post(_url(model, "change", row.pk), {field: value, "_save": "Save"})
    delete_get = admin_client.get(_url(model, "delete", row.pk))
    delete_post = admin_client.post(_url(model, "delete", row.pk), {"post": "yes"})
    bulk_delete = admin_client.post(
        _url(model, "changelist"), {"action": "delete_selected", "_selected_action": [row.pk], "index": 0}
    )

    # Then every write is refused, the page shows the row read-only, and nothing changed
    assert add_get.status_code == 403
    assert add_post.status_code == 403
    assert change_get.status_code == 200
    assert b'name="_save"' not in change_get.content
    assert b'class="deletelink"' not in change_get.content
    assert change_post.status_code == 403
    assert delete_get.status_code == 403
    assert delete_post.status_code == 403
    assert bulk_delete.status_code == 200
    assert model._default_manager.count() == before
    row.refresh_from_db()
    assert getattr(row, field) == original


@pytest.mark.parametrize(("model", "field", "value"), READ_ONLY, ids=lambda p: getattr(p, "__name__", None))
def test_read_only_changelists_offer_no_add_and_no_actions(
    admin_client: Client, model: type[Model], field: str, value: str
) -> None:
    _row(model)

    response = admin_client.get(_url(model, "changelist"))

    assert response.status_code == 200
    # No link to the add page anywhere (the nav sidebar still offers "Add" for the editable models).
    assert _url(model, "add") not in response.content.decode()
    assert b'name="action"' not in response.content
    model_admin = admin.site.get_model_admin(model)
    assert model_admin.get_actions(response.wsgi_request) == {}
    assert model_admin.show_full_result_count is False


def test_every_field_of_an_entry_is_read_only(rf: Any, admin_user: Any) -> None:
    request = rf.get("/")
    request.user = admin_user
    model_admin = admin.site.get_model_admin(CitationLedgerEntry)

    readonly = set(model_admin.get_readonly_fields(request))

    assert {f.name for f in CitationLedgerEntry._meta.concrete_fields} <= readonly
    assert set(model_admin.get_fields(request)) <= readonly


# --- The changelist ----------------------------------------------------------------------------------------------


def test_the_changelist_query_count_does_not_grow_with_the_entries(
    admin_client: Client, django_assert_num_queries: AssertNumQueries
) -> None:
    # Given one entry, each in its own chat and turn
    factories.assembled_turn(kb=1, caselaw=0, tools=0)
    admin_client.get(reverse(CHANGELIST))  # warm the session and the content types
    with CaptureQueriesContext(connection) as one_entry:
        assert len(_changelist(admin_client)) == 1

    # When there are a hundred, across a hundred chats and turns and all three kinds
    for i in range(99):
        factories.assembled_turn(kb=int(i % 3 == 0), caselaw=int(i % 3 == 1), tools=int(i % 3 == 2))

    # Then the changelist runs the same queries (no query per row for its chat or message)
    with django_assert_num_queries(len(one_entry.captured_queries)):
        assert len(_changelist(admin_client)) == 100


def test_the_changelist_shows_the_columns_and_links_to_chat_and_message(admin_client: Client) -> None:
    message = factories.assembled_turn(kb=1, caselaw=0, tools=0)

    response = admin_client.get(reverse(CHANGELIST))

    html = response.content.decode()
    for column in ("created_at", "source_kind", "cited", "status", "confidence", "provider"):
        assert f"column-{column}" in html
    assert _url(Message, "change", message.pk) in html
    assert _url(type(message.chat), "change", message.chat.pk) in html
    assert 'class="toplinks"' in html  # the date hierarchy


@pytest.mark.parametrize("query", [{}, {"created_at__year": "2020"}, {"source_kind": "caselaw"}])
def test_neither_filters_nor_date_hierarchy_scan_for_distinct_values(
    admin_client: Client, query: dict[str, str]
) -> None:
    # A field filter or Django's {% date_hierarchy %} would run SELECT DISTINCT over every entry.
    factories.assembled_turn()

    with CaptureQueriesContext(connection) as queries:
        admin_client.get(reverse(CHANGELIST), query)

    assert not [q["sql"] for q in queries.captured_queries if "DISTINCT" in q["sql"].upper()]


def _dated_entries(*dates: datetime.datetime) -> list[CitationLedgerEntry]:
    """One entry (a consulted source) per date, its created_at set to that date."""
    entries = []
    for date in dates:
        # dated when written: entries are never updated
        entries.append(factories.CitationLedgerEntryFactory.create(tool_source=True, created_at=date))
    return entries


def _drilldown(client: Client, **query: str) -> list[str]:
    response = client.get(reverse(CHANGELIST), query)
    return [choice["title"] for choice in response.context["ledger_date_hierarchy"]["choices"]]


def test_the_date_hierarchy_drills_down_from_years_to_days(admin_client: Client) -> None:
    # Given entries in 2023 (March) and 2025 (February and the 14th and 16th of April)
    march_2023, feb_2025, april_14, april_16 = _dated_entries(
        datetime.datetime(2023, 3, 5, 12, tzinfo=datetime.UTC),
        datetime.datetime(2025, 2, 1, 12, tzinfo=datetime.UTC),
        datetime.datetime(2025, 4, 14, 12, tzinfo=datetime.UTC),
        datetime.datetime(2025, 4, 16, 12, tzinfo=datetime.UTC),
    )

    # Then it offers every year, month or day between the first and the last entry, and filters by it
    assert _drilldown(admin_client) == ["2023", "2024", "2025"]
    assert _drilldown(admin_client, created_at__year="2025") == ["February 2025", "March 2025", "April 2025"]
    assert _drilldown(admin_client, created_at__year="2025", created_at__month="4") == [
        "April 14",
        "April 15",
        "April 16",
    ]
    shown = _changelist(admin_client, created_at__year="2025", created_at__month="4")
    assert {e.pk for e in shown} == {april_14.pk, april_16.pk}
    shown = _changelist(admin_client, created_at__year="2025", created_at__month="4", created_at__day="14")
    assert [e.pk for e in shown] == [april_14.pk]
    assert {e.pk for e in _changelist(admin_client, created_at__year="2023")} == {march_2023.pk}
    assert feb_2025.pk in {e.pk for e in _changelist(admin_client, created_at__year="2025")}


def test_the_date_hierarchy_links_keep_the_other_filters(admin_client: Client) -> None:
    _dated_entries(
        datetime.datetime(2024, 1, 1, tzinfo=datetime.UTC), datetime.datetime(2025, 1, 1, tzinfo=datetime.UTC)
    )

    response = admin_client.get(reverse(CHANGELIST), {"source_kind": "caselaw"})

    links = [choice["link"] for choice in response.context["ledger_date_hierarchy"]["choices"]]
    assert links == ["?created_at__year=2024&source_kind=caselaw", "?created_at__year=2025&source_kind=caselaw"]
    assert 'href="?created_at__year=2024&amp;source_kind=caselaw"' in response.content.decode()


def test_the_date_hierarchy_of_an_empty_ledger_shows_nothing(admin_client: Client) -> None:
    response = admin_client.get(reverse(CHANGELIST))
    drilled_down = admin_client.get(reverse(CHANGELIST), {"created_at__year": "2020"})

    assert response.context["ledger_date_hierarchy"]["show"] is False
    assert 'class="toplinks"' not in response.content.decode()
    assert drilled_down.context["ledger_date_hierarchy"]["choices"] == []
    assert 'class="date-back"' in drilled_down.content.decode()  # the way back to all dates


@pytest.mark.parametrize(
    ("query", "expected"),
    [
        ({"source_kind": "kb_document"}, {"kb"}),
        ({"source_kind": "caselaw"}, {"caselaw", "tool"}),  # the tool source consulted caselaw
        ({"verification_status": "exact_match"}, {"kb", "caselaw"}),
        ({"verification_status": "provenance"}, {"tool"}),
        ({"provider": "courtlistener"}, {"tool"}),
        ({"provider": "local"}, {"caselaw"}),
        ({"source_kind": "caselaw", "verification_status": "provenance"}, {"tool"}),
        ({"provider": "nobody"}, set()),
    ],
)
def test_filters(admin_client: Client, query: dict[str, str], expected: set[str]) -> None:
    entries = _entries(factories.assembled_turn())
    names = {entry.pk: name for name, entry in entries.items()}

    shown = _changelist(admin_client, **query)

    assert {names[entry.pk] for entry in shown} == expected


def test_the_provider_filter_keeps_the_other_filters(admin_client: Client) -> None:
    factories.assembled_turn()

    response = admin_client.get(reverse(CHANGELIST), {"source_kind": "caselaw", "provider": "local"})

    html = response.content.decode()
    assert '<input type="hidden" name="source_kind" value="caselaw">' in html
    assert 'name="provider" value="local"' in html


def test_search_by_chat_message_or_project_id(admin_client: Client) -> None:
    # Given two turns in two chats of two matters
    message = factories.assembled_turn()
    factories.assembled_turn()
    chat = message.chat
    assert chat.project is not None

    # Then an exact id of either finds that turn's entries only
    for term in (chat.pk, message.pk, chat.project.pk):
        shown = _changelist(admin_client, q=str(term))
        assert {entry.message_id for entry in shown} == {message.pk}
        assert len(shown) == 3


def test_search_by_document_title_case_name_or_citation(admin_client: Client) -> None:
    # Given a turn quoting a memo and an opinion, a turn citing a case under a wrong name, and unrelated turns
    project = factories.ProjectFactory.create()
    message = factories.MessageFactory.create(chat__project=project)
    memo = factories.DocumentFactory.create(project=project, title="Strict scrutiny memo")
    kb = factories.DocumentQuoteFactory.create(message=message, document=memo)
    fisher = factories.CaselawOpinionFactory.create(case_name="Fisher v. University of Texas", citation="570 U.S. 297")
    caselaw = factories.OpinionQuoteFactory.create(message=message, opinion=fisher)
    ledger.assemble(message)
    cited = factories.CaseCitationFactory.create(
        opinion=fisher, case_name="Grutter v. Bollinger", status="name_mismatch", citation="570 U.S. 297"
    )
    ledger.assemble(cited.message)
    unrelated = factories.MessageFactory.create()
    factories.DocumentQuoteFactory.create(message=unrelated)
    factories.OpinionQuoteFactory.create(message=unrelated, opinion__citation="539 U.S. 306")
    ledger.assemble(unrelated)

    def found(term: str) -> set[object]:
        return {entry.source_row_id for entry in _changelist(admin_client, q=term)}

    # Then words of the title, of the opinion's name, or the citation find those entries, whatever their case;
    # a name only the answer wrote is not searched (a text match over every case citation of every turn):
    # the citation is found by the case it really is
    assert found("scrutiny MEMO") == {kb.pk}
    assert found("fisher") == {caselaw.pk, cited.pk}
    assert found("Grutter") == set()
    assert found("570 U.S. 297") == {caselaw.pk, cited.pk}
    assert found("no such case") == set()


def test_the_changelist_names_what_was_cited_and_the_status_in_words(admin_client: Client) -> None:
    message = factories.MessageFactory.create()
    factories.DocumentQuoteFactory.create(message=message, document__title="Strict scrutiny memo")
    factories.DocumentQuoteFactory.create(message=message, failed=True, document=None)
    factories.CaseCitationFactory.create(
        message=message, case_name="Grutter v. Bollinger", status="name_mismatch", answer_offset_start=300
    )
    ledger.assemble(message)

    html = admin_client.get(reverse(CHANGELIST)).content.decode()

    assert '<td class="field-cited">Strict scrutiny memo</td>' in html
    assert '<td class="field-cited">Grutter v. Bollinger, 570 U.S. 297</td>' in html
    assert '<td class="field-cited">(no document of the matter)</td>' in html
    assert "\u2713 verified exactly</span>" in html
    assert "\u2717 not found in the source</span>" in html
    assert "\u2717 cited under another case&#x27;s name</span>" in html


def test_an_entry_page_names_its_document_and_shows_the_quote_that_failed(
    admin_client: Client, django_assert_max_num_queries: AssertNumQueries
) -> None:
    message = factories.MessageFactory.create()
    failed = factories.DocumentQuoteFactory.create(
        message=message, failed=True, quote="a quote the memo never says", document__title="Strict scrutiny memo"
    )
    ledger.assemble(message)
    entry = CitationLedgerEntry.objects.get(message_citation=failed)
    verified = CitationLedgerEntry.objects.get(message=factories.assembled_turn(caselaw=0, tools=0))
    admin_client.get(_url(CitationLedgerEntry, "change", verified.pk))  # warm the session and the content types
    with CaptureQueriesContext(connection) as verified_page:
        admin_client.get(_url(CitationLedgerEntry, "change", verified.pk))

    with django_assert_max_num_queries(len(verified_page.captured_queries)):
        html = admin_client.get(_url(CitationLedgerEntry, "change", entry.pk)).content.decode()

    assert '<div class="readonly">Strict scrutiny memo</div>' in html
    assert '<blockquote class="claimed-quote">a quote the memo never says</blockquote>' in html
    assert f'href="/chats/{message.chat_id}/#claim-{failed.pk}"' in html  # its card on the trace page
    assert "\u2717 not found in the source" in html


def test_a_uuid_search_is_an_exact_match_not_a_like(admin_client: Client) -> None:
    message = factories.assembled_turn()

    with CaptureQueriesContext(connection) as queries:
        _changelist(admin_client, q=str(message.pk))

    assert not any("LIKE" in q["sql"].upper() for q in queries.captured_queries)


@pytest.mark.parametrize(
    ("model", "field"),
    [(Message, "pk"), (Message, "chat_id"), (DocumentQuote, "pk"), (DocumentQuote, "message_id"), (CaseCitation, "pk")],
)
def test_the_record_changelists_find_a_row_by_any_of_its_ids(
    admin_client: Client, model: type[Model], field: str
) -> None:
    message = factories.assembled_turn()
    factories.CaseCitationFactory.create(message=message)
    factories.assembled_turn()  # another turn, not found
    row = message if model is Message else model._default_manager.get(message=message)

    response = admin_client.get(_url(model, "changelist"), {"q": str(getattr(row, field))})

    assert response.status_code == 200
    assert [r.pk for r in response.context["cl"].result_list] == [row.pk]


def test_a_record_search_that_is_not_a_uuid_finds_nothing_and_says_why(admin_client: Client) -> None:
    factories.assembled_turn()

    response = admin_client.get(_url(Message, "changelist"), {"q": "strict scrutiny"}, follow=True)

    assert response.status_code == 200
    assert list(response.context["cl"].result_list) == []
    assert [str(m) for m in response.context["messages"]] == [
        "Search takes an exact id (a UUID) of: id, chat_id. 'strict scrutiny' is not a UUID."
    ]


# --- An entry's page and a message's page ------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("kind", "source_model"),
    [("kb", DocumentQuote), ("caselaw", OpinionQuote), ("tool", MessageToolSource)],
)
def test_an_entry_page_links_to_its_source_row_message_and_chat(
    admin_client: Client, kind: str, source_model: type[Model]
) -> None:
    message = factories.assembled_turn()
    entry = _entries(message)[kind]

    response = admin_client.get(_url(CitationLedgerEntry, "change", entry.pk))

    html = response.content.decode()
    assert response.status_code == 200
    assert f'href="{_url(source_model, "change", entry.source_row_id)}"' in html
    assert f'href="{_url(Message, "change", message.pk)}"' in html
    assert f'href="{_url(type(message.chat), "change", message.chat_id)}"' in html
    # The source row's page itself renders, read-only.
    source_page = admin_client.get(_url(source_model, "change", entry.source_row_id))
    assert source_page.status_code == 200
    assert b'name="_save"' not in source_page.content


def test_an_entry_page_shows_the_passage(admin_client: Client) -> None:
    message = factories.assembled_turn(caselaw=0, tools=0)
    citation = message.citations.get()
    start, end = citation.source_offset_start, citation.source_offset_end

    entry = CitationLedgerEntry.objects.get(message=message)

    response = admin_client.get(_url(CitationLedgerEntry, "change", entry.pk))

    # Then the passage is highlighted among the source text around it, and no alteration is listed
    assert citation.document is not None
    content = citation.document.content
    html = response.content.decode()
    assert (
        f'<div class="passage-in-context">{escape(content[:start])}'
        f'<mark title="the verified passage [{start}:{end}]">{escape(content[start:end])}</mark>'
        f"{escape(content[end:])}</div>"
    ) in html
    assert '<ol class="alterations">' not in html


@pytest.mark.parametrize("kind", ["kb", "caselaw"])
def test_an_entry_page_shows_the_passage_in_its_context_with_each_alteration_marked(
    admin_client: Client, kind: str
) -> None:
    # Given an altered quote ("[t]he reviewing court must . . . be satisfied") of a long document or opinion
    content = "x" * 250 + " A preamble. " + factories.TEXT + " And more." + "y" * 250
    project = factories.ProjectFactory.create()
    message = factories.MessageFactory.create(chat__project=project)
    citation: DocumentQuote | OpinionQuote
    if kind == "kb":
        document = factories.DocumentFactory.create(project=project, content=content)
        citation = factories.DocumentQuoteFactory.create(message=message, document=document, altered=True)
    else:
        opinion = factories.CaselawOpinionFactory.create(text=content)
        citation = factories.OpinionQuoteFactory.create(message=message, opinion=opinion, altered=True)
    ledger.assemble(message)
    entry = CitationLedgerEntry.objects.get(message=message)
    start, end = citation.source_offset_start, citation.source_offset_end
    assert start is not None
    assert end is not None
    letter, ellipsis = citation.alterations

    # When its page is shown
    html = admin_client.get(_url(CitationLedgerEntry, "change", entry.pk)).content.decode()

    # Then the passage is highlighted, with up to 200 characters of the source on each side, in whole words
    text = content
    assert html.count("<mark ") == 1
    marked = html[html.index('<div class="passage-in-context"') : html.index("</div>", html.index("<mark "))]
    shown_from = text.index("A preamble.")
    assert start - shown_from < CONTEXT_CHARS
    assert marked.startswith(f'<div class="passage-in-context">\u2026 {text[shown_from:start]}')
    shown_to = text.index(" And more.") + len(" And")
    assert shown_to - end < CONTEXT_CHARS
    assert marked.endswith(f"</mark>{text[end:shown_to]} \u2026")
    # ... the bracketed letter and the omission are marked where they are, each named in its title
    assert (
        f'<mark title="the verified passage [{start}:{end}]">'
        '<span class="alteration" data-kind="letter" title="letter: the quote&#x27;s “[t]” stands for “T”">'
        "<del>T</del><ins>[t]</ins></span>he reviewing court must "
        '<span class="alteration" data-kind="ellipsis" title="omission: the quote&#x27;s “...” omits “ultimately”">'
        "<del>ultimately</del></span> be satisfied</mark>"
    ) in marked
    # ... and listed below with their source offsets
    assert (
        '<ol class="alterations">'
        f'<li data-kind="letter">letter: the quote&#x27;s “[t]” stands for “T” '
        f"<small>[{letter['source_start']}:{letter['source_end']}]</small></li>"
        f'<li data-kind="ellipsis">omission: the quote&#x27;s “...” omits “ultimately” '
        f"<small>[{ellipsis['source_start']}:{ellipsis['source_end']}]</small></li></ol>"
    ) in html


@pytest.mark.parametrize(
    ("quote", "marked", "listed"),
    [
        # A case-only match spans the whole passage: listed, not marked inside it.
        ("the reviewing Court must ultimately be satisfied", "", "case: the passage matches the quote only when"),
        # [sic] adds to the quote, at the passage's end.
        (
            "[T]he reviewing court must ultimately be satisfied [sic]",
            '<span class="alteration" data-kind="sic" title="sic: the quote adds “[sic]”"><ins>[sic]</ins></span>'
            "</mark>",
            "sic: the quote adds “[sic]”",
        ),
    ],
)
def test_an_entry_page_marks_insertions_and_lists_a_case_only_match(
    admin_client: Client, quote: str, marked: str, listed: str
) -> None:
    message = factories.MessageFactory.create()
    factories.DocumentQuoteFactory.create(message=message, altered=True, quote=quote)
    ledger.assemble(message)
    entry = CitationLedgerEntry.objects.get(message=message)

    html = admin_client.get(_url(CitationLedgerEntry, "change", entry.pk)).content.decode()

    assert html.count("<mark ") == 1
    assert marked in html
    assert "<li data-kind=" in html
    assert listed in html
    if not marked:
        assert 'class="alteration"' not in html


def test_an_entry_page_escapes_the_source_and_the_alterations(admin_client: Client) -> None:
    # Given a document whose text and a stored alteration carry markup
    project = factories.ProjectFactory.create()
    content = "<script>alert(1)</script> " + factories.TEXT + " <b>bold</b>"
    document = factories.DocumentFactory.create(project=project, content=content)
    message = factories.MessageFactory.create(chat__project=project)
    alterations = alterations_record(verify_quote(factories.ALTERED_QUOTE, content))  # type: ignore[arg-type]
    alterations[0]["quote_text"] = "<img src=x onerror=alert(1)>"
    factories.DocumentQuoteFactory.create(message=message, document=document, altered=True, alterations=alterations)
    ledger.assemble(message)
    entry = CitationLedgerEntry.objects.get(message=message)

    html = admin_client.get(_url(CitationLedgerEntry, "change", entry.pk)).content.decode()

    assert "<script>alert(1)</script>" not in html
    assert "&lt;script&gt;alert(1)&lt;/script&gt;" in html
    assert "<img src=x" not in html
    assert "<ins>&lt;img src=x onerror=alert(1)&gt;</ins>" in html
    assert "<b>bold</b>" not in html


def test_an_entry_page_reads_the_passage_in_context_in_one_query(
    admin_client: Client, django_assert_max_num_queries: AssertNumQueries
) -> None:
    exact = CitationLedgerEntry.objects.get(message=factories.assembled_turn(caselaw=0, tools=0))
    altered = CitationLedgerEntry.objects.get(message=factories.assembled_turn(caselaw=0, tools=0, altered=True))
    admin_client.get(_url(CitationLedgerEntry, "change", exact.pk))  # warm the session and the content types

    with CaptureQueriesContext(connection) as exact_page:
        admin_client.get(_url(CitationLedgerEntry, "change", exact.pk))
    with django_assert_max_num_queries(len(exact_page.captured_queries)):
        admin_client.get(_url(CitationLedgerEntry, "change", altered.pk))


def test_a_message_page_lists_its_entries_with_their_passages(admin_client: Client) -> None:
    # Given a turn with one source of each kind
    message = factories.assembled_turn()
    citation = message.citations.get()
    caselaw = message.caselaw_citations.get()
    tool_source = message.tool_sources.get()

    # When its admin page is shown
    response = admin_client.get(_url(Message, "change", message.pk))

    # Then the inline shows each quote's passage read from its source, and the consulted source's label and url
    html = response.content.decode()
    assert citation.document is not None
    assert caselaw.opinion is not None
    document_passage = citation.document.content[citation.source_offset_start : citation.source_offset_end]
    opinion_passage = caselaw.opinion.text[caselaw.source_offset_start : caselaw.source_offset_end]
    assert f"<q>{document_passage}</q>" in html
    assert f"<q>{opinion_passage}</q>" in html
    assert tool_source.label in html
    assert f'href="{tool_source.url}"' in html
    for entry in _entries(message).values():
        assert _url(CitationLedgerEntry, "change", entry.pk) in html  # each row links to its entry
    # Read-only inline: no form may be added (the "Add another" button is drawn only below max_num).
    assert 'name="ledger_entries-MAX_NUM_FORMS" value="0"' in html
    assert "ledger_entries-0-DELETE" not in html


def test_the_message_page_query_count_does_not_grow_with_its_entries(
    admin_client: Client, django_assert_num_queries: AssertNumQueries
) -> None:
    small = factories.assembled_turn()
    large = factories.assembled_turn(kb=10, caselaw=10, tools=10)
    admin_client.get(_url(Message, "change", small.pk))  # warm the session and the content types

    with CaptureQueriesContext(connection) as three_entries:
        admin_client.get(_url(Message, "change", small.pk))
    with django_assert_num_queries(len(three_entries.captured_queries)):
        response = admin_client.get(_url(Message, "change", large.pk))
    assert response.content.decode().count("<q>") == 20


def test_a_tool_url_that_is_not_http_is_not_a_link(admin_client: Client) -> None:
    message = factories.MessageFactory.create()
    factories.MessageToolSourceFactory.create(message=message, url="javascript:alert(1)")
    ledger.assemble(message)

    html = admin_client.get(_url(Message, "change", message.pk)).content.decode()

    assert 'href="javascript:' not in html


def test_a_message_with_ledger_entries_cannot_be_deleted_through_the_admin(admin_client: Client) -> None:
    # A message is a record: nobody deletes it here, superusers included.
    message = factories.assembled_turn()

    confirm = admin_client.get(_url(Message, "delete", message.pk))
    delete = admin_client.post(_url(Message, "delete", message.pk), {"post": "yes"})

    assert confirm.status_code == 403
    assert delete.status_code == 403
    assert CitationLedgerEntry.objects.filter(message=message).count() == 3


def test_failed_claims_are_filterable_and_their_entry_says_why(admin_client: Client) -> None:
    # Given a turn with a verified quote and a failed claim, and a turn without any failure
    message = factories.MessageFactory.create(verdict="fail", finalized_at=timezone.now())
    factories.DocumentQuoteFactory.create(message=message)
    failed = factories.DocumentQuoteFactory.create(
        message=message,
        failed=True,
        unverified_reason="not found in the document",
    )
    ledger.assemble(message)
    factories.assembled_turn()

    # Then the ledger lists only the failed claim under "unverified", and its page says why it failed
    (shown,) = _changelist(admin_client, verification_status="unverified")
    assert shown.message_citation_id == failed.pk
    page = admin_client.get(_url(CitationLedgerEntry, "change", shown.pk)).content.decode()
    assert "<strong>not verified</strong>: not found in the document" in page
    # and the quote rows and messages filter the same way
    rows = admin_client.get(reverse("admin:chats_documentquote_changelist"), {"verification_method": "unverified"})
    assert list(rows.context["cl"].result_list) == [failed]
    turns = admin_client.get(reverse("admin:chats_message_changelist"), {"verdict": "fail"})
    assert list(turns.context["cl"].result_list) == [message]


def test_a_case_citation_entry_shows_the_check_and_links_to_its_row(admin_client: Client) -> None:
    case = factories.CaseCitationFactory.create(case_name="Smith v. Jones", status="name_mismatch", detail="x")
    ledger.assemble(case.message)
    entry = CitationLedgerEntry.objects.get(message_case_citation=case)

    page = admin_client.get(_url(CitationLedgerEntry, "change", entry.pk)).content.decode()
    (shown,) = _changelist(admin_client, verification_status="name_mismatch")

    assert "<strong>name_mismatch</strong>: Smith v. Jones, 570 U.S. 297 &mdash; x" in page
    assert _url(CaseCitation, "change", case.pk) in page
    assert shown.pk == entry.pk


def test_an_entry_page_shows_an_altered_quotes_context_flags_and_why_its_alterations_may_mislead(
    admin_client: Client,
) -> None:
    # Given an altered quote of a KB document: an exact passage that the source goes on to limit
    source = "The motion is granted in part and denied in part."
    project = factories.ProjectFactory.create()
    message = factories.MessageFactory.create(chat__project=project)
    document = factories.DocumentFactory.create(project=project, content=source)
    omission = {"kind": "ellipsis", "detail": "", "quote_text": "....", "source_start": 22, "source_end": 49}
    factories.DocumentQuoteFactory.create(
        message=message,
        document=document,
        quote="The motion is granted . . . .",
        source_offset_start=0,
        source_offset_end=21,
        verification_method="altered",
        verification_confidence=0.6,
        alterations=[omission | {"alters": "a trailing omission drops a limiting continuation"}],
        context_flags=[{"flag": "limited_after", "source_start": 22, "source_end": 29}],
    )
    ledger.assemble(message)
    entry = CitationLedgerEntry.objects.get(message=message)

    html = admin_client.get(_url(CitationLedgerEntry, "change", entry.pk)).content.decode()

    # Then the flag is listed with the limiting source text, and the omission says why it may mislead
    assert '<ul class="context-flags"><li data-flag="limited_after">' in html
    assert "the source goes on with a limiting continuation: \u201cin part\u201d <small>[22:29]</small>" in html
    assert "may change what the source says: a trailing omission drops a limiting continuation" in html
    # ... and the status filter offers the altered status
    changelist = admin_client.get(_url(CitationLedgerEntry, "changelist")).content.decode()
    assert "altered (found, but may change what the source says)" in changelist
