"""The authority library on the publishers' own files (authorities/data/uslm: 1, 9, 35 U.S.C. and 27 C.F.R.):
loading by release, statute citations resolved, statute quotes verified."""

from __future__ import annotations

import io
import json
from pathlib import Path

import pytest
from django.core.exceptions import ValidationError
from django.core.management import CommandError, call_command
from django.db import IntegrityError
from django.test import Client
from django.urls import reverse

from authorities.finder import FULL, ID, NO_SECTION_SIGN, OTHER_LAW, PART, PROSE, RANGE, find_statutes
from authorities.loading import load_uslm
from authorities.models import AuthorityFile, AuthorityRelease, StatuteSection
from authorities.selectors import (
    ALTERED_QUOTE,
    FAILED,
    FOUND_ELSEWHERE,
    NOT_FOUND,
    UNCHECKED,
    VERIFIED,
    check_statutes,
)
from authorities.uslm import UslmError, read_uslm

FIXTURES = Path(__file__).resolve().parent.parent / "authorities" / "data" / "uslm"
TITLES = ("usc01.xml", "usc09.xml", "usc35.xml", "CFR-2018-title27-vol3-uslm.xml")


@pytest.fixture
def library(db: None) -> None:
    for name in TITLES:
        load_uslm(path=FIXTURES / name)


def _only(text: str) -> tuple[str, str, str]:
    """The one citation's status, the one quote's status, and the quote's reason."""
    checks = check_statutes(text=text)
    assert len(checks.citations) == 1, checks.citations
    assert len(checks.quotes) == 1, checks.quotes
    return checks.citations[0].status, checks.quotes[0].status, checks.quotes[0].reason


@pytest.mark.parametrize(
    ("text", "cited"),
    [
        ("1 U.S.C. § 1 (“words importing the plural include the singular”)", "1 U.S.C. § 1 (Online@117-80)"),
        (
            "Under 1 U.S.C. § 8(a), a person “shall include every infant member of the species homo sapiens "
            "who is born alive at any stage of development.”",
            "1 U.S.C. § 8(a) (Online@117-80)",
        ),
        (
            "An arbitration clause “shall be valid, irrevocable, and enforceable, save upon such grounds as exist at "
            "law or in equity for the revocation of any contract.” 9 U.S.C. § 2.",
            "9 U.S.C. § 2 (Online@117-80)",
        ),
        (
            "9 U.S.C. § 10(a) (the court “may make an order vacating the award upon the application of any party to "
            "the arbitration”)",
            "9 U.S.C. § 10(a) (Online@117-80)",
        ),
        (
            "35 U.S.C. § 101 (“Whoever invents or discovers any new and useful process, machine, manufacture, or "
            "composition of matter”)",
            "35 U.S.C. § 101 (Online@117-80)",
        ),
        (
            "35 U.S.C. § 112(a) (“The specification shall contain a written description of the invention”)",
            "35 U.S.C. § 112(a) (Online@117-80)",
        ),
        (
            "27 C.F.R. § 478.11 (“Words in the plural form shall include the singular, and vice versa”)",
            "27 C.F.R. § 478.11 (2017)",
        ),
        (
            "27 C.F.R. § 478.21(a) (“The Director is authorized to prescribe all forms required by this part.”)",
            "27 C.F.R. § 478.21(a) (2017)",
        ),
    ],
)
def test_a_section_and_a_subsection_of_each_title_resolve_and_their_quotes_verify(
    library: None, text: str, cited: str
) -> None:
    checks = check_statutes(text=text)

    assert [(c.status, c.cited) for c in checks.citations] == [(VERIFIED, cited)]
    [quote] = checks.quotes
    assert quote.status == VERIFIED, quote.reason
    assert quote.check.release is not None
    assert f"({quote.check.release.cite_date})" in cited
    # the passage is the section's own text at the offsets recorded
    section = StatuteSection.objects.get(identifier=quote.identifier, release_id=quote.check.release.id)
    assert section.text[quote.start : quote.end] == quote.passage
    assert quote.passage.rstrip(".") == quote.quote.rstrip(".")


def test_a_subsection_quote_verifies_against_the_subsection_and_the_offsets_index_the_section(library: None) -> None:
    [quote] = check_statutes(
        text="35 U.S.C. § 112(b) (“The specification shall conclude with one or more claims”)"
    ).quotes

    section = StatuteSection.objects.get(identifier="/us/usc/t35/s112")
    [b] = [s for s in section.subdivisions if s["path"] == "b"]
    assert quote.status == VERIFIED
    assert quote.start is not None
    assert quote.end is not None
    assert b["start"] <= quote.start < quote.end <= b["end"]
    assert section.text[b["start"] : b["end"]].startswith("(b) Conclusion.—The specification shall conclude")


def test_a_word_changed_in_a_quote_of_9_usc_2_fails(library: None) -> None:
    citation, quote, reason = _only("9 U.S.C. § 2 (“shall be valid, revocable, and enforceable”)")

    assert (citation, quote) == (VERIFIED, FAILED)
    assert reason.startswith("not found in 9 U.S.C. § 2 (Online@117-80)")


def test_a_quote_from_another_section_is_reported_where_it_was_found_never_verified(library: None) -> None:
    text = "9 U.S.C. § 2 (“the court in which such suit is pending, upon being satisfied that the issue involved”)"

    [quote] = check_statutes(text=text).quotes

    assert quote.status == FOUND_ELSEWHERE
    assert quote.found_in == "9 U.S.C. § 3"
    assert quote.reason == "found in 9 U.S.C. § 3, cited as § 2"
    assert quote.identifier == "/us/usc/t9/s3"


def test_a_quote_from_another_subsection_is_reported_as_such(library: None) -> None:
    [quote] = check_statutes(text="35 U.S.C. § 112(b) (“The specification shall contain a written description”)").quotes

    assert quote.status == FOUND_ELSEWHERE
    assert quote.reason == "found in 35 U.S.C. § 112(a), cited as § 112(b)"


def test_a_quote_that_drops_the_limit_right_after_it_is_altered_not_verified(library: None) -> None:
    # the same policy as opinions: "... enforceable" without the "save upon such grounds ..." that limits it
    [quote] = check_statutes(text="9 U.S.C. § 2 (“valid, irrevocable, and enforceable”)").quotes

    assert quote.status == ALTERED_QUOTE
    assert [f["flag"] for f in quote.context_flags] == ["limited_after"]


def test_a_section_the_title_does_not_have_is_not_found(library: None) -> None:
    [check] = check_statutes(text="See 35 U.S.C. § 1011.").citations

    assert check.status == NOT_FOUND
    assert check.reason == (
        "title 35 of the U.S. Code has no § 1011 in release point Online@117-80: the citation may be fabricated"
    )


def test_a_subsection_the_section_does_not_have_is_not_found(library: None) -> None:
    [check] = check_statutes(text="35 U.S.C. § 112(g)").citations

    assert check.status == NOT_FOUND
    assert "35 U.S.C. § 112 has no (g)" in check.reason


def test_a_title_not_loaded_is_unchecked_naming_the_title(library: None) -> None:
    checks = check_statutes(text="42 U.S.C. § 1983 (“Every person who, under color of any statute”)")

    [check] = checks.citations
    assert check.status == UNCHECKED
    assert check.reason == "title 42 of the U.S. Code is not loaded: load OLRC's usc42.xml"
    assert check.release is None
    assert [q.status for q in checks.quotes] == [UNCHECKED]


def test_a_cfr_part_in_a_volume_not_loaded_is_unchecked_not_fabricated(library: None) -> None:
    # 27 C.F.R. part 4 is in volume 1; the library holds volume 3 (parts 400 to end)
    [check] = check_statutes(text="27 C.F.R. § 4.21").citations

    assert check.status == UNCHECKED
    assert "part 4 of title 27 of the CFR is in a volume of the edition revised as of April 1, 2017 not loaded" in (
        check.reason
    )


def test_a_cfr_part_resolves(library: None) -> None:
    [check] = check_statutes(text="27 C.F.R. pt. 478").citations

    assert (check.status, check.cited, check.identifier) == (VERIFIED, "27 C.F.R. pt. 478 (2017)", "/us/cfr/t27/p478")


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("50 U.S.C. 1701", [("usc", 50, "1701", "", NO_SECTION_SIGN)]),
        ("27 CFR 478.11", [("cfr", 27, "478.11", "", NO_SECTION_SIGN)]),
        ("18 U.S.C. § 1028A", [("usc", 18, "1028A", "", FULL)]),
        ("17 C.F.R. § 240.10b-5", [("cfr", 17, "240.10b-5", "", FULL)]),
        ("28 U.S.C. §§ 1331\u20131332", [("usc", 28, "1331", "", RANGE), ("usc", 28, "1332", "", RANGE)]),
        ("28 U.S.C. §§ 1331-1332", [("usc", 28, "1331", "", RANGE), ("usc", 28, "1332", "", RANGE)]),
        (
            "42 U.S.C. §§ 1981, 1982, and 1983",
            [("usc", 42, "1981", "", RANGE), ("usc", 42, "1982", "", RANGE), ("usc", 42, "1983", "", RANGE)],
        ),
        ("42 U.S.C. sections 1981 and 1982", [("usc", 42, "1981", "", RANGE), ("usc", 42, "1982", "", RANGE)]),
        ("section 1983 of title 42", [("usc", 42, "1983", "", PROSE)]),
        ("Section 2 of title 9, United States Code", [("usc", 9, "2", "", PROSE)]),
        ("9 U.S.C. § 2. Id. § 3.", [("usc", 9, "2", "", FULL), ("usc", 9, "3", "", ID)]),
        ("35 U.S.C. § 112(a)", [("usc", 35, "112", "a", FULL)]),
        ("35 U.S.C. §112(b)(1) (2018)", [("usc", 35, "112", "b/1", FULL)]),
        ("9 U.S.C. § 2", [("usc", 9, "2", "", FULL)]),
        ("27 C.F.R. pt. 478", [("cfr", 27, "478", "", PART)]),
        ("27 C.F.R. part 478", [("cfr", 27, "478", "", PART)]),
    ],
)
def test_the_forms_eyecite_misses_are_found(text: str, expected: list[tuple[str, int, str, str, str]]) -> None:
    found = find_statutes(text)

    assert [(f.code, f.title, f.section, f.pin, f.form) for f in found] == expected


def test_id_after_a_case_is_the_case_not_a_statute() -> None:
    found = find_statutes("9 U.S.C. § 2. Smith v. Jones, 570 U.S. 297 (2013). Id. § 3.")

    assert [(f.title, f.section) for f in found] == [(9, "2")]


def test_id_after_a_state_code_is_not_read_as_the_federal_title_before_it() -> None:
    found = find_statutes("9 U.S.C. § 2. N.C. Gen. Stat. § 163-230.2. Id. § 163-231.")

    assert [(f.form, f.title, f.section) for f in found] == [(FULL, 9, "2"), (OTHER_LAW, 0, "163-230.2")]


def test_eyecite_law_citations_of_codes_the_library_does_not_hold_are_kept_as_other_law(db: None) -> None:
    [found] = find_statutes("N.C. Gen. Stat. § 163-230.2")
    [check] = check_statutes(text="N.C. Gen. Stat. § 163-230.2").citations

    assert found.form == OTHER_LAW
    assert (check.status, check.reason) == (UNCHECKED, "N.C. Gen. Stat. is not a code the library holds")


def test_a_second_release_is_kept_beside_the_first_and_a_check_names_which(library: None) -> None:
    load_uslm(path=FIXTURES / "usc09-later-release.xml")

    assert list(AuthorityRelease.objects.filter(code="usc", title=9).values_list("release_point", flat=True)) == [
        "Online@118-1",
        "Online@117-80",
    ]
    # by default the latest release; the fixture's later release has no § 16
    latest = check_statutes(text="9 U.S.C. § 2. 9 U.S.C. § 16.").citations
    assert [(c.status, c.cited) for c in latest] == [
        (VERIFIED, "9 U.S.C. § 2 (Online@118-1)"),
        (NOT_FOUND, "9 U.S.C. § 16 (Online@118-1)"),
    ]
    earlier = check_statutes(text="9 U.S.C. § 16.", release_points={("usc", 9): "Online@117-80"}).citations
    assert [(c.status, c.cited) for c in earlier] == [(VERIFIED, "9 U.S.C. § 16 (Online@117-80)")]


def test_the_latest_release_is_the_one_through_the_latest_law_whatever_the_order_of_loading(db: None) -> None:
    load_uslm(path=FIXTURES / "usc09-later-release.xml")
    load_uslm(path=FIXTURES / "usc09.xml")

    [check] = check_statutes(text="9 U.S.C. § 2").citations

    assert check.cited == "9 U.S.C. § 2 (Online@118-1)"


def test_loading_the_same_file_twice_adds_nothing(library: None) -> None:
    before = (AuthorityRelease.objects.count(), AuthorityFile.objects.count(), StatuteSection.objects.count())

    report = load_uslm(path=FIXTURES / "usc35.xml")

    assert report.skipped
    assert report.added == 0
    assert (AuthorityRelease.objects.count(), AuthorityFile.objects.count(), StatuteSection.objects.count()) == before


def test_a_load_that_stopped_part_way_is_finished_by_loading_again(db: None) -> None:
    # Given a load of 9 U.S.C. that stopped after its first sections (the file not complete)
    first = load_uslm(path=FIXTURES / "usc09.xml")
    StatuteSection.objects.filter(number__in=["10", "16"]).delete()
    AuthorityFile.objects.update(completed_at=None)
    assert check_statutes(text="9 U.S.C. § 2").citations[0].status == UNCHECKED  # a part-loaded title is not used

    # When the same file is loaded again
    again = load_uslm(path=FIXTURES / "usc09.xml")

    # Then only the missing sections are added and the title is used
    assert (first.added, again.added, again.sections) == (6, 2, 6)
    assert StatuteSection.objects.count() == 6
    assert check_statutes(text="9 U.S.C. § 16").citations[0].status == VERIFIED


def test_releases_say_what_they_are(library: None) -> None:
    usc = AuthorityRelease.objects.get(code="usc", title=9)
    cfr = AuthorityRelease.objects.get(code="cfr", title=27)

    assert (usc.release_point, usc.label, usc.official) == ("Online@117-80", "Online@117-80", False)
    assert "positive-law title" in usc.legal_status
    assert (cfr.release_point, cfr.label, cfr.official) == ("2017-04-01", "revised as of April 1, 2017", True)
    assert list(cfr.files.values_list("first_part", "last_part")) == [(400, None)]


def test_sections_keep_their_text_without_source_credits_and_notes_and_their_printed_pages(library: None) -> None:
    two = StatuteSection.objects.get(identifier="/us/usc/t9/s2")
    cfr = StatuteSection.objects.get(identifier="/us/cfr/t27/s478.24")

    assert (two.number, two.heading) == ("2", "Validity, irrevocability, and enforcement of agreements to arbitrate")
    assert two.text.startswith("A written provision in any maritime transaction")
    assert two.text.endswith("for the revocation of any contract.")  # no "(July 30, 1947, ch. 392 ...)" nor notes
    assert two.pages == []
    assert cfr.pages == [{"page": "30", "offset": 0}, {"page": "31", "offset": 114}]
    assert cfr.part == 478


def test_a_section_gpo_gives_another_sections_identifier_is_stored_under_its_printed_number(library: None) -> None:
    numbers = set(StatuteSection.objects.filter(part=478).values_list("number", flat=True))

    assert {"478.113", "478.113a"} <= numbers
    assert StatuteSection.objects.get(number="478.113a").identifier == "/us/cfr/t27/s478.113a"


def test_a_check_is_plain_data_a_row_can_store(library: None) -> None:
    checks = check_statutes(text="35 U.S.C. § 112(a) (“The specification shall contain a written description”)")

    stored = json.loads(json.dumps(checks.quotes[0].record()))

    assert stored["status"] == VERIFIED
    assert stored["check"]["release"]["release_point"] == "Online@117-80"
    assert stored["check"]["citation"]["pin"] == "a"


def test_a_page_break_before_a_sections_first_word_starts_the_section_on_the_new_page() -> None:
    # the shape of GPO's 27 C.F.R. § 478.33, whose page marker comes before its text
    xml = (
        '<cfrDoc xmlns="http://schemas.gpo.gov/xml/uslm"><meta><docNumber>27</docNumber>'
        '<docReleasePoint>2017-04-01</docReleasePoint></meta><main><?page num="35"?>'
        '<section identifier="/us/cfr/t27/s478.33"><num value="478.33">§ 478.33</num><heading>Stolen.</heading>'
        '<content><?page num="36"?><p>No person shall transport any stolen firearm.</p></content></section>'
        "</main></cfrDoc>"
    )

    _, sections = read_uslm(io.BytesIO(xml.encode()))

    [section] = list(sections)
    assert (section.text, section.pages) == (
        "No person shall transport any stolen firearm.",
        [{"page": "36", "offset": 0}],
    )


def test_the_reader_refuses_what_is_not_a_uslm_title(tmp_path: Path) -> None:
    wrong = tmp_path / "wrong.xml"
    wrong.write_text("<html><body/></html>")

    with pytest.raises(UslmError, match=r"the root element is <html>"), wrong.open("rb") as handle:
        read_uslm(handle)


def test_the_command_loads_reports_and_refuses_a_bad_file_writing_nothing(
    db: None, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    call_command("load_authorities", str(FIXTURES / "usc09.xml"), verbosity=0)
    call_command("load_authorities", str(FIXTURES / "usc09.xml"), verbosity=0)
    assert capsys.readouterr().out.splitlines() == [
        "usc09.xml: Online@117-80 - 6 sections read, 6 added",
        "usc09.xml: loaded before, skipped",
    ]

    broken = tmp_path / "usc09.xml"
    broken.write_bytes((FIXTURES / "usc09.xml").read_bytes()[:3000])
    with pytest.raises(CommandError, match=r"usc09.xml: the file is not well-formed XML"):
        call_command("load_authorities", str(broken), verbosity=0)
    with pytest.raises(CommandError, match=r"not a file: .*missing.xml"):
        call_command("load_authorities", str(tmp_path / "missing.xml"), verbosity=0)
    assert StatuteSection.objects.count() == 6


def test_a_dry_run_writes_nothing(db: None) -> None:
    report = load_uslm(path=FIXTURES / "usc35.xml", dry_run=True)

    assert report.sections == 4
    assert (AuthorityRelease.objects.count(), StatuteSection.objects.count()) == (0, 0)


def test_a_release_needs_its_name(db: None) -> None:
    release = AuthorityRelease(
        code="usc", title=9, release_point="", label="", released_on="2021-04-13", sequence="117-00080", official=False,
        legal_status="x",
        publisher="OLRC",
    )  # fmt: skip

    with pytest.raises(ValidationError):
        release.full_clean()
    with pytest.raises(IntegrityError):
        release.save()


def test_the_library_is_read_only_in_the_admin(library: None, admin_client: Client) -> None:
    section = StatuteSection.objects.get(identifier="/us/usc/t9/s2")
    url = reverse("admin:authorities_statutesection_change", args=[section.pk])

    listing = admin_client.get(reverse("admin:authorities_statutesection_changelist"), {"q": "/us/usc/t9/"})
    page = admin_client.get(url)
    post = admin_client.post(url, {"heading": "changed"})

    assert listing.status_code == 200
    assert "/us/usc/t9/s2" in listing.content.decode()
    assert page.status_code == 200
    assert "A written provision in any maritime transaction" in page.content.decode()
    assert post.status_code == 403
    assert admin_client.get(reverse("admin:authorities_authorityrelease_add")).status_code == 403
    section.refresh_from_db()
    assert section.heading == "Validity, irrevocability, and enforcement of agreements to arbitrate"
