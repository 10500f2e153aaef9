"""A statute or regulation looked up by its citation: the section's (or pinned subdivision's) words in a release.

What the assistant's ``statute_lookup`` tool reads: each citation written in a request (``9 U.S.C. § 2``,
``35 U.S.C. 112(a)``, ``27 C.F.R. pt. 478``) resolved as a check resolves it (:mod:`authorities.resolver`), and,
when the library holds it, its heading and text in the release checked. Plain data, no Django objects.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

from authorities.finder import PART, find_statutes
from authorities.models import AuthorityRelease, StatuteSection
from authorities.resolver import VERIFIED, StatuteCitationCheck, TitleKey, cite, resolve_statutes

# The most citations one lookup resolves (a range such as `§§ 1-16` names many sections).
MAX_CITATIONS = 5
# The most sections of a part a part's lookup lists.
MAX_PART_SECTIONS = 50


@dataclass(frozen=True, slots=True)
class StatuteText:
    """One citation looked up. ``text`` is the cited section's text, or the pinned subdivision's (its label
    included); empty unless ``check.status`` is verified, and for a part, whose sections ``contents`` lists
    (``27 C.F.R. § 478.11 Meaning of terms.``). ``publisher`` names who released the text (``OLRC``, ``GPO``)."""

    check: StatuteCitationCheck
    heading: str = ""
    text: str = ""
    contents: tuple[str, ...] = ()
    publisher: str = ""
    legal_status: str = ""


def _subdivision_text(section: StatuteSection, pin: str) -> str:
    spans = [(s["start"], s["end"]) for s in section.subdivisions if s["path"] == pin]
    return section.text[spans[0][0] : spans[0][1]] if spans else ""


def _looked_up(check: StatuteCitationCheck, release: AuthorityRelease) -> StatuteText:
    found = check.citation
    sections = StatuteSection.objects.filter(release=release)
    publisher, legal_status = release.publisher, release.legal_status
    if found.form == PART:
        listed = sections.filter(part=int(found.section)).order_by("id")[:MAX_PART_SECTIONS]
        contents = tuple(f"{cite(found.code, found.title, s.number)} {s.heading}".strip() for s in listed)
        return StatuteText(check, contents=contents, publisher=publisher, legal_status=legal_status)
    section = sections.get(identifier=f"/us/{found.code}/t{found.title}/s{found.section}")
    text = _subdivision_text(section, found.pin) if found.pin else section.text
    return StatuteText(check, heading=section.heading, text=text, publisher=publisher, legal_status=legal_status)


def look_up_statutes(*, citation: str, release_points: Mapping[TitleKey, str] | None = None) -> list[StatuteText]:
    """The statute and regulation citations written in ``citation`` (at most :data:`MAX_CITATIONS`), each
    resolved against the library (the latest release of its title, or the one ``release_points`` names) and,
    when verified, with the words of the release checked. Empty when ``citation`` cites no section or part."""
    checks = resolve_statutes(find_statutes(citation)[:MAX_CITATIONS], release_points=release_points)
    releases = AuthorityRelease.objects.in_bulk({c.release.id for c in checks if c.release is not None})
    return [
        _looked_up(check, releases[check.release.id])
        if check.status == VERIFIED and check.release is not None
        else StatuteText(check)
        for check in checks
    ]


def library_holds_a_title() -> bool:
    """Whether any title is loaded whole (a lookup can find something)."""
    return AuthorityRelease.objects.filter(files__completed_at__isnull=False).exists()
