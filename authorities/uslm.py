"""A streaming reader of USLM XML: the U.S. Code as OLRC publishes it (USLM 1.0) and the annual CFR as GPO
publishes it (USLM 2.0). Pure: a file in, its release (:class:`UslmRelease`) and its sections
(:class:`ParsedSection`) out, one at a time.

lxml's ``iterparse`` reads the file as a stream; each section is turned into text when its end tag is read and
then removed with every finished element before it, so memory stays flat whatever the file's size. lxml rather
than the standard library's parser: its elements know their parent, which is what lets a finished one be
removed; it keeps the CFR's page markers (``<?page num="21"?>``) in the tree where they stand; it refuses
entities and network access.
"""

from __future__ import annotations

import datetime
import re
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import IO, Any

from lxml import etree

# What follows the statutory text, or sits beside it, and is not part of it.
_SKIPPED = frozenset({"sourceCredit", "notes", "note", "source", "toc", "editorialNote", "footnote"})
# Elements that start on a line of their own in the text.
_SUBDIVISIONS = frozenset(
    {"subsection", "paragraph", "subparagraph", "clause", "subclause", "item", "subitem", "subsubitem", "level"}
)
_BLOCKS = _SUBDIVISIONS | {"p", "continuation", "tr", "table", "quotedContent"}
_CELLS = frozenset({"td", "th"})
# Outside a section: where a `<section>` is quoted, not enacted (amendment notes, tables of contents).
_QUOTING = frozenset({"notes", "note", "quotedContent", "toc"})
_WHITESPACE = re.compile(r"\s+")
_ROOTS = {"uscDoc": "usc", "cfrDoc": "cfr"}
# `Online@117-80`, `Online@118-22not21` (a release point that leaves a law out): the last law it includes.
_RELEASE_POINT = re.compile(r"Online@(?P<congress>\d+)-(?P<law>\d+)")


class UslmError(ValueError):
    """The file is not a USLM title this reader can load; the message says why, for an operator."""


@dataclass(frozen=True, slots=True)
class UslmRelease:
    """The title and release point a file holds, read from its ``<meta>``."""

    code: str  # usc | cfr
    title: int
    release_point: str
    label: str
    released_on: datetime.date
    sequence: str  # orders the releases of a title: see AuthorityRelease.sequence
    official: bool
    legal_status: str
    publisher: str
    first_part: int | None = None
    last_part: int | None = None


@dataclass(frozen=True, slots=True)
class ParsedSection:
    """One section: see :class:`authorities.models.StatuteSection` for what each field holds."""

    identifier: str
    number: str
    heading: str
    text: str
    subdivisions: list[dict[str, Any]] = field(default_factory=list)
    pages: list[dict[str, Any]] = field(default_factory=list)
    part: int | None = None


def _local(tag: Any) -> str:
    return tag.rsplit("}", 1)[-1] if isinstance(tag, str) else ""


class _Text:
    """Builds a section's text from text nodes: whitespace collapsed, one line per block, offsets exact."""

    def __init__(self) -> None:
        self.parts: list[str] = []
        self.length = 0
        self.space = False
        self.line_start = True

    def add(self, raw: str | None) -> None:
        if not raw:
            return
        words = _WHITESPACE.sub(" ", raw)
        if words.startswith(" "):
            self.space = True
        words = words.strip()
        if not words:
            return
        if self.space and not self.line_start:
            self._emit(" ")
        self._emit(words)
        self.line_start = False
        self.space = raw[-1].isspace()

    def newline(self) -> None:
        if not self.line_start:
            self._emit("\n")
        self.line_start, self.space = True, False

    def _emit(self, text: str) -> None:
        self.parts.append(text)
        self.length += len(text)

    def value(self) -> str:
        return "".join(self.parts)


class _SectionReader:
    """Turns one ``<section>`` element into a :class:`ParsedSection`."""

    def __init__(self, identifier: str, start_page: str | None) -> None:
        self.identifier = identifier
        self.text = _Text()
        self.subdivisions: list[dict[str, Any]] = []
        self.pages: list[dict[str, Any]] = [{"page": start_page, "offset": 0}] if start_page else []

    def read(self, section: Any, *, code: str) -> ParsedSection:
        number, heading = "", ""
        for child in section:
            name = _local(child.tag)
            if name == "num" and not number:
                number = _number(child)
            elif name == "heading" and not heading:
                heading = " ".join("".join(child.itertext()).split())
            else:
                self._walk(child, path="")
            self.text.add(child.tail)
        part = int(number.split(".")[0]) if code == "cfr" and number.split(".")[0].isdigit() else None
        identifier = self.identifier
        if number and not identifier.endswith(f"/s{number}"):
            # GPO's 27 C.F.R. § 478.113a carries the identifier and number value of § 478.113: the printed number
            # is the section's, so the identifier is made from it.
            identifier = f"{identifier.rsplit('/s', 1)[0]}/s{number}"
        return ParsedSection(
            identifier=identifier,
            number=number,
            heading=heading.rstrip("."),
            text=self.text.value(),
            subdivisions=self.subdivisions,
            pages=self.pages,
            part=part,
        )

    def _walk(self, element: Any, *, path: str) -> None:
        if isinstance(element, etree._ProcessingInstruction):
            if element.target == "page" and (page := element.get("num")):
                if self.pages and self.pages[-1]["offset"] == self.text.length:
                    self.pages.pop()  # a page break before any text of it: the section starts on the new page
                self.pages.append({"page": page, "offset": self.text.length})
            return
        name = _local(element.tag)
        if not name or name in _SKIPPED:
            return
        if name in _BLOCKS:
            self.text.newline()
        elif name in _CELLS:
            self.text.space = True
        own_path = self._path(element, parent=path) if name in _SUBDIVISIONS else path
        start = self.text.length
        self.text.add(element.text)
        for child in element:
            self._walk(child, path=own_path)
            self.text.add(child.tail)
        if own_path != path:
            self.subdivisions.append({"path": own_path, "start": start, "end": self.text.length})

    def _path(self, element: Any, *, parent: str) -> str:
        identifier = element.get("identifier") or ""
        if identifier.startswith(f"{self.identifier}/"):
            return identifier.removeprefix(f"{self.identifier}/")
        num = next((c for c in element if _local(c.tag) == "num"), None)
        value = (num.get("value") or "".join(num.itertext()).strip("() ")) if num is not None else "?"
        return f"{parent}/{value}" if parent else value


def _number(num: Any) -> str:
    """A section's number as printed (``§ 478.113a`` -> ``478.113a``), else its ``value``."""
    printed = " ".join("".join(num.itertext()).split()).strip("§. ")
    value = (num.get("value") or "").strip()
    return printed if printed and " " not in printed else value


def _date(text: str, *, what: str) -> datetime.date:
    try:
        return datetime.date.fromisoformat(text.strip()[:10])
    except ValueError:
        raise UslmError(f"the file's {what} is not a date: {text!r}") from None


def _part(text: str | None) -> int | None:
    text = (text or "").strip()
    return int(text) if text.isdigit() else None


def _release(code: str, meta: Any) -> UslmRelease:
    values: dict[str, str] = {}
    for child in meta:
        name = _local(child.tag)
        if name == "property":
            name = f"property:{child.get('role')}"
        values.setdefault(name, " ".join("".join(child.itertext()).split()))
    number = values.get("docNumber", "")
    if not number.isdigit():
        raise UslmError(f"the file's title number (docNumber) is {number!r}, not a number: appendices are not loaded")
    if code == "usc":
        point = values.get("docPublicationName", "")
        law = _RELEASE_POINT.match(point)
        if law is None:
            raise UslmError("the file names no OLRC release point (docPublicationName like 'Online@117-80')")
        positive = values.get("property:is-positive-law") == "yes"
        return UslmRelease(
            code=code,
            title=int(number),
            release_point=point,
            label=point,
            released_on=_date(values.get("created", ""), what="creation date (dcterms:created)"),
            sequence=f"{int(law['congress']):03d}-{int(law['law']):05d}",
            official=False,
            legal_status=(
                "positive-law title: legal evidence of the law (1 U.S.C. § 204(a)); an OLRC online release point"
                if positive
                else "prima facie evidence of the law (1 U.S.C. § 204(a)); an OLRC online release point"
            ),
            publisher=values.get("publisher") or "OLRC",
        )
    revised = _date(values.get("docReleasePoint", ""), what="release point (docReleasePoint)")
    return UslmRelease(
        code=code,
        title=int(number),
        release_point=revised.isoformat(),
        label=f"revised as of {revised:%B} {revised.day}, {revised.year}",
        released_on=revised,
        sequence=revised.isoformat(),
        official=True,
        legal_status="the annual edition of the CFR, official; judicially noticed (44 U.S.C. §§ 1507, 1510)",
        publisher=values.get("publisher") or "GPO",
        first_part=_part(values.get("startingProvision")),
        last_part=_part(values.get("endingProvision")),
    )


def read_uslm(source: IO[bytes]) -> tuple[UslmRelease, Iterator[ParsedSection]]:
    """The release ``source`` holds and an iterator of its sections, in document order, read as a stream.

    Raises :class:`UslmError` (before returning for a file that is not USLM or names no release; while
    iterating for XML that breaks off)."""
    events = _events(source)
    first = next(events, None)
    if not isinstance(first, UslmRelease):
        raise UslmError("the file has no <meta> with its title and release point")
    return first, (item for item in events if isinstance(item, ParsedSection))


def _events(source: IO[bytes]) -> Iterator[UslmRelease | ParsedSection]:
    parser = etree.iterparse(
        source, events=("start", "end", "pi"), resolve_entities=False, no_network=True, remove_comments=True
    )
    code, prefix, page = "", "", None
    quoting, in_section, in_meta = 0, 0, False
    reader: _SectionReader | None = None
    section = meta = ""
    quoting_tags: set[str] = set()
    try:
        for event, element in parser:
            if event == "pi":
                if element.target == "page" and element.get("num"):
                    page = element.get("num")
                continue
            tag = element.tag
            if not code:
                code = _ROOTS.get(_local(tag), "")
                if not code:
                    raise UslmError(f"the root element is <{_local(tag)}>, not a USLM title (<uscDoc> or <cfrDoc>)")
                # The tags compared below, in the document's namespace: comparing whole tags is what keeps
                # the reader within a small factor of a bare parse.
                namespace = tag[: -len(_local(tag))]
                section, meta = f"{namespace}section", f"{namespace}meta"
                quoting_tags = {f"{namespace}{name}" for name in _QUOTING}
                continue
            if event == "start":
                if tag == section:
                    if not quoting and not in_section and prefix:
                        identifier = element.get("identifier") or ""
                        if identifier.startswith(prefix):
                            reader = _SectionReader(identifier, page)
                    in_section += 1
                elif tag in quoting_tags and not in_section:
                    quoting += 1
                elif tag == meta:
                    in_meta = True
                continue
            if tag == meta and not prefix:
                in_meta = False
                release = _release(code, element)
                prefix = f"/us/{code}/t{release.title}/s"
                yield release
            elif tag == section:
                in_section -= 1
                if reader is not None and not in_section:
                    yield reader.read(element, code=code)
                    reader = None
            elif tag in quoting_tags and not in_section:
                quoting -= 1
            if not in_section and not in_meta:
                _forget(element)
    except etree.XMLSyntaxError as exc:
        raise UslmError(f"the file is not well-formed XML: {exc}") from None
    if not code:
        raise UslmError("the file is empty")


def _forget(element: Any) -> None:
    """Drop a finished element's content and its finished siblings before it: what keeps memory flat."""
    element.clear(keep_tail=True)
    parent = element.getparent()
    if parent is not None:
        while element.getprevious() is not None:
            del parent[0]
