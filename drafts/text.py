"""A draft read into text: the text, its pages and its structure (paragraphs, block quotes, footnotes).

Offsets index :attr:`DraftText.text`. The body comes first, paragraphs separated by a blank line; a DOCX's
footnotes follow the body, one block per paragraph, each knowing the offset of its reference mark in the body:
a footnote is on the page of its mark.
"""

from __future__ import annotations

import bisect
from dataclasses import dataclass, field
from typing import Literal

from chats.pages import Pages

BlockKind = Literal["paragraph", "block_quote", "footnote"]
PARAGRAPH_SEPARATOR = "\n\n"


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


def paragraph_blocks(text: str, *, offset: int = 0, end: int | None = None) -> list[Block]:
    """The paragraphs of ``text[offset:end]`` (split at blank lines, whitespace-only ones skipped), as blocks;
    a paragraph whose every line is indented (four spaces or a tab) or starts with ``>`` is a block quote."""
    end = len(text) if end is None else end
    blocks: list[Block] = []
    at = offset
    while at < end:
        cut = text.find(PARAGRAPH_SEPARATOR, at, end)
        stop = end if cut < 0 else cut
        chunk = text[at:stop]
        if chunk.strip():
            lead = len(chunk) - len(chunk.lstrip("\n"))
            body = chunk.strip("\n")
            kind: BlockKind = "block_quote" if _indented(body) else "paragraph"
            blocks.append(Block(start=at + lead, end=at + lead + len(body), kind=kind))
        at = stop + len(PARAGRAPH_SEPARATOR) if cut >= 0 else end
    return blocks


def _indented(paragraph: str) -> bool:
    lines = [line for line in paragraph.split("\n") if line.strip()]
    return bool(lines) and all(line.startswith(("    ", "\t", ">")) for line in lines)
