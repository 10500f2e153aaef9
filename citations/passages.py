"""The one renderer of "a passage in context with its alterations": the admin's ledger entry page, the trace
pages (``pages``) and the export report show a verified quote through :func:`passage_in_context_html`.

The passage is highlighted (``<mark>``) in the source text around it; each alteration and omission of the
quote is marked in place (a ``span.alteration`` titled with the alteration in words, holding the source text
it replaces or omits struck out in ``<del>`` and, for a bracket, the quote's text in ``<ins>``) and listed
below in words. The markup is drawn by ``citations/passage_in_context.html`` and styled by
``citations/passage.css`` (no inline style, so that a strict Content-Security-Policy holds). Everything
from the source or the quote is escaped.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from django.template.loader import render_to_string
from django.utils.safestring import SafeString

from citations.selectors import PassageInContext
from lqai_verify.verification.results import CASE, ELLIPSIS

TEMPLATE = "citations/passage_in_context.html"
STYLESHEET = "citations/passage.css"


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


def _marked(context: PassageInContext, start: int, end: int, alterations: list[dict[str, Any]]) -> list[Segment]:
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


def segments(
    context: PassageInContext, alterations: Sequence[dict[str, Any]], *, offsets: bool = True
) -> list[Segment]:
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
    context: PassageInContext,
    alterations: Sequence[dict[str, Any]],
    *,
    offsets: bool = True,
    context_flags: Sequence[dict[str, Any]] = (),
) -> SafeString:
    """The passage of ``context`` highlighted in its context, its ``alterations`` (as a quote row stores them)
    marked and listed, and its ``context_flags`` (an altered quote's limiting context) listed with the source
    text of each; ``offsets``: with the source offsets of the passage and of each alteration (for operators; a
    reader of the trace pages gets page cites instead)."""
    flags = [
        ListedFlag(
            flag=f["flag"],
            words=CONTEXT_FLAG_WORDS.get(f["flag"], f["flag"]),
            text=context.slice(f["source_start"], f["source_end"]),
            start=f["source_start"],
            end=f["source_end"],
        )
        for f in context_flags
    ]
    listed = [
        ListedAlteration(
            kind=a["kind"],
            words=describe(a, context.slice(a["source_start"], a["source_end"])),
            start=a["source_start"],
            end=a["source_end"],
        )
        for a in sorted(alterations, key=lambda a: (a["source_start"], a["source_end"]))
    ]
    return SafeString(
        render_to_string(
            TEMPLATE,
            {
                "context": context,
                "segments": segments(context, alterations, offsets=offsets),
                "listed": listed,
                "flags": flags,
                "offsets": offsets,
                "changed": context.passage.intact is False,
            },
        )
    )
