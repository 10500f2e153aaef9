"""Reading a draft and finding what it cites and quotes: real DOCX, PDF and text drafts made here, citing the
project's own opinions (chats/data/opinions) and statutes (authorities/data/uslm)."""

from __future__ import annotations

import io
import zipfile
from pathlib import Path

import pytest
from django.conf import LazySettings
from pypdf import PdfReader, PdfWriter

from drafts.errors import UnreadableDraft
from drafts.finding import DraftFindings, Finding, find_in_draft
from drafts.reading import read_draft
from tests.docx_fixture import Para, make_docx
from tests.pdf_fixture import make_pdf

FISHER = "Fisher v. University of Texas at Austin, 570 U.S. 297, 310 (2013)"
PATEL = "City of Los Angeles v. Patel, 576 U.S. 409, 415 (2015)"
# Fisher and Patel (their slip opinions in chats/data/opinions, Patel with an omission and an alteration), and
# 9 U.S.C. § 2 and 35 U.S.C. § 112(a) as their publishers print them (authorities/data/uslm).
SCRUTINY = "Strict scrutiny is a searching examination"
ARBITRATION = "shall be valid, irrevocable, and enforceable"
PER_SE = "per se unreasonable under the Fourth Amendment\u2014subject only to a few . . . exceptions"
FACIAL = "[f]acial challenges under the Fourth Amendment are not categorically barred"
SPECIFICATION = "The specification shall contain a written description of the invention"


def _found(data: bytes, name: str) -> DraftFindings:
    return find_in_draft(read_draft(data=data, name=name))


def _one(result: DraftFindings, kind: str, text: str) -> Finding:
    hits = [f for f in result.findings if f.kind == kind and f.text == text]
    assert len(hits) == 1, (kind, text, [(f.kind, f.text) for f in result.findings])
    return hits[0]


def _authority(result: DraftFindings, finding: Finding) -> str:
    assert finding.authority is not None, finding
    return result.authorities[finding.authority].cite


def _toa(result: DraftFindings) -> dict[str, list[str]]:
    return {entry.cite: entry.pages for entry in result.authorities}


def _docx_brief() -> bytes:
    return make_docx(
        [
            Para("ARGUMENT"),
            f'The Court requires more than good faith. "{SCRUTINY}." {FISHER}. Hotel registries are no different.[^1]',
            # page 2: Word recorded a page break here
            "\fThe University must still prove it. Id. at 311. The same holds for any plan. Fisher, 570 U.S. at 312.",
            Para(f"{SCRUTINY}, and it is the government that bears the burden to prove", style="Quote"),
            "Fisher, 570 U.S. at 311-12.",
            Para(f"A written provision in any contract {ARBITRATION}.", style="BlockCitation"),
            "9 U.S.C. § 2.",
            # page 3
            f'\fThe statute says what a patent must hold: "{SPECIFICATION}." 35 U.S.C. § 112(a). Id.',
            'Counsel also wrote that "the answer is plain from the record."',
            f'Searches of hotel registries are "{PER_SE}."[^2]',
        ],
        {
            1: [f'See {PATEL} (holding that "{FACIAL}").'],
            2: ["Patel, 576 U.S. at 419."],
        },
    )


def test_a_docx_brief_every_kind_found_paired_and_paged() -> None:
    draft = read_draft(data=_docx_brief(), name="brief.docx")
    text, result = draft.text, find_in_draft(draft)

    # Every finding's text is the draft's, at its offsets
    assert all(text[f.start : f.end] == f.text for f in result.findings)
    # A full citation, with its pin cite and parenthetical, on page 1
    fisher = _one(result, "case_citation", FISHER)
    assert (fisher.form, fisher.pin, fisher.parentheticals, fisher.page) == ("full", "310", ("2013",), "1")
    # The inline quotation is tied to the citation after it
    scrutiny = _one(result, "quote", f"{SCRUTINY}.")
    assert (scrutiny.form, scrutiny.page, scrutiny.cited_by) == ("inline", "1", result.findings.index(fisher))
    # The footnote's citation is on the page of its mark, its parenthetical's quotation tied to it
    patel = _one(result, "case_citation", f'{PATEL} (holding that "{FACIAL}")')
    assert (patel.footnote, patel.page, _authority(result, patel)) == ("1", "1", "576 U.S. 409")
    assert _authority(result, _one(result, "quote", FACIAL)) == "576 U.S. 409"
    # id. and a short form on page 2 are Fisher's
    id_cite = _one(result, "case_citation", "Id. at 311")
    short = _one(result, "case_citation", "Fisher, 570 U.S. at 312")
    assert (id_cite.form, id_cite.page, _authority(result, id_cite)) == ("id", "2", "570 U.S. 297")
    assert (short.form, short.pin, short.page, _authority(result, short)) == ("short", "312", "2", "570 U.S. 297")
    # A block quote by style, and one by its style's indentation, each tied to the citation after it
    by_style = _one(result, "quote", f"{SCRUTINY}, and it is the government that bears the burden to prove")
    assert (by_style.form, by_style.page, _authority(result, by_style)) == ("block", "2", "570 U.S. 297")
    by_indent = _one(result, "quote", f"A written provision in any contract {ARBITRATION}.")
    assert (by_indent.form, _authority(result, by_indent)) == ("block", "9 U.S.C. § 2")
    # A statute quoted on page 3, and an id. after the statute refers to it
    assert _authority(result, _one(result, "quote", f"{SPECIFICATION}.")) == "35 U.S.C. § 112"
    assert _one(result, "statute_citation", "35 U.S.C. § 112(a)").pin == "a"
    assert _authority(result, _one(result, "case_citation", "Id.")) == "35 U.S.C. § 112"
    # A quotation with no citation is a finding of its own
    uncited = _one(result, "quote", "the answer is plain from the record.")
    assert (uncited.authority, uncited.cited_by, uncited.page) == (None, None, "3")
    # A quotation whose citation is in the footnote its sentence's mark calls
    in_note = _one(result, "quote", f"{PER_SE}.")
    assert result.findings[in_note.cited_by or 0].text == "Patel, 576 U.S. at 419"
    assert result.findings[in_note.cited_by or 0].footnote == "2"
    # The table of authorities: every page citing each
    assert _toa(result) == {
        "570 U.S. 297": ["1", "2"],
        "576 U.S. 409": ["1", "3"],
        "9 U.S.C. § 2": ["2"],
        "35 U.S.C. § 112": ["3"],
    }
    assert [(e.kind, e.name) for e in result.authorities[:2]] == [
        ("case", "Fisher v. University of Texas at Austin"),
        ("case", "City of Los Angeles v. Patel"),
    ]


def test_a_docx_word_never_laid_out_has_no_pages_rather_than_guessed_ones() -> None:
    # Given a DOCX whose only page break is a hard one (no layout recorded by Word)
    data = make_docx([f"{FISHER}.", "Id. at 311."]).replace(b"<w:r><w:lastRenderedPageBreak/></w:r>", b"")
    result = _found(data, "brief.docx")

    assert [f.page for f in result.findings] == [None, None]
    assert _toa(result) == {"570 U.S. 297": []}


def test_a_pdf_brief_keeps_its_pages() -> None:
    pdf = make_pdf(
        [
            [
                "ARGUMENT",
                'The Court held that "strict scrutiny is a searching',
                'examination." ' + FISHER[:40],
                FISHER[41:] + ".",
            ],
            [
                'An agreement to arbitrate is "valid, irrevocable, and',
                'enforceable." 9 U.S.C. 2. See Fisher, 570 U.S. at 311.',
            ],
        ]
    )
    result = _found(pdf, "brief.pdf")

    quote = _one(result, "quote", "strict scrutiny is a searching\nexamination.")
    assert (quote.page, _authority(result, quote)) == ("1", "570 U.S. 297")
    statute_quote = _one(result, "quote", "valid, irrevocable, and\nenforceable.")
    assert (statute_quote.page, _authority(result, statute_quote)) == ("2", "9 U.S.C. § 2")
    assert _one(result, "statute_citation", "9 U.S.C. 2").page == "2"
    assert _toa(result) == {"570 U.S. 297": ["1", "2"], "9 U.S.C. § 2": ["2"]}


# The source's own quotation marks, nested in a quotation.
OPEN, CLOSE = "\u2018", "\u2019"
TEXT_BRIEF = f"""Petitioners misread the standard. "{SCRUTINY}." {FISHER}. The University must show more. Id. at 311.
See also {PATEL}.

The Court was explicit. “Strict scrutiny does not permit a court to {OPEN}accept a school{CLOSE}s
assertion{CLOSE} at face value.” Fisher, 570 U.S. at 311. That much is settled.

Patel, supra, at 416, is not to the contrary. A regulation defines the terms (the “Regulation”), see 27 C.F.R. § 478.11.

“Nothing supports this sentence,” the brief concludes. It is repeated here. See 27 C.F.R. § 478.11."""


def test_a_text_brief_short_forms_and_citation_sentences() -> None:
    result = _found(TEXT_BRIEF.encode(), "brief.md")

    assert all(f.page is None for f in result.findings)
    assert _authority(result, _one(result, "case_citation", "Id. at 311")) == "570 U.S. 297"
    supra = _one(result, "case_citation", "Patel, supra, at 416")
    assert (supra.form, supra.pin, _authority(result, supra)) == ("supra", "416", "576 U.S. 409")
    # A curly quotation with the source's own single quotes inside, whose citation comes in the next sentence
    nested = _one(
        result,
        "quote",
        f"Strict scrutiny does not permit a court to {OPEN}accept a school{CLOSE}s\nassertion{CLOSE} at face value.",
    )
    assert _authority(result, nested) == "570 U.S. 297"
    assert result.findings[nested.cited_by or 0].text == "Fisher, 570 U.S. at 311"
    # A defined term is not a quotation; a quotation whose nearest citation is two sentences away has none
    assert not [f for f in result.findings if f.kind == "quote" and f.text == "Regulation"]
    uncited = _one(result, "quote", "Nothing supports this sentence,")
    assert uncited.authority is None
    assert _toa(result)["27 C.F.R. § 478.11"] == []  # a text draft has no pages


def test_block_quotes_are_indented_beyond_the_body_text() -> None:
    # Given a DOCX whose body is all indented half an inch, and one paragraph indented an inch more
    docx = make_docx(
        [
            Para(f"The Court was explicit. {FISHER}.", indent_twips=720),
            Para(f"{SCRUTINY}, and it is not satisfied by good faith.", indent_twips=2160),
            Para("Fisher, 570 U.S. at 310.", indent_twips=720),
            Para("The University did not meet it.", indent_twips=720),
        ]
    )
    # And a text draft whose paragraphs start with a tab, with a block quote indented further and a Markdown one
    text = (
        f"\tThe Court was explicit. {FISHER}.\n\n\t\t{SCRUTINY}, and it is not satisfied by good faith.\n\n"
        f"\tFisher, 570 U.S. at 310.\n\n> {ARBITRATION}.\n\n\t9 U.S.C. § 2.\n\n\tThe University did not meet it."
    )

    for result in (_found(docx, "brief.docx"), _found(text.encode(), "brief.md")):
        quotes = [(f.form, f.text) for f in result.findings if f.kind == "quote"]
        assert quotes[0] == ("block", f"{SCRUTINY}, and it is not satisfied by good faith.")
        assert _authority(result, result.findings[result.findings.index(_one(result, "quote", quotes[0][1]))]) == (
            "570 U.S. 297"
        )
    markdown = _one(_found(text.encode(), "brief.md"), "quote", f"{ARBITRATION}.")
    assert (markdown.form, _authority(_found(text.encode(), "brief.md"), markdown)) == ("block", "9 U.S.C. § 2")


def test_id_refers_to_the_citation_right_before_it_even_one_eyecite_does_not_read() -> None:
    # Given a statute cited without a section sign (the authority library's finder reads it, eyecite does not)
    result = _found(
        f"{FISHER}. The President may act. 50 U.S.C. 1701. Id. See Fisher, 570 U.S. at 311.".encode(), "b.txt"
    )

    assert _authority(result, _one(result, "case_citation", "Id.")) == "50 U.S.C. § 1701"
    assert _authority(result, _one(result, "case_citation", "Fisher, 570 U.S. at 311")) == "570 U.S. 297"


def test_a_quotation_tied_to_the_citation_before_it_in_its_sentence() -> None:
    result = _found(f'Under 9 U.S.C. § 2, an arbitration clause "{ARBITRATION}."'.encode(), "brief.txt")

    assert _authority(result, _one(result, "quote", f"{ARBITRATION}.")) == "9 U.S.C. § 2"


def _zip(members: dict[str, bytes], *, compression: int = zipfile.ZIP_DEFLATED) -> bytes:
    out = io.BytesIO()
    with zipfile.ZipFile(out, "w", compression) as archive:
        for name, data in members.items():
            archive.writestr(name, data)
    return out.getvalue()


def _encrypted_pdf() -> bytes:
    writer = PdfWriter(clone_from=PdfReader(io.BytesIO(make_pdf([[FISHER]]))))
    writer.encrypt("secret")
    out = io.BytesIO()
    writer.write(out)
    return out.getvalue()


@pytest.mark.parametrize(
    ("name", "data", "says"),
    [
        ("brief.docx", make_pdf([[FISHER]]), "said to be a Word document (DOCX) but it is a PDF"),
        ("brief.pdf", FISHER.encode(), "said to be a PDF but it is a text file"),
        ("brief.txt", make_docx([FISHER]), "said to be a text file but it is a Word document"),
        ("brief.md", make_pdf([[FISHER]]), "said to be a Markdown file but it is a PDF"),
        ("brief.rtf", b"{\\rtf1 x}", "a draft is read from a Word document (.docx), a PDF"),
        ("brief.pdf", make_pdf([[]]), "no extractable text"),
        ("brief.pdf", _encrypted_pdf(), "The PDF is encrypted"),
        (
            "brief.docx",
            b"\xd0\xcf\x11\xe0\xa1\xb1\x1a\xe1" + bytes(600),
            "password-protected or in the old .doc format",
        ),
        ("brief.docx", b"PK\x03\x04" + bytes(100), "its archive is damaged"),
        ("brief.docx", _zip({"hello.txt": b"not a document"}), "not a Word document (DOCX) that can be read"),
        ("brief.docx", make_docx([" "]), "The Word document has no text"),
        ("brief.txt", "Fisher".encode("utf-16"), "not UTF-8 text"),
        ("brief.txt", b"Fisher\x00v. Texas", "binary data"),
        ("brief.txt", b"  \n\n ", "The draft has no text"),
        ("brief.docx", _zip({"word/document.xml": bytes(5 * 1024 * 1024)}), "more than 100 to 1 (LQAI_MAX_ZIP_RATIO)"),
        ("brief.docx", _zip({f"p{n}.xml": b"" for n in range(1001)}), "more than 1000 files (LQAI_MAX_ZIP_MEMBERS)"),
    ],
)
def test_bad_files_are_refused_with_the_reason(name: str, data: bytes, says: str) -> None:
    with pytest.raises(UnreadableDraft) as refused:
        read_draft(data=data, name=name)

    assert says in str(refused.value)


def test_an_oversized_draft_is_refused(settings: LazySettings) -> None:
    settings.LQAI_MAX_UPLOAD_BYTES = 1024 * 1024

    with pytest.raises(UnreadableDraft, match="larger than 1 MB"):
        read_draft(data=b"x" * (1024 * 1024 + 1), name="brief.txt")


def test_a_docx_whose_parts_unpack_too_large_is_refused(settings: LazySettings) -> None:
    # Given a bound of 2 MB inflated, and a zip declaring two stored parts of 1.5 MB
    settings.LQAI_MAX_ZIP_BYTES = 2 * 1024 * 1024
    data = _zip({"a.xml": b"a" * 1_500_000, "b.xml": b"b" * 1_500_000}, compression=zipfile.ZIP_STORED)

    with pytest.raises(UnreadableDraft, match=r"possible zip bomb: .*LQAI_MAX_ZIP_BYTES"):
        read_draft(data=data, name="brief.docx")


def test_a_draft_text_too_long_is_refused(settings: LazySettings) -> None:
    settings.LQAI_MAX_DOCUMENT_CHARS = 100

    with pytest.raises(UnreadableDraft, match="longer than 100 characters"):
        read_draft(data=make_docx([FISHER, FISHER]), name="brief.docx")


def test_the_docs_state_the_zip_bounds_in_force() -> None:
    docs = (Path(__file__).resolve().parent.parent / "docs" / "drafts.md").read_text(encoding="utf-8")

    for setting in ("LQAI_MAX_ZIP_MEMBERS", "LQAI_MAX_ZIP_BYTES", "LQAI_MAX_ZIP_RATIO"):
        assert setting in docs
