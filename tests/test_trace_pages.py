"""The trace pages: login, access by membership (404 to others), a chat's turns with a marker per claim and a card
per marker, the "needs review" filter, page cites from star paging, a strict-CSP-ready page, and a constant
number of queries whatever the number of turns."""

from __future__ import annotations

import datetime
import io
import re
import uuid
from pathlib import Path
from typing import Any

import pytest
from django.contrib.auth.models import User
from django.core.management import call_command
from django.db import connection
from django.test import Client
from django.test.utils import CaptureQueriesContext
from django.urls import reverse
from django.utils import timezone
from pytest_django import DjangoAssertNumQueries as AssertNumQueries

from chats.models import CaseCitation, Chat, Message
from chats.pages import pages_of_span
from citations import export, ledger, seals
from citations.models import TurnSeal
from citations.passages import passage_in_context_html
from citations.selectors import Passage, PassageInContext
from lqai_verify.bundle import verify_bundle
from lqai_verify.statuses import status_in_words, verdict_in_words
from lqai_verify.verification.page_breaks import reporter_pages
from lqai_verify.verification.page_cites import page_cite
from pages import answer, selectors
from tests import factories

pytestmark = pytest.mark.django_db

SJS = (
    Path(__file__).resolve().parent / "fixtures" / "opinions" / "in-re-sjs-134-sw3d-673-mo-ct-app-2004.txt"
).read_text(encoding="utf-8")
KB_QUOTE = "must ultimately be satisfied"
ANSWER = (
    'The court "must ultimately be\nsatisfied" that no alternative works. See Doe v. Roe, 570 U.S. 297 (2013). '
    "And strict scrutiny applies."
)


def _page(chat: Chat) -> str:
    return reverse("pages:chat", args=[chat.pk])


def _turn(chat: Chat, *, content: str = ANSWER, verdict: str = "fail", **rows: Any) -> Message:
    """A finalized turn of ``chat``: its question and its answer, a verified KB quote the answer writes, a failed
    claim, a caselaw quote and a verified case citation at its place in the answer, and a consulted source."""
    question = factories.UserMessageFactory.create(chat=chat, content="Is strict scrutiny satisfied?")
    message = factories.MessageFactory.create(chat=chat, content=content, reply_to=question, verdict=verdict)
    memo = chat.project.documents.first() if chat.project is not None else None
    factories.DocumentQuoteFactory.create(message=message, quote=KB_QUOTE, document=memo)
    factories.DocumentQuoteFactory.create(
        message=message, failed=True, quote="a sentence the memo never says", document=memo
    )
    factories.OpinionQuoteFactory.create(message=message, **rows.get("caselaw", {}))
    start = content.find("570 U.S. 297")
    if start >= 0:
        factories.CaseCitationFactory.create(
            message=message, answer_offset_start=start, answer_offset_end=start + len("570 U.S. 297")
        )
    factories.MessageToolSourceFactory.create(message=message, label="Grutter v. Bollinger")
    return message


@pytest.fixture
def member(user: User) -> User:
    return user


@pytest.fixture
def member_client(member: User) -> Client:
    client = Client()
    client.force_login(member)
    return client


@pytest.fixture
def chat(member: User) -> Chat:
    owner = factories.UserFactory.create(username="owner")
    project = factories.ProjectFactory.create(owner=owner, name="Admissions matter", members=[member])
    factories.DocumentFactory.create(project=project, title="Strict scrutiny memo")
    return factories.ChatFactory.create(project=project, owner=owner, title="Admissions")


# --- Login and access --------------------------------------------------------------------------------------------


def test_a_logged_out_visitor_is_sent_to_the_login_page(client: Client, chat: Chat) -> None:
    message = _turn(chat)
    for url in ("/", _page(chat), reverse("pages:turn", args=[chat.pk, message.pk])):
        response = client.get(url)
        assert response.status_code == 302
        assert response["Location"] == f"/accounts/login/?next={url}"
    login = client.get("/accounts/login/?next=/")
    assert login.status_code == 200
    assert b'<input type="password" name="password"' in login.content


def test_signing_in_lands_on_the_matters_and_signing_out_leaves(client: Client, member: User, chat: Chat) -> None:
    response = client.post(
        "/accounts/login/", {"username": member.username, "password": "correct horse battery staple", "next": ""}
    )
    assert response.status_code == 302
    assert response["Location"] == "/"
    assert "Admissions matter" in client.get("/").content.decode()

    assert client.post("/accounts/logout/")["Location"] == "/accounts/login/"
    assert client.get("/").status_code == 302


def test_a_wrong_password_is_refused_with_a_message(client: Client, member: User) -> None:
    response = client.post("/accounts/login/", {"username": member.username, "password": "wrong"})
    assert response.status_code == 200
    assert "did not match" in response.content.decode()


def test_a_non_member_gets_404_and_a_removed_member_too(chat: Chat, member: User, member_client: Client) -> None:
    message = _turn(chat)
    stranger = Client()
    stranger.force_login(factories.UserFactory.create(username="mallory"))
    urls = (_page(chat), reverse("pages:turn", args=[chat.pk, message.pk]))

    assert [member_client.get(url).status_code for url in urls] == [200, 200]
    assert [stranger.get(url).status_code for url in urls] == [404, 404]
    assert "Admissions" not in stranger.get("/").content.decode()

    # When the member leaves the matter, the next request is refused as well
    assert chat.project is not None
    chat.project.members.remove(member)
    assert [member_client.get(url).status_code for url in urls] == [404, 404]


def test_a_turn_of_another_chat_is_not_found_under_this_one(chat: Chat, member_client: Client) -> None:
    other = factories.ChatFactory.create(project=chat.project, owner=chat.owner)
    message = _turn(other)
    assert member_client.get(reverse("pages:turn", args=[chat.pk, message.pk])).status_code == 404


# --- The matters --------------------------------------------------------------------------------------------------


def test_the_home_page_lists_the_matters_with_their_chats_and_latest_verdicts(
    member: User, member_client: Client, chat: Chat
) -> None:
    _turn(chat, verdict="pass")
    _turn(chat, verdict="fail")
    empty = factories.ChatFactory.create(project=chat.project, owner=chat.owner, title="Not asked yet")
    own = factories.ChatFactory.create(project=None, owner=member, title="A private chat")
    factories.ChatFactory.create(title="Somebody else's chat")

    html = member_client.get("/").content.decode()

    assert "Admissions matter" in html
    assert f'href="{_page(chat)}">Admissions</a>' in html
    row = html[html.index(_page(chat)) : html.index("</tr>", html.index(_page(chat)))]
    assert "Fail" in row  # the latest turn's verdict, in words
    assert "Pass" not in row
    assert f'href="{_page(empty)}"' in html
    assert "no turn yet" in html
    assert "Chats outside a matter" in html
    assert f'href="{_page(own)}"' in html
    assert "Somebody else" not in html


def test_a_member_downloads_the_matters_signed_record_from_its_pages_and_a_stranger_gets_404(
    member: User, member_client: Client, chat: Chat, tmp_path: Path
) -> None:
    """The pages link each matter's export (the API's export, with the page's session and the same membership
    rule): a zip that verifies offline. A chat outside any matter links its own."""
    message = _turn(chat)
    ledger.assemble(message)
    seals.seal_turn(message_id=message.pk)
    own = factories.ChatFactory.create(project=None, owner=member, title="A private chat")
    url = reverse("pages:matter-record", args=[chat.project_id])
    link = f'<a href="{url}">Download the matter\'s signed record</a>'

    home, page = (member_client.get(path).content.decode() for path in ("/", _page(chat)))
    download = member_client.get(url)

    assert home.count(link) == 1
    assert link in page
    own_url = reverse("pages:chat-record", args=[own.pk])
    own_page = member_client.get(_page(own)).content.decode()
    assert f'<a href="{own_url}">Download this chat\'s signed record</a>' in own_page
    assert "the matter's signed record" not in own_page
    assert member_client.get(own_url).status_code == 200
    # A chat of a matter has no record of its own: its link goes to the matter's.
    assert member_client.get(reverse("pages:chat-record", args=[chat.pk]))["Location"] == url
    assert download.status_code == 200
    assert download["Content-Type"] == "application/zip"
    assert "attachment" in download["Content-Disposition"]
    bundle = tmp_path / "matter.zip"
    bundle.write_bytes(b"".join(download.streaming_content))  # type: ignore[attr-defined]
    checked = verify_bundle(bundle)
    assert checked.problems == []
    assert (checked.matter, checked.turns, checked.seals) == (str(chat.project_id), 1, 1)
    stranger = Client()
    stranger.force_login(factories.UserFactory.create(username="mallory"))
    assert stranger.get(url).status_code == 404
    assert stranger.get(own_url).status_code == 404
    assert Client().get(url)["Location"].startswith("/accounts/login/")  # signed out: to the login, no record


def test_a_record_asked_for_while_another_is_prepared_says_so_on_a_page(
    member_client: Client, chat: Chat, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A second click while the first export is prepared (the slots themselves are tested on PostgreSQL, in
    tests/test_export.py): a page in words with 429 and Retry-After, not a failed download."""

    def busy(*, user_id: int) -> Any:
        raise export.ExportBusy("An export of yours is already being prepared.", code="export_in_progress")

    monkeypatch.setattr(export, "export_slot", busy)

    response = member_client.get(reverse("pages:matter-record", args=[chat.project_id]))

    assert response.status_code == 429
    assert int(response["Retry-After"]) > 0
    assert response["Content-Type"].startswith("text/html")
    page = response.content.decode()
    assert "The signed record is not ready yet" in page
    assert "An export of yours is already being prepared." in page


# --- A chat -------------------------------------------------------------------------------------------------------


def _cards(html: str) -> list[str]:
    return re.findall(r'<li class="claim-card[^"]*" id="claim-([0-9a-f-]+)"', html)


def test_each_claim_has_a_numbered_marker_at_its_place_in_the_answer_and_a_card(
    member_client: Client, chat: Chat
) -> None:
    message = _turn(chat)
    kb, failed = message.citations.order_by("verification_method")  # exact_match, unverified
    caselaw = message.caselaw_citations.get()
    case = message.case_citations.get()

    html = member_client.get(_page(chat)).content.decode()

    # The quote (written across a line break) gets marker 1 after its closing quote mark, the case citation 2,
    # the caselaw quote ("strict scrutiny") 3
    answer_html = html[html.index('<div class="answer">') : html.index("</div>", html.index('<div class="answer">'))]
    assert re.search(
        rf'satisfied&quot;<a class="marker tone-ok" id="marker-{kb.pk}" href="#claim-{kb.pk}"', answer_html
    )
    assert re.search(
        rf'570 U.S. 297<a class="marker tone-ok" id="marker-{case.pk}" href="#claim-{case.pk}"', answer_html
    )
    assert 'aria-label="Claim 1: verified exactly"' in answer_html
    assert 'aria-label="Claim 2: case verified: the citation is this case"' in answer_html
    # ... the claims the answer does not write as claimed are listed after it, and every claim has its card
    assert "Not found as written in the answer" in html
    assert _cards(html) == [str(kb.pk), str(case.pk), str(caselaw.pk), str(failed.pk)]
    # The verdict in words, the turn's id and time
    assert "Verdict: Fail</strong>" in html
    assert str(message.pk) in html
    assert "Is strict scrutiny satisfied?" in html
    # A verified quote's card: its source and its passage highlighted in context
    kb_card = html[html.index(f'id="claim-{kb.pk}"') : html.index("</li>", html.index(f'id="claim-{kb.pk}"'))]
    assert "Strict scrutiny memo" in kb_card
    assert "<mark title=" in kb_card
    assert f">{KB_QUOTE}</mark>" in kb_card
    # A failed claim's card: the quote that failed and why
    failed_card = html[html.index(f'id="claim-{failed.pk}"') :]
    assert 'aria-hidden="true">\u2717</span> not found in the source' in failed_card
    assert '<blockquote class="claimed-quote">a sentence the memo never says</blockquote>' in failed_card
    assert "Why it failed: not found in the document." in failed_card
    # A case citation's card: the name written and the name found
    case_card = html[html.index(f'id="claim-{case.pk}"') :]
    assert "<dt>Name written</dt><dd>" in case_card
    assert case.opinion is not None
    assert f"<dt>Name found</dt><dd>{case.opinion.case_name}</dd>" in case_card
    # The source consulted, not quoted
    assert "Sources consulted, not quoted (1)" in html
    assert "Grutter v. Bollinger" in html


def test_the_filter_shows_only_what_needs_review_without_javascript(member_client: Client, chat: Chat) -> None:
    message = _turn(chat)
    failed = message.citations.get(verification_method="unverified")
    mismatch = factories.CaseCitationFactory.create(
        message=message,
        case_name="Grutter v. Bollinger",
        status="name_mismatch",
        answer_offset_start=0,
        answer_offset_end=3,
    )
    altered = factories.DocumentQuoteFactory.create(message=message, altered=True)
    everything = member_client.get(_page(chat)).content.decode()
    assert len(_cards(everything)) == 6
    assert f'href="{_page(chat)}?review=1"' in everything

    html = member_client.get(_page(chat), {"review": "1"}).content.decode()

    assert set(_cards(html)) == {str(failed.pk), str(mismatch.pk)}
    assert str(altered.pk) not in _cards(html)  # a tolerant match with marked alterations: verified
    assert "Showing only what needs review</strong> (2 claims)" in html
    assert f'<a href="{_page(chat)}">Show every claim</a>' in html
    # ... the other claims' markers stay in the answer, numbered, without a link to a hidden card
    assert 'class="marker marker-hidden"' in html


def test_a_quote_with_alterations_says_so_and_is_marked_with_the_one_renderer(
    member_client: Client, chat: Chat
) -> None:
    question = factories.UserMessageFactory.create(chat=chat)
    message = factories.MessageFactory.create(
        chat=chat, reply_to=question, content=f"He wrote {factories.ALTERED_QUOTE}."
    )
    altered = factories.DocumentQuoteFactory.create(message=message, altered=True)

    html = member_client.get(_page(chat)).content.decode()

    assert "verified, with marked alterations" in html
    assert '<span class="alteration" data-kind="letter"' in html
    assert '<span class="alteration" data-kind="ellipsis"' in html
    assert "passage [" not in html  # offsets are for operators: the card shows page cites
    # The card's drawing is the renderer's
    assert altered.document is not None
    content = altered.document.content
    assert altered.source_offset_start is not None
    assert altered.source_offset_end is not None
    span = Passage(
        start=altered.source_offset_start,
        end=altered.source_offset_end,
        text=content[altered.source_offset_start : altered.source_offset_end],
        verified_sha256=altered.passage_sha256,
    )
    drawn = passage_in_context_html(
        PassageInContext(passage=span, start=0, text=content), altered.alterations, offsets=False
    )
    assert str(drawn).strip() in html


@pytest.mark.parametrize(
    ("method", "confidence", "reads", "title"),
    [
        ("altered", 0.5, "review", "Verdict: Review</strong>"),  # a claim a person must check: never green
        ("tolerant_match", 0.9, "pass", "Verdict: Pass</strong>"),  # formatting only, nothing to review
    ],
)
def test_a_turn_sealed_as_supported_reads_by_its_claims_and_says_so(
    member_client: Client, chat: Chat, method: str, confidence: float, reads: str, title: str
) -> None:
    # Given a turn finalized under the earlier rules, its verdict "supported", over one quote
    question = factories.UserMessageFactory.create(chat=chat)
    message = factories.MessageFactory.create(
        chat=chat, reply_to=question, content=f"He wrote {factories.ALTERED_QUOTE}.", verdict="supported"
    )
    factories.DocumentQuoteFactory.create(
        message=message, altered=True, verification_method=method, verification_confidence=confidence
    )

    html = member_client.get(_page(chat)).content.decode()

    # Then its banner reads what its claims say, and says what it was sealed as
    banner = html[html.index('<div class="verdict') : html.index("</div>", html.index('<div class="verdict'))]
    assert title in banner
    assert f'data-verdict="{reads}"' in banner
    assert f"sealed as \u2018supported\u2019 under earlier rules; its claims read: {reads}" in banner
    assert ("tone-ok" in banner) == (reads == "pass")
    message.refresh_from_db()
    assert message.verdict == "supported"  # the stored (sealed) value is kept


def test_a_caselaw_quote_of_a_star_paged_opinion_has_its_page_cite(member_client: Client, chat: Chat) -> None:
    opinion = factories.CaselawOpinionFactory.create(
        case_name="In re S.J.S.", citation="134 S.W.3d 673", text=SJS, absolute_url="https://example.com/sjs"
    )
    quote = "the sanction of a court given by order *677approving such a transfer"
    on_one_page = "Father, T.J.S., appeals"
    question = factories.UserMessageFactory.create(chat=chat)
    message = factories.MessageFactory.create(chat=chat, reply_to=question, content=f'"{quote}" and "{on_one_page}"')
    across = factories.OpinionQuoteFactory.create(message=message, opinion=opinion, quote=quote)
    one = factories.OpinionQuoteFactory.create(message=message, opinion=opinion, quote=on_one_page)

    html = member_client.get(_page(chat)).content.decode()

    def card(row: Any) -> str:
        at = html.index(f'id="claim-{row.pk}"')
        return html[at : html.index("</li>", at)]

    # The Bluebook pin cite in the case's reporter after its first page, never a bare "p." (Rule 3.2(a): 676\u201377)
    assert 'In re S.J.S., 134 S.W.3d 673</a>, <span class="claim-pages">676\u201377</span>' in card(across)
    assert '134 S.W.3d 673</a>, <span class="claim-pages">675</span>' in card(one)
    assert 'href="https://example.com/sjs"' in card(one)


def test_the_page_uses_no_inline_script_or_style(member_client: Client, chat: Chat) -> None:
    # A strict Content-Security-Policy (no 'unsafe-inline') must hold on every page.
    _turn(chat)
    for url in ("/", _page(chat), "/accounts/login/"):
        html = member_client.get(url).content.decode()
        assert not re.search(r"<script(?![^>]*\bsrc=)", html), url
        assert "<style" not in html
        assert not re.search(r"\sstyle=", html), url
        assert not re.search(r"\son[a-z]+=", html), url


def test_the_text_of_sources_and_answers_is_escaped(member_client: Client, chat: Chat) -> None:
    question = factories.UserMessageFactory.create(chat=chat, content="<script>alert(1)</script>?")
    factories.MessageFactory.create(chat=chat, reply_to=question, content="<img src=x onerror=alert(1)>")
    html = member_client.get(_page(chat)).content.decode()
    assert "<script>alert(1)" not in html
    assert "<img src=x" not in html
    assert "&lt;img src=x onerror=alert(1)&gt;" in html


def test_each_turn_says_whether_its_record_is_sealed(member_client: Client, chat: Chat) -> None:
    # Given a turn sealed when it was answered, one sealed late by seal_turns, one unsealed, one unfinished
    on_time = _turn(chat)
    seals.seal_turn(message_id=on_time.pk)
    late = _turn(chat)
    call_command("seal_turns", stdout=io.StringIO())
    unsealed = _turn(chat)
    question = factories.UserMessageFactory.create(chat=chat, content="Still thinking?")
    unfinished = factories.MessageFactory.create(
        chat=chat, reply_to=question, content="Partial", status=Message.Status.INTERRUPTED, finalized_at=None
    )

    html = member_client.get(_page(chat)).content.decode()

    def meta(message: Message) -> str:
        found = re.search(rf'<p class="turn-meta">Turn <code>{message.pk}</code>.*?</p>', html, re.S)
        assert found is not None, message.pk
        return found.group(0)

    assert ">sealed #1</span>" in meta(on_time)
    sealed_at = TurnSeal.objects.get(message=late).sealed_at
    assert f'>sealed #2, late (<time datetime="{sealed_at.isoformat()}">' in meta(late)
    assert "the seal proves the record from that date on" in meta(late)
    assert '<span class="unsealed"' in meta(unsealed)
    assert ">not sealed</span>" in meta(unsealed)
    assert "sealed" not in meta(unfinished)


def test_an_unfinished_turn_has_no_verdict_yet(member_client: Client, chat: Chat) -> None:
    question = factories.UserMessageFactory.create(chat=chat, content="Still thinking?")
    factories.MessageFactory.create(
        chat=chat, reply_to=question, content="Partial", status=Message.Status.INTERRUPTED, finalized_at=None
    )
    html = member_client.get(_page(chat)).content.decode()
    assert "Verdict: No verdict yet</strong> — the turn is interrupted." in html


@pytest.mark.parametrize("turns", [1, 50])
def test_the_chat_page_is_a_constant_number_of_queries(
    member_client: Client, chat: Chat, turns: int, django_assert_num_queries: AssertNumQueries
) -> None:
    # Given a chat of one turn with every kind of claim, the page's queries counted
    _turn(chat)
    member_client.get(_page(chat))  # warm the session
    with CaptureQueriesContext(connection) as one_turn:
        assert member_client.get(_page(chat)).status_code == 200

    # When it has `turns` turns, each with every kind of claim
    for _ in range(turns - 1):
        _turn(chat)

    # Then the page runs as many queries, and shows every card
    with django_assert_num_queries(len(one_turn.captured_queries)):
        html = member_client.get(_page(chat)).content.decode()
    assert len(_cards(html)) == 4 * turns
    assert CaseCitation.objects.filter(message__chat=chat).count() == turns


# --- The pieces ---------------------------------------------------------------------------------------------------


def test_a_quote_is_found_in_the_answer_whatever_its_line_breaks() -> None:
    text = 'He said "a b\n  c" and then "a b c".'
    taken: set[int] = set()
    first = answer.quote_span(text, "a\nb c", taken=taken)
    second = answer.quote_span(text, "a b c", taken=taken)
    assert first == (9, 16)
    assert second is not None
    assert text[second[0] : second[1]] == "a b c"
    assert answer.quote_span(text, "a b c", taken=taken) is None  # both places are taken
    assert answer.quote_span(text, "   ") is None
    assert answer.quote_span(text, "a.b") is None  # regex characters are literal
    assert answer.marker_offset(text, 16) == 17  # after the closing quote mark


def test_page_cites_read_the_sources_stored_pages() -> None:
    # The card's page cite is the API's pages of the span (chats.pages), written as a lawyer cites them
    pages = reporter_pages(SJS, citation="134 S.W.3d 673")
    start = SJS.index("*676")
    assert page_cite(pages_of_span(pages, start - 10, start - 1)) == "p. 675"
    assert page_cite(pages_of_span(pages, start - 10, start + 10)) == "pp. 675\u2013676"
    # before the first break (*675): the pages from the citation's first
    assert page_cite(pages_of_span(pages, 0, 5)) == "pp. 673\u2013674"
    assert page_cite(pages_of_span([], 0, 5)) == ""
    assert page_cite(["673-674", "675"]) == "pp. 673\u2013675"


def test_every_status_has_words_and_an_unknown_one_needs_review() -> None:
    for code in ("exact_match", "tolerant_match", "altered", "unverified", *CaseCitation.Status.values):
        words = status_in_words(code)
        assert words.words
        assert words.symbol
        assert "_" not in words.words
    assert status_in_words("name_mismatch").words == "cited under another case's name"
    assert not status_in_words("exact_match").needs_review
    assert status_in_words("altered").needs_review
    assert status_in_words("pin_mismatch").tone == "fail"
    unknown = status_in_words("court_mismatch")
    assert unknown.needs_review
    assert unknown.words.startswith("court mismatch")
    assert verdict_in_words(None, status="streaming").explanation == "the turn is streaming"
    assert verdict_in_words(None, status="complete").title == "No verdict recorded"
    assert verdict_in_words("fail").title == "Fail"
    assert verdict_in_words("someday").tone == "review"
    assert (verdict_in_words("review").title, verdict_in_words("review").tone) == ("Review", "review")
    assert verdict_in_words("pass").tone == "ok"
    assert verdict_in_words("supported", claims="supported").tone == "review"  # never green on its own


def test_a_quote_s_recorded_place_in_the_answer_comes_before_searching_for_it(chat: Chat) -> None:
    # Quote rows are to record their span of the answer (answer_offset_start/end): once they do, it is used.
    row = factories.DocumentQuoteFactory.build(quote="strict scrutiny")
    content = "strict scrutiny, and again strict scrutiny"
    assert selectors._quote_marker_offset(row, content, taken=set()) == len("strict scrutiny")
    setattr(row, "answer_offset_end", len(content))  # noqa: B010 - a column quote rows do not have yet
    assert selectors._quote_marker_offset(row, content, taken=set()) == len(content)


@pytest.mark.parametrize("chats", [1, 20])
def test_the_home_page_is_a_constant_number_of_queries(
    member_client: Client, chat: Chat, chats: int, django_assert_num_queries: AssertNumQueries
) -> None:
    _turn(chat)
    member_client.get("/")
    with CaptureQueriesContext(connection) as one_chat:
        member_client.get("/")
    for _ in range(chats - 1):
        _turn(factories.ChatFactory.create(project=chat.project, owner=chat.owner))
    with django_assert_num_queries(len(one_chat.captured_queries)):
        html = member_client.get("/").content.decode()
    assert html.count('<td><a href="/chats/') == chats


def test_an_older_turn_without_reply_to_gets_the_question_asked_with_it(member_client: Client, chat: Chat) -> None:
    # Turns stored before answers pointed at their question, question and answer at the same instant
    # (the answer's id sorts before its question's)
    for n in range(3):
        when = timezone.now() - datetime.timedelta(days=10 - n)
        answer_first = factories.MessageFactory.create(
            chat=chat, id=uuid.UUID(int=2 * n + 1), content=f"Older answer {n}", created_at=when
        )
        factories.UserMessageFactory.create(
            chat=chat, id=uuid.UUID(int=2 * n + 2), content=f"Older question {n}", created_at=when
        )
        assert answer_first.reply_to is None

    html = member_client.get(_page(chat)).content.decode()

    questions = re.findall(r'<span class="label">Question</span> (Older question \d)', html)
    assert questions == ["Older question 0", "Older question 1", "Older question 2"]
    assert "(no question recorded)" not in html


def test_a_resolved_referent_is_shown_with_its_bracket() -> None:
    # Hogarth v. Bell: "The State Board has a statutorily imposed duty ... It also bears the duty, jointly ..."
    from lqai_verify.passage_html import describe
    from lqai_verify.verification import alterations_record
    from tests.conftest import corpus_text, normalized

    name = "opinions/hogarth-v-bell-edn-c-2025.txt"
    match = normalized(name).verify("[The State Board] also bears the duty, jointly with district attorneys")
    assert match is not None
    [alteration] = alterations_record(match)
    start, end = int(alteration["source_start"]), int(alteration["source_end"])
    assert describe(alteration, corpus_text(name)[start:end]) == (
        "bracket (reference): the quote's \u201c[The State Board]\u201d stands for \u201cIt\u201d "
        "([The State Board] stands for \u201cIt\u201d; the sentence before names the State Board)"
    )
