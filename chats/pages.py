"""Pages of a source text: where each page starts, and which pages a span of the text covers.

A source's pages are a list of ``[start, label]`` pairs, in text order: the page labelled ``label`` begins at
character ``start`` and runs to the next pair's start (the last one to the end of the text). An empty list
means the source has no known pages. Two kinds of source have them:

- a PDF uploaded as a document: one page per PDF page, labelled ``"1"``, ``"2"``, ... (:func:`join_pages`);
- a court opinion with star paging, the reporter's page breaks written inline as ``*1047`` (:func:`star_pages`),
  or, without star paging, a slip opinion whose text keeps the PDF's page breaks as form feeds
  (:func:`form_feed_pages`); :func:`opinion_pages` chooses.

Pure functions, no Django: the serializers of the chat API and the trace call :func:`pages_of_span`.
"""

from __future__ import annotations

import bisect
import re
from collections.abc import Iterable, Sequence

Pages = list[list[int | str | None]]

# Between two PDF pages in a document's text.
PAGE_SEPARATOR = "\n\n"

# A star-paging marker: "*1047", also glued to the next word ("*676in", as HTML-to-text conversion leaves it).
# Not "**1047" (a parallel reporter's pages) nor a pin cite "at *63" to another work.
_STAR = re.compile(r"(?<![*\w])\*(\d{1,5})(?!\d)")
_PIN_CITE = re.compile(r"\bat\s+$")
# The first page of a reporter citation: "134 S.W.3d 673", "570 U.S. 297 (2013)".
_FIRST_PAGE = re.compile(r"^\s*\d+\s+[A-Za-z][\w.' ]*?\s(\d{1,5})\b")


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


def star_pages(text: str, *, citation: str = "") -> Pages:
    """The pages of an opinion with star paging, or ``[]`` if it has none.

    Markers count only in a run that goes up one page at a time (a stray ``*12`` elsewhere is not a page
    break). The text before the first marker is on the citation's first page, or on the pages from it up to
    the marker's (``"673-675"``) when the marker is further on; without a first page it is unlabelled (``None``).
    """
    markers: list[tuple[int, int]] = []
    for match in _STAR.finditer(text):
        if _PIN_CITE.search(text, max(0, match.start() - 8), match.start()):
            continue
        page = int(match.group(1))
        if markers and page != markers[-1][1] + 1:
            continue
        markers.append((match.start(), page))
    if not markers:
        return []
    first_marker = markers[0][1]
    found = _FIRST_PAGE.match(citation)
    first_page = int(found.group(1)) if found else None
    opening: str | None
    if first_page is None or first_page >= first_marker:
        opening = None
    elif first_page == first_marker - 1:
        opening = str(first_page)
    else:
        opening = f"{first_page}-{first_marker - 1}"
    pages: Pages = [] if markers[0][0] == 0 else [[0, opening]]
    pages.extend([start, str(page)] for start, page in markers)
    return pages


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


def form_feed_pages(text: str) -> Pages:
    """The pages of a text that keeps its page breaks as form feeds (a slip opinion converted from its PDF),
    labelled from 1; ``[]`` if it has none."""
    if "\f" not in text:
        return []
    pages: Pages = [[0, "1"]]
    for number, match in enumerate(re.finditer("\f", text), start=2):
        if match.end() < len(text):
            pages.append([match.end(), str(number)])
    return pages


def opinion_pages(text: str, *, citation: str = "") -> Pages:
    """An opinion's pages: its star paging (the reporter's pages) where it has any, else its form-feed pages."""
    return star_pages(text, citation=citation) or form_feed_pages(text)
