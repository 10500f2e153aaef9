"""Knowledge-base documents: the services that store them, and the text of an uploaded file.

:func:`add_document` stores a document in a matter and :func:`save_document` saves one built or changed
elsewhere (the admin, the demo); both make its passages (``chats.passages``) in the same transaction, so that
every document the application stores is searchable at once. :func:`text_of_upload` turns an uploaded file
into the document's text and pages (``chats.pages``); a file it cannot read raises :class:`UnreadableDocument`
with a sentence for the client, one over a limit :class:`DocumentTooLarge` naming the limit. A PDF is read in
a process of its own (``chats/pdf_text.py``), bounded in pages, characters and time; a zip (a DOCX) is checked
by ``chats.archives`` before anything of it is read.
"""

from __future__ import annotations

import json
import logging
import signal
import subprocess
import sys
import zipfile
from dataclasses import dataclass, field
from functools import partial
from pathlib import Path
from typing import IO, Any

from django.conf import settings
from django.db import transaction
from django.db.models import RestrictedError

from chats import archives, pdf_text
from chats.models import Document, Project
from chats.pages import Pages, join_pages
from chats.passages import count_terms, make_passages

logger = logging.getLogger(__name__)

PDF_MAGIC = b"%PDF-"
# The script that reads a PDF's pages in a process of its own.
PDF_READER = Path(__file__).with_name("pdf_text.py")


class UnreadableDocument(ValueError):
    """The upload is not a text or PDF file the server can read; the message says why, for the client."""


class DocumentKept(ValueError):
    """The document cannot be deleted: an answer quotes it (it stays as long as the turn that quotes it), or its
    matter is on legal hold. The message says which, for the user."""


class DocumentTooLarge(ValueError):
    """The document is over a limit: its text (``LQAI_MAX_DOCUMENT_CHARS``), a PDF's pages
    (``LQAI_MAX_PDF_PAGES``) or reading time (``LQAI_MAX_PDF_SECONDS``), a zip's members or sizes
    (``chats.archives``). The message names the limit."""


@dataclass(frozen=True)
class ExtractedText:
    text: str
    pages: Pages = field(default_factory=list)
    kind: str = "text"


def _clean(text: str) -> str:
    # NUL cannot be stored in a PostgreSQL text column; a lone surrogate cannot be encoded as UTF-8.
    return text.replace("\x00", "").encode("utf-8", "replace").decode("utf-8")


def text_of_pdf(stream: IO[bytes]) -> ExtractedText:
    """The text of each page of a PDF, joined, with where each page starts, read by ``chats/pdf_text.py`` in a
    process of its own: refused (:class:`DocumentTooLarge`, naming the limit) past ``LQAI_MAX_PDF_PAGES`` pages
    (counted here, from the page tree, before any process is started or any page read), past
    ``LQAI_MAX_DOCUMENT_CHARS`` characters (as soon as the text read passes it), or when reading takes longer
    than ``LQAI_MAX_PDF_SECONDS`` (the process is stopped)."""
    data = stream.read()
    refusal = pdf_text.refusal_before_reading(data, max_pages=settings.LQAI_MAX_PDF_PAGES)
    if refusal is not None:
        raise _pdf_refusal({"refused": refusal, "error": "the structure could not be parsed"})
    seconds = settings.LQAI_MAX_PDF_SECONDS
    command = [
        sys.executable,
        "-I",
        str(PDF_READER),
        *("--max-pages", str(settings.LQAI_MAX_PDF_PAGES)),
        *("--max-chars", str(settings.LQAI_MAX_DOCUMENT_CHARS)),
        *("--seconds", str(seconds)),
    ]
    try:
        done = subprocess.run(command, input=data, capture_output=True, timeout=seconds, check=False)  # noqa: S603 - our own script, no shell
    except subprocess.TimeoutExpired:
        raise _pdf_refusal({"refused": "stopped"}) from None
    outcome = _pdf_outcome(done)
    page_texts = outcome.get("pages")
    if page_texts is None:
        raise _pdf_refusal(outcome)
    if not any(text.strip() for text in page_texts):
        raise UnreadableDocument(
            "The PDF has no extractable text (a scanned image?): upload a PDF with a text layer, or its text."
        )
    text, pages = join_pages([_clean(text) for text in page_texts])
    return ExtractedText(text=text, pages=pages, kind="pdf")


def _pdf_outcome(done: subprocess.CompletedProcess[bytes]) -> dict[str, Any]:
    """What ``chats/pdf_text.py`` answered: its JSON; ``stopped`` if the kernel stopped it at its CPU limit (or
    it was killed); anything else is a failure of the script, logged, and the file counts as unreadable."""
    if done.returncode in (-signal.SIGXCPU, -signal.SIGKILL):
        return {"refused": "stopped"}
    try:
        if done.returncode == 0:
            return dict(json.loads(done.stdout))
    except ValueError:
        pass
    logger.error("the PDF reader failed (exit status %s): %s", done.returncode, done.stderr[-2000:])
    return {"refused": "unreadable", "error": "the reader failed"}


def _pdf_refusal(outcome: dict[str, Any]) -> ValueError:
    """The error for ``chats/pdf_text.py``'s refusal ``outcome`` (``stopped``: past its time)."""
    why = outcome["refused"]
    if why == "pages":
        return DocumentTooLarge(f"The PDF has more than {settings.LQAI_MAX_PDF_PAGES} pages (LQAI_MAX_PDF_PAGES).")
    if why == "stopped":
        return DocumentTooLarge(
            f"The PDF takes longer than {settings.LQAI_MAX_PDF_SECONDS:g} seconds to read (LQAI_MAX_PDF_SECONDS)."
        )
    if why == "chars":
        return DocumentTooLarge(f"The document's text is longer than {settings.LQAI_MAX_DOCUMENT_CHARS} characters.")
    if why == "encrypted":
        return UnreadableDocument("The PDF is encrypted: upload it without a password.")
    logger.info("unreadable PDF upload: %s", outcome.get("error"))
    return UnreadableDocument("The file is not a PDF that can be read.")


def text_of_upload(stream: IO[bytes], *, content_type: str = "") -> ExtractedText:
    """The text of an uploaded file: a PDF (by its first bytes, whatever its name) or UTF-8 text."""
    head = stream.read(len(PDF_MAGIC))
    stream.seek(0)
    if head == PDF_MAGIC or content_type == "application/pdf":
        return text_of_pdf(stream)
    if head.startswith(archives.ZIP_MAGIC):
        try:
            archives.check_zip(stream)
        except archives.ZipTooLarge as exc:
            raise DocumentTooLarge(str(exc)) from None
        except zipfile.BadZipFile:
            raise UnreadableDocument("The file is not a zip archive that can be read.") from None
        raise UnreadableDocument("A DOCX or other zip file is not read yet: upload a PDF, or the document's text.")
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


def upload_document(*, project: Project, title: str, file: IO[bytes], size: int, content_type: str = "") -> Document:
    """Store an uploaded file (``size`` bytes) as a KB document of ``project``: :class:`DocumentTooLarge` over
    ``LQAI_MAX_UPLOAD_BYTES`` or a bound of :func:`text_of_upload` and :func:`add_document`,
    :class:`UnreadableDocument` for a file it cannot read; nothing is written then. The API's upload and the
    matter's page both call it."""
    if size > settings.LQAI_MAX_UPLOAD_BYTES:
        raise DocumentTooLarge(f"The file is too large: at most {settings.LQAI_MAX_UPLOAD_BYTES} bytes.")
    extracted = text_of_upload(file, content_type=content_type)
    return add_document(project=project, title=title, text=extracted.text, pages=extracted.pages)


def delete_document(*, document: Document) -> None:
    """Delete a KB document and its passages. Refused with :class:`DocumentKept` while a quote row of an answer
    names it (the rows' ``RESTRICT``: a turn's record keeps what it quoted) or while its matter is on legal
    hold. Its words stay in the matter's counts (an over-count, see ``chats.models.MatterTerm``)."""
    if Project.objects.filter(pk=document.project_id, legal_hold=True).exists():
        raise DocumentKept(f"The matter is on legal hold: {document.title!r} cannot be deleted.")
    try:
        with transaction.atomic():
            document.delete()
    except RestrictedError:
        raise DocumentKept(
            f"{document.title!r} is quoted by an answer in this matter: it stays as long as that turn's record."
        ) from None


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
