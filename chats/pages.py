"""Pages of a source text: where each page starts, and which pages a span of the text covers.

A source's pages are a list of ``[start, label]`` pairs, in text order: the page labelled ``label`` begins at
character ``start`` and runs to the next pair's start (the last one to the end of the text). An empty list
means the source has no known pages. Two kinds of source have them:

- a PDF uploaded as a document: one page per PDF page, labelled ``"1"``, ``"2"``, ... (:func:`join_pages`);
- a court opinion: its reporter's pages (inline star paging ``*1047``, bracketed markers ``[590 F.Supp.3d 870]``)
  or a slip opinion's own pages (``"slip 5"``), read by ``lqai_verify.verification.page_breaks``
  (:func:`opinion_pages`); ``lqai_verify.verification.page_cites.pin_cite`` writes them as a pin cite.

Pure functions, no Django: the serializers of the chat API and the trace call :func:`pages_of_span`.
"""

from __future__ import annotations

import bisect
from collections.abc import Iterable, Sequence

from lqai_verify.verification import page_breaks
from lqai_verify.verification.page_cites import page_cite, pin_cite

Pages = list[list[int | str | None]]

# Between two PDF pages in a document's text.
PAGE_SEPARATOR = "\n\n"


def join_pages(page_texts: Iterable[str]) -> tuple[str, Pages]:
    """The text of a paged document (pages joined by :data:`PAGE_SEPARATOR`) and its pages, labelled from 1."""
    parts: list[str] = []
    pages: Pages = []
    offset = 0
    for number, text in enumerate(page_texts, start=1):
        if parts:
            parts.append(PAGE_SEPARATOR)
            offset += len(PAGE_SEPARATOR)
        pages.append([offset, str(number)])
        parts.append(text)
        offset += len(text)
    return "".join(parts), pages


def pages_of_span(pages: Sequence[Sequence[int | str | None]], start: int | None, end: int | None) -> list[str] | None:
    """The labels of the pages that ``text[start:end]`` covers, in order; ``None`` when the source has no known
    pages or the span is not known (a failed claim). An unlabelled page contributes nothing."""
    if not pages or start is None or end is None:
        return None
    starts = [int(page[0]) for page in pages]  # type: ignore[arg-type]
    first = max(bisect.bisect_right(starts, start) - 1, 0)
    # An empty span, or one ending exactly where a page starts, does not cover that page.
    last = max(bisect.bisect_left(starts, max(end, start + 1)) - 1, first)
    return [str(page[1]) for page in pages[first : last + 1] if page[1] is not None]


def pages_valid(pages: object, *, text_length: int) -> bool:
    """Whether ``pages`` has the shape described above, for a text of ``text_length`` characters."""
    if not isinstance(pages, list):
        return False
    previous = -1
    for page in pages:
        if not (isinstance(page, list) and len(page) == 2 and isinstance(page[0], int)):
            return False
        if not (previous < page[0] <= max(text_length, 0)) or not (page[1] is None or isinstance(page[1], str)):
            return False
        previous = page[0]
    return True


def opinion_pages(text: str, *, citation: str = "") -> Pages:
    """An opinion's pages: its reporter's where its text marks any, else its slip pages
    (``page_breaks.opinion_pages``)."""
    return page_breaks.opinion_pages(text, citation=citation)


def span_pin_cite(
    pages: Sequence[Sequence[int | str | None]], start: int | None, end: int | None, *, citation: str | None
) -> str | None:
    """Where ``text[start:end]`` is, as a lawyer cites it: in an opinion (``citation``: the case's) its Bluebook
    pin cite (``page_cites.pin_cite``), in a document (``citation`` None) its own pages, ``p. 4``; None when no
    page of it is known. The API, the trace pages and the export all cite through it."""
    labels = pages_of_span(pages, start, end)
    if citation is None:
        return page_cite(labels) or None
    return pin_cite(labels, citation=citation)
