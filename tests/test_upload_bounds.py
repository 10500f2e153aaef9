"""Uploads are bounded by the work of reading them, not only by their bytes.

From an outside review: a 4 KB PDF (10,000 pages sharing one content stream of 400 text operators) kept a
worker busy for 44 s, a 3.6 KB one (62,500 empty pages) for 25 s. A PDF's pages are now counted before any is
read (``LQAI_MAX_PDF_PAGES``) and its reading runs in a process of its own, stopped after
``LQAI_MAX_PDF_SECONDS``; a zip (a DOCX) is held to its members, sizes and ratios (``chats.archives``). Each
refusal is a 413 naming the limit, and nothing is stored.
"""

from __future__ import annotations

import io
import os
import random
import time
import zipfile

import pytest
from django.conf import LazySettings
from rest_framework.test import APIClient

from chats import archives
from chats.models import Document, Project
from chats.pdf_text import page_texts
from tests.pdf_fixture import _pdf_file, make_page_tree_bomb, make_pdf
from tests.test_api_projects import matter, owner, upload  # noqa: F401 - fixtures

BOMBS = {
    "10,000 pages sharing 400 text operators": {"fan_out": 100, "text_operators": 400},
    "62,500 empty pages": {"fan_out": 250},
}


@pytest.mark.django_db
@pytest.mark.parametrize("bomb", sorted(BOMBS))
def test_the_reviews_pdf_bombs_are_refused_in_under_two_seconds_naming_the_limit(
    owner: APIClient,  # noqa: F811
    matter: Project,  # noqa: F811
    bomb: str,
) -> None:
    data = make_page_tree_bomb(**BOMBS[bomb])
    assert len(data) < 5_000

    started = time.monotonic()
    response = upload(owner, matter, "bomb.pdf", data, "application/pdf")
    elapsed = time.monotonic() - started

    assert response.status_code == 413, response.content
    assert response.json()["detail"] == "The PDF has more than 2000 pages (LQAI_MAX_PDF_PAGES)."
    assert elapsed < 2, elapsed
    assert not Document.objects.exists()


@pytest.mark.django_db
def test_a_300_page_pdf_still_uploads_with_its_pages(owner: APIClient, matter: Project) -> None:  # noqa: F811
    lines = [f"Paragraph {line} of the record, as the court reads it." for line in range(20)]
    data = make_pdf([[f"Page {page}.", *lines] for page in range(1, 301)])

    response = upload(owner, matter, "record.pdf", data, "application/pdf")

    assert response.status_code == 201, response.content
    document = Document.objects.get()
    assert len(document.pages) == 300
    assert document.content.startswith("Page 1.")
    assert "Page 300." in document.content


@pytest.mark.django_db
def test_a_pdf_over_the_page_limit_is_refused_and_one_at_it_is_read(
    owner: APIClient,  # noqa: F811
    matter: Project,  # noqa: F811
    settings: LazySettings,
) -> None:
    settings.LQAI_MAX_PDF_PAGES = 3

    over = upload(owner, matter, "four.pdf", make_pdf([["Four pages."]] * 4), "application/pdf")
    at = upload(owner, matter, "three.pdf", make_pdf([["Three pages."]] * 3), "application/pdf")

    assert over.status_code == 413
    assert over.json()["detail"] == "The PDF has more than 3 pages (LQAI_MAX_PDF_PAGES)."
    assert at.status_code == 201, at.content
    assert list(Document.objects.values_list("title", flat=True)) == ["Memo"]


@pytest.mark.django_db
def test_a_pdf_that_takes_too_long_to_read_is_stopped_naming_the_limit(
    owner: APIClient,  # noqa: F811
    matter: Project,  # noqa: F811
    settings: LazySettings,
) -> None:
    # Given a 1,600-page PDF (under the page limit) every page of which is costly to read, and one second to read it
    settings.LQAI_MAX_PDF_SECONDS = 1
    data = make_page_tree_bomb(fan_out=40, text_operators=2_000)

    started = time.monotonic()
    response = upload(owner, matter, "slow.pdf", data, "application/pdf")
    elapsed = time.monotonic() - started

    assert response.status_code == 413, response.content
    assert response.json()["detail"] == "The PDF takes longer than 1 seconds to read (LQAI_MAX_PDF_SECONDS)."
    assert elapsed < 3, elapsed
    assert not Document.objects.exists()


def test_a_page_tree_of_empty_nodes_is_not_walked_to_its_end() -> None:
    # Given a page tree 60 levels deep whose every node lists the next twice, and no page at all: 2**60 nodes
    # for a reader that walks it as it says
    depth = 60
    nodes = [f"<< /Type /Pages /Kids [{n + 3} 0 R {n + 3} 0 R] /Count 0 >>".encode() for n in range(depth)]
    nodes.append(b"<< /Type /Pages /Kids [] /Count 0 >>")
    data = _pdf_file([b"<< /Type /Catalog /Pages 2 0 R >>", *nodes])

    started = time.monotonic()
    outcome = page_texts(data, max_pages=2_000, max_chars=1_000)

    assert outcome == {"refused": "pages"}
    assert time.monotonic() - started < 1


# --- A zip (a DOCX) ----------------------------------------------------------------------------------------------


def _zip(members: dict[str, bytes]) -> bytes:
    out = io.BytesIO()
    with zipfile.ZipFile(out, "w", compression=zipfile.ZIP_DEFLATED) as archive:
        for name, data in members.items():
            archive.writestr(name, data)
    return out.getvalue()


def _docx(document: bytes) -> bytes:
    """A DOCX's parts (its content types, its relationships, its document), with ``document`` as its text."""
    return _zip(
        {
            "[Content_Types].xml": b'<?xml version="1.0"?><Types/>',
            "_rels/.rels": b'<?xml version="1.0"?><Relationships/>',
            "word/document.xml": document,
        }
    )


@pytest.mark.django_db
def test_a_docx_bomb_is_refused_before_it_is_inflated(owner: APIClient, matter: Project) -> None:  # noqa: F811
    # Given a DOCX of about 20 KB whose document inflates to 20 MB (a thousand to one)
    bomb = _docx(b"<w:t>" + b" " * (20 * 1024 * 1024) + b"</w:t>")
    assert len(bomb) < 40_000

    started = time.monotonic()
    response = upload(owner, matter, "brief.docx", bomb, "application/octet-stream")

    assert response.status_code == 413, response.content
    assert response.json()["detail"] == (
        "The archive's file 'word/document.xml' is compressed more than 100 to 1 (LQAI_MAX_ZIP_RATIO)."
    )
    assert time.monotonic() - started < 2
    assert not Document.objects.exists()


@pytest.mark.django_db
def test_a_zip_over_its_member_count_or_its_uncompressed_size_is_refused(settings: LazySettings) -> None:
    settings.LQAI_MAX_ZIP_MEMBERS = 10
    settings.LQAI_MAX_ZIP_BYTES = 100_000
    many = _zip({f"word/media/image{n}.png": b"x" for n in range(11)})
    large = _zip({"word/document.xml": os.urandom(60_000), "word/media/image1.png": os.urandom(60_000)})

    with pytest.raises(archives.ZipTooLarge, match=r"more than 10 files \(LQAI_MAX_ZIP_MEMBERS\)"):
        archives.check_zip(io.BytesIO(many))
    with pytest.raises(archives.ZipTooLarge, match=r"larger than 100000 bytes uncompressed \(LQAI_MAX_ZIP_BYTES\)"):
        archives.check_zip(io.BytesIO(large))


@pytest.mark.django_db
def test_an_ordinary_docx_passes_its_bounds_and_is_answered_plainly(
    owner: APIClient,  # noqa: F811
    matter: Project,  # noqa: F811
) -> None:
    words = ["the", "motion", "is", "granted", "in", "part", "and", "denied", "court", "finds", "that", "plaintiff"]
    rng = random.Random(48)
    text = " ".join(rng.choice(words) for _ in range(300_000))
    docx = _docx(f"<w:document><w:t>{text}</w:t></w:document>".encode())
    stream = io.BytesIO(docx)

    archives.check_zip(stream)  # 1.6 MB of prose, compressed as prose is
    response = upload(owner, matter, "brief.docx", docx, "application/octet-stream")

    assert stream.tell() == 0
    assert response.status_code == 400
    assert response.json() == {
        "file": ["A DOCX or other zip file is not read yet: upload a PDF, or the document's text."]
    }
