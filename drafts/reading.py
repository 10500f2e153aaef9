"""A draft file read into :class:`~drafts.text.DraftText`, whatever its format, or refused with one error.

:func:`read_draft` takes the file's bytes and the type it claims (its name's extension, or ``kind``): DOCX
(:mod:`drafts.word`), PDF with a text layer (read as documents are, :func:`chats.documents.text_of_pdf`, one
page per PDF page), plain text or Markdown (no pages). A file that is not what it claims, has no text, is
encrypted, too large or a zip bomb raises :class:`~drafts.errors.UnreadableDraft`, saying why.
"""

from __future__ import annotations

import io
from pathlib import PurePath

from django.conf import settings

from chats.documents import DocumentTooLarge, UnreadableDocument, text_of_pdf
from drafts.errors import UnreadableDraft
from drafts.text import DraftText, paragraph_blocks
from drafts.word import read_docx

KINDS = {".docx": "docx", ".pdf": "pdf", ".txt": "text", ".text": "text", ".md": "markdown", ".markdown": "markdown"}
_NAMES = {"docx": "a Word document (DOCX)", "pdf": "a PDF", "text": "a text file", "markdown": "a Markdown file"}
_ZIP_MAGIC = b"PK\x03\x04"
_PDF_MAGIC = b"%PDF-"
# An OLE compound file: a password-protected Word document (Word encrypts a DOCX into one) or an old .doc.
_OLE_MAGIC = b"\xd0\xcf\x11\xe0\xa1\xb1\x1a\xe1"


def kind_of(name: str) -> str:
    """The draft format a file name claims (``brief.docx`` -> ``docx``); :class:`UnreadableDraft` if none."""
    kind = KINDS.get(PurePath(name).suffix.lower())
    if kind is None:
        raise UnreadableDraft(
            f"{PurePath(name).name or 'The file'}: a draft is read from a Word document (.docx), a PDF (.pdf), "
            "a text file (.txt) or Markdown (.md)."
        )
    return kind


def _format_of(data: bytes) -> str | None:
    if data.startswith(_ZIP_MAGIC):
        return "docx"
    if data.startswith(_PDF_MAGIC):
        return "pdf"
    if data.startswith(_OLE_MAGIC):
        return "ole"
    return None


def read_draft(*, data: bytes, name: str = "", kind: str | None = None) -> DraftText:
    """The text, pages and structure of the draft ``data``, of the format ``kind`` or, without it, the one
    ``name``'s extension claims. Refused (:class:`UnreadableDraft`) when larger than ``LQAI_MAX_UPLOAD_BYTES``,
    when its bytes are not of that format, and as each reader refuses (see the module)."""
    kind = kind or kind_of(name)
    if kind not in _NAMES:
        raise UnreadableDraft(f"Unknown draft format {kind!r}: use docx, pdf, text or markdown.")
    limit = settings.LQAI_MAX_UPLOAD_BYTES
    if len(data) > limit:
        raise UnreadableDraft(f"The draft is larger than {limit // (1024 * 1024)} MB; upload a smaller file.")
    found = _format_of(data)
    if found == "ole" and kind == "docx":
        raise UnreadableDraft(
            "The Word document is password-protected or in the old .doc format: save it as .docx without a password."
        )
    claimed = "text" if kind == "markdown" else kind
    actual = found if found in ("docx", "pdf") else "text"
    if found == "ole" or actual != claimed:
        what = _NAMES.get(actual, "another kind of file") if found != "ole" else "an old Word or Office file"
        raise UnreadableDraft(f"The file is said to be {_NAMES[kind]} but it is {what}.")
    if kind == "docx":
        return read_docx(data)
    if kind == "pdf":
        return _read_pdf(data)
    return _read_text(data, kind=kind)


def _read_pdf(data: bytes) -> DraftText:
    try:
        extracted = text_of_pdf(io.BytesIO(data))
    except (UnreadableDocument, DocumentTooLarge) as exc:
        raise UnreadableDraft(str(exc)) from None
    return DraftText(text=extracted.text, kind="pdf", pages=extracted.pages, blocks=paragraph_blocks(extracted.text))


def _read_text(data: bytes, *, kind: str) -> DraftText:
    try:
        text = data.decode("utf-8-sig")
    except UnicodeDecodeError:
        raise UnreadableDraft(f"The file is said to be {_NAMES[kind]} but it is not UTF-8 text.") from None
    if "\x00" in text:
        raise UnreadableDraft(f"The file is said to be {_NAMES[kind]} but it holds binary data (NUL bytes).")
    text = text.replace("\r\n", "\n").replace("\r", "\n")
    if not text.strip():
        raise UnreadableDraft("The draft has no text.")
    if len(text) > settings.LQAI_MAX_DOCUMENT_CHARS:
        raise UnreadableDraft(f"The draft's text is longer than {settings.LQAI_MAX_DOCUMENT_CHARS} characters.")
    return DraftText(text=text, kind=kind, blocks=paragraph_blocks(text))
