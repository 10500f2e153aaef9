"""Page breaks of a court opinion's text, read from every form real opinion text carries.

A page map is a list of ``[start, label]`` pairs in text order (``chats.pages`` describes it). An opinion's
labels are its reporter's pages (``"870"``; ``"850-854"`` for the text before the first marker, when it may
run over several pages), or, in a slip opinion without them, the slip's own pages (``"slip 5"``, with the
part of a separate opinion: ``"slip 3 (Thomas, J., concurring)"``). ``page_cites.pin_cite`` writes them.

Pure text, no Django: the server computes the map when an opinion is saved; the offline verifier needs none.
"""

from __future__ import annotations

import re

Pages = list[list[int | str | None]]

SLIP = "slip "

# Inline star paging: "*1047", also glued to the next word ("*676in"). Not "**1047" (a parallel reporter).
_STAR = re.compile(r"(?<![*\w])\*(\d{1,5})(?!\d)")
# A pin cite to another work ("at *63", "1997 WL 582901, *3") is no page break.
_PIN_CITE = re.compile(r"(?:\bat|\d,)\s*$")
# A bracketed reporter marker: "[590 F.Supp.3d 870]" (volume, reporter, page) or "[*870]".
_BRACKET = re.compile(r"\[(?:(\d{1,4}) ([A-Za-z][A-Za-z0-9.' ]{0,30}?) |\*)(\d{1,5})\]")
# The volume, reporter and first page of a reporter citation: "134 S.W.3d 673", "570 U.S. 297 (2013)".
_CITATION = re.compile(r"^\s*(\d{1,4})\s+([A-Za-z][A-Za-z0-9.' ]*?)\s+(\d{1,5})\b")
# A star page further than this past the first page belongs to another reporter.
_MAX_OPINION_PAGES = 2000

# A Supreme Court slip opinion's running head, with its printed page number.
_RUNNING_HEAD = re.compile(
    r"^[ \t\f]*(?:\(Slip Opinion\)[ \t]+OCTOBER TERM, \d{4}|Cite as: \d+ U\. ?S\. [_\d]+ \(\d{4}\))"
    r"[ \t]+(\d{1,3})[ \t]*$"
    r"|^[ \t\f]*(\d{1,3})[ \t]{2,}[A-Z][A-Z0-9 .,'&\-]* v\. [A-Z0-9 .,'&\-]+$",
    re.MULTILINE,
)
# The part a running head's next line names: the syllabus, the Court's opinion, or a Justice's separate one.
_PART = re.compile(
    r"^[ \t]*(Syllabus|Opinion of the Court|Per Curiam|(?:Opinion|Statement) of [A-Z][A-Z'\-]+, (?:C\. ?)?J\."
    r"|[A-Z][A-Z'\-]+, (?:C\. ?)?J\., (?:concurring|dissenting)[a-z ,]*)[ \t]*$",
    re.MULTILINE,
)


# CourtListener's star-pagination markup in ``html_with_citations``: ``<span class="star-pagination">*103</span>``,
# ``<span citation-index="1" class="star-pagination" label="1322"> *1322 </span>``, ``*Page 154``.
_STAR_PAGINATION = re.compile(
    r"<span\b(?P<attributes>[^>]*\bclass=\"[^\"]*\bstar-pagination\b[^\"]*\"[^>]*)>(?P<inner>.*?)</span\s*>",
    re.IGNORECASE | re.DOTALL,
)
_ATTRIBUTE = re.compile(r"\b(label|citation-index)=\"([^\"]*)\"", re.IGNORECASE)


def star_paged_markup(markup: str) -> str:
    """CourtListener's opinion markup with each star-pagination marker of the case's first reporter written as
    inline star paging (``*1322``, which :func:`reporter_pages` reads once the tags are stripped) and every
    other reporter's marker (``citation-index`` other than 1, ``**1047``) removed."""

    def inline(found: re.Match[str]) -> str:
        attributes = {name.lower(): value for name, value in _ATTRIBUTE.findall(found.group("attributes"))}
        inner = re.sub(r"<[^>]*>", "", found.group("inner")).strip()
        if attributes.get("citation-index", "1") != "1" or inner.startswith("**"):
            return ""
        label = attributes.get("label") or re.sub(r"^\*\s*(?:Page\s+)?", "", inner)
        return f"*{label}" if label.isdigit() else ""

    return _STAR_PAGINATION.sub(inline, markup)


def reporter_citation(citation: str) -> tuple[str, str, int] | None:
    """The volume, reporter (as written) and first page of ``citation``, or None when it names no reporter page
    (a docket number, a slip opinion's ``570 U.S. ___``)."""
    found = _CITATION.match(citation)
    if found is None:
        return None
    return found.group(1), found.group(2).strip(), int(found.group(3))


def _squeezed(reporter: str) -> str:
    return re.sub(r"[\s.]", "", reporter).lower()


def reporter_pages(text: str, *, citation: str = "") -> Pages:
    """The reporter's pages of an opinion, or ``[]`` if its text marks none.

    Markers are inline star paging and bracketed reporter markers of the citation's reporter (of the first
    reporter named, without a citation). They count only in a run that goes up one page at a time (a stray
    ``*12`` is no page break). The text before the first marker is on the citation's first page, or on the
    pages from it up to the marker's (``"673-675"``) when the marker is further on; unlabelled without one.
    """
    cited = reporter_citation(citation)
    reporter = _squeezed(f"{cited[0]} {cited[1]}") if cited else None
    first_page = cited[2] if cited else None
    candidates: list[tuple[int, int]] = []
    bracketed: list[tuple[int, int]] = []
    for match in _BRACKET.finditer(text):
        if match.group(2) is not None:
            named = _squeezed(f"{match.group(1)} {match.group(2)}")
            reporter = reporter or named
            if named != reporter:
                continue  # a parallel reporter's page
        candidates.append((match.start(), int(match.group(3))))
        bracketed.append((match.start(), match.end()))
    for match in _STAR.finditer(text):
        inside = any(start <= match.start() < end for start, end in bracketed)
        if inside or _PIN_CITE.search(text, max(0, match.start() - 8), match.start()):
            continue
        candidates.append((match.start(), int(match.group(1))))
    markers: list[tuple[int, int]] = []
    for start, page in sorted(candidates):
        if first_page is not None and not first_page <= page <= first_page + _MAX_OPINION_PAGES:
            continue
        if not markers or page == markers[-1][1] + 1:
            markers.append((start, page))
    if not markers:
        return []
    return _with_opening(markers, first_page)


def _with_opening(markers: list[tuple[int, int]], first_page: int | None) -> Pages:
    first_marker = markers[0][1]
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


def slip_pages(text: str) -> Pages:
    """A slip opinion's own pages, or ``[]``: the page number of each Supreme Court running head (with the part
    named under it: ``"slip 3 (Thomas, J., concurring)"``), else, in a text that keeps its PDF's page breaks as
    form feeds, the pages counted from 1 (``"slip 2"``). Text before the first running head is unlabelled."""
    heads = list(_RUNNING_HEAD.finditer(text))
    if len(heads) >= 2:
        starts = [head.start() + len(head.group(0)) - len(head.group(0).lstrip("\f")) for head in heads]
        pages: Pages = [] if starts[0] == 0 else [[0, None]]
        for head, start in zip(heads, starts, strict=True):
            part = _PART.match(text, _next_line(text, head.end()))
            label = f"{SLIP}{head.group(1) or head.group(2)}"
            named = _part_name(part.group(1)) if part else ""
            pages.append([start, f"{label} ({named})" if named else label])
        return pages
    if "\f" not in text:
        return []
    pages = [[0, f"{SLIP}1"]]
    for number, match in enumerate(re.finditer("\f", text), start=2):
        if match.end() < len(text):
            pages.append([match.end(), f"{SLIP}{number}"])
    return pages


def _next_line(text: str, end: int) -> int:
    """Where the first non-blank line after ``end`` starts."""
    found = re.compile(r"\n[ \t\f]*(?=\S)").search(text, end)
    return found.start() + 1 if found else len(text)


def _part_name(part: str) -> str:
    """A running head's part as a Bluebook parenthetical: ``"Thomas, J., concurring"``, ``"syllabus"``; empty
    for the opinion of the Court."""
    if part in ("Opinion of the Court", "Per Curiam"):
        return ""
    if part == "Syllabus":
        return "syllabus"
    named = re.sub(r"\b[A-Z][A-Z'\-]+\b", lambda m: _name_case(m.group(0)), part).replace("C. J.", "C.J.")
    return named[0].lower() + named[1:] if named.startswith(("Opinion of", "Statement of")) else named


def _name_case(word: str) -> str:
    """``"O'CONNOR"`` as ``"O'Connor"``; a one-letter word (``J``) unchanged."""
    if len(word) == 1:
        return word
    return re.sub(r"[A-Za-z]+", lambda m: m.group(0).capitalize(), word.lower())


def opinion_pages(text: str, *, citation: str = "") -> Pages:
    """An opinion's pages: its reporter's (:func:`reporter_pages`) where the text marks any, else its slip
    pages (:func:`slip_pages`)."""
    return reporter_pages(text, citation=citation) or slip_pages(text)
