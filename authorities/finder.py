"""The statute and regulation citations written in a text: eyecite's law citations and the forms it misses.

eyecite (used as published, ``eyecite.get_citations``) finds ``42 U.S.C. § 1983``; it misses a citation without
``§`` (``50 U.S.C. 1701``, ``27 CFR 478.11``), cuts letter-suffixed sections (``18 U.S.C. § 1028A``,
``17 C.F.R. § 240.10b-5``), reads only the first section of a range (``§§ 1331`` to ``1332``, en dash), and
misses section-first prose ("section 1983 of title 42"), ``id. § 3`` after a statute and C.F.R. parts. This
module reads those forms with its own patterns and keeps eyecite's citations they do not cover, so that every
law citation eyecite knows is listed (a state code's as :data:`OTHER_LAW`, which the library does not hold).
Pure: no database.
"""

from __future__ import annotations

import functools
import re
from dataclasses import dataclass
from typing import Any

FULL = "full"  # 9 U.S.C. § 2
NO_SECTION_SIGN = "no_section_sign"  # 50 U.S.C. 1701
RANGE = "range"  # 28 U.S.C. §§ 1331-1332 (or an en dash): one citation per section named
PROSE = "prose"  # section 1983 of title 42
ID = "id"  # Id. § 3, after a statute
PART = "part"  # 27 C.F.R. pt. 478
OTHER_LAW = "other_law"  # a law citation of a code the library does not hold (eyecite's)

USC, CFR = "usc", "cfr"

_NUM = r"\d+[A-Za-z]*(?:[.\-]\d+[A-Za-z]*)*"
_PIN = r"(?:\((?:[a-z]{1,5}|[A-Z]{1,3}|\d{1,3})\))+"
_CODE = r"(?P<code>U\.\s?S\.\s?C\.(?:\s?[AS]\.)?|USCA?\b|C\.\s?F\.\s?R\.|CFR\b)"
_FULL = re.compile(
    rf"(?<![\w.§])(?P<title>\d{{1,3}})\s+{_CODE}\s*"
    rf"(?:(?P<sign>§§|§|[Ss]ecs?\.|[Ss]ections?)\s*|(?P<part>[Pp]ts?\.|[Pp]arts?)\s*)?"
    rf"(?P<num>{_NUM})(?P<pin>{_PIN})?"
)
# The further sections of `§§ 1331, 1332` or `§§ 1331` en dash `1332` (a hyphen between two numbers: _more_sections).
_MORE = re.compile(
    rf"\s*(?P<sep>,\s*(?:and\b|&)?|\u2013|\u2014|\bto\b|\bthrough\b|\band\b|&)\s*(?:§\s*)?(?P<num>{_NUM})(?P<pin>{_PIN})?"
)
_PROSE = re.compile(
    rf"\b[Ss]ection\s+(?P<num>{_NUM})(?P<pin>{_PIN})?\s+of\s+[Tt]itle\s+(?P<title>\d{{1,3}})"
    r"(?:(?:,\s*|\s+of\s+the\s+)(?:(?P<usc>United\s+States\s+Code)|(?P<cfr>Code\s+of\s+Federal\s+Regulations)))?"
)
_ID = re.compile(rf"\b[Ii]d\.,?\s*(?:at\s+)?§\s*(?P<num>{_NUM})(?P<pin>{_PIN})?")
_PIN_PART = re.compile(r"\(([^()]+)\)")
_LAW_REPORTERS = {"U.S.C.": USC, "C.F.R.": CFR}


@dataclass(frozen=True, slots=True)
class FoundStatute:
    """One statute or regulation citation: ``text[start:end]`` as written.

    ``section`` is the section (``2``, ``1028A``, ``240.10b-5``) or, for :data:`PART`, the part (``478``);
    ``pin`` the subdivision path (``a/1`` for ``(a)(1)``). ``code`` and ``title`` are empty/0 for
    :data:`OTHER_LAW`, whose ``reporter`` names the code as eyecite read it."""

    start: int
    end: int
    written: str
    form: str
    code: str
    title: int
    section: str
    pin: str = ""
    reporter: str = ""

    @property
    def pin_label(self) -> str:
        return "".join(f"({p})" for p in self.pin.split("/")) if self.pin else ""


def _pin_path(pin: str | None) -> str:
    return "/".join(_PIN_PART.findall(pin or ""))


def _code(written: str) -> str:
    return CFR if written.replace(" ", "").replace(".", "").upper().startswith("CFR") else USC


def _form(code: str, number: str, sign: str | None, part: str | None) -> str:
    if part or (code == CFR and "." not in number):
        return PART
    return FULL if sign else NO_SECTION_SIGN


def _full_citations(text: str) -> list[FoundStatute]:
    found: list[FoundStatute] = []
    for match in _FULL.finditer(text):
        code, title, sign = _code(match["code"]), int(match["title"]), match["sign"]
        numbers = [(match["num"], match["pin"])]
        end = match.end()
        if sign and (sign == "§§" or sign.lower().startswith(("sections", "secs"))):
            numbers, end = _more_sections(text, match)
        form = RANGE if len(numbers) > 1 else _form(code, numbers[0][0], sign, match["part"])
        for number, pin in numbers:
            found.append(
                FoundStatute(
                    start=match.start(),
                    end=end,
                    written=text[match.start() : end],
                    form=form if form != RANGE or code == USC or "." in number else PART,
                    code=code,
                    title=title,
                    section=number,
                    pin=_pin_path(pin),
                )
            )
    return found


def _more_sections(text: str, match: re.Match[str]) -> tuple[list[tuple[str, str | None]], int]:
    first, pin = match["num"], match["pin"]
    numbers: list[tuple[str, str | None]] = []
    low, dash, high = first.partition("-")
    if dash and low.isdigit() and high.isdigit() and int(high) > int(low):  # `§§ 1331-1332`
        numbers = [(low, None), (high, pin)]
    else:
        numbers = [(first, pin)]
    end = match.end()
    while more := _MORE.match(text, end):
        numbers.append((more["num"], more["pin"]))
        end = more.end()
    return numbers, end


def _prose_citations(text: str) -> list[FoundStatute]:
    return [
        FoundStatute(
            start=m.start(),
            end=m.end(),
            written=m.group(0),
            form=PROSE,
            code=CFR if m["cfr"] else USC,
            title=int(m["title"]),
            section=m["num"],
            pin=_pin_path(m["pin"]),
        )
        for m in _PROSE.finditer(text)
    ]


@functools.cache
def _eyecite() -> Any:
    import eyecite

    return eyecite


def _eyecite_citations(text: str) -> tuple[list[FoundStatute], list[tuple[int, int]]]:
    """eyecite's law citations, and the spans of its case citations (an ``id.`` after one is the case's)."""
    eyecite = _eyecite()
    laws: list[FoundStatute] = []
    cases: list[tuple[int, int]] = []
    for citation in eyecite.get_citations(text):
        kind = type(citation).__name__
        start, end = citation.span()
        if kind != "FullLawCitation":
            if kind != "UnknownCitation" and kind != "IdCitation":
                cases.append((start, end))
            continue
        groups = citation.groups
        reporter = str(groups.get("reporter") or "")
        code = _LAW_REPORTERS.get(reporter, "")
        title = str(groups.get("title") or groups.get("chapter") or "")
        section = str(groups.get("section") or "")
        if code and title.isdigit() and section:
            laws.append(
                FoundStatute(
                    start=start,
                    end=end,
                    written=text[start:end],
                    form=_form(code, section, "§", None),
                    code=code,
                    title=int(title),
                    section=section,
                    pin=_pin_path(citation.metadata.pin_cite),
                )
            )
        else:
            laws.append(
                FoundStatute(start, end, text[start:end], OTHER_LAW, "", 0, section, reporter=reporter or "unknown")
            )
    return laws, cases


def _overlaps(a: FoundStatute, spans: list[tuple[int, int]]) -> bool:
    return any(a.start < end and start < a.end for start, end in spans)


def _id_citations(text: str, found: list[FoundStatute], cases: list[tuple[int, int]]) -> list[FoundStatute]:
    """``Id. § 3``: the title of the statute cited last before it, unless a case or a code the library does not
    hold was cited last."""
    result: list[FoundStatute] = []
    cited = sorted(found, key=lambda f: f.start)
    for match in _ID.finditer(text):
        before = [f for f in cited + result if f.end <= match.start()]
        if not before:
            continue
        antecedent = max(before, key=lambda f: f.end)
        if not antecedent.code:  # after a state code's citation: that code's section
            continue
        if any(antecedent.end <= start and end <= match.start() for start, end in cases):
            continue
        result.append(
            FoundStatute(
                start=match.start(),
                end=match.end(),
                written=match.group(0),
                form=ID,
                code=antecedent.code,
                title=antecedent.title,
                section=match["num"],
                pin=_pin_path(match["pin"]),
            )
        )
    return result


def find_statutes(text: str) -> list[FoundStatute]:
    """Every U.S. Code and C.F.R. citation in ``text`` (and eyecite's other law citations), in text order; a
    range or list of sections gives one citation per section it names, all with the range's span."""
    found = _full_citations(text)
    found += [p for p in _prose_citations(text) if not _overlaps(p, [(f.start, f.end) for f in found])]
    laws, cases = _eyecite_citations(text)
    spans = [(f.start, f.end) for f in found]
    found += [law for law in laws if not _overlaps(law, spans)]
    found += _id_citations(text, found, cases)
    return sorted(found, key=lambda f: f.start)
