"""A Word draft (DOCX) read into :class:`~drafts.text.DraftText`: body paragraphs, block quotes, footnotes, pages.

python-docx opens the package (after :func:`drafts.archives.check_zip`) and gives the styles; each paragraph's
runs are read from its WordprocessingML (``w:t``, tabs, breaks), which also holds what python-docx does not
expose: footnote reference marks, and the page breaks Word recorded when it last laid the document out
(``w:lastRenderedPageBreak``). The footnotes are the package's footnotes part, reached through python-docx's
opc API and parsed with lxml (no entities, no network). Pages are known only when Word recorded its layout;
a DOCX without it has no pages (``page`` null), never guessed ones.
"""

from __future__ import annotations

import io
import logging
import re
from collections import Counter
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

from django.conf import settings
from lxml import etree

from chats.pages import Pages
from drafts.archives import check_zip
from drafts.errors import UnreadableDraft
from drafts.text import PARAGRAPH_SEPARATOR, Block, BlockKind, DraftText

logger = logging.getLogger(__name__)

_W = "http://schemas.openxmlformats.org/wordprocessingml/2006/main"
_MC = "http://schemas.openxmlformats.org/markup-compatibility/2006"
_SKIPPED = {
    f"{{{_W}}}moveFrom",
    f"{{{_W}}}del",
    f"{{{_W}}}txbxContent",
    f"{{{_MC}}}Fallback",
    f"{{{_W}}}pPr",
    f"{{{_W}}}rPr",
    f"{{{_W}}}instrText",
}
_FOOTNOTE_KINDS_SKIPPED = {"separator", "continuationSeparator", "continuationNotice"}
# A block quote's style is named so (Word's "Quote", "Intense Quote", "Block Text"; "Block Quote" in templates).
_QUOTE_STYLE = re.compile(r"quot|block text", re.IGNORECASE)
# Or it is indented at least half an inch (twips) more than the body text, and is not a list item.
BLOCK_QUOTE_INDENT_TWIPS = 720
_TWIPS_PER_EMU = 1 / 635


def _w(name: str) -> str:
    return f"{{{_W}}}{name}"


@dataclass
class _Paragraph:
    """One paragraph's text, where page breaks fall in it, and the footnote marks (offset, id) in it."""

    text: str = ""
    breaks: list[int] = field(default_factory=list)
    rendered_breaks: int = 0
    marks: list[tuple[int, str]] = field(default_factory=list)


def _read_paragraph(p: Any) -> _Paragraph:
    out = _Paragraph()
    pieces: list[str] = []
    length = 0

    def walk(element: Any) -> None:
        nonlocal length
        for child in element:
            tag = child.tag
            if not isinstance(tag, str) or tag in _SKIPPED:
                continue
            piece = ""
            if tag == _w("t"):
                piece = child.text or ""
            elif tag == _w("tab"):
                piece = "\t"
            elif tag == _w("noBreakHyphen"):
                piece = "-"
            elif tag == _w("cr") or (tag == _w("br") and child.get(_w("type")) not in ("page", "column")):
                piece = "\n"
            elif tag == _w("br") and child.get(_w("type")) == "page":
                out.breaks.append(length)
            elif tag == _w("lastRenderedPageBreak"):
                out.breaks.append(length)
                out.rendered_breaks += 1
            elif tag == _w("footnoteReference"):
                out.marks.append((length, str(child.get(_w("id")))))
            else:
                walk(child)
            pieces.append(piece)
            length += len(piece)

    walk(p)
    out.text = "".join(pieces)
    return out


class _Styles:
    """Paragraph styles by id, through python-docx: whether one is a block quote style, and its left indent."""

    def __init__(self, document: Any) -> None:
        self._by_id = {style.style_id: style for style in document.styles}

    def _chain(self, style_id: str | None) -> Iterator[Any]:
        style = self._by_id.get(style_id) if style_id else None
        seen = 0
        while style is not None and seen < 20:  # a style's base chain; a loop in a damaged file stops
            yield style
            style = style.base_style
            seen += 1

    def quote_style(self, style_id: str | None) -> bool:
        return any(_QUOTE_STYLE.search(style.name or "") for style in self._chain(style_id))

    def left_indent_twips(self, style_id: str | None) -> int:
        for style in self._chain(style_id):
            indent = style.paragraph_format.left_indent
            if indent is not None:
                return int(indent * _TWIPS_PER_EMU)
        return 0


@dataclass(frozen=True, slots=True)
class _Layout:
    """How a body paragraph is set: styled as a quotation, a list item, and its left indent in twips."""

    quote_style: bool
    list_item: bool
    left_twips: int


def _layout(p: Any, styles: _Styles) -> _Layout:
    properties = p.find(_w("pPr"))
    style = properties.find(_w("pStyle")) if properties is not None else None
    style_id = style.get(_w("val")) if style is not None else None
    indent = properties.find(_w("ind")) if properties is not None else None
    list_item = properties is not None and properties.find(_w("numPr")) is not None
    list_item = list_item or (indent is not None and bool(indent.get(_w("hanging"))))
    written = (indent.get(_w("left")) or indent.get(_w("start"))) if indent is not None else None
    left = int(written) if written and written.lstrip("-").isdigit() else styles.left_indent_twips(style_id)
    return _Layout(quote_style=styles.quote_style(style_id), list_item=list_item, left_twips=left)


def _kinds(layouts: list[_Layout], lengths: list[int]) -> list[BlockKind]:
    """Each body paragraph's kind: a block quote if styled as one, or if it is not a list item and is indented
    :data:`BLOCK_QUOTE_INDENT_TWIPS` more than the draft's body text (the indent most of its text has: a brief
    set wholly indented has no block quote for that)."""
    by_indent = Counter[int]()
    for layout, length in zip(layouts, lengths, strict=True):
        by_indent[layout.left_twips] += length
    body = by_indent.most_common(1)[0][0] if by_indent else 0
    return [
        "block_quote"
        if layout.quote_style or (not layout.list_item and layout.left_twips - body >= BLOCK_QUOTE_INDENT_TWIPS)
        else "paragraph"
        for layout in layouts
    ]


class _Builder:
    """The draft's text built paragraph by paragraph, with its blocks, page starts and footnote marks."""

    def __init__(self) -> None:
        self.parts: list[str] = []
        self.length = 0
        self.blocks: list[Block] = []
        self.page_starts: list[int] = [0]
        self.rendered = 0
        self.pending_break = False
        self.marks: dict[str, int] = {}  # footnote id -> offset of its mark in the body
        self.limit = settings.LQAI_MAX_DOCUMENT_CHARS

    def add(self, paragraph: _Paragraph, *, kind: BlockKind, footnote: str = "", anchor: int | None = None) -> None:
        self.rendered += paragraph.rendered_breaks
        lead = len(paragraph.text) - len(paragraph.text.lstrip())
        text = paragraph.text.strip()
        paragraph.breaks = [max(at - lead, 0) for at in paragraph.breaks]
        paragraph.marks = [(max(at - lead, 0), footnote_id) for at, footnote_id in paragraph.marks]
        if not text:
            self.pending_break = self.pending_break or bool(paragraph.breaks)
            return
        start = self.length + (len(PARAGRAPH_SEPARATOR) if self.parts else 0)
        if self.pending_break:
            self._page_at(start)
        self.pending_break = False
        for at in paragraph.breaks:
            if at < len(text):
                self._page_at(start + at)
            else:
                self.pending_break = True
        for at, footnote_id in paragraph.marks:
            self.marks.setdefault(footnote_id, start + min(at, len(text)))
        if self.parts:
            self.parts.append(PARAGRAPH_SEPARATOR)
        self.parts.append(text)
        self.length = start + len(text)
        if self.length > self.limit:
            raise UnreadableDraft(f"The draft's text is longer than {self.limit} characters.")
        self.blocks.append(Block(start=start, end=self.length, kind=kind, footnote=footnote, anchor=anchor))

    def _page_at(self, offset: int) -> None:
        # A page break Word recorded right after a hard one (no text between) is the same break.
        if offset > self.page_starts[-1]:
            self.page_starts.append(offset)


def _footnotes(document: Any) -> dict[str, list[Any]]:
    """The paragraphs of each footnote by id, read from the package's footnotes part (none: empty)."""
    from docx.opc.constants import RELATIONSHIP_TYPE

    try:
        part = document.part.part_related_by(RELATIONSHIP_TYPE.FOOTNOTES)
    except KeyError:
        return {}
    parser = etree.XMLParser(resolve_entities=False, no_network=True, huge_tree=False)
    root = etree.fromstring(part.blob, parser=parser)
    return {
        str(note.get(_w("id"))): list(note.iter(_w("p")))
        for note in root.iter(_w("footnote"))
        if note.get(_w("type")) not in _FOOTNOTE_KINDS_SKIPPED
    }


def _body_paragraphs(document: Any) -> Iterator[Any]:
    body = document.element.find(_w("body"))
    for p in body.iter(_w("p")):
        if next(p.iterancestors(_w("txbxContent")), None) is None:
            yield p


def read_docx(data: bytes) -> DraftText:
    """The text of a DOCX draft (see the module); :class:`UnreadableDraft` for a file that is not one, a zip
    bomb (:func:`~drafts.archives.check_zip`), or a document with no text."""
    import docx

    check_zip(data)
    try:
        document = docx.Document(io.BytesIO(data))
        styles = _Styles(document)
        footnotes = _footnotes(document)
        builder = _Builder()
        body = [(_read_paragraph(p), _layout(p, styles)) for p in _body_paragraphs(document)]
        kinds = _kinds([layout for _, layout in body], [len(paragraph.text.strip()) for paragraph, _ in body])
        for (paragraph, _), kind in zip(body, kinds, strict=True):
            builder.add(paragraph, kind=kind)
        body_pages, rendered = list(builder.page_starts), builder.rendered
        for number, (footnote_id, anchor) in enumerate(sorted(builder.marks.items(), key=lambda i: i[1]), 1):
            for p in footnotes.get(footnote_id, []):
                paragraph = _read_paragraph(p)
                paragraph.breaks = []  # a footnote is on its mark's page
                builder.add(paragraph, kind="footnote", footnote=str(number), anchor=anchor)
    except UnreadableDraft:
        raise
    except Exception as exc:
        logger.info("unreadable DOCX draft: %r", exc)
        raise UnreadableDraft("The file is not a Word document (DOCX) that can be read.") from None
    if not builder.blocks:
        raise UnreadableDraft("The Word document has no text.")
    pages: Pages = [[start, str(number)] for number, start in enumerate(body_pages, 1)] if rendered else []
    return DraftText(text="".join(builder.parts), kind="docx", pages=pages, blocks=builder.blocks)
