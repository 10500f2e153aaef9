"""Checking a draft: every citation and quotation of briefs made here, citing the project's own opinions
(chats/data/opinions) and statutes (authorities/data/uslm), gets the finding it deserves; CourtListener is
a local fake on 127.0.0.1 (tests/test_case_citations.py), never the network."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from authorities.loading import load_uslm
from benchmarks import draft_check_bench
from chats.case_citations import lookup
from chats.models import CaselawOpinion
from drafts.checking import STATUSES, CheckedDraft, check_draft
from drafts.finding import find_in_draft
from drafts.reading import read_draft
from tests import factories
from tests.conftest import DEMOCRACY, FISHER, corpus_text
from tests.docx_fixture import Para, make_docx
from tests.pdf_fixture import make_pdf
from tests.test_case_citations import FakeCourtListener, fake_courtlistener  # noqa: F401 - the fixture

AUTHORITIES = Path(__file__).resolve().parent.parent / "authorities" / "data" / "uslm"
PATEL = "opinions/los-angeles-v-patel-2015-slip.txt"


@pytest.fixture
def opinions(db: None) -> dict[str, CaselawOpinion]:
    """Fisher, Patel and Democracy North Carolina as seeded (provider ``local``) opinions."""
    made = {}
    supreme = "Supreme Court of the United States"
    for key, name, case_name, citation, court in (
        ("fisher", FISHER, "Fisher v. University of Texas at Austin", "570 U.S. 297", supreme),
        ("patel", PATEL, "City of Los Angeles v. Patel", "576 U.S. 409", supreme),
        (
            "democracy",
            DEMOCRACY,
            "Democracy North Carolina v. North Carolina State Board of Elections",
            "590 F. Supp. 3d 850",
            "",
        ),
    ):
        made[key] = factories.CaselawOpinionFactory.create(
            provider="local",
            opinion_id=key,
            case_name=case_name,
            citation=citation,
            court=court,
            text=corpus_text(name),
        )
    return made


@pytest.fixture
def library(db: None) -> None:
    for name in ("usc09.xml", "usc35.xml"):
        load_uslm(path=AUTHORITIES / name)


def checked(text: str, *, name: str = "brief.txt", **options: Any) -> CheckedDraft:
    data = text.encode() if name.endswith(".txt") else make_docx(text.split("\n\n"))
    draft = read_draft(data=data, name=name)
    return check_draft(found=find_in_draft(draft), **({"use_courtlistener": False} | options))


def finding(result: CheckedDraft, text: str) -> dict[str, Any]:
    record: Any = result.record(matter="m")
    hits = [f for f in record["findings"] if f["text"] == text]
    assert len(hits) == 1, [(f["kind"], f["text"], f["status"]) for f in record["findings"]]
    return hits[0]


DEMOCRACY_CASE = "Democracy N.C. v. N.C. State Bd. of Elections, 590 F. Supp. 3d 850"
PLEADINGS = "a court will not accept mere legal conclusions as true"  # at 590 F. Supp. 3d 861
OMITTED = "subject only to a few . . . exceptions. . . . One exception is for administrative searches"


FISHER_CASE = "Fisher v. University of Texas at Austin, 570 U.S. 297"
SCRUTINY = "Strict scrutiny is a searching examination"
SPECIFICATION = "The specification shall contain a written description of the invention"


def _brief() -> str:
    return "\n\n".join(
        [
            f'The standard is demanding: "{SCRUTINY}." {FISHER_CASE}, 310 (2013). Id. at 311.',
            f'Courts have said it is "a lenient examination." {FISHER_CASE}, 310 (2013).',
            "No such case exists. Smith v. Jones, 999 U.S. 123 (2001).",
            "Wrong name. Grutter v. Bollinger, 576 U.S. 409 (2015).",
            f'"{PLEADINGS}." {DEMOCRACY_CASE}, 858 (M.D.N.C. 2022).',
            f'Again, "{PLEADINGS}." {DEMOCRACY_CASE}, 861 (M.D.N.C. 2022). Id. at 861.',
            f'Searches are "{OMITTED}." City of Los Angeles v. Patel, 576 U.S. 409 (2015).',
            "The burden stays. Fisher, 570 U.S. at 312. Not the same book: Fisher, 571 U.S. at 312.",
            f'A patent must hold it: "{SPECIFICATION}." 35 U.S.C. § 112(a). And 9 U.S.C. § 99.',
            '"Quoted from nowhere at all."',
        ]
    )


def test_each_citation_and_quote_of_a_brief_gets_its_finding(
    opinions: dict[str, CaselawOpinion], library: None
) -> None:
    # Given a brief citing the project's own opinions and statutes, when it is checked with the local library
    result = checked(_brief())
    record: Any = result.record(matter="m")
    statuses = {(f["text"], f["status"]) for f in record["findings"]}

    # then a correct quote verifies, and the slip opinion's pin cite is shown as not checkable, for review
    assert (f"{SCRUTINY}.", "exact_match") in statuses
    fisher_first = [f for f in record["findings"] if f["text"] == f"{FISHER_CASE}, 310 (2013)"]
    assert [f["status"] for f in fisher_first] == ["pin_unchecked", "pin_unchecked"]
    # a misquote is not found in the case it cites
    assert finding(result, "a lenient examination.")["status"] == "unverified"
    # a fabricated case: nothing local holds it and CourtListener is off, so unchecked, saying what would check it
    fabricated = finding(result, "Smith v. Jones, 999 U.S. 123 (2001)")
    assert (fabricated["status"], fabricated["needs_review"]) == ("unchecked", True)
    assert "COURTLISTENER_API_TOKEN" in fabricated["detail"]
    # a real citation under another case's name
    wrong_name = finding(result, "Grutter v. Bollinger, 576 U.S. 409 (2015)")
    assert wrong_name["status"] == "name_mismatch"
    assert wrong_name["detail"] == (
        "The draft names 'Grutter v. Bollinger', but 576 U.S. 409 is 'City of Los Angeles v. Patel'."
    )
    # a pin cite off the page of the passage quoted with it; the right one verifies
    wrong_pin = finding(result, f"{DEMOCRACY_CASE}, 858 (M.D.N.C. 2022)")
    assert wrong_pin["status"] == "pin_mismatch"
    assert "590 F. Supp. 3d at 861" in wrong_pin["detail"]
    assert finding(result, f"{DEMOCRACY_CASE}, 861 (M.D.N.C. 2022)")["status"] == "verified"
    # a correct quote that omits a citation sentence verifies with the omission shown
    omitted = finding(result, f"{OMITTED}.")
    assert (omitted["status"], omitted["needs_review"]) == ("tolerant_match", False)
    assert omitted["words"] == "verified, with marked alterations"
    assert "Arizona v. Gant" in omitted["detail"]
    assert any(a["kind"] == "ellipsis" for a in omitted["alterations"]), omitted["alterations"]
    # a short form of the same volume is its case's; one naming another volume is not
    assert finding(result, "Fisher, 570 U.S. at 312")["status"] == "pin_unchecked"
    other_book = finding(result, "Fisher, 571 U.S. at 312")
    assert other_book["status"] == "unchecked"
    assert other_book["detail"].startswith("Writes 571 U.S., but the case it names (Fisher")
    assert other_book["detail"].endswith("no full citation of this volume earlier in the draft.")
    # id. follows its antecedent: after the verified pin 861, its own pin on the same case
    ids = [f for f in record["findings"] if f["form"] == "id"]
    assert [f["text"] for f in ids] == ["Id. at 311", "Id. at 861"]
    assert ids[0]["authority"] == fisher_first[0]["authority"]
    assert ids[1]["status"] in ("verified", "pin_unchecked")
    assert "590 F. Supp. 3d 850" in ids[1]["detail"]
    # a statute's quote verifies against the subsection cited; a section the title lacks is not found
    assert finding(result, f"{SPECIFICATION}.")["status"] in ("exact_match", "tolerant_match")
    assert finding(result, "35 U.S.C. § 112(a)")["status"] == "verified"
    assert finding(result, "9 U.S.C. § 99")["status"] == "not_found"
    # a quotation no citation supports is unchecked, saying why
    orphan = finding(result, "Quoted from nowhere at all.")
    assert (orphan["status"], orphan["authority"]) == ("unchecked", None)
    assert "No citation supports" in orphan["detail"]
    # the table of authorities gives each its worst status: Democracy's wrong pin cite fails it
    table = {entry["cite"]: entry["status"] for entry in record["authorities"]}
    assert table["590 F. Supp. 3d 850"] == "pin_mismatch"
    assert table["570 U.S. 297"] == "pin_unchecked"
    assert table["35 U.S.C. § 112"] == "verified"
    assert table["9 U.S.C. § 99"] == "not_found"
    # every status is of the one vocabulary docs/drafts.md explains
    assert {f["status"] for f in record["findings"]} <= set(STATUSES)
    # nothing failed is green: the verdict fails, and every failed, altered or unchecked finding needs review
    assert record["verdict"] == "fail"
    for f in record["findings"]:
        assert f["needs_review"] == (f["status"] not in ("verified", "exact_match", "tolerant_match")), f


def test_courtlistener_found_not_found_and_rate_limited(
    fake_courtlistener: FakeCourtListener,  # noqa: F811 - the fixture imported above
    opinions: dict[str, CaselawOpinion],
) -> None:
    # Given a brief citing a case only CourtListener holds, one it has not, and one the local store holds
    brief = f"Grutter v. Bollinger, 539 U.S. 306 (2003). Smith v. Jones, 999 U.S. 999 (2001). {FISHER_CASE} (2013)."

    # when CourtListener (a fake on 127.0.0.1) answers
    result = checked(brief, courtlistener_client=fake_courtlistener.client(), use_courtlistener=True)

    # then it is asked once, only about what the store lacks; found verifies, not found fails
    assert fake_courtlistener.lookups == ["539 U.S. 306\n999 U.S. 999"]
    assert finding(result, "Grutter v. Bollinger, 539 U.S. 306 (2003)")["status"] == "verified"
    assert finding(result, "Smith v. Jones, 999 U.S. 999 (2001)")["status"] == "not_found"
    assert result.verdict == "fail"
    # and the answer is kept: the case found is local the next time, CourtListener not asked about it again
    again = checked(
        "Grutter v. Bollinger, 539 U.S. 306 (2003).",
        courtlistener_client=fake_courtlistener.client(),
        use_courtlistener=True,
    )
    assert finding(again, "Grutter v. Bollinger, 539 U.S. 306 (2003)")["status"] == "verified"
    # and a citation to nothing is remembered: not asked about again for a while
    client = fake_courtlistener.client()
    nothing = checked("Smith v. Jones, 999 U.S. 999 (2001).", courtlistener_client=client, use_courtlistener=True)
    assert finding(nothing, "Smith v. Jones, 999 U.S. 999 (2001)")["status"] == "not_found"
    assert len(fake_courtlistener.lookups) == 1

    # when CourtListener rate-limits the account, what it was to check stays unchecked, saying so
    fake_courtlistener.mode = "throttled"
    limited = checked("Doe v. Roe, 998 U.S. 998 (2001).", courtlistener_client=client, use_courtlistener=True)
    held = finding(limited, "Doe v. Roe, 998 U.S. 998 (2001)")
    assert (held["status"], held["needs_review"]) == ("unchecked", True)
    assert "rate-limiting" in held["detail"]
    assert limited.verdict == "review"


def test_courtlistener_is_asked_in_batches_and_not_again_after_a_rate_limit(
    fake_courtlistener: FakeCourtListener,  # noqa: F811 - the fixture imported above
    db: None,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # Given CourtListener's per-request limit (250 citations) made 2, and a brief citing five cases nobody holds
    monkeypatch.setattr(lookup, "MAX_CITATIONS_PER_REQUEST", 2)
    brief = " ".join(f"Case{n} v. Other{n}, {900 + n} U.S. {100 + n} (2001)." for n in range(5))

    # when it is checked, CourtListener is asked three times, two citations at most each
    result = checked(brief, courtlistener_client=fake_courtlistener.client(), use_courtlistener=True)
    assert [len(asked.split("\n")) for asked in fake_courtlistener.lookups] == [2, 2, 1]
    assert {c.status for c in result.checks} == {"not_found"}

    # when CourtListener rate-limits the account, it is asked once: every citation stays unchecked, saying so
    fake_courtlistener.mode = "throttled"
    fake_courtlistener.lookups.clear()
    limited = checked(
        brief.replace(" U.S. ", " F.3d "), courtlistener_client=fake_courtlistener.client(), use_courtlistener=True
    )
    assert len(fake_courtlistener.lookups) == 1
    assert {c.status for c in limited.checks} == {"unchecked"}
    assert all("rate-limiting this account" in c.detail for c in limited.checks)


def test_a_docx_brief_its_footnote_and_block_quote_checked_on_their_pages(
    opinions: dict[str, CaselawOpinion], library: None
) -> None:
    # Given a Word brief: a quotation whose citation is in its footnote, and a block quote of a statute, on page 2
    data = make_docx(
        [
            "ARGUMENT",
            f'\fSearches are "{OMITTED}."[^1] The statute is plain:',
            Para(f"{SPECIFICATION}.", style="Quote"),
            "35 U.S.C. § 112(a).",
        ],
        {1: ["See City of Los Angeles v. Patel, 576 U.S. 409 (2015)."]},
    )
    draft = read_draft(data=data, name="brief.docx")

    # when it is checked
    result = check_draft(found=find_in_draft(draft), use_courtlistener=False)

    # then the footnote's case verifies, and the quotation tied to it verifies against the opinion, on page 2
    patel = finding(result, "City of Los Angeles v. Patel, 576 U.S. 409 (2015)")
    assert (patel["status"], patel["footnote"], patel["page"]) == ("verified", "1", "2")
    quoted = finding(result, f"{OMITTED}.")
    assert (quoted["status"], quoted["page"], quoted["authority"]) == ("tolerant_match", "2", patel["authority"])
    # the block quote verifies against the subsection cited after it
    block = finding(result, f"{SPECIFICATION}.")
    assert block["form"] == "block"
    assert block["status"] in ("exact_match", "tolerant_match")
    assert "35 U.S.C. § 112(a)" in block["detail"]


def test_the_bench_brief_has_its_pages_citations_and_quotations() -> None:
    # Given the bench's brief of 40 pages (make bench item 16), when it is read, then it has what the bench says
    draft = read_draft(data=draft_check_bench.brief(draft_check_bench.PAGES), name="brief.docx")
    found = find_in_draft(draft)

    assert len(draft.pages or []) == draft_check_bench.PAGES
    quotes = [f for f in found.findings if f.kind == "quote"]
    assert len(quotes) == draft_check_bench.QUOTES
    assert all(q.authority is not None for q in quotes)
    assert draft_check_bench.CITATIONS <= len(found.findings) - len(quotes) <= draft_check_bench.CITATIONS + 10


def test_a_quotation_of_a_matter_document_named_beside_it_is_checked_against_that_document(db: None) -> None:
    # Given a matter holding a services agreement, and another matter's document of the same title
    matter = factories.ProjectFactory.create()
    factories.DocumentFactory.create(
        project=matter,
        title="Services Agreement",
        content="4. Term. The Provider shall deliver the reports within thirty days of each quarter's end.",
    )
    factories.DocumentFactory.create(title="Services Agreement", content="The Provider may deliver nothing.")
    brief = (
        'The Services Agreement requires that the Provider "shall deliver the reports within thirty days."\n\n'
        'Under the Services Agreement, the Provider "may deliver the reports whenever it likes."\n\n'
        'Elsewhere the Provider "may deliver nothing."'
    )
    draft = read_draft(data=brief.encode(), name="brief.txt")

    # when it is checked for the matter
    result = check_draft(found=find_in_draft(draft), matter=matter, use_courtlistener=False)

    # then a quotation is checked against the document its paragraph names, and only the matter's own
    right = finding(result, "shall deliver the reports within thirty days.")
    assert right["status"] in ("exact_match", "tolerant_match"), right
    assert "\u201cServices Agreement\u201d" in right["detail"]
    assert finding(result, "may deliver the reports whenever it likes.")["status"] == "unverified"
    unnamed = finding(result, "may deliver nothing.")
    assert unnamed["status"] == "unchecked"
    assert "No citation supports" in unnamed["detail"]


def test_a_pdf_brief_is_checked_on_its_pages(opinions: dict[str, CaselawOpinion]) -> None:
    # Given a PDF brief whose second page quotes Democracy North Carolina with a wrong pin cite
    data = make_pdf(
        [
            ["ARGUMENT", "The pleadings must state a claim."],
            [f'A court holds that "{PLEADINGS}."', f"{DEMOCRACY_CASE}, 858 (M.D.N.C. 2022)."],
        ]
    )
    draft = read_draft(data=data, name="brief.pdf")

    # when it is checked
    result = check_draft(found=find_in_draft(draft), use_courtlistener=False)

    # then the quotation verifies and the pin cite is off its page, both on the draft's page 2
    quoted = finding(result, f"{PLEADINGS}.")
    assert (quoted["status"], quoted["page"]) == ("exact_match", "2")
    cited = finding(result, f"{DEMOCRACY_CASE}, 858 (M.D.N.C. 2022)")
    assert (cited["status"], cited["page"]) == ("pin_mismatch", "2")
    assert result.verdict == "fail"
