"""The drafts' pages (issue 51, item 5): a draft uploaded from a matter's page with the API's bounds and errors, its
progress streamed, and the draft's page: markers in its text, cards, its own page numbers, the "only what needs
review" filter, the changes since the previous check and the table of authorities with every page citing each."""

from __future__ import annotations

import json
import re
from typing import Any

import pytest
from django.conf import LazySettings
from django.contrib.auth.models import User
from django.core.files.uploadedfile import SimpleUploadedFile
from django.db import connection
from django.test import Client
from django.test.utils import CaptureQueriesContext
from django.urls import reverse

from chats.models import CaselawOpinion, Message, Project
from drafts.models import DraftCheck
from drafts.recording import record_draft
from tests import factories
from tests.docx_fixture import Para, make_docx
from tests.test_draft_checks import opinions  # noqa: F401 - the fixture

FISHER = "Fisher v. University of Texas at Austin, 570 U.S. 297, 310 (2013)"
SCRUTINY = "Strict scrutiny is a searching examination"
MISQUOTE = "Strict scrutiny is a mere formality"
ARBITRATION = "shall be valid, irrevocable, and enforceable"
FACIAL = "facial challenges under the Fourth Amendment are not categorically barred"


def brief() -> bytes:
    """A Word brief over three pages: a verified quotation of Fisher (page 1), a misquote of it and a block quote
        (page 2), a citation to a case that does not exist, a footnote citing Patel and a quotation of 9 U.S.C. § 2
    (page 3)."""
    return make_docx(
        [
            Para("ARGUMENT"),
            f'The Court requires more than good faith. "{SCRUTINY}." {FISHER}.',
            f'\fThe University calls it "{MISQUOTE}." {FISHER}.',
            Para(f"{SCRUTINY}, and it is the government that bears the burden to prove", style="Quote"),
            "Fisher, 570 U.S. at 310.",
            "\fNo court has held otherwise. Smith v. Nowhere, 999 U.S. 999 (2031). Hotel registries too.[^1]",
            f'An agreement to arbitrate "{ARBITRATION}." 9 U.S.C. § 2.',
        ],
        {1: [f'See City of Los Angeles v. Patel, 576 U.S. 409, 415 (2015) (holding that "{FACIAL}").']},
    )


@pytest.fixture
def matter(user: User, opinions: dict[str, CaselawOpinion]) -> Project:  # noqa: F811 - the fixture above
    return factories.ProjectFactory.create(owner=user, name="Admissions matter")


@pytest.fixture
def client_of(user: User) -> Client:
    client = Client()
    client.force_login(user)
    return client


def checked(matter: Project, user: User, data: bytes | None = None, name: str = "brief.docx") -> DraftCheck:
    return record_draft(matter=matter, author=user, data=data or brief(), name=name).check


def page_of(client: Client, check: DraftCheck, **params: str) -> str:
    response = client.get(reverse("draft_pages:draft", args=[check.pk]), params)
    assert response.status_code == 200
    return response.content.decode()


def markers(html: str) -> list[str]:
    return re.findall(r'<a class="marker tone-\w+" id="marker-(\d+)"', html)


@pytest.mark.django_db
def test_a_member_sees_the_draft_with_a_marker_and_a_card_for_every_finding(
    matter: Project, user: User, client_of: Client
) -> None:
    # Given a checked brief
    check = checked(matter, user)

    # when its page is read
    html = page_of(client_of, check)

    # then every finding has its numbered marker in the text and its card, in the order of the draft
    numbers = [str(n) for n in range(1, len(check.findings) + 1)]
    assert markers(html) == numbers
    assert re.findall(r'<li class="claim-card[^"]*" id="finding-(\d+)"', html) == numbers
    # the draft's own page numbers, each once, in order
    assert re.findall(r'aria-label="Page (\w+) of the draft"', html) == ["1", "2", "3"]
    # the misquote's card says it in words and names its page; the verified quotation's card draws its passage
    assert "p. 2 of the draft" in html
    assert "not found in the source" in html.lower() or "not verified" in html.lower()
    assert '<div class="claim-passage">' in html
    assert "<mark" in html
    # the JSON and the record are linked
    assert reverse("drafts:draft", args=[check.pk]) in html
    assert reverse("pages:chat", args=[check.chat_id]) in html


@pytest.mark.django_db
def test_the_filter_shows_only_what_needs_review(matter: Project, user: User, client_of: Client) -> None:
    check = checked(matter, user)
    in_order = sorted(check.findings, key=lambda f: (f["end"], f["start"]))
    to_review = [n for n, f in enumerate(in_order, start=1) if f["needs_review"]]
    assert 0 < len(to_review) < len(check.findings)  # the brief has both

    html = page_of(client_of, check, review="1")

    assert markers(html) == [str(n) for n in to_review]
    assert re.findall(r'id="finding-(\d+)"', html) == [str(n) for n in to_review]
    assert "Showing only what needs review" in html


@pytest.mark.django_db
def test_the_table_of_authorities_lists_every_page_citing_each(matter: Project, user: User, client_of: Client) -> None:
    check = checked(matter, user)

    html = page_of(client_of, check)
    toa = html[html.index('id="toa-text"') :]
    rows = dict(re.findall(r'<td class="toa-title">([^<]+)</td><td class="toa-pages">([^<]+)</td>', toa))

    # then Fisher is cited on pages 1 and 2, Patel (in a footnote) on 3, the fabricated case on 3 and flagged
    assert rows["Fisher v. University of Texas at Austin, 570 U.S. 297"] == "1, 2"
    assert rows["City of Los Angeles v. Patel, 576 U.S. 409"] == "3"
    assert rows["Smith v. Nowhere, 999 U.S. 999"] == "3"
    assert rows["9 U.S.C. § 2"] == "3"
    assert toa.index("Cases") < toa.index("Statutes and regulations")
    assert toa.index('<h3 class="toa-part">Cases</h3>') >= 0
    # every entry of the record is in the table, with every page the record gives it
    for entry in check.authorities:
        assert ", ".join(entry["pages"]) in toa


@pytest.mark.django_db
def test_a_non_member_gets_404_for_the_draft_and_the_upload(matter: Project, user: User, other_user: User) -> None:
    check = checked(matter, user)
    client = Client()
    client.force_login(other_user)

    assert client.get(reverse("draft_pages:draft", args=[check.pk])).status_code == 404
    upload = SimpleUploadedFile("brief.docx", brief())
    response = client.post(reverse("draft_pages:upload", args=[matter.pk]), {"file": upload})
    assert response.status_code == 404
    assert DraftCheck.objects.count() == 1


@pytest.mark.django_db
def test_the_matter_page_lists_its_drafts_with_their_verdict_and_what_needs_review(
    matter: Project, user: User, client_of: Client
) -> None:
    check = checked(matter, user)
    to_review = sum(bool(f["needs_review"]) for f in check.findings)

    html = client_of.get(reverse("pages:matter", args=[matter.pk])).content.decode()

    drafts = html[html.index('id="drafts"') :]
    assert reverse("draft_pages:draft", args=[check.pk]) in drafts
    assert f"{to_review} of {len(check.findings)} findings" in drafts
    assert 'action="' + reverse("draft_pages:upload", args=[matter.pk]) + '"' in drafts
    assert "csrfmiddlewaretoken" in drafts


@pytest.mark.django_db
def test_an_upload_is_checked_recorded_and_opens_the_drafts_page(
    matter: Project, user: User, client_of: Client
) -> None:
    response = client_of.post(
        reverse("draft_pages:upload", args=[matter.pk]), {"file": SimpleUploadedFile("brief.docx", brief())}
    )

    check = DraftCheck.objects.get()
    assert response.status_code == 302
    assert response["Location"] == reverse("draft_pages:draft", args=[check.pk])
    assert (check.project_id, check.message.kind, check.message.chat.project_id) == (
        matter.pk,
        Message.Kind.DRAFT,
        matter.pk,
    )


@pytest.mark.django_db
def test_a_streamed_upload_sends_the_findings_then_each_step_of_their_check_then_the_page(
    matter: Project, user: User, client_of: Client
) -> None:
    response = client_of.post(
        reverse("draft_pages:upload", args=[matter.pk]),
        {"file": SimpleUploadedFile("brief.docx", brief()), "stream": "1"},
    )

    assert response.status_code == 200
    assert response["Content-Type"] == "application/x-ndjson"
    events = [json.loads(line) for line in b"".join(response.streaming_content).decode().splitlines()]  # type: ignore[attr-defined]
    check = DraftCheck.objects.get()
    kinds = [e["event"] for e in events]
    # the findings first, then each step of the check as it ends, then the page
    assert kinds[0] == "found"
    assert len(events[0]["findings"]) == len(check.findings)
    assert [e["words"] for e in events if e["event"] == "step"] == ["citations looked up", "quotations checked"]
    assert kinds[-1] == "done"
    # every finding's status once, the quotations' as soon as they are checked (before the citations' pin cites)
    statuses = {e["index"]: e for e in events if e["event"] == "checked"}
    assert sorted(statuses) == list(range(len(check.findings)))
    assert kinds.count("checked") == len(check.findings)
    quotations = {i for i, f in enumerate(check.findings) if f["kind"] == "quote"}
    after_quotations = kinds.index("step", kinds.index("step") + 1) + 1
    assert {e["index"] for e in events[after_quotations : after_quotations + len(quotations)]} == quotations
    # in the words the record keeps
    assert [statuses[i]["words"] for i in range(len(check.findings))] == [f["words"] for f in check.findings]
    assert events[-1]["url"] == reverse("draft_pages:draft", args=[check.pk])


@pytest.mark.django_db
@pytest.mark.parametrize(
    ("name", "data", "status", "says"),
    [
        ("brief.docx", b"not a word file at all", 400, "docx"),
        ("brief.exe", b"MZ", 400, ""),
        ("brief.txt", b"", 400, "empty"),
    ],
)
def test_a_bad_upload_is_refused_on_the_form_and_writes_nothing(
    matter: Project, client_of: Client, name: str, data: bytes, status: int, says: str
) -> None:
    response = client_of.post(
        reverse("draft_pages:upload", args=[matter.pk]), {"file": SimpleUploadedFile(name, data), "stream": "1"}
    )

    assert response.status_code == status
    html = response.content.decode()
    assert 'class="form-error field-error"' in html
    assert says in html.lower()
    assert not DraftCheck.objects.exists()
    assert not Message.objects.exists()


@pytest.mark.django_db
def test_an_upload_over_the_size_bound_is_413(matter: Project, client_of: Client, settings: LazySettings) -> None:
    settings.LQAI_MAX_UPLOAD_BYTES = 100
    response = client_of.post(
        reverse("draft_pages:upload", args=[matter.pk]), {"file": SimpleUploadedFile("brief.docx", brief())}
    )

    assert response.status_code == 413
    assert "at most 100 bytes" in response.content.decode()
    assert not DraftCheck.objects.exists()


@pytest.mark.django_db
def test_an_upload_over_the_turn_rate_is_429(matter: Project, client_of: Client, settings: LazySettings) -> None:
    settings.LQAI_THROTTLE_TURNS = "1/hour"
    url = reverse("draft_pages:upload", args=[matter.pk])
    text = f'"{SCRUTINY}." {FISHER}.'.encode()
    assert client_of.post(url, {"file": SimpleUploadedFile("a.txt", text)}).status_code == 302

    response = client_of.post(url, {"file": SimpleUploadedFile("b.txt", text)})

    assert response.status_code == 429
    assert DraftCheck.objects.count() == 1


@pytest.mark.django_db
def test_the_upload_needs_the_csrf_token(matter: Project, user: User) -> None:
    client = Client(enforce_csrf_checks=True)
    client.force_login(user)
    response = client.post(
        reverse("draft_pages:upload", args=[matter.pk]), {"file": SimpleUploadedFile("a.txt", b"text")}
    )
    assert response.status_code == 403


@pytest.mark.django_db
def test_a_revised_draft_shows_what_it_fixed_added_and_left_open(
    matter: Project, user: User, client_of: Client
) -> None:
    first = f'It is "{MISQUOTE}." {FISHER}.\n\n"Quoted from nowhere at all."'
    revised = f'It is "{SCRUTINY}." {FISHER}.\n\n"Quoted from nowhere at all."\n\nIt is "{MISQUOTE} too." {FISHER}.'
    checked(matter, user, first.encode(), name="brief.txt")
    check = checked(matter, user, revised.encode(), name="brief.txt")

    html = page_of(client_of, check)
    changes = html[html.index('id="changes-title"') : html.index('class="turn draft"')]

    fixed = changes[changes.index("Fixed (") : changes.index("New (")]
    new = changes[changes.index("New (") : changes.index("Still open (")]
    still_open = changes[changes.index("Still open (") :]
    # the misquote is fixed; the new misquote (and the citation its pin cite now needs review for) is new
    assert "Fixed (1)" in fixed
    assert f"&ldquo;{MISQUOTE}.&rdquo;" in fixed
    assert f"&ldquo;{MISQUOTE} too.&rdquo;" in new
    assert f"{MISQUOTE} too" not in fixed + still_open
    # the uncited quotation is still open, in words
    assert "Quoted from nowhere at all" in still_open
    assert "not checked" in still_open


@pytest.mark.django_db
def test_a_check_failing_mid_stream_says_so_and_writes_nothing(
    matter: Project, client_of: Client, monkeypatch: pytest.MonkeyPatch
) -> None:
    def broken(**_: object) -> None:
        raise RuntimeError("the checks broke")

    monkeypatch.setattr("drafts.pages.check_draft_in_steps", broken)
    response = client_of.post(
        reverse("draft_pages:upload", args=[matter.pk]),
        {"file": SimpleUploadedFile("brief.docx", brief()), "stream": "1"},
    )

    events = [json.loads(line) for line in b"".join(response.streaming_content).decode().splitlines()]  # type: ignore[attr-defined]
    assert [e["event"] for e in events] == ["found", "error"]
    assert "nothing was recorded" in events[-1]["detail"]
    assert not DraftCheck.objects.exists()
    assert not Message.objects.exists()


@pytest.mark.django_db
@pytest.mark.parametrize("quotations", [6])
def test_the_drafts_page_reads_a_constant_number_of_queries(
    matter: Project, user: User, client_of: Client, quotations: int, django_assert_num_queries: Any
) -> None:
    # Given a draft quoting Fisher once, and one quoting it (and citing it) many times
    one = checked(matter, user, f'It is "{SCRUTINY}." {FISHER}.'.encode(), name="one.txt")
    many_text = "\n\n".join(f'Again {n}: "{SCRUTINY}." {FISHER}.' for n in range(quotations))
    many = checked(matter, user, many_text.encode(), name="many.txt")
    assert len(many.findings) == 2 * quotations

    # when each page is read, then both read the same number of queries
    with CaptureQueriesContext(connection) as small:
        page_of(client_of, one)
    with django_assert_num_queries(len(small.captured_queries)):
        html = page_of(client_of, many)
    assert html.count('<div class="claim-passage">') == quotations


@pytest.mark.django_db
def test_the_matter_page_reads_its_drafts_in_a_constant_number_of_queries(
    matter: Project, user: User, client_of: Client, django_assert_num_queries: Any
) -> None:
    text = f'It is "{SCRUTINY}." {FISHER}.'.encode()
    checked(matter, user, text, name="first.txt")
    url = reverse("pages:matter", args=[matter.pk])
    with CaptureQueriesContext(connection) as one_draft:
        client_of.get(url)
    # Given two more drafts, one of them checked twice
    checked(matter, user, text, name="second.txt")
    checked(matter, user, text, name="third.txt")
    checked(matter, user, text, name="third.txt")

    with django_assert_num_queries(len(one_draft.captured_queries)):
        html = client_of.get(url).content.decode()
    assert html.count('href="/drafts/') == 3
    assert "(2 checks)" in html
