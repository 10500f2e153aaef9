"""A draft read into text: the text, its pages and its structure (paragraphs, block quotes, footnotes).

Offsets index :attr:`DraftText.text`. The body comes first, paragraphs separated by a blank line; a DOCX's
footnotes follow the body, one block per paragraph, each knowing the offset of its reference mark in the body:
a footnote is on the page of its mark.
"""

from __future__ import annotations

import bisect
from collections import Counter
from dataclasses import dataclass, field
from typing import Literal

from chats.pages import Pages

BlockKind = Literal["paragraph", "block_quote", "footnote"]
PARAGRAPH_SEPARATOR = "\n\n"
BLOCK_QUOTE_INDENT_COLUMNS = 4


@dataclass(frozen=True, slots=True)
class Block:
    """``text[start:end]``: one paragraph of the body, a block quote, or one paragraph of footnote ``footnote``
    (its number as the draft shows it), whose reference mark is at ``anchor`` in the body."""

    start: int
    end: int
    kind: BlockKind = "paragraph"
    footnote: str = ""
    anchor: int | None = None


@dataclass(frozen=True, slots=True)
class DraftText:
    """A draft's text; ``pages`` as :mod:`chats.pages` has them (``[start, label]`` pairs, empty when the
    draft has no pages: plain text, or a DOCX with no page break recorded); ``blocks`` in text order;
    ``kind`` the format read (``docx``, ``pdf``, ``text``, ``markdown``)."""

    text: str
    kind: str
    pages: Pages = field(default_factory=list)
    blocks: list[Block] = field(default_factory=list)
    _block_starts: list[int] = field(init=False, repr=False, compare=False)
    _page_starts: list[int] = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        # Looked up once per finding: searched, not rebuilt (a long brief has thousands of blocks).
        object.__setattr__(self, "_block_starts", [block.start for block in self.blocks])
        object.__setattr__(self, "_page_starts", [int(start or 0) for start, _ in self.pages])

    def block_at(self, offset: int) -> Block | None:
        """The block holding ``offset``, or ``None`` (between blocks)."""
        index = bisect.bisect_right(self._block_starts, offset) - 1
        if index >= 0 and offset < self.blocks[index].end:
            return self.blocks[index]
        return None

    def page_at(self, offset: int) -> str | None:
        """The draft's page label at ``offset`` (a footnote's is its reference mark's), or ``None`` without
        pages."""
        if not self.pages:
            return None
        block = self.block_at(offset)
        if block is not None and block.anchor is not None:
            offset = block.anchor
        index = max(bisect.bisect_right(self._page_starts, offset) - 1, 0)
        label = self.pages[index][1]
        return None if label is None else str(label)


def paragraph_blocks(text: str) -> list[Block]:
    """The paragraphs of ``text`` (split at blank lines, whitespace-only ones skipped), as blocks. A paragraph
    is a block quote when its lines start with ``>``, or when every line is indented at least four columns more
    than the draft's body text (the indent most of its text has: a draft whose paragraphs all start with a tab
    has no block quote for that)."""
    spans: list[tuple[int, int]] = []
    at = 0
    while at < len(text):
        cut = text.find(PARAGRAPH_SEPARATOR, at)
        stop = len(text) if cut < 0 else cut
        chunk = text[at:stop]
        if chunk.strip():
            lead = len(chunk) - len(chunk.lstrip("\n"))
            spans.append((at + lead, at + lead + len(chunk.strip("\n"))))
        at = stop + len(PARAGRAPH_SEPARATOR) if cut >= 0 else len(text)
    indents = [_indent(text[start:end]) for start, end in spans]
    by_indent = Counter[int]()
    for indent, (start, end) in zip(indents, spans, strict=True):
        by_indent[indent] += end - start
    body = by_indent.most_common(1)[0][0] if by_indent else 0
    return [
        Block(start=start, end=end, kind=_quoted(text[start:end], indent - body))
        for indent, (start, end) in zip(indents, spans, strict=True)
    ]


def _indent(paragraph: str) -> int:
    """The least indent of the paragraph's lines, in columns (a tab is four)."""
    lines = [line.expandtabs(4) for line in paragraph.split("\n") if line.strip()]
    return min((len(line) - len(line.lstrip(" ")) for line in lines), default=0)


def _quoted(paragraph: str, extra_indent: int) -> BlockKind:
    lines = [line.lstrip() for line in paragraph.split("\n") if line.strip()]
    if all(line.startswith(">") for line in lines) or extra_indent >= BLOCK_QUOTE_INDENT_COLUMNS:
        return "block_quote"
    return "paragraph"
