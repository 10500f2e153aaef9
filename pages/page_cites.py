"""Page cites of a passage: where a verified quote sits in its source's pagination.

One function, :func:`page_cite`, turns a span of a source into "p. 676" or "pp. 676-677", from the page
boundaries of that source (``(offset, page)`` pairs, each page beginning at its offset). Where the boundaries
come from is the other half, in :func:`opinion_page_boundaries`:

- opinions: star paging (``*676``, as CourtListener and the Caselaw Access Project leave a reporter's page
  breaks inline in the text), read from the opinion's text;
- documents: none yet, so no page cite is shown.

Stored page boundaries (of PDF documents, or an opinion's star paging recorded at retrieval) plug in there:
:func:`opinion_page_boundaries` and :func:`document_page_boundaries` are the only readers of boundaries.
"""

from __future__ import annotations

import bisect
import re
from collections.abc import Iterable, Sequence
from uuid import UUID

from chats.models import CaselawOpinion

Boundaries = Sequence[tuple[int, int]]

# A star page: "*676" at a word's start, not a pin cite into another source ("at *7", "at *5-6"), and not a
# footnote mark ("**"): followed by a letter, white space or the end (CAP text runs it into the next word).
STAR_PAGE = re.compile(r"(?<![\w*])(?<!at )\*(\d{1,5})(?![\d*\-\u2013])")


def star_pages(text: str) -> list[tuple[int, int]]:
    """The star paging of an opinion's text: ``(offset of the marker, page)`` for each page break, in order.
    Only increasing page numbers count: a star in the text that is not a page break (a note, a pin cite the
    pattern missed) would go backwards or stand alone."""
    boundaries: list[tuple[int, int]] = []
    for match in STAR_PAGE.finditer(text):
        page = int(match.group(1))
        if not boundaries or boundaries[-1][1] < page <= boundaries[-1][1] + 50:
            boundaries.append((match.start(), page))
    # A lone marker is as likely a stray star as a page break.
    return boundaries if len(boundaries) >= 2 else []


def page_at(boundaries: Boundaries, offset: int) -> int:
    """The page ``offset`` is on: the last page beginning at or before it, or the page before the first
    break."""
    index = bisect.bisect_right([start for start, _ in boundaries], offset) - 1
    return boundaries[0][1] - 1 if index < 0 else boundaries[index][1]


def page_cite(boundaries: Boundaries, *, start: int, end: int) -> str:
    """``source[start:end]`` as a page cite ("p. 676", "pp. 676-677"); empty without boundaries."""
    if not boundaries:
        return ""
    first, last = page_at(boundaries, start), page_at(boundaries, max(start, end - 1))
    return f"p. {first}" if first == last else f"pp. {first}\u2013{last}"


def opinion_page_boundaries(opinion_ids: Iterable[UUID]) -> dict[UUID, list[tuple[int, int]]]:
    """The page boundaries of each opinion (star paging, from its text): one query for all of them, their texts
    read once and dropped."""
    ids = set(opinion_ids)
    if not ids:
        return {}
    texts = CaselawOpinion.objects.filter(pk__in=ids).values_list("pk", "text")
    return {pk: star_pages(text) for pk, text in texts.iterator()}


def document_page_boundaries(document_ids: Iterable[UUID]) -> dict[UUID, list[tuple[int, int]]]:
    """The page boundaries of each KB document: none are recorded yet (no query)."""
    return {}
