"""PDFs made by the tests: real PDF 1.4 files with a text layer, written here byte by byte (objects, a
cross-reference table, a trailer), so that uploads, extraction and page numbers are tested on the real format
with no binary fixture in the repository."""

from __future__ import annotations

from collections.abc import Sequence


def _escape(line: str) -> str:
    return line.replace("\\", "\\\\").replace("(", "\\(").replace(")", "\\)")


def make_pdf(pages: Sequence[Sequence[str]]) -> bytes:
    """A PDF of ``len(pages)`` letter pages; page *n* shows the lines ``pages[n]`` (Latin-1 text, Helvetica), top
    to bottom. A page with no lines has no text at all, as a scanned page has none."""
    count = len(pages)
    # 1: catalog, 2: page tree, 3: font, then for each page its page object and its content stream.
    kids = " ".join(f"{4 + 2 * n} 0 R" for n in range(count))
    objects = [
        b"<< /Type /Catalog /Pages 2 0 R >>",
        f"<< /Type /Pages /Kids [{kids}] /Count {count} >>".encode(),
        b"<< /Type /Font /Subtype /Type1 /BaseFont /Helvetica /Encoding /WinAnsiEncoding >>",
    ]
    for n, lines in enumerate(pages):
        commands = ["BT", "/F1 11 Tf", "14 TL", "72 720 Td", *(f"({_escape(line)}) Tj T*" for line in lines), "ET"]
        stream = "\n".join(commands).encode("latin-1")
        objects.append(
            f"<< /Type /Page /Parent 2 0 R /MediaBox [0 0 612 792] /Contents {5 + 2 * n} 0 R "
            "/Resources << /Font << /F1 3 0 R >> >> >>".encode()
        )
        objects.append(b"<< /Length %d >>\nstream\n" % len(stream) + stream + b"\nendstream")
    return _pdf_file(objects)


def make_page_tree_bomb(*, fan_out: int, text_operators: int = 0) -> bytes:
    """A tiny PDF of ``fan_out ** 2`` pages: a two-level page tree whose every node lists one child ``fan_out``
    times, down to one page object that every page shares, with (if ``text_operators``) one content stream of
    that many text-showing operators. A reader that takes the page tree as it says walks every page: the
    review's two bombs are ``fan_out=100, text_operators=400`` (10,000 pages, about 4 KB) and ``fan_out=250``
    (62,500 empty pages, about 3.6 KB)."""
    contents = " /Contents 5 0 R" if text_operators else ""
    stream = ("BT /F1 1 Tf " + "(a) Tj " * text_operators + "ET").encode()
    objects = [
        b"<< /Type /Catalog /Pages 2 0 R >>",
        f"<< /Type /Pages /Kids [{' '.join(['3 0 R'] * fan_out)}] /Count {fan_out**2} >>".encode(),
        f"<< /Type /Pages /Kids [{' '.join(['4 0 R'] * fan_out)}] /Count {fan_out} >>".encode(),
        f"<< /Type /Page /MediaBox [0 0 612 792]{contents} /Resources << /Font << /F1 6 0 R >> >> >>".encode(),
        b"<< /Length %d >>\nstream\n" % len(stream) + stream + b"\nendstream",
        b"<< /Type /Font /Subtype /Type1 /BaseFont /Helvetica >>",
    ]
    return _pdf_file(objects)


def _pdf_file(objects: Sequence[bytes]) -> bytes:
    """A PDF 1.4 file of ``objects`` (numbered from 1; the first is the catalog), with its cross-reference table."""
    out = bytearray(b"%PDF-1.4\n%\xe2\xe3\xcf\xd3\n")
    offsets = []
    for number, body in enumerate(objects, start=1):
        offsets.append(len(out))
        out += b"%d 0 obj\n" % number + body + b"\nendobj\n"
    xref = len(out)
    out += b"xref\n0 %d\n0000000000 65535 f \n" % (len(objects) + 1)
    out += b"".join(b"%010d 00000 n \n" % offset for offset in offsets)
    out += b"trailer\n<< /Size %d /Root 1 0 R >>\nstartxref\n%d\n%%%%EOF\n" % (len(objects) + 1, xref)
    return bytes(out)
