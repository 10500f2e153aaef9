"""The quotations of a draft: inline ones between double quotation marks, and block quotes.

Inline: straight ``"..."`` or curly ``“...”`` marks, paired within one paragraph (single quotation marks inside
are the quoted source's own, part of the words). A term a draft defines in parentheses (``(the "Act")``) is
not a quotation. A block quote is a whole block (:class:`~drafts.text.Block` of kind ``block_quote``), without
its quotation marks, if it has any, or a Markdown ``>`` before it; marks inside it are the source's, not found
again.
Pure: no database.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from drafts.text import DraftText

_INLINE = re.compile(r"“(?P<curly>[^“”]+?)”|\"(?P<straight>[^\"]+?)\"")
_DEFINED_BEFORE = re.compile(r"\((?:the|a|an|hereinafter|collectively,?)?\s*$", re.IGNORECASE)
_DEFINED_AFTER = re.compile(r"^\s*\)")
_DEFINED_TERM_WORDS = 5
_MARKS = "\"\u201c\u201d'\u2018\u2019"


@dataclass(frozen=True, slots=True)
class Quotation:
    """The quoted words ``text[start:end]`` (without the quotation marks); ``block`` for a block quote."""

    start: int
    end: int
    block: bool = False


def _defined_term(text: str, match: re.Match[str], words: str) -> bool:
    before = text[max(0, match.start() - 20) : match.start()]
    after = text[match.end() : match.end() + 3]
    return (
        bool(_DEFINED_BEFORE.search(before) and _DEFINED_AFTER.match(after))
        and len(words.split()) <= _DEFINED_TERM_WORDS
    )


def find_quotations(draft: DraftText) -> list[Quotation]:
    """Every quotation of ``draft``, in text order (see the module)."""
    text = draft.text
    found: list[Quotation] = []
    for block in draft.blocks:
        if block.kind == "block_quote":
            start, end = block.start, block.end
            while start < end and (text[start].isspace() or text[start] in _MARKS or text[start] == ">"):
                start += 1
            while end > start and (text[end - 1].isspace() or text[end - 1] in _MARKS):
                end -= 1
            if start < end:
                found.append(Quotation(start=start, end=end, block=True))
            continue
        for match in _INLINE.finditer(text, block.start, block.end):
            group = "curly" if match.group("curly") is not None else "straight"
            words = match.group(group)
            if not words.strip() or _defined_term(text, match, words):
                continue
            found.append(Quotation(start=match.start(group), end=match.end(group)))
    return found
