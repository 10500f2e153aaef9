"""Page numbers of quotes: a PDF document's pages and an opinion's star paging, mapped from offsets by
``chats.pages``, reported for every quote in the chat API, the stream's citation events and the trace."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any, cast

import pytest
from django.core.files.uploadedfile import SimpleUploadedFile
from hypothesis import given
from hypothesis import strategies as st
from rest_framework.test import APIClient

from chats.assistant import FinalAnswer, Script, TextDelta
from chats.models import CaselawOpinion, Chat, Document
from chats.pages import PAGE_SEPARATOR, join_pages, pages_of_span, pages_valid
from chats.services import ClaimedCitation
from lqai_verify.verification.page_breaks import reporter_pages
from tests import factories
from tests.pdf_fixture import make_pdf

SJS = (Path(__file__).resolve().parent / "fixtures" / "in-re-sjs-134-sw3d-673-mo-ct-app-2004.txt").read_text(
    encoding="utf-8"
)
PAGE_ONE = ["Memorandum on ballot access.", "A party may not substitute a candidate after the primary."]
PAGE_TWO = ["The reviewing court must be satisfied that", "no workable race-neutral alternative exists."]


# --- the pure functions ------------------------------------------------------------------------------------------


def test_join_pages_records_where_each_page_starts() -> None:
    text, pages = join_pages(["abc", "", "de"])
    assert text == "abc" + PAGE_SEPARATOR + PAGE_SEPARATOR + "de"
    assert pages == [[0, "1"], [5, "2"], [7, "3"]]


@pytest.mark.parametrize(
    ("start", "end", "expected"),
    [
        (0, 3, ["1"]),  # inside the first page
        (2, 6, ["1", "2"]),  # across a page break
        (5, 5, ["2"]),  # empty span at a page start
        (0, 5, ["1"]),  # ends exactly where page 2 starts
        (4, 100, ["1", "2", "3"]),  # runs past the end
        (None, None, None),  # a failed claim has no span
    ],
)
def test_pages_of_span(start: int | None, end: int | None, expected: list[str] | None) -> None:
    assert pages_of_span([[0, "1"], [5, "2"], [9, "3"]], start, end) == expected


def test_a_source_without_pages_reports_none() -> None:
    assert pages_of_span([], 0, 10) is None


def test_star_paging_of_a_real_opinion() -> None:
    pages = reporter_pages(SJS, citation="134 S.W.3d 673")

    assert [label for _, label in pages] == ["673-674", "675", "676", "677", "678"]
    assert SJS[cast(int, pages[2][0]) :].startswith("*676in 1993")
    assert SJS[cast(int, pages[3][0]) :].startswith("*677approving")
    assert pages_valid(pages, text_length=len(SJS))


@pytest.mark.parametrize(
    ("text", "citation", "labels"),
    [
        ("no star paging here", "1 U.S. 1", []),
        ("intro *298 two *299 three", "570 U.S. 297 (2013)", ["297", "298", "299"]),
        ("intro *298 two", "", [None, "298"]),
        ("*12 from the start *13", "", ["12", "13"]),
        # A pin cite to another work and a parallel reporter's page are not page breaks of this one
        ("S. Rep. at *63 (1982) and **401 here *851 on", "590 F. Supp. 3d 850", ["850", "851"]),
        # A stray number out of sequence is ignored
        ("a *851 b *17 c *852", "590 F. Supp. 3d 850", ["850", "851", "852"]),
    ],
)
def test_reporter_pages(text: str, citation: str, labels: list[str | None]) -> None:
    assert [label for _, label in reporter_pages(text, citation=citation)] == labels


@given(st.lists(st.text(max_size=30), min_size=1, max_size=8), st.data())
def test_every_span_of_a_joined_text_reports_the_pages_it_touches(page_texts: list[str], data: Any) -> None:
    text, pages = join_pages(page_texts)
    assert pages_valid(pages, text_length=len(text))
    start = data.draw(st.integers(0, len(text)))
    end = data.draw(st.integers(start, len(text)))

    reported = pages_of_span(pages, start, end)

    starts = [cast(int, s) for s, _ in pages]
    ends = [*starts[1:], len(text) + 1]
    touched = [
        str(n + 1) for n, (s, e) in enumerate(zip(starts, ends, strict=True)) if s < max(end, start + 1) and start < e
    ]
    assert reported == touched


def test_pages_valid_refuses_other_shapes() -> None:
    assert not pages_valid({"a": 1}, text_length=5)
    assert not pages_valid([[0, 1]], text_length=5)
    assert not pages_valid([[3, "1"], [2, "2"]], text_length=5)
    assert not pages_valid([[0, "1"], [9, "2"]], text_length=5)


# --- stored with the sources -------------------------------------------------------------------------------------


def test_an_opinion_with_star_paging_gets_its_pages_when_saved(db: None) -> None:
    opinion = factories.CaselawOpinionFactory.create(text=SJS, citation="134 S.W.3d 673")
    assert [label for _, label in CaselawOpinion.objects.get(pk=opinion.pk).pages] == [
        "673-674",
        "675",
        "676",
        "677",
        "678",
    ]

    opinion.text = "no pages now"
    opinion.save(update_fields=["text"])
    assert CaselawOpinion.objects.get(pk=opinion.pk).pages == []


def test_pages_must_be_a_list_in_the_database(db: None) -> None:
    from django.db import IntegrityError, transaction

    document = factories.DocumentFactory.create()
    with pytest.raises(IntegrityError), transaction.atomic():
        Document.objects.filter(pk=document.pk).update(pages={"1": 0})


# --- reported for quotes -----------------------------------------------------------------------------------------


@pytest.fixture
def pdf_chat(user: Any, api_client: APIClient) -> tuple[Chat, Document]:
    project = factories.ProjectFactory.create(owner=user)
    file = SimpleUploadedFile("memo.pdf", make_pdf([PAGE_ONE, PAGE_TWO]), content_type="application/pdf")
    response = api_client.post(
        f"/api/projects/{project.pk}/documents/", {"title": "Memo", "file": file}, format="multipart"
    )
    assert response.status_code == 201
    return factories.ChatFactory.create(project=project, owner=user), Document.objects.get(pk=response.json()["id"])


def test_quotes_from_a_pdf_report_their_pages_in_the_api_the_stream_and_the_trace(
    api_client: APIClient,
    pdf_chat: tuple[Chat, Document],
    scripted_backend: Callable[..., Script],
    django_capture_on_commit_callbacks: Callable[..., Any],
) -> None:
    chat, document = pdf_chat
    opinion = factories.CaselawOpinionFactory.create(text=SJS, citation="134 S.W.3d 673", provider="local")
    across = "substitute a candidate after the primary. The reviewing court must be satisfied"
    claims = (
        ClaimedCitation("A party may not substitute a candidate", document_id=document.pk),  # page 1
        ClaimedCitation("no workable race-neutral alternative exists.", document_id=document.pk),  # page 2
        ClaimedCitation(across, document_id=document.pk),  # pages 1-2 (tolerant: the page break)
        ClaimedCitation("transfer of custody to the petitioner", opinion_id=opinion.pk),
        ClaimedCitation("given by order *677approving such a transfer", opinion_id=opinion.pk),
        ClaimedCitation("not in the memo at all", document_id=document.pk),
    )
    scripted_backend(TextDelta("An answer."), FinalAnswer(claims))

    with django_capture_on_commit_callbacks(execute=True):
        response = api_client.post(f"/api/chats/{chat.pk}/messages/", {"content": "Who may adopt?"}, format="json")

    assert response.status_code == 201
    message = response.json()["message"]
    assert [(c["quote"], c["pages"]) for c in message["citations"]] == [
        (claims[0].quote, ["1"]),
        (claims[1].quote, ["2"]),
        (across, ["1", "2"]),
    ]
    expected_opinion_pages = {
        claims[3].quote: star_pages_of(SJS, claims[3].quote),
        claims[4].quote: ["676", "677"],
    }
    assert {c["quote"]: c["pages"] for c in message["caselaw_citations"]} == expected_opinion_pages
    assert "pages" not in message["unverified_citations"][0]

    trace = api_client.get(f"/api/chats/{chat.pk}/ledger/").json()
    entries = trace["results"] if isinstance(trace, dict) else trace
    pages_by_quote = {
        e["passage"]["text"]: e["pages"] for e in entries if e["passage"] is not None and e["source_kind"] != "case"
    }
    assert sorted(map(tuple, pages_by_quote.values())) == sorted(
        [("1",), ("2",), ("1", "2"), tuple(expected_opinion_pages[claims[3].quote]), ("676", "677")]
    )
    assert all(e["pages"] is None for e in entries if e["passage"] is None)


def star_pages_of(text: str, quote: str) -> list[str]:
    start = text.index(quote)
    result = pages_of_span(reporter_pages(text, citation="134 S.W.3d 673"), start, start + len(quote))
    assert result is not None
    return result


def test_the_stream_sends_pages_with_each_citation(
    api_client: APIClient,
    pdf_chat: tuple[Chat, Document],
    scripted_backend: Callable[..., Script],
    django_capture_on_commit_callbacks: Callable[..., Any],
) -> None:
    chat, document = pdf_chat
    scripted_backend(
        TextDelta("An answer."),
        FinalAnswer((ClaimedCitation("no workable race-neutral alternative exists.", document_id=document.pk),)),
    )
    from demo.seed import sse_events

    with django_capture_on_commit_callbacks(execute=True):
        response = api_client.post(
            f"/api/chats/{chat.pk}/messages/stream/", {"content": "q"}, format="json", HTTP_ACCEPT="text/event-stream"
        )
        events = list(sse_events(iter(response.streaming_content)))  # type: ignore[attr-defined]

    [citation] = [data for event, data in events if event == "citation"]
    assert citation["pages"] == ["2"]


def test_pages_are_read_only_in_the_admin(client: Any, db: None) -> None:
    from django.contrib.auth.models import User

    client.force_login(User.objects.create_superuser("admin", "a@example.com", "pw"))
    document = factories.DocumentFactory.create(pages=[[0, "1"]])
    opinion = factories.CaselawOpinionFactory.create(text=SJS, citation="134 S.W.3d 673")
    for url in (f"/admin/chats/document/{document.pk}/change/", f"/admin/chats/caselawopinion/{opinion.pk}/change/"):
        page = client.get(url)
        assert page.status_code == 200
        assert 'name="pages"' not in page.content.decode()
        assert "field-pages" in page.content.decode()


def test_a_slip_opinion_without_star_paging_is_paged_by_its_form_feeds() -> None:
    from chats.pages import opinion_pages, pages_of_span

    text = "first page\fsecond page\fthird page\f"
    pages = opinion_pages(text)
    # The slip's own pages, never taken for a reporter's.
    assert pages == [[0, "slip 1"], [11, "slip 2"], [23, "slip 3"]]
    assert pages_of_span(pages, text.index("second"), text.index("third") + 3) == ["slip 2", "slip 3"]
    assert opinion_pages("no breaks at all") == []
    # Star paging wins where there is any
    assert opinion_pages("a *12 b *13 c\fd")[0][1] != "slip 1"
