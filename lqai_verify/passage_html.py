"""The one drawing of "a passage in context with its alterations", pure (no Django), so that the admin's ledger
entry page, the trace pages (through ``citations.passages``) and the export report (rendered again by the offline
verifier) draw a verified quote alike.

The passage is highlighted (``<mark>``) in the source text around it; each alteration and omission of the
quote is marked in place (a ``span.alteration`` titled with the alteration in words, holding the source text
it replaces or omits struck out in ``<del>`` and, for a bracket, the quote's text in ``<ins>``) and listed
below in words, every omission with the words it omits. Styled by ``citations/passage.css`` (no inline
style, so that a strict Content-Security-Policy holds) and the report's own style. Everything from the source
or the quote is escaped.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass
from html import escape
from typing import Any, Protocol

from lqai_verify.verification.results import CASE, ELLIPSIS


class Span(Protocol):
    """The verified passage: its offsets in the source, and whether its text read now is the one verified
    (``None`` when no digest says)."""

    @property
    def start(self) -> int: ...
    @property
    def end(self) -> int: ...
    @property
    def intact(self) -> bool | None: ...


class Context(Protocol):
    """A passage and the source text around it (:class:`Excerpt`)."""

    @property
    def passage(self) -> Span: ...
    @property
    def start(self) -> int: ...
    @property
    def end(self) -> int: ...
    @property
    def more_before(self) -> bool: ...
    @property
    def more_after(self) -> bool: ...
    def slice(self, start: int, end: int) -> str: ...


@dataclass(frozen=True, slots=True)
class ExcerptSpan:
    start: int
    end: int
    intact: bool | None = None


@dataclass(frozen=True, slots=True)
class Excerpt:
    """A passage in a known stretch of its source, ``text`` = ``source[start:start + len(text)]``: up to the
    context asked for on each side, cut at whitespace; ``more_before`` and ``more_after`` tell whether the source
    goes on beyond it."""

    passage: Span
    start: int
    text: str
    more_before: bool = False
    more_after: bool = False

    @property
    def end(self) -> int:
        return self.start + len(self.text)

    def slice(self, start: int, end: int) -> str:
        """``source[start:end]``, for offsets within the excerpt."""
        return self.text[max(start - self.start, 0) : max(end - self.start, 0)]


def excerpt_around(
    *, passage_start: int, passage_end: int, text: str, text_start: int, context_chars: int, reach: Sequence[int] = ()
) -> Excerpt:
    """The passage ``[passage_start, passage_end)`` with up to ``context_chars`` characters of ``text`` (the source
    from ``text_start``) on each side, widened to the offsets in ``reach`` (so that what an omission omits is
    shown whole), and cut at white space so that no word is shown in part, never into the passage."""
    first, last = min([passage_start, *reach]), max([passage_end, *reach])
    low = max(text_start, first - context_chars)
    high = min(text_start + len(text), last + context_chars)
    shown = text[low - text_start : high - text_start]
    more_before, more_after = low > 0, high < text_start + len(text)
    if more_before:
        space = re.search(r"\s", shown[: first - low])
        if space is not None:
            low, shown = low + space.end(), shown[space.end() :]
    if more_after:
        gap = max(shown.rfind(" ", last - low), shown.rfind("\n", last - low))
        if gap >= 0:
            shown = shown[:gap]
    return Excerpt(ExcerptSpan(passage_start, passage_end), low, shown, more_before=more_before, more_after=more_after)


@dataclass(frozen=True, slots=True)
class Segment:
    """One piece of the marked-up context: ``role`` is ``text``, ``alteration``, ``open`` or ``close`` (the
    highlight of the passage begins or ends)."""

    role: str
    text: str = ""
    kind: str = ""
    title: str = ""
    deleted: str = ""
    inserted: str = ""


@dataclass(frozen=True, slots=True)
class ListedAlteration:
    kind: str
    words: str
    start: int
    end: int


def describe(alteration: dict[str, Any], replaced: str) -> str:
    """An alteration in words: its kind (and detail), what the quote wrote, the source text ``replaced`` it
    stands for or omits, how the verifier read it (its ``note``: a bracket's resolved referent), and why it may
    change what the source says (an ``altered`` quote's)."""
    described = _described(alteration, replaced)
    note = alteration.get("note") or ""  # how the verifier read it (rules version 4: a resolved referent)
    if note:
        described = f"{described} ({note})"
    alters = alteration.get("alters") or ""  # rows stored before it was recorded have none
    return f"{described} \u2014 may change what the source says: {alters}" if alters else described


# A context flag in words (see ``lqai_verify.verification``): what the source says right next to the passage.
CONTEXT_FLAG_WORDS = {
    "limited_after": "the source goes on with a limiting continuation",
    "negated_before": "the passage starts after a negation of its clause",
    "limited_before": "the passage starts after a limiting word of its clause",
}


@dataclass(frozen=True, slots=True)
class ListedFlag:
    flag: str
    words: str
    text: str
    start: int
    end: int


def _described(alteration: dict[str, Any], replaced: str) -> str:
    kind = alteration["kind"] + (f" ({alteration['detail']})" if alteration.get("detail") else "")
    if alteration["kind"] == ELLIPSIS:
        return f"omission: the quote's \u201c{alteration['quote_text']}\u201d omits \u201c{replaced}\u201d"
    if alteration["kind"] == CASE:
        return "case: the passage matches the quote only when case is ignored"
    if alteration["source_start"] == alteration["source_end"]:
        return f"{kind}: the quote adds \u201c{alteration['quote_text']}\u201d"
    return f"{kind}: the quote's \u201c{alteration['quote_text']}\u201d stands for \u201c{replaced}\u201d"


def _marked(context: Context, start: int, end: int, alterations: list[dict[str, Any]]) -> list[Segment]:
    """The source text ``[start, end)`` of ``context`` with ``alterations`` (inside it, in order, disjoint)."""
    segments: list[Segment] = []
    at = start
    for alteration in alterations:
        a, b = alteration["source_start"], alteration["source_end"]
        replaced = context.slice(a, b)
        segments.append(Segment("text", context.slice(at, a)))
        segments.append(
            Segment(
                "alteration",
                kind=alteration["kind"],
                title=describe(alteration, replaced),
                deleted=replaced if a < b else "",
                inserted="" if alteration["kind"] == ELLIPSIS else alteration["quote_text"],
            )
        )
        at = b
    segments.append(Segment("text", context.slice(at, end)))
    return segments


def segments(context: Context, alterations: Sequence[dict[str, Any]], *, offsets: bool = True) -> list[Segment]:
    """The context as segments: the text before the passage, the highlight's opening, the passage, its closing,
    the text after, each alteration that lies wholly inside one of the three marked in place (one that
    straddles the passage's edge, overlaps the one before, or is case-only, spanning the whole passage, is
    only listed)."""
    span = context.passage
    zones: list[list[dict[str, Any]]] = [[], [], []]  # before, inside, after the passage
    at = context.start
    for alteration in sorted(alterations, key=lambda a: (a["source_start"], a["source_end"])):
        a, b = alteration["source_start"], alteration["source_end"]
        if alteration["kind"] == CASE or a < at or b > context.end:
            continue
        if span.start <= a and b <= span.end:
            zones[1].append(alteration)
        elif b <= span.start:
            zones[0].append(alteration)
        elif a >= span.end:
            zones[2].append(alteration)
        else:
            continue
        at = b
    return [
        *_marked(context, context.start, span.start, zones[0]),
        Segment("open", title=f"the verified passage [{span.start}:{span.end}]" if offsets else "the verified passage"),
        *_marked(context, span.start, span.end, zones[1]),
        Segment("close"),
        *_marked(context, span.end, context.end, zones[2]),
    ]


def passage_in_context_html(
    context: Context,
    alterations: Sequence[dict[str, Any]],
    *,
    offsets: bool = True,
    context_flags: Sequence[dict[str, Any]] = (),
) -> str:
    """The passage of ``context`` highlighted in its context, its ``alterations`` (as a quote row stores them)
    marked and listed, and its ``context_flags`` (an altered quote's limiting context) listed with the source
    text of each; ``offsets``: with the source offsets of the passage and of each alteration (for operators; a
    reader of the trace pages and of the report gets page cites instead). HTML, every value escaped."""
    drawn = "".join(_segment_html(s) for s in segments(context, alterations, offsets=offsets))
    html = [
        f'<div class="passage-in-context">{"… " if context.more_before else ""}{drawn}'
        f"{' …' if context.more_after else ''}</div>"
    ]
    if offsets:
        html.append(
            f"<small>passage [{context.passage.start}:{context.passage.end}] of the source, with the text around "
            "it</small>"
        )
    if context.passage.intact is False:
        html.append(' <strong class="passage-changed">changed since verified</strong>')
    listed = sorted(alterations, key=lambda a: (a["source_start"], a["source_end"]))
    if listed:
        items = "".join(
            f'<li data-kind="{_e(a["kind"])}">{_e(describe(a, context.slice(a["source_start"], a["source_end"])))}'
            f"{_offsets(a['source_start'], a['source_end']) if offsets else ''}</li>"
            for a in listed
        )
        html.append(f'<ol class="alterations">{items}</ol>')
    if context_flags:
        items = "".join(
            f'<li data-flag="{_e(f["flag"])}">{_e(CONTEXT_FLAG_WORDS.get(f["flag"], f["flag"]))}: '
            f"\u201c{_e(context.slice(f['source_start'], f['source_end']))}\u201d"
            f"{_offsets(f['source_start'], f['source_end']) if offsets else ''}</li>"
            for f in context_flags
        )
        html.append(f'<ul class="context-flags">{items}</ul>')
    return "".join(html)


def _e(value: Any) -> str:
    return escape(str(value))


def _offsets(start: int, end: int) -> str:
    return f" <small>[{start}:{end}]</small>"


def _segment_html(segment: Segment) -> str:
    if segment.role == "text":
        return _e(segment.text)
    if segment.role == "open":
        return f'<mark title="{_e(segment.title)}">'
    if segment.role == "close":
        return "</mark>"
    deleted = f"<del>{_e(segment.deleted)}</del>" if segment.deleted else ""
    inserted = f"<ins>{_e(segment.inserted)}</ins>" if segment.inserted else ""
    opening = f'<span class="alteration" data-kind="{_e(segment.kind)}" title="{_e(segment.title)}">'
    return f"{opening}{deleted}{inserted}</span>"
