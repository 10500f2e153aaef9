"""Knowledge-base documents: the services that store them, and the text of an uploaded file.

:func:`add_document` stores a document in a matter and :func:`save_document` saves one built or changed
elsewhere (the admin, the demo); both make its passages (``chats.passages``) in the same transaction, so that
every document the application stores is searchable at once. :func:`text_of_upload` turns an uploaded file
into the document's text and pages (``chats.pages``); a file it cannot read raises
:class:`UnreadableDocument` with a sentence for the client.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass, field
from functools import partial
from typing import IO

from django.conf import settings
from django.db import transaction
from pypdf import PdfReader

from chats.models import Document, Project
from chats.pages import PAGE_SEPARATOR, Pages, join_pages
from chats.passages import count_terms, make_passages

logger = logging.getLogger(__name__)

PDF_MAGIC = b"%PDF-"


class UnreadableDocument(ValueError):
    """The upload is not a text or PDF file the server can read; the message says why, for the client."""


class DocumentTooLarge(ValueError):
    """The document's text is longer than ``LQAI_MAX_DOCUMENT_CHARS``."""


@dataclass(frozen=True)
class ExtractedText:
    text: str
    pages: Pages = field(default_factory=list)
    kind: str = "text"


def _clean(text: str) -> str:
    # NUL cannot be stored in a PostgreSQL text column; a lone surrogate cannot be encoded as UTF-8.
    return text.replace("\x00", "").encode("utf-8", "replace").decode("utf-8")


def text_of_pdf(stream: IO[bytes]) -> ExtractedText:
    """The text of each page of a PDF, joined, with where each page starts. Extraction stops as soon as the
    text is longer than ``LQAI_MAX_DOCUMENT_CHARS`` (:class:`DocumentTooLarge`)."""
    limit = settings.LQAI_MAX_DOCUMENT_CHARS
    page_texts: list[str] = []
    try:
        reader = PdfReader(stream)
        if reader.is_encrypted:
            raise UnreadableDocument("The PDF is encrypted: upload it without a password.")
        length = 0
        for page in reader.pages:
            page_texts.append(_clean(page.extract_text() or ""))
            length += len(page_texts[-1]) + len(PAGE_SEPARATOR)
            if length > limit:
                raise DocumentTooLarge(f"The document's text is longer than {limit} characters.")
    except (UnreadableDocument, DocumentTooLarge):
        raise
    except Exception as exc:
        logger.info("unreadable PDF upload: %r", exc)
        raise UnreadableDocument("The file is not a PDF that can be read.") from None
    if not any(text.strip() for text in page_texts):
        raise UnreadableDocument(
            "The PDF has no extractable text (a scanned image?): upload a PDF with a text layer, or its text."
        )
    text, pages = join_pages(page_texts)
    return ExtractedText(text=text, pages=pages, kind="pdf")


def text_of_upload(stream: IO[bytes], *, content_type: str = "") -> ExtractedText:
    """The text of an uploaded file: a PDF (by its first bytes, whatever its name) or UTF-8 text."""
    head = stream.read(len(PDF_MAGIC))
    stream.seek(0)
    if head == PDF_MAGIC or content_type == "application/pdf":
        return text_of_pdf(stream)
    raw = stream.read()
    try:
        text = raw.decode("utf-8-sig")
    except UnicodeDecodeError:
        raise UnreadableDocument("The file is neither a PDF nor UTF-8 text.") from None
    if "\x00" in text:
        raise UnreadableDocument("The file is neither a PDF nor text (it holds NUL bytes).")
    return ExtractedText(text=_clean(text))


def add_document(*, project: Project, title: str, text: str, pages: Pages | None = None) -> Document:
    """Store a KB document in ``project``; its text must not be empty nor over ``LQAI_MAX_DOCUMENT_CHARS``."""
    if not text.strip():
        raise UnreadableDocument("The document has no text.")
    if len(text) > settings.LQAI_MAX_DOCUMENT_CHARS:
        raise DocumentTooLarge(f"The document's text is longer than {settings.LQAI_MAX_DOCUMENT_CHARS} characters.")
    return save_document(document=Document(project=project, title=title, content=text, pages=pages or []))


# The columns chats.passages keeps (whether the passages are made, and counted).
_KEPT_BY_PASSAGES = frozenset({"passages_sha256", "terms_counted"})


def save_document(*, document: Document) -> Document:
    """Save ``document`` (new, or with fields changed) and make the passages of its content in its matter, in
    one transaction; returns it. The passages are made again only when they are stale: the database's trigger
    (chats.0030) marks them so when the content or the matter changes; other changes keep them. The words of
    new passages join the matter's counts after the commit, once for all the documents the transaction added
    (:func:`chats.passages.count_terms`)."""
    # No savepoint inside a caller's transaction: a bulk import's thousands of savepoints would each be a
    # subtransaction PostgreSQL checks every row it wrote against; an error fails the caller's transaction.
    with transaction.atomic(savepoint=False):
        if document._state.adding:
            document.save()
        else:  # what the passages' maker keeps is never written back from a copy loaded before it ran
            deferred = document.get_deferred_fields()
            document.save(
                update_fields=[
                    f.name
                    for f in Document._meta.concrete_fields
                    if not f.primary_key and f.attname not in deferred and f.name not in _KEPT_BY_PASSAGES
                ]
            )
        make_passages(document_ids=[document.pk])
        document.refresh_from_db(fields=["passages_sha256", "terms_counted"])
    # After commit, so that a transaction adding many documents counts their words once, not once per document
    # (each count would update the rows the previous ones left); if this process stops first, the matter's
    # next turn counts them (chats.passages.ensure_passages).
    transaction.on_commit(partial(count_terms, project_id=document.project_id), robust=True)
    return document
