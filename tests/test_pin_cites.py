"""Pin cites of opinion quotes: page breaks read from every form real opinion text carries (inline star paging,
bracketed reporter markers, CourtListener's star-pagination markup, a slip opinion's own pages), written in the
Bluebook short form in the API, the trace pages, the export and its report; a document keeps ``p. N``."""

from __future__ import annotations

import importlib
import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey
from rest_framework.test import APIClient

from chats import courtlistener
from chats.assistant import FinalAnswer, Script, TextDelta
from chats.case_citations.extraction import extract_citations
from chats.models import CaseCitation, CaselawOpinion, Chat, Message
from chats.opinion_records import courtlistener_text
from chats.pages import opinion_pages, span_pin_cite
from chats.services import ClaimedCitation, finalize_turn, start_turn
from citations import keys
from lqai_verify import record
from lqai_verify.bundle import verify_bundle
from lqai_verify.verification.page_breaks import reporter_pages, slip_pages, star_paged_markup
from lqai_verify.verification.page_cites import bluebook_reporter, cited_with_pin, page_range, pin_cite
from tests import factories
from tests.test_export import export, jsonl, lines, members, rewrite

TESTS = Path(__file__).resolve().parent
CORPUS = TESTS.parent / "chats" / "data" / "opinions"
SJS = (TESTS / "fixtures" / "in-re-sjs-134-sw3d-673-mo-ct-app-2004.txt").read_text(encoding="utf-8")
SJS_CITATION = "134 S.W.3d 673 (Mo. Ct. App. 2004)"
DEMOCRACY = (CORPUS / "democracy-nc-v-nc-board-of-elections-mdnc-2022.txt").read_text(encoding="utf-8")
DEMOCRACY_CITATION = "590 F. Supp. 3d 850 (M.D.N.C. 2022)"
FISHER = (CORPUS / "fisher-v-university-of-texas-2013-slip.txt").read_text(encoding="utf-8")
FISHER_CITATION = "570 U.S. 297 (2013)"
# A CourtListener opinion whose html_with_citations carries star-pagination markup (In re S.J.S.).
CL_STAR_PAGINATION = TESTS / "fixtures" / "courtlistener" / "opinion_930010_star_pagination.json"


def pin_of(text: str, citation: str, first: str, last: str | None = None) -> str | None:
    """The pin cite of the passage of ``text`` from ``first`` through ``last`` (or ``first`` alone)."""
    start = text.index(first)
    end = text.index(last, start) + len(last) if last else start + len(first)
    return span_pin_cite(opinion_pages(text, citation=citation), start, end, citation=citation)


# --- Bluebook forms ----------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("first", "last", "expected"),
    [
        ("676", "677", "676\u201377"),
        ("1099", "1101", "1099\u2013101"),
        ("99", "100", "99\u2013100"),
        ("5", "6", "5\u20136"),
    ],
)
def test_a_page_range_drops_repeated_leading_digits_but_keeps_two(first: str, last: str, expected: str) -> None:
    assert page_range(first, last) == expected


@pytest.mark.parametrize(
    ("written", "bluebook"),
    [
        ("F.Supp.3d", "F. Supp. 3d"),
        ("S. W. 3d", "S.W.3d"),
        ("S.Ct.", "S. Ct."),
        ("U.S.", "U.S."),
        ("L. Ed. 2d", "L. Ed. 2d"),
    ],
)
def test_a_reporter_is_spaced_as_the_bluebook_spaces_it(written: str, bluebook: str) -> None:
    assert bluebook_reporter(written) == bluebook


@pytest.mark.parametrize(
    ("labels", "citation", "expected"),
    [
        (["870"], "590 F.Supp.3d 850", "590 F. Supp. 3d at 870"),
        (["676", "677"], "134 S.W.3d 673", "134 S.W.3d at 676\u201377"),
        (["slip 5"], "570 U.S. ___ (2013)", "slip op. at 5"),
        (["slip 3 (Thomas, J., concurring)"], "570 U.S. 297", "slip op. at 3 (Thomas, J., concurring)"),
        (["slip 13", "slip 1 (Scalia, J., concurring)"], "", "slip op. at 13, 1 (Scalia, J., concurring)"),
        # Never a bare page for an opinion: a form-feed count stored before (below the reporter's first page),
        # a page only known to lie somewhere in a range, a citation naming no reporter page, no page at all.
        (["18"], "570 U.S. 297 (2013)", None),
        (["673-674"], "134 S.W.3d 673", None),
        (["3"], "No. 5:24-CV-481-FL (E.D.N.C. 2025)", None),
        (None, "134 S.W.3d 673", None),
    ],
)
def test_pin_cite(labels: list[str] | None, citation: str, expected: str | None) -> None:
    assert pin_cite(labels, citation=citation) == expected


# --- Page breaks of real opinions --------------------------------------------------------------------------------


def test_inline_star_paging_of_in_re_sjs_gives_reporter_pin_cites() -> None:
    assert pin_of(SJS, SJS_CITATION, "Father was married to mother in 1992") == "134 S.W.3d at 675"
    # Across "*676in": the marker glued to the next word
    assert pin_of(SJS, SJS_CITATION, "was born of the marriage", "In 1995") == "134 S.W.3d at 675\u201376"
    assert pin_of(SJS, SJS_CITATION, "approving such a transfer") == "134 S.W.3d at 677"
    # Before the first marker the page is one of 673-674: no pin cite rather than a guess
    assert pin_of(SJS, SJS_CITATION, "In the matter of S.J.S.") is None


def test_bracketed_reporter_markers_of_democracy_nc_give_reporter_pin_cites() -> None:
    assert pin_of(DEMOCRACY, DEMOCRACY_CITATION, "Under Section 208 of the Voting Rights Act") == (
        "590 F. Supp. 3d at 870"
    )
    assert (
        pin_of(DEMOCRACY, DEMOCRACY_CITATION, "thus finds Plaintiff Hutchins has standing", "163-230.2")
        == "590 F. Supp. 3d at 869\u201370"
    )
    assert [label for _, label in opinion_pages(DEMOCRACY, citation=DEMOCRACY_CITATION)][-1] == "872"


def test_bracketed_star_markers_count_and_a_parallel_reporters_do_not() -> None:
    text = "opening [*851] one [2022 WL 123456 *2] two [590 F.Supp.3d 852] three"
    pages = reporter_pages(text, citation="590 F. Supp. 3d 850")
    assert [label for _, label in pages] == ["850", "851", "852"]
    assert span_pin_cite(pages, text.index("two"), text.index("three"), citation="590 F. Supp. 3d 850") == (
        "590 F. Supp. 3d at 851\u201352"
    )


def test_a_slip_opinion_is_cited_by_its_own_printed_pages_never_by_form_feeds() -> None:
    # Fisher's opinion of the Court, page 11 of the slip (the 14th page of the PDF)
    assert pin_of(FISHER, FISHER_CITATION, "The reviewing court must ultimately be satisfied") == "slip op. at 11"
    assert pin_of(FISHER, FISHER_CITATION, "it is not sufficient to satisfy strict scrutiny", "The reviewing") == (
        "slip op. at 10\u201311"
    )
    assert pin_of(FISHER, FISHER_CITATION, "tionship to the prevention of espionage") == (
        "slip op. at 3 (Thomas, J., concurring)"
    )
    assert pin_of(FISHER, FISHER_CITATION, "consideration of race in admis-") == "slip op. at 1 (syllabus)"


def test_a_slip_opinion_without_form_feeds_is_paged_by_its_running_heads() -> None:
    patel = (CORPUS / "los-angeles-v-patel-2015-slip.txt").read_text(encoding="utf-8")
    labels = [label for _, label in slip_pages(patel)]
    assert labels[:4] == ["slip 1 (syllabus)", "slip 2 (syllabus)", "slip 3 (syllabus)", "slip 1"]


def test_courtlistener_star_pagination_markup_is_read_when_the_opinion_is_materialized(db: None) -> None:
    detail = json.loads(CL_STAR_PAGINATION.read_text(encoding="utf-8"))

    opinion = courtlistener.save_opinion(
        opinion_id="930010",
        metadata={"case_name": "In re S.J.S.", "citation": "134 S.W.3d 673"},
        text=courtlistener_text(detail),
    )

    stored = CaselawOpinion.objects.get(pk=opinion.pk)
    assert [label for _, label in stored.pages] == ["673-674", "675", "676", "677", "678"]
    assert "star-pagination" not in stored.text
    assert "<span" not in stored.text
    start = stored.text.index("was born of the marriage")
    end = stored.text.index("In 1995", start)
    assert span_pin_cite(stored.pages, start, end, citation=stored.citation) == "134 S.W.3d at 675\u201376"


def test_another_reporters_star_pagination_markup_is_dropped() -> None:
    markup = (
        '<p>one <span citation-index="1" class="star-pagination" label="298"> *298 </span>two'
        '<span citation-index="2" class="star-pagination" label="2412"> **2412 </span> three'
        '<span class="star-pagination">*Page 299</span> four</p>'
    )
    assert star_paged_markup(markup) == "<p>one *298two three*299 four</p>"


# --- Everywhere a quote is shown ---------------------------------------------------------------------------------


def test_every_opinion_quote_carries_its_pin_cite_in_the_api_the_trace_pages_and_the_export(
    api_client: APIClient,
    client: Any,
    user: Any,
    matter_chat: Chat,
    scripted_backend: Callable[..., Script],
    django_capture_on_commit_callbacks: Callable[..., Any],
    tmp_path: Path,
) -> None:
    democracy = factories.CaselawOpinionFactory.create(
        provider="local",
        case_name="Democracy N.C. v. N.C. State Bd. of Elections",
        citation=DEMOCRACY_CITATION,
        text=DEMOCRACY,
    )
    fisher = factories.CaselawOpinionFactory.create(
        provider="local", case_name="Fisher v. University of Texas at Austin", citation=FISHER_CITATION, text=FISHER
    )
    document = matter_chat.project.documents.get()  # type: ignore[union-attr]
    claims = (
        ClaimedCitation("Under Section 208 of the Voting Rights Act", opinion_id=democracy.pk),
        ClaimedCitation("The reviewing court must ultimately be satisfied", opinion_id=fisher.pk),
        ClaimedCitation(document.content.split(".")[0], document_id=document.pk),
    )
    scripted_backend(TextDelta("An answer."), FinalAnswer(claims))

    with django_capture_on_commit_callbacks(execute=True):
        response = api_client.post(f"/api/chats/{matter_chat.pk}/messages/", {"content": "q"}, format="json")

    assert response.status_code == 201
    message = response.json()["message"]
    expected = {claims[0].quote: "590 F. Supp. 3d at 870", claims[1].quote: "slip op. at 11"}
    assert {c["quote"]: c["pin_cite"] for c in message["caselaw_citations"]} == expected
    assert [c["pin_cite"] for c in message["citations"]] == [None]  # a document without PDF pages
    trace = api_client.get(f"/api/chats/{matter_chat.pk}/ledger/").json()
    entries = trace["results"] if isinstance(trace, dict) else trace
    assert {e["passage"]["text"]: e["pin_cite"] for e in entries if e["source_kind"] == "caselaw"} == expected
    client.force_login(user)
    html = client.get(f"/chats/{matter_chat.pk}/").content.decode()
    # A case's pin cite after its first page (Rule 3.2(a)), its citation not written twice; a slip's after it.
    assert '590 F. Supp. 3d 850</a>, <span class="claim-pages">870</span> (M.D.N.C. 2022)' in html
    assert '<span class="claim-pages">slip op. at 11</span>' in html

    files = members(export(matter_chat, tmp_path / "matter.zip"))
    passages = lines(files["passages.jsonl"])
    assert sorted(p["pin_cite"] for p in passages if p["source_table"] == "caselaw_opinions") == sorted(
        expected.values()
    )
    report = files["report.html"].decode()
    assert "590 F. Supp. 3d 850, 870 (M.D.N.C. 2022)" in report
    assert "590 F. Supp. 3d at 870" not in report
    assert f"{FISHER_CITATION}, slip op. at 11" in report


# --- A pin cite written in the answer, against the passage quoted with it ----------------------------------------

DEMOCRACY_NAME = "Democracy North Carolina v. North Carolina State Board of Elections"
ON_870 = "Under Section 208 of the Voting Rights Act"


@pytest.fixture
def democracy(db: None) -> CaselawOpinion:
    return factories.CaselawOpinionFactory.create(
        provider="local",
        opinion_id="democracy-nc-2022",
        case_name=DEMOCRACY_NAME,
        citation=DEMOCRACY_CITATION,
        court="U.S. District Court, Middle District of North Carolina",
        text=DEMOCRACY,
    )


def finalized(chat: Chat, user: Any, content: str, *claims: ClaimedCitation) -> list[CaseCitation]:
    _, answer = start_turn(chat=chat, content="q", author=user)
    finalize_turn(message=answer, content=content, status=Message.Status.COMPLETE, claimed_citations=claims)
    return list(CaseCitation.objects.filter(message=answer).order_by("answer_offset_start"))


@pytest.fixture
def no_courtlistener(settings: Any) -> None:
    settings.COURTLISTENER_API_TOKEN = ""


@pytest.mark.usefixtures("no_courtlistener")
def test_a_pin_on_the_quoted_passages_page_is_within(matter_chat: Chat, user: Any, democracy: CaselawOpinion) -> None:
    [case] = finalized(
        matter_chat,
        user,
        f"\u201c{ON_870}\u201d applies. {DEMOCRACY_NAME}, 590 F. Supp. 3d 850, 870 (M.D.N.C. 2022).",
        ClaimedCitation(ON_870, opinion_id=democracy.pk),
    )
    assert (case.status, case.pin, case.pin_status) == ("verified", "870", "within")
    assert "the page of the passage quoted with it (590 F. Supp. 3d at 870)" in case.detail


@pytest.mark.usefixtures("no_courtlistener")
def test_a_pin_off_the_quoted_passages_page_fails_naming_both_pages(
    matter_chat: Chat, user: Any, democracy: CaselawOpinion
) -> None:
    [case] = finalized(
        matter_chat,
        user,
        f"\u201c{ON_870}\u201d applies. {DEMOCRACY_NAME}, 590 F. Supp. 3d 850, 866 (M.D.N.C. 2022).",
        ClaimedCitation(ON_870, opinion_id=democracy.pk),
    )
    assert (case.status, case.pin_status) == ("pin_mismatch", "outside")
    assert "the passage is at 590 F. Supp. 3d at 870, the pin cite names page 866" in case.detail
    assert Message.objects.get(pk=case.message_id).verdict == "fail"


@pytest.mark.usefixtures("no_courtlistener")
def test_a_pin_nothing_can_check_is_never_within(
    matter_chat: Chat, user: Any, democracy: CaselawOpinion, local_opinion: CaselawOpinion
) -> None:
    # Within the case's pages, but no passage is quoted with it
    [alone] = finalized(matter_chat, user, f"See {DEMOCRACY_NAME}, 590 F. Supp. 3d 850, 866 (M.D.N.C. 2022).")
    assert (alone.status, alone.pin_status) == ("verified", "unchecked")
    assert "no passage quoted with it" in alone.detail
    # Nothing green over it: the turn needs a person to look at the page
    assert Message.objects.get(pk=alone.message_id).verdict == "review"
    # A passage of a slip opinion: its U.S. Reports page is not known
    quote = "The reviewing court must ultimately be satisfied"
    [slip] = finalized(
        matter_chat,
        user,
        f"\u201c{quote}\u201d. Fisher v. University of Texas at Austin, 570 U.S. 297, 312 (2013).",
        ClaimedCitation(quote, opinion_id=local_opinion.pk),
    )
    assert (slip.status, slip.pin_status) == ("verified", "unchecked")
    assert "(it is at slip op. at 11)" in slip.detail


def test_the_volume_of_a_parallel_citation_is_not_a_pin() -> None:
    found = extract_citations("Fisher v. University of Texas at Austin, 570 U.S. 297, 133 S. Ct. 2411 (2013).")
    assert [(f.citation, f.pin) for f in found] == [("570 U.S. 297", ""), ("133 S. Ct. 2411", "")]
    with_pins = extract_citations("Fisher v. Univ. of Tex., 570 U.S. 297, 311, 133 S. Ct. 2411, 2420 (2013).")
    assert [f.pin for f in with_pins] == ["311", "2420"]


# --- Opinions stored before ---------------------------------------------------------------------------------------


def test_stored_uncited_opinions_get_their_pages_read_again_and_cited_ones_keep_theirs(db: None) -> None:
    from django.apps import apps

    reread = importlib.import_module("chats.migrations.0035_opinion_pages_reread").reread_pages_of_uncited_opinions
    stale: list[list[int | str | None]] = [
        [0, "1"],
        [10, "2"],
    ]  # form feeds counted, as stored before slip pages were read
    uncited = factories.CaselawOpinionFactory.create(citation=FISHER_CITATION, text=FISHER)
    cited = factories.CaselawOpinionFactory.create(citation=FISHER_CITATION, text=FISHER)
    CaselawOpinion.objects.filter(pk__in=[uncited.pk, cited.pk]).update(pages=stale)
    factories.OpinionQuoteFactory.create(opinion=cited, quote="The reviewing court must ultimately be satisfied")

    reread(apps, None)

    assert CaselawOpinion.objects.get(pk=uncited.pk).pages == opinion_pages(FISHER, citation=FISHER_CITATION)
    assert CaselawOpinion.objects.get(pk=cited.pk).pages == stale
    # ... whose page map gives no pin cite rather than a form-feed count taken for a U.S. Reports page
    assert span_pin_cite(stale, 12, 20, citation=FISHER_CITATION) is None


def test_the_demo_seed_leaves_a_cited_opinion_as_it_was_quoted(db: None) -> None:
    from demo.seed import seed

    seed()
    fisher = CaselawOpinion.objects.get(provider="local", opinion_id="fisher-2013")
    stale: list[list[int | str | None]] = [[0, "1"], [10, "2"]]
    CaselawOpinion.objects.filter(pk=fisher.pk).update(pages=stale)
    factories.OpinionQuoteFactory.create(opinion=fisher, quote="The reviewing court must ultimately be satisfied")

    seed()  # refused a change of the cited opinion's pages before

    assert CaselawOpinion.objects.get(pk=fisher.pk).pages == stale


def test_a_short_forms_page_range_is_read_whole_and_checked_against_a_passage_over_two_pages(
    matter_chat: Chat, user: Any, no_courtlistener: None
) -> None:
    sjs = factories.CaselawOpinionFactory.create(
        provider="local", opinion_id="sjs-2004", case_name="In re S.J.S.", citation="134 S.W.3d 673", text=SJS
    )
    quote = "was born of the marriage *676in 1993"
    content = (
        "In re S.J.S., 134 S.W.3d 673 (Mo. Ct. App. 2004), is an adoption case. "
        f"The son \u201c{quote}\u201d. S.J.S., 134 S.W.3d, at 675\u201376."
    )
    assert [f.pin for f in extract_citations(content)] == ["", "675-76"]

    _, short = finalized(matter_chat, user, content, ClaimedCitation(quote, opinion_id=sjs.pk))

    assert (short.pin, short.status, short.pin_status) == ("675-76", "verified", "within")
    assert "(134 S.W.3d at 675\u201376)" in short.detail


def test_the_offline_verifier_reads_each_pin_cite_as_its_pages_say(
    api_client: APIClient,
    matter_chat: Chat,
    scripted_backend: Callable[..., Script],
    django_capture_on_commit_callbacks: Callable[..., Any],
    tmp_path: Path,
) -> None:
    democracy = factories.CaselawOpinionFactory.create(provider="local", citation=DEMOCRACY_CITATION, text=DEMOCRACY)
    scripted_backend(TextDelta("An answer."), FinalAnswer((ClaimedCitation(ON_870, opinion_id=democracy.pk),)))
    with django_capture_on_commit_callbacks(execute=True):
        api_client.post(f"/api/chats/{matter_chat.pk}/messages/", {"content": "q"}, format="json")
    files = members(export(matter_chat, tmp_path / "matter.zip"))
    assert verify_bundle(tmp_path / "matter.zip", public_key=keys.current_fingerprint()).problems == []

    # Given a pin cite that says another page than the passage's (the bundle signed again, as its signer could)
    passages = [
        {**p, "pin_cite": "590 F. Supp. 3d at 871"} if p.get("pin_cite") else p for p in lines(files["passages.jsonl"])
    ]
    key = Ed25519PrivateKey.generate()
    rewrite(tmp_path / "changed.zip", {**files, "passages.jsonl": jsonl(passages)}, resign=key)

    problems = verify_bundle(tmp_path / "changed.zip", public_key=record.fingerprint(key.public_key())).problems

    assert any("its pin cite '590 F. Supp. 3d at 871' does not read as its pages ['870'] say" in p for p in problems)


@pytest.mark.usefixtures("no_courtlistener")
def test_a_page_map_stored_before_reporter_pages_were_read_fails_no_pin(
    matter_chat: Chat, user: Any, local_opinion: CaselawOpinion
) -> None:
    # Given Fisher's page map as stored before: its form feeds counted, "14" where the slip's page 11 is
    form_feeds: list[list[int | str | None]] = [[0, "1"]]
    for n, at in enumerate((i + 1 for i, c in enumerate(FISHER) if c == "\f"), start=2):
        form_feeds.append([at, str(n)])
    CaselawOpinion.objects.filter(pk=local_opinion.pk).update(pages=form_feeds)
    quote = "The reviewing court must ultimately be satisfied"

    [case] = finalized(
        matter_chat,
        user,
        f"\u201c{quote}\u201d. Fisher v. University of Texas at Austin, 570 U.S. 297, 312 (2013).",
        ClaimedCitation(quote, opinion_id=local_opinion.pk),
    )

    assert (case.status, case.pin_status) == ("verified", "unchecked")
    assert "the page in 570 U.S. of the passage quoted with it is not known (it is at page 14 of" in case.detail


@pytest.mark.parametrize(
    ("source", "pin", "written"),
    [
        (  # a full citation takes its pin after its first page, before its parenthetical
            f"Democracy North Carolina v. North Carolina State Board of Elections, {DEMOCRACY_CITATION}",
            "590 F. Supp. 3d at 870",
            "Democracy North Carolina v. North Carolina State Board of Elections, 590 F. Supp. 3d 850, 870 "
            "(M.D.N.C. 2022)",
        ),
        ("In re S.J.S., 134 S.W.3d 673", "134 S.W.3d at 676\u201377", "In re S.J.S., 134 S.W.3d 673, 676\u201377"),
        # a slip opinion's pages are not the reporter's: written after the citation as they are
        (f"Fisher v. University of Texas at Austin, {FISHER_CITATION}", "slip op. at 11", None),
        # a pin in another reporter (a parallel citation) is not folded into this one
        ("In re S.J.S., 134 S.W.3d 673", "135 S.W.3d at 676", None),
        ("Engagement letter", "p. 4", None),
        ("In re S.J.S., 134 S.W.3d 673", "", None),
    ],
)
def test_a_pin_cite_is_written_after_the_first_page_of_its_full_citation(
    source: str, pin: str, written: str | None
) -> None:
    expected = written if written is not None else (f"{source}, {pin}" if pin else source)
    assert cited_with_pin(source, pin) == expected
