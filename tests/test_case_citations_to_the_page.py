"""Case citations checked to the page (``chats.case_citations``): pin cites against the opinion's pages, a short
form's volume against its antecedent's, Bluebook T6/T10 names, generic-only names, year and court parentheticals,
docket numbers and the answer-size bound. Real opinions from ``chats/data/opinions``."""

from __future__ import annotations

import datetime
from pathlib import Path

import pytest

from chats.case_citations import CheckedCitation, Kind, Status, check_case_citations
from chats.case_citations.extraction import extract_citations
from chats.models import CaselawOpinion
from tests import factories

CORPUS = Path(__file__).resolve().parent.parent / "chats" / "data" / "opinions"

pytestmark = pytest.mark.usefixtures("no_courtlistener")


@pytest.fixture
def no_courtlistener(settings: pytest.FixtureRequest) -> None:
    settings.COURTLISTENER_API_TOKEN = ""  # type: ignore[attr-defined]


@pytest.fixture
def sjs(db: None) -> CaselawOpinion:
    """In re S.J.S., 134 S.W.3d 673 (Mo. Ct. App. 2004): its text star-paged *675 to *678, as HTML gives it."""
    return factories.CaselawOpinionFactory.create(
        provider="local",
        opinion_id="sjs-2004",
        case_name="In re S.J.S.",
        citation="134 S.W.3d 673",
        court="Missouri Court of Appeals",
        date_filed=datetime.date(2004, 3, 23),
        text=(CORPUS / "in-re-sjs-134-sw3d-673-mo-ct-app-2004.txt").read_text(encoding="utf-8"),
    )


@pytest.fixture
def fisher(db: None) -> CaselawOpinion:
    """The Fisher slip opinion: no star paging, so its last page in the U.S. Reports is unknown."""
    return factories.CaselawOpinionFactory.create(
        provider="local",
        opinion_id="fisher-2013",
        case_name="Fisher v. University of Texas at Austin",
        citation="570 U.S. 297",
        court="Supreme Court of the United States",
        date_filed=datetime.date(2013, 6, 24),
        text=(CORPUS / "fisher-v-university-of-texas-2013-slip.txt").read_text(encoding="utf-8"),
    )


def only(answer: str) -> CheckedCitation:
    [checked] = [c for c in check_case_citations(answer) if c.kind is not Kind.ID]
    return checked


# --- pin cites ------------------------------------------------------------------------------------------------


@pytest.mark.parametrize("pin", ["676", "673", "677-78", "678"])
def test_a_pin_within_the_opinions_pages_is_unchecked_until_a_quoted_passage_shows_its_page(
    sjs: CaselawOpinion, pin: str
) -> None:
    # The case verifies; its pin is only known to lie within the case (tests/test_pin_cites.py checks it against
    # the page of the passage quoted with it).
    checked = only(f"In re S.J.S., 134 S.W.3d 673, {pin} (Mo. Ct. App. 2004).")
    assert (checked.status, checked.pin, checked.pin_status) == (Status.VERIFIED, pin, "unchecked")
    assert "pin cite within pages 673-678, with no passage quoted with it" in checked.detail


@pytest.mark.parametrize(
    ("pin", "why"),
    [
        ("4012", "past the opinion's last page, 678"),
        ("679", "past the opinion's last page, 678"),
        ("612", "before the opinion's first page, 673"),
    ],
)
def test_a_pin_outside_the_opinion_is_a_pin_mismatch(sjs: CaselawOpinion, pin: str, why: str) -> None:
    checked = only(f"In re S.J.S., 134 S.W.3d 673, {pin} (Mo. Ct. App. 2004).")
    assert (checked.status, checked.pin_status) == (Status.PIN_MISMATCH, "outside")
    assert checked.opinion == sjs  # the case itself exists: it is named
    assert why in checked.detail


def test_a_pin_is_unchecked_when_the_last_page_is_unknown_but_the_case_verifies(fisher: CaselawOpinion) -> None:
    checked = only("Fisher v. University of Texas at Austin, 570 U.S. 297, 311\u201312 (2013).")
    assert (checked.status, checked.pin, checked.pin_status) == (Status.VERIFIED, "311-12", "unchecked")
    assert "the opinion's last page is unknown" in checked.detail
    # ... but a pin before the first page is wrong whatever the last page is.
    before = only("Fisher v. University of Texas at Austin, 570 U.S. 297, 200 (2013).")
    assert (before.status, before.pin_status) == (Status.PIN_MISMATCH, "outside")


def test_id_and_short_forms_are_checked_on_their_own_pins(sjs: CaselawOpinion) -> None:
    answer = "In re S.J.S., 134 S.W.3d 673, 676 (Mo. Ct. App. 2004). Id. at 9000. Later: S.J.S., 134 S.W.3d at 677."
    full, id_, short = check_case_citations(answer)
    assert (full.status, id_.status, short.status) == (Status.VERIFIED, Status.PIN_MISMATCH, Status.VERIFIED)
    assert (id_.pin_status, short.pin_status) == ("outside", "unchecked")


# --- short forms ------------------------------------------------------------------------------------------------


def test_a_short_form_that_writes_another_volume_is_not_linked_to_the_case_it_names(sjs: CaselawOpinion) -> None:
    full, short = check_case_citations("In re S.J.S., 134 S.W.3d 673 (Mo. Ct. App. 2004). S.J.S., 135 S.W.3d at 676.")
    assert full.status is Status.VERIFIED
    assert (short.status, short.antecedent, short.opinion) == (Status.UNCHECKED, None, None)
    assert "writes 135 S.W.3d, but the case it names" in short.detail
    assert "is at 134 S.W.3d 673" in short.detail


# --- names ------------------------------------------------------------------------------------------------------


def test_bluebook_t6_abbreviations_from_the_data_file_verify_a_correctly_abbreviated_name(db: None) -> None:
    factories.CaselawOpinionFactory.create(
        provider="local",
        opinion_id="ideal-1997",
        case_name="Ideal Electronic Security Co. v. International Fidelity Insurance Co.",
        citation="129 F.3d 143",
        text=(CORPUS / "ideal-electronic-v-international-fidelity-dc-cir-1997.txt").read_text(encoding="utf-8"),
    )
    # `Fid.` (Fidelity) is T6; "International" and "Insurance" are generic, so only it tells the side apart.
    checked = only("Ideal Elec. Sec. Co. v. Int'l Fid. Ins. Co., 129 F.3d 143 (D.C. Cir. 1997).")
    assert checked.status is Status.VERIFIED


def test_a_name_of_generic_words_only_never_suffices(db: None) -> None:
    factories.CaselawOpinionFactory.create(
        provider="local",
        opinion_id="county-commission",
        case_name="Jones v. County Commission of Dade County",
        citation="500 F.3d 100",
        text="Opinion of the court.",
    )
    checked = only("See County Comm'n, 500 F.3d 100 (11th Cir. 2007).")
    assert checked.status is Status.NAME_MISMATCH
    assert "only generic words" in checked.detail
    assert only("Jones v. County Comm'n, 500 F.3d 100 (11th Cir. 2007).").status is Status.VERIFIED


# --- parentheticals ---------------------------------------------------------------------------------------------


def test_a_wrong_year_in_the_parenthetical_is_reported(sjs: CaselawOpinion) -> None:
    checked = only("In re S.J.S., 134 S.W.3d 673 (Mo. Ct. App. 2001).")
    assert checked.status is Status.VERIFIED  # the volume and page identify the case; the year misleads less
    assert checked.parenthetical_mismatch
    assert "the parenthetical says 2001, but the opinion was filed in 2004" in checked.detail
    assert not only("In re S.J.S., 134 S.W.3d 673 (Mo. Ct. App. 2004).").parenthetical_mismatch


def test_a_wrong_court_in_the_parenthetical_is_reported(fisher: CaselawOpinion) -> None:
    checked = only("Fisher v. University of Texas at Austin, 570 U.S. 297 (5th Cir. 2013).")
    assert checked.parenthetical_mismatch
    assert "names another court (ca5)" in checked.detail


# --- what cannot be looked up -----------------------------------------------------------------------------------


def test_a_docket_number_citation_is_listed_unchecked_with_why(db: None) -> None:
    answer = "See Hogarth v. Bell, No. 5:24-CV-481-FL (E.D.N.C. Mar. 28, 2025). Id. at 3."
    docket, id_ = check_case_citations(answer)
    assert (docket.kind, docket.status, docket.case_name) == (Kind.OTHER, Status.UNCHECKED, "Hogarth v. Bell")
    assert answer[docket.start : docket.end] == "No. 5:24-CV-481-FL (E.D.N.C. Mar. 28, 2025)"
    assert "docket-number citation" in docket.detail
    assert (id_.status, id_.antecedent) == (Status.UNCHECKED, None)


def test_citations_past_the_bound_are_one_unchecked_entry_that_says_so(sjs: CaselawOpinion) -> None:
    cite = "In re S.J.S., 134 S.W.3d 673, 676 (Mo. Ct. App. 2004).\n\n"
    answer = cite * 10
    checked = check_case_citations(answer, max_chars=len(cite) * 3 + 5)
    assert [c.status for c in checked[:3]] == [Status.VERIFIED] * 3
    rest = checked[-1]
    assert len(checked) == 4
    assert (rest.kind, rest.status, rest.end) == (Kind.OTHER, Status.UNCHECKED, len(answer))
    assert rest.start == len(cite) * 3 - 2  # cut at the paragraph break, never inside a citation
    assert "not checked for case citations" in rest.detail
    assert "LQAI_CASE_CITATION_MAX_CHARS" in rest.detail


def test_extraction_reads_the_pin_and_parenthetical_eyecite_misreads() -> None:
    # eyecite reads no pin from an en-dash range and then takes a later parenthetical's year.
    [fisher, docket] = extract_citations(
        "Fisher v. Univ. of Tex., 570 U.S. 297, 311\u201312 (2013). Hogarth v. Bell, No. 5:24-CV-481 (E.D.N.C. 2025)."
    )
    assert (fisher.pin, fisher.year) == ("311-12", "2013")
    assert docket.unresolvable
