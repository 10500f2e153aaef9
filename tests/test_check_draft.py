"""``manage.py check_draft PATH --matter ID [--json OUT]``: a draft read and its findings listed, bad input refused."""

from __future__ import annotations

import io
import json
import uuid
from pathlib import Path

import pytest
from django.core.management import CommandError, call_command

from chats.models import Project
from tests import factories
from tests.docx_fixture import make_docx

FISHER = "Fisher v. University of Texas at Austin, 570 U.S. 297, 310 (2013)"


@pytest.fixture
def matter(db: None) -> Project:
    return factories.ProjectFactory.create()


def _brief(tmp_path: Path) -> Path:
    path = tmp_path / "brief.docx"
    path.write_bytes(
        make_docx([f'"Strict scrutiny is a searching examination." {FISHER}.', "\fId. at 311.", '"Unsupported."'])
    )
    return path


def test_the_findings_are_listed_and_written_as_json(matter: Project, tmp_path: Path) -> None:
    out = io.StringIO()
    err = io.StringIO()

    call_command(
        "check_draft",
        str(_brief(tmp_path)),
        "--matter",
        str(matter.pk),
        "--json",
        str(tmp_path / "f.json"),
        stdout=out,
        stderr=err,
    )

    lines = out.getvalue().splitlines()
    assert any(line.startswith("! p. 2") and "Id. at 311 -> 570 U.S. 297" in line for line in lines)
    assert any("Unsupported. -> no citation" in line for line in lines)
    assert "  case       Fisher v. University of Texas at Austin, 570 U.S. 297: 1, 2 (unchecked)" in lines
    assert lines[-1] == (
        "check_draft: brief.docx: 2 case citations, 0 statute and regulation citations, 2 quotations "
        "(1 without a citation), 1 authorities; 4 to review; verdict review"
    )
    record = json.loads((tmp_path / "f.json").read_text(encoding="utf-8"))
    assert (record["matter"], record["verdict"]) == (str(matter.pk), "review")
    first = record["findings"][0]
    # no opinion is stored and CourtListener is off: nothing could check the case, so neither its quote
    assert first["detail"].startswith("Not checked: the case cited (570 U.S. 297) could not be resolved")
    assert {k: first[k] for k in ("kind", "text", "page", "status", "needs_review", "authority")} == {
        "kind": "quote",
        "text": "Strict scrutiny is a searching examination.",
        "page": "1",
        "status": "unchecked",
        "needs_review": True,
        "authority": 0,
    }
    assert record["authorities"] == [
        {
            "kind": "case",
            "cite": "570 U.S. 297",
            "name": "Fisher v. University of Texas at Austin",
            "pages": ["1", "2"],
            "status": "unchecked",
        }
    ]


def test_bad_input_is_a_command_error_and_writes_nothing(matter: Project, tmp_path: Path) -> None:
    pdf_named_docx = tmp_path / "brief.docx"
    pdf_named_docx.write_bytes(b"%PDF-1.4\n")
    out = tmp_path / "f.json"

    with pytest.raises(
        CommandError, match=r"brief\.docx: The file is said to be a Word document \(DOCX\) but it is a PDF"
    ):
        call_command("check_draft", str(pdf_named_docx), "--matter", str(matter.pk), "--json", str(out))
    with pytest.raises(CommandError, match="No matter"):
        call_command("check_draft", str(_brief(tmp_path)), "--matter", str(uuid.uuid4()))
    with pytest.raises(CommandError, match="cannot be read"):
        call_command("check_draft", str(tmp_path / "missing.docx"), "--matter", str(matter.pk))
    with pytest.raises(CommandError, match="does not exist"):
        call_command(
            "check_draft", str(_brief(tmp_path)), "--matter", str(matter.pk), "--json", str(tmp_path / "no" / "f.json")
        )
    assert not out.exists()
