"""Statute and regulation citations resolved against the loaded releases, and statute quotes verified.

A citation is :data:`VERIFIED` (the section, and the subdivision it pins, is in the release checked),
:data:`NOT_FOUND` (the title is loaded and has no such section or subdivision: the citation may be
fabricated) or :data:`UNCHECKED` (the title, or the CFR volume holding the part, is not loaded; the reason
says what to load). The release checked is the latest complete one of the title unless the caller names one,
and every result names it. A quote is verified with :mod:`lqai_verify.verification` (the verifier and policy
used for opinions) against the cited section's text, or the pinned subdivision's; a quote found only in
another section of the title is :data:`FOUND_ELSEWHERE`, never verified. Results are plain data
(:meth:`StatuteCitationCheck.record`) a per-turn row can store.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass, field
from typing import Any

from django.db.models import Q

from authorities.finder import CFR, OTHER_LAW, PART, USC, FoundStatute
from authorities.models import AuthorityFile, AuthorityRelease, StatuteSection
from lqai_verify.verification import ALTERED, alterations_record, context_flags_record, verify_quote_detailed

VERIFIED, NOT_FOUND, UNCHECKED = "verified", "not_found", "unchecked"
# Quote statuses beyond VERIFIED: found with an alteration that may change the meaning (a person must read it);
# found only in another section of the title; not found at all.
ALTERED_QUOTE, FOUND_ELSEWHERE, FAILED = "altered", "found_elsewhere", "failed"
# How many other sections of a title a failed quote is tried against (those holding its rarest words).
ELSEWHERE_CANDIDATES = 40
_WORD = re.compile(r"[A-Za-z]{4,}")

TitleKey = tuple[str, int]  # ("usc", 9)


@dataclass(frozen=True, slots=True)
class ReleaseRef:
    """The release a check used, as a record names it."""

    id: int
    code: str
    title: int
    release_point: str
    label: str
    official: bool

    @classmethod
    def of(cls, release: AuthorityRelease) -> ReleaseRef:
        return cls(release.pk, release.code, release.title, release.release_point, release.label, release.official)

    @property
    def named(self) -> str:
        """The release in words: ``release point Online@117-80``, ``the edition revised as of April 1, 2017``."""
        return f"the edition {self.label}" if self.code == CFR else f"release point {self.label}"

    @property
    def cite_date(self) -> str:
        """The parenthetical of a cite: the release point for the Code, the edition's year for the CFR."""
        return self.release_point[:4] if self.code == CFR else self.release_point


def cite(code: str, title: int, section: str, pin_label: str = "", *, part: bool = False) -> str:
    """``9 U.S.C. § 2``, ``35 U.S.C. § 112(a)``, ``27 C.F.R. § 478.11``, ``27 C.F.R. pt. 478``."""
    if code == CFR:
        return f"{title} C.F.R. pt. {section}" if part else f"{title} C.F.R. § {section}{pin_label}"
    return f"{title} U.S.C. § {section}{pin_label}"


@dataclass(frozen=True, slots=True)
class StatuteCitationCheck:
    """One citation and what the library says of it. ``cited`` is the citation the way a lawyer writes it,
    with the release checked (``9 U.S.C. § 2 (Online@117-80)``) when there is one."""

    citation: FoundStatute
    status: str
    reason: str
    identifier: str = ""
    cited: str = ""
    release: ReleaseRef | None = None
    # The primary key of the section resolved to (none for a part, or a citation not verified).
    section_id: int | None = None

    def record(self) -> dict[str, Any]:
        """The check as JSON-ready data."""
        return asdict(self)


@dataclass(frozen=True, slots=True)
class StatuteQuoteCheck:
    """One quote checked against the section (or subdivision) its citation names.

    ``start``/``end`` index the text of the section ``identifier`` (the section cited, or where the quote was
    found instead); ``passage`` is that text; ``alterations`` and ``context_flags`` are the verifier's records
    with offsets into the same text."""

    quote: str
    status: str
    reason: str
    check: StatuteCitationCheck
    method: str = ""
    confidence: float | None = None
    identifier: str = ""
    start: int | None = None
    end: int | None = None
    passage: str = ""
    found_in: str = ""
    # The primary key of the section ``identifier`` (where ``start``/``end`` point), when the quote was found.
    section_id: int | None = None
    alterations: list[dict[str, Any]] = field(default_factory=list)
    context_flags: list[dict[str, Any]] = field(default_factory=list)

    def record(self) -> dict[str, Any]:
        return asdict(self)


def _code_name(code: str) -> str:
    return "the CFR" if code == CFR else "the U.S. Code"


def _what_to_load(code: str, title: int) -> str:
    if code == CFR:
        return f"title {title} of the CFR is not loaded: load GPO's annual edition (CFR-<year>-title{title}-vol<n>.xml)"
    return f"title {title} of the U.S. Code is not loaded: load OLRC's usc{title:02d}.xml"


class _Library:
    """The releases and files one call reads, each queried once."""

    def __init__(self, release_points: Mapping[TitleKey, str] | None) -> None:
        self.release_points = dict(release_points or {})
        self.releases: dict[TitleKey, AuthorityRelease | None] = {}
        self.files: dict[int, list[AuthorityFile]] = {}

    def release(self, key: TitleKey) -> AuthorityRelease | None:
        if key not in self.releases:
            complete = AuthorityRelease.objects.filter(
                code=key[0], title=key[1], files__completed_at__isnull=False
            ).distinct()
            if key in self.release_points:
                complete = complete.filter(release_point=self.release_points[key])
            self.releases[key] = complete.order_by("-sequence", "-id").first()
        return self.releases[key]

    def covers(self, release: AuthorityRelease, part: int | None) -> bool:
        if release.pk not in self.files:
            self.files[release.pk] = list(release.files.filter(completed_at__isnull=False))
        return any(
            part is None
            or f.first_part is None
            or (f.first_part <= part and (f.last_part is None or part <= f.last_part))
            for f in self.files[release.pk]
        )


def _part_of(found: FoundStatute) -> int | None:
    head = found.section.split(".")[0]
    return int(head) if found.code == CFR and head.isdigit() else None


def _check_one(found: FoundStatute, library: _Library, sections: dict[str, StatuteSection]) -> StatuteCitationCheck:
    if found.form == OTHER_LAW:
        return StatuteCitationCheck(found, UNCHECKED, f"{found.reporter} is not a code the library holds")
    release = library.release((found.code, found.title))
    if release is None:
        wanted = library.release_points.get((found.code, found.title))
        reason = (
            f"release {wanted} of title {found.title} of {_code_name(found.code)} is not loaded"
            if wanted
            else _what_to_load(found.code, found.title)
        )
        return StatuteCitationCheck(found, UNCHECKED, reason)
    ref, part = ReleaseRef.of(release), _part_of(found)
    is_part = found.form == PART
    written = cite(found.code, found.title, found.section, found.pin_label, part=is_part)
    cited = f"{written} ({ref.cite_date})"
    if not library.covers(release, part):
        reason = f"part {part} of title {found.title} of the CFR is in a volume of {ref.named} not loaded"
        return StatuteCitationCheck(found, UNCHECKED, reason, cited=cited, release=ref)
    if is_part:
        identifier = f"/us/cfr/t{found.title}/p{found.section}"
        exists = StatuteSection.objects.filter(release=release, part=part).exists()
        missing = f"{written} has no sections in {ref.named}"
    else:
        identifier = f"/us/{found.code}/t{found.title}/s{found.section}"
        section = sections.get(identifier)
        exists = section is not None
        missing = f"title {found.title} of {_code_name(found.code)} has no § {found.section} in {ref.named}"
        if section is not None and found.pin and not _subdivisions(section, found.pin):
            exists = False
            missing = f"{cite(found.code, found.title, found.section)} has no {found.pin_label} in {ref.named}"
        if found.pin:
            identifier = f"{identifier}/{found.pin}"
    if not exists:
        return StatuteCitationCheck(
            found, NOT_FOUND, f"{missing}: the citation may be fabricated", identifier, cited, ref
        )
    section_id = None if is_part else sections[f"/us/{found.code}/t{found.title}/s{found.section}"].pk
    return StatuteCitationCheck(found, VERIFIED, f"{written} is in {ref.named}", identifier, cited, ref, section_id)


def _subdivisions(section: StatuteSection, path: str) -> list[tuple[int, int]]:
    return [(s["start"], s["end"]) for s in section.subdivisions if s["path"] == path]


def resolve_statutes(
    found: Sequence[FoundStatute], *, release_points: Mapping[TitleKey, str] | None = None
) -> list[StatuteCitationCheck]:
    """Each citation of ``found`` checked against the library, in the same order. ``release_points`` names the
    release to check a title against (``{("usc", 9): "Online@117-80"}``); by default the latest loaded."""
    library = _Library(release_points)
    wanted: dict[int, set[str]] = {}
    for f in found:
        release = library.release((f.code, f.title)) if f.code else None
        if release is not None and f.form != PART:
            wanted.setdefault(release.pk, set()).add(f"/us/{f.code}/t{f.title}/s{f.section}")
    query = Q(pk__in=[])
    for release_id, identifiers in wanted.items():
        query |= Q(release_id=release_id, identifier__in=identifiers)
    sections = {s.identifier: s for s in StatuteSection.objects.filter(query)} if wanted else {}
    return [_check_one(f, library, sections) for f in found]


def _attempt(quote: str, section: StatuteSection, spans: list[tuple[int, int]]) -> tuple[Any, int, str]:
    """The first of ``spans`` of the section's text the quote verifies in: ``(match, offset, "")``, or
    ``(None, 0, reason)``."""
    reason = ""
    for start, end in spans:
        match, reason = verify_quote_detailed(quote, section.text[start:end])
        if match is not None:
            return match, start, ""
    return None, 0, reason


def _found(
    quote: str, check: StatuteCitationCheck, section: StatuteSection, match: Any, offset: int, **extra: Any
) -> StatuteQuoteCheck:
    status = extra.pop("status", ALTERED_QUOTE if match.method == ALTERED else VERIFIED)
    return StatuteQuoteCheck(
        quote=quote,
        status=status,
        check=check,
        method=match.method,
        confidence=match.confidence,
        identifier=section.identifier,
        section_id=section.pk,
        start=match.start + offset,
        end=match.end + offset,
        passage=section.text[match.start + offset : match.end + offset],
        alterations=alterations_record(match, offset=offset),
        context_flags=context_flags_record(match, offset=offset),
        **extra,
    )


def verify_statute_quote(*, quote: str, check: StatuteCitationCheck) -> StatuteQuoteCheck:
    """``quote`` checked against the text ``check`` resolved to (a section, a pinned subdivision, a part).

    Unchecked unless the citation is verified. Otherwise verified (or altered, with the alterations that may
    change the meaning) when found there; else, if found in another subdivision of the section or another
    section of the title in the same release, :data:`FOUND_ELSEWHERE` naming where ("found in 9 U.S.C. § 3,
    cited as § 2"); else failed, with the verifier's reason."""
    if check.status != VERIFIED or check.release is None:
        return StatuteQuoteCheck(quote, UNCHECKED, f"the citation is {check.status.replace('_', ' ')}", check)
    found, release_id = check.citation, check.release.id
    title_sections = StatuteSection.objects.filter(release_id=release_id)
    if found.form == PART:
        for section in title_sections.filter(part=_part_of(found)).order_by("id"):
            match, offset, _ = _attempt(quote, section, [(0, len(section.text))])
            if match is not None:
                return _found(quote, check, section, match, offset, reason=f"found in {_section_cite(section)}")
        return StatuteQuoteCheck(quote, FAILED, f"not found in {check.cited}", check)
    section = title_sections.get(identifier=f"/us/{found.code}/t{found.title}/s{found.section}")
    spans = _subdivisions(section, found.pin) if found.pin else [(0, len(section.text))]
    match, offset, reason = _attempt(quote, section, spans)
    if match is not None:
        return _found(quote, check, section, match, offset, reason=f"found in {check.cited}")
    elsewhere = _found_elsewhere(quote, check, section, title_sections)
    return elsewhere or StatuteQuoteCheck(quote, FAILED, f"not found in {check.cited}: {reason}", check)


def _section_cite(section: StatuteSection, pin_label: str = "") -> str:
    code, title = section.identifier.split("/")[2], int(section.identifier.split("/")[3][1:])
    return cite(code, title, section.number, pin_label)


def _found_elsewhere(
    quote: str, check: StatuteCitationCheck, cited: StatuteSection, title_sections: Any
) -> StatuteQuoteCheck | None:
    written = f"cited as § {check.citation.section}{check.citation.pin_label}"
    if check.citation.pin:
        match, offset, _ = _attempt(quote, cited, [(0, len(cited.text))])
        if match is not None:
            where = _pin_at(cited, match.start + offset)
            found_in = _section_cite(cited, where)
            return _found(
                quote, check, cited, match, offset, status=FOUND_ELSEWHERE, found_in=found_in,
                reason=f"found in {found_in}, {written}",
            )  # fmt: skip
    words = sorted(set(_WORD.findall(quote)), key=len, reverse=True)[:3]
    candidates = title_sections.exclude(pk=cited.pk)
    for word in words:
        candidates = candidates.filter(text__icontains=word)
    for section in candidates.order_by("id")[:ELSEWHERE_CANDIDATES]:
        match, offset, _ = _attempt(quote, section, [(0, len(section.text))])
        if match is not None:
            found_in = _section_cite(section)
            return _found(
                quote, check, section, match, offset, status=FOUND_ELSEWHERE, found_in=found_in,
                reason=f"found in {found_in}, {written}",
            )  # fmt: skip
    return None


def _pin_at(section: StatuteSection, offset: int) -> str:
    """The label of the innermost subdivision holding ``offset`` (``(b)(1)``), empty if none."""
    holding = [s for s in section.subdivisions if s["start"] <= offset < s["end"]]
    if not holding:
        return ""
    innermost = min(holding, key=lambda s: s["end"] - s["start"])
    return "".join(f"({p})" for p in innermost["path"].split("/"))


__all__ = [
    "ALTERED_QUOTE",
    "CFR",
    "FAILED",
    "FOUND_ELSEWHERE",
    "NOT_FOUND",
    "UNCHECKED",
    "USC",
    "VERIFIED",
    "ReleaseRef",
    "StatuteCitationCheck",
    "StatuteQuoteCheck",
    "resolve_statutes",
    "verify_statute_quote",
]
