"""Page cites: the pages a quoted passage spans, as a lawyer writes them.

A document's own pages read ``p. 4``, ``pp. 4\u20135`` (:func:`page_cite`); an opinion's, in the Bluebook short form
of the reporter of the case's citation, ``590 F. Supp. 3d at 870``, ``134 S.W.3d at 676\u201377``, or ``slip op. at
5`` when only the slip's pages are known (:func:`pin_cite`). Pure text, like the rest of this package, so that
the offline verifier's report (``lqai_verify.report``) cites pages exactly as the server's pages and API do
(``chats.pages`` finds the labels, ``page_breaks`` reads an opinion's)."""

from __future__ import annotations

import re
from collections.abc import Sequence

from lqai_verify.verification.page_breaks import SLIP, reporter_citation

EN_DASH = "\u2013"
_SLIP_LABEL = re.compile(r"^slip (\d{1,4})(?: \((.+)\))?$")
# One abbreviation of a reporter's name ("F.", "Supp.", "3d", "Ct.").
_TOKEN = re.compile(r"\d+(?:st|nd|rd|th|d)\b|[A-Za-z][A-Za-z']*\.?")


def page_cite(labels: Sequence[str] | None) -> str:
    """A document's page labels (from ``chats.pages.pages_of_span``) as a page cite: ``"p. 676"``,
    ``"pp. 676\u2013677"`` (a label that is itself a range, ``"673-674"``, reads as one); empty when no page is
    known."""
    if not labels:
        return ""
    first, last = labels[0].split("-")[0], labels[-1].split("-")[-1]
    return f"p. {first}" if first == last else f"pp. {first}{EN_DASH}{last}"


def page_range(first: str, last: str) -> str:
    """Inclusive pages joined by an en dash, the last two digits kept and other repeated leading digits dropped
    (Bluebook Rule 3.2(a)): ``676\u201377``, ``1099\u2013101``, ``99\u2013100``; one page alone when equal."""
    if first == last:
        return first
    if len(first) == len(last):
        shared = 0
        while shared < len(first) and first[shared] == last[shared]:
            shared += 1
        last = last[min(shared, len(last) - 2) :]
    return f"{first}{EN_DASH}{last}"


def bluebook_reporter(reporter: str) -> str:
    """A reporter's abbreviation spaced as the Bluebook spaces it (Rule 6.1(a)): adjacent single capitals and
    ordinals closed up, every other abbreviation set off by spaces (``F.Supp.3d`` as ``F. Supp. 3d``,
    ``S. W. 3d`` as ``S.W.3d``, ``S.Ct.`` as ``S. Ct.``)."""
    tokens = _TOKEN.findall(reporter)
    if not tokens:
        return reporter.strip()
    closed = [re.fullmatch(r"[A-Z]\.?|\d+(?:st|nd|rd|th|d)", token) is not None for token in tokens]
    out = tokens[0]
    for index in range(1, len(tokens)):
        out += ("" if closed[index - 1] and closed[index] else " ") + tokens[index]
    return out


def pin_cite(labels: Sequence[str] | None, *, citation: str) -> str | None:
    """An opinion's page labels (``page_breaks``) for a passage as its Bluebook pin cite, or None when no page
    of it is known for certain (no labels, a page before the first marker whose number is uncertain, a label
    that is no page of the citation's reporter).

    Reporter pages: ``590 F. Supp. 3d at 870``, ``134 S.W.3d at 676\u201377`` (the volume and reporter of
    ``citation``); slip pages: ``slip op. at 5``, ``slip op. at 3 (Thomas, J., concurring)``."""
    if not labels:
        return None
    if all(label.startswith(SLIP) for label in labels):
        return _slip_pin_cite(labels)
    cited = reporter_citation(citation)
    if cited is None or not all(label.isdigit() for label in labels):
        return None
    volume, reporter, first_page = cited
    if int(labels[0]) < first_page:
        return None  # not a page of this reporter (a map stored before reporter pages were read)
    return f"{volume} {bluebook_reporter(reporter)} at {page_range(labels[0], labels[-1])}"


def _slip_pin_cite(labels: Sequence[str]) -> str | None:
    """``slip op. at 5\u20136``; pages of several parts each with its own parenthetical."""
    groups: list[tuple[str, list[str]]] = []
    for label in labels:
        found = _SLIP_LABEL.match(label)
        if found is None:
            return None
        part = found.group(2) or ""
        if groups and groups[-1][0] == part:
            groups[-1][1].append(found.group(1))
        else:
            groups.append((part, [found.group(1)]))
    cites = [f"{page_range(pages[0], pages[-1])}{f' ({part})' if part else ''}" for part, pages in groups]
    return "slip op. at " + ", ".join(cites)


_SHORT_PIN = re.compile(r"(?P<cite>.+?) at (?P<pages>\S.*)")


def pin_in_source(source: str, pin: str) -> tuple[str, str, str]:
    """``(before, pin, after)``: how ``source`` (a case as cited: its name, reporter citation and parenthetical)
    and the pin cite of a passage of it (``pin``, a Bluebook short form) are written together, ``before, pin
    after``. A full citation takes its pin after its first page (Rule 3.2(a)):
    ``"Democracy N.C. v. N.C. State Bd. of Elections, 590 F. Supp. 3d 850 (M.D.N.C. 2022)"`` and
    ``"590 F. Supp. 3d at 870"`` give ``("..., 590 F. Supp. 3d 850", "870", " (M.D.N.C. 2022)")``. When ``source``
    does not end with the reporter citation the pin is in (a slip opinion's pin, a document's page), the pin is
    written after the source as it is: ``(source, pin, "")``."""
    short = _SHORT_PIN.fullmatch(pin)
    full = (
        re.search(re.escape(short["cite"]) + r" \d+(?P<after>(?: \([^()]*\))?)$", source) if short is not None else None
    )
    if short is None or full is None:
        return source, pin, ""
    return source[: full.start("after")], short["pages"], full["after"]


def cited_with_pin(source: str, pin: str) -> str:
    """``source`` and ``pin`` as one citation (:func:`pin_in_source`): ``"..., 590 F. Supp. 3d 850, 870 (M.D.N.C.
    2022)"``; ``source`` alone without a pin."""
    before, pages, after = pin_in_source(source, pin)
    return f"{before}, {pages}{after}" if pages else before
