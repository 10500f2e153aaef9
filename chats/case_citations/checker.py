"""The case-citation check of an answer: does each cited case exist, and is it the case the answer names?

:func:`check_case_citations` gives one :class:`CheckedCitation` per citation span found in the answer
(:mod:`chats.case_citations.extraction`): a full case citation is looked up by volume/reporter/page in the
local opinion store, then in CourtListener when configured, and compared with the name written
(``verified``, ``name_mismatch``, ``not_found``, ``ambiguous`` or ``unchecked`` with why); short forms,
``id.``, ``supra`` and references take the outcome of the citation they resolve to; statutes and other kinds
are ``unchecked`` with why, never dropped. It never raises for a lookup failure: the worst outcome is
``unchecked`` with the reason. Each outcome: docs/verification.md.
"""

from __future__ import annotations

import functools
import re
from collections.abc import Iterable
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING

from django.conf import settings

from chats import courtlistener
from chats.case_citations.extraction import CitationKey, FoundCitation, Kind, StreamedCitations, extract_citations
from chats.case_citations.lookup import Lookup, Outcome, find_local, lookup_courtlistener
from chats.case_citations.names import names_match, only_generic, parse_case_name
from chats.models import CaseCitationStatus, CaselawOpinion

if TYPE_CHECKING:
    from courtlistener import CourtListener


Status = CaseCitationStatus  # what the check found: the statuses its rows store


@dataclass(frozen=True, slots=True)
class CheckedCitation:
    """One citation span of the answer and what the check found.

    ``start``/``end`` index the answer (``text == answer[start:end]``). ``citation`` is normalized: the
    volume/reporter/page of the case (for a short form, ``id.`` or ``supra``, of the case it refers to),
    or eyecite's corrected form of anything else. ``case_name`` is the name as written in the answer (for
    ``id.``, its antecedent's). ``opinion`` is the resolved case (also for a ``name_mismatch``: the case the
    citation really is), ``candidates`` the cases of an ``ambiguous`` one. ``provider`` is where the answer
    came from (``local``, ``courtlistener``), empty when nothing was looked up. ``antecedent`` is the index,
    in the returned list, of the citation a short form, ``id.``, ``supra`` or reference refers to.
    """

    start: int
    end: int
    kind: Kind
    text: str
    citation: str
    case_name: str
    status: Status
    detail: str
    opinion: CaselawOpinion | None = None
    candidates: tuple[CaselawOpinion, ...] = ()
    provider: str = ""
    antecedent: int | None = None
    pin: str = ""  # the pin cite as written (`311`, `311-12`), "" if none
    pin_status: str = ""  # "" (no pin) | PIN_WITHIN | PIN_OUTSIDE | PIN_UNCHECKED
    parenthetical_mismatch: bool = False  # the year or court written does not match the opinion (in the detail)


PIN_WITHIN = "within"
PIN_OUTSIDE = "outside"
PIN_UNCHECKED = "unchecked"


NOT_CHECKED_LOCALLY = (
    "not in the local opinion store, and CourtListener was not asked (COURTLISTENER_API_TOKEN unset): "
    "whether a case exists at this citation is unknown"
)


def check_case_citations(
    answer_text: str,
    *,
    courtlistener_client: CourtListener | None = None,
    use_courtlistener: bool = True,
    max_chars: int | None = None,
    streamed: StreamedCitations | None = None,
) -> list[CheckedCitation]:
    """Check every citation of ``answer_text`` (see the module docstring).

    CourtListener is asked only about full citations the local store does not hold, 250 to a request,
    through ``courtlistener_client`` or, when none is given, the client of the settings' token (none when
    ``COURTLISTENER_API_TOKEN`` is unset); ``use_courtlistener=False`` checks against the local store only.
    Materializes the opinions CourtListener returns (each in a savepoint).

    Only the first ``max_chars`` characters (default ``LQAI_CASE_CITATION_MAX_CHARS``), cut at a line or word
    break, are read: the rest of a longer answer is one ``unchecked`` entry that says so.

    ``streamed``: the answer's citations as read while it streamed (fed exactly ``answer_text``): only its
    unfinished rest is read now; the result is the same (see :class:`StreamedCitations`).
    """
    limit = settings.LQAI_CASE_CITATION_MAX_CHARS if max_chars is None else max_chars
    rest: CheckedCitation | None = None
    if len(answer_text) > limit:
        cut = _cut_before(answer_text, limit)
        rest = CheckedCitation(
            start=cut,
            end=len(answer_text),
            kind=Kind.OTHER,
            text="",
            citation="(the rest of the answer)",
            case_name="",
            status=Status.UNCHECKED,
            detail=f"the answer's last {len(answer_text) - cut} characters were not checked for case citations: "
            f"the check reads at most {limit} characters of an answer (LQAI_CASE_CITATION_MAX_CHARS)",
        )
        answer_text = answer_text[:cut]
    found = streamed.citations(answer_text) if streamed is not None else extract_citations(answer_text)
    checked = _check_found(found, courtlistener_client=courtlistener_client, use_courtlistener=use_courtlistener)
    return [*checked, rest] if rest is not None else checked


def check_found_citations(
    found: list[FoundCitation], *, courtlistener_client: CourtListener | None = None, use_courtlistener: bool = True
) -> list[CheckedCitation]:
    """The check of :func:`check_case_citations` on citations already read from a text (by
    :func:`~chats.case_citations.extraction.extract_citations`, whose list, in order, it takes whole), for a
    caller that read them itself: eyecite does not read the text twice. No length bound: the caller's."""
    return _check_found(found, courtlistener_client=courtlistener_client, use_courtlistener=use_courtlistener)


def _cut_before(text: str, limit: int) -> int:
    """Where to stop reading ``text`` at most ``limit`` characters in: at its last paragraph, line or word break
    before the limit (a citation is never cut in two), or at the limit."""
    for separator in ("\n\n", "\n", " "):
        at = text.rfind(separator, max(0, limit - 2000), limit)
        if at > 0:
            return at
    return limit


def _check_found(
    found: list[FoundCitation], *, courtlistener_client: CourtListener | None, use_courtlistener: bool
) -> list[CheckedCitation]:
    keys = list(dict.fromkeys(f.key for f in found if f.kind is Kind.FULL and f.key is not None))
    lookups = find_local(keys)
    missing = [key for key in keys if lookups[key].outcome == Outcome.NOT_FOUND]
    client = None
    if use_courtlistener and missing:
        client = courtlistener_client or courtlistener.client_from_settings()
    if client is not None:
        lookups |= lookup_courtlistener(client, missing)
    else:
        # The local store holds a few opinions: that it lacks a citation says nothing of whether the case
        # exists. Only an authority over all reported cases (CourtListener) can say "no case at this citation".
        for key in missing:
            lookups[key] = replace(lookups[key], outcome=Outcome.UNCHECKED, detail=NOT_CHECKED_LOCALLY)

    _load_texts(lookups[key] for key in _pinned_keys(found) if key in lookups)
    checked: list[CheckedCitation] = []
    for citation in found:
        checked.append(_check(citation, lookups, checked))
    return checked


def _pinned_keys(found: list[FoundCitation]) -> set[CitationKey]:
    """The cases cited with a pin cite (directly, or by a short form, ``id.`` or ``supra``)."""
    keys: set[CitationKey] = set()
    for citation in found:
        if not citation.pin:
            continue
        seen = 0
        while citation.kind is not Kind.FULL and citation.antecedent is not None and seen < len(found):
            citation, seen = found[citation.antecedent], seen + 1
        if citation.key is not None and citation.kind is Kind.FULL:
            keys.add(citation.key)
    return keys


def _load_texts(lookups: Iterable[Lookup]) -> None:
    """Load, in one query, the text of each resolved opinion that was read without it (the local lookup defers
    it): the pin check reads its star paging (:func:`last_page`), which would otherwise be a query per case."""
    deferred = {
        lookup.opinion.pk: lookup.opinion
        for lookup in lookups
        if lookup.opinion is not None and "text" in lookup.opinion.get_deferred_fields()
    }
    if not deferred:
        return
    for pk, text in CaselawOpinion.objects.filter(pk__in=deferred).values_list("pk", "text"):
        deferred[pk].text = text


def _check(found: FoundCitation, lookups: dict[CitationKey, Lookup], earlier: list[CheckedCitation]) -> CheckedCitation:
    base = CheckedCitation(
        start=found.start,
        end=found.end,
        kind=found.kind,
        text=found.text,
        citation=found.citation,
        case_name=found.case_name,
        status=Status.UNCHECKED,
        detail="",
        antecedent=found.antecedent,
    )
    base = replace(base, pin=found.pin)
    if found.kind is Kind.FULL:
        if found.key is None:
            return replace(base, detail="no page number (a slip opinion or a case not yet paginated)")
        checked = _checked_full(base, lookups[found.key])
        return _parenthetical_compared(_pin_checked(checked, found.key.page), found)
    if found.kind is Kind.STATUTE:
        return replace(base, detail="statutes and regulations are not checked")
    if found.kind is Kind.OTHER:
        return replace(base, detail=found.unresolvable or "only case citations are checked")
    if found.antecedent is None:
        return replace(base, detail="refers to no full case citation earlier in the answer")
    antecedent = earlier[found.antecedent]
    disagreement = _written_volume_disagrees(found, antecedent)
    if disagreement:
        # Linked by name only: the volume or reporter written is another book, so not the case it names.
        return replace(base, antecedent=None, detail=disagreement)
    inherited = replace(
        base,
        citation=antecedent.citation,
        case_name=found.case_name or antecedent.case_name,
        status=antecedent.status,
        detail=f"refers to {antecedent.citation}: {antecedent.detail}",
        opinion=antecedent.opinion,
        candidates=antecedent.candidates,
        provider=antecedent.provider,
    )
    if found.kind is Kind.SHORT and found.case_name and antecedent.opinion is not None:
        # The short name written with it must be one of the parties of the case it cites.
        inherited = _compared(inherited, antecedent.opinion, (antecedent.opinion.case_name,), short_form=True)
    first_page = antecedent.citation.rsplit(" ", 1)[-1]
    return _pin_checked(replace(inherited, pin_status="", status=_without_pin(inherited.status)), first_page)


def _without_pin(status: Status) -> Status:
    """An antecedent's pin is its own: a citation that refers to it is checked on its own pin."""
    return Status.VERIFIED if status is Status.PIN_MISMATCH else status


def _written_volume_disagrees(found: FoundCitation, antecedent: CheckedCitation) -> str:
    """Why a short form's own volume and reporter (`412 F.3d` of `Jones, 412 F.3d at 880`) are not those of
    the full citation it is linked to (`411 F.3d 870`), or ""."""
    if found.kind is not Kind.SHORT or not found.written_volume:
        return ""
    parts = antecedent.citation.split(" ")
    volume, reporter = parts[0], " ".join(parts[1:-1])
    if found.written_volume == volume and _squeezed(found.written_reporter) == _squeezed(reporter):
        return ""
    return (
        f"writes {found.written_volume} {found.written_reporter}, but the case it names "
        f"({antecedent.case_name or antecedent.citation}) is at {antecedent.citation}: no full citation of this "
        "volume earlier in the answer"
    )


def _squeezed(reporter: str) -> str:
    return reporter.replace(" ", "").lower()


_PIN_PAGES = re.compile(r"^(\d+)(?:-(\d+))?$")


def pin_pages(pin: str) -> tuple[int, int] | None:
    """The first and last page of a pin cite (`311-12` -> 311, 312), or None (`*3`: a database's screen)."""
    m = _PIN_PAGES.match(pin)
    if m is None:
        return None
    first = int(m.group(1))
    last = m.group(2)
    if last is None:
        return first, first
    if len(last) < len(m.group(1)):  # `311-12`: the last page written with its leading digits left off
        last = m.group(1)[: len(m.group(1)) - len(last)] + last
    return first, max(first, int(last))


def _pin_checked(checked: CheckedCitation, first_page: str) -> CheckedCitation:
    """``checked`` with its pin cite compared with the cited opinion's pages: the first from the citation, the
    last from the opinion's star paging (:func:`last_page`). A pin outside them is a ``pin_mismatch`` (unless
    the name already failed); any other is ``unchecked`` here: ``pins`` compares it with the page of the passage
    quoted with it once the answer's quotes are verified."""
    if not checked.pin or checked.opinion is None or not first_page.isdigit():
        return checked
    pages = pin_pages(checked.pin)
    if pages is None:
        return replace(
            checked, pin_status=PIN_UNCHECKED, detail=f"{checked.detail}; pin cite {checked.pin} not checked"
        )
    first = int(first_page)
    last = last_page(checked.opinion, first)
    outside = ""
    if pages[0] < first:
        outside = f"pin cite {checked.pin} is before the opinion's first page, {first}"
    elif last is not None and pages[1] > last:
        outside = f"pin cite {checked.pin} is past the opinion's last page, {last} (from its star paging)"
    if outside:
        status = Status.PIN_MISMATCH if checked.status is Status.VERIFIED else checked.status
        return replace(checked, status=status, pin_status=PIN_OUTSIDE, detail=f"{checked.detail}; {outside}")
    if last is None:
        return replace(
            checked,
            pin_status=PIN_UNCHECKED,
            detail=f"{checked.detail}; pin cite {checked.pin} not checked: the opinion's last page is unknown",
        )
    # Within the case, but only the page of a passage quoted with it can confirm it (``pins``): until then,
    # not checked.
    return replace(
        checked,
        pin_status=PIN_UNCHECKED,
        detail=f"{checked.detail}; pin cite within pages {first}-{last}, with no passage quoted with it to show "
        "its page",
    )


# Star paging in an opinion's text: `*676`, glued or not, and `[590 F.Supp.3d 861]` (volume, reporter, page).
_STAR_PAGE = re.compile(r"(?<![\w*])\*(\d{2,5})(?![\d.,*])|\[\*?(\d{1,4}) [A-Za-z][^\[\]\n]{0,30}? \*?(\d{1,6})\]")
# A star page further than this past the first page is another reporter's paging, not this opinion's.
_MAX_OPINION_PAGES = 2000


def last_page(opinion: CaselawOpinion, first: int) -> int | None:
    """The opinion's last page in the reporter whose first page is ``first``: the highest star page of its
    text at or after ``first`` (within a plausible length), or None when its text has no star paging."""
    return _last_page(opinion.text, first)


@functools.lru_cache(maxsize=256)
def _last_page(text: str, first: int) -> int | None:
    pages = [int(m.group(1) or m.group(3)) for m in _STAR_PAGE.finditer(text)]
    pages = [page for page in pages if first <= page <= first + _MAX_OPINION_PAGES]
    return max(pages) if pages else None


def _parenthetical_compared(checked: CheckedCitation, found: FoundCitation) -> CheckedCitation:
    """``checked`` with what its parenthetical says (year, court) compared with the opinion: a mismatch is
    reported in the detail. It does not fail the citation: the volume and page identify the case, and the
    name check says whether it is the case the answer means; a wrong year or court misleads less."""
    opinion = checked.opinion
    if opinion is None:
        return checked
    notes = []
    if found.year and opinion.date_filed is not None and int(found.year) != opinion.date_filed.year:
        notes.append(f"the parenthetical says {found.year}, but the opinion was filed in {opinion.date_filed.year}")
    court = _court_id(opinion.court)
    if found.court and court and found.court != court:
        notes.append(f"the parenthetical names another court ({found.court}) than the opinion's ({opinion.court})")
    if not notes:
        return checked
    return replace(checked, detail="; ".join([checked.detail, *notes]), parenthetical_mismatch=True)


@functools.cache
def _court_ids() -> dict[str, str]:
    from courts_db import courts

    return {_squeezed(str(court["name"])): str(court["id"]) for court in courts} | {
        str(court["id"]): str(court["id"]) for court in courts
    }


def _court_id(court: str) -> str:
    """The courts-db id of an opinion's court (stored as its id or its courts-db name), or "" if not known."""
    return _court_ids().get(_squeezed(court), "") if court else ""


def _checked_full(base: CheckedCitation, lookup: Lookup) -> CheckedCitation:
    checked = replace(base, provider=lookup.provider)
    if lookup.outcome == Outcome.RESOLVED and lookup.opinion is not None:
        if not base.case_name:
            return replace(
                checked,
                status=Status.VERIFIED,
                opinion=lookup.opinion,
                detail=f"{base.citation} is {lookup.opinion.case_name}; no case name is written to compare",
            )
        return _compared(checked, lookup.opinion, lookup.official_names, short_form=False)
    if lookup.outcome == Outcome.AMBIGUOUS:
        names = "; ".join(c.case_name for c in lookup.candidates)
        return replace(
            checked, status=Status.AMBIGUOUS, candidates=lookup.candidates, detail=f"{lookup.detail}: {names}"
        )
    if lookup.outcome == Outcome.NOT_FOUND:
        return replace(checked, status=Status.NOT_FOUND, detail=f"no case at {base.citation}: {lookup.detail}")
    return replace(checked, status=Status.UNCHECKED, detail=lookup.detail)


def _compared(
    checked: CheckedCitation, opinion: CaselawOpinion, official_names: tuple[str, ...], *, short_form: bool
) -> CheckedCitation:
    official = official_names or (opinion.case_name,)
    if names_match(checked.case_name, official, short_form=short_form):
        return replace(
            checked, status=Status.VERIFIED, opinion=opinion, detail=f"{checked.citation} is {opinion.case_name}"
        )
    why = (
        f"the answer names only generic words ({checked.case_name!r}), which fit any such party; "
        f"{checked.citation} is {opinion.case_name!r}"
        if only_generic(parse_case_name(checked.case_name))
        else f"the answer names {checked.case_name!r}, but {checked.citation} is {opinion.case_name!r}"
    )
    return replace(checked, status=Status.NAME_MISMATCH, opinion=opinion, detail=why)
