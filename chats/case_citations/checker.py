"""The case-citation check of an answer: does each cited case exist, and is it the case the answer names?

:func:`check_case_citations` gives one :class:`CheckedCitation` per citation span eyecite finds in the
answer (see :mod:`chats.case_citations.extraction`):

- a full case citation is looked up by its normalized volume/reporter/page, first in the local opinion
  store, then (when a CourtListener client is configured) in CourtListener's citation-lookup API; a case
  found is compared with the name written in the answer (:func:`chats.case_citations.names.names_match`):
  ``verified`` or ``name_mismatch`` (the detail gives both names); otherwise ``not_found`` (only
  CourtListener, which covers all reported cases, can say so), ``ambiguous`` (with the candidate
  opinions) or ``unchecked`` (with why: not in the local store and CourtListener not configured, no page
  number, CourtListener rate-limiting or unreachable, ...);
- a short form (``Fisher, 570 U.S., at 311``) takes the outcome of the full citation it resolves to, and
  its own short name, when written, must match either party of that case;
- ``id.``, ``supra`` and references by name take the outcome of the citation they resolve to;
- statutes and other citation kinds are ``unchecked`` with why, never dropped.

The check never raises for a lookup failure: the worst outcome is ``unchecked`` with the reason.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import TYPE_CHECKING

from chats import courtlistener
from chats.case_citations.extraction import CitationKey, FoundCitation, Kind, extract_citations
from chats.case_citations.lookup import Lookup, Outcome, find_local, lookup_courtlistener
from chats.case_citations.names import names_match
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


NOT_CHECKED_LOCALLY = (
    "not in the local opinion store, and CourtListener was not asked (COURTLISTENER_API_TOKEN unset): "
    "whether a case exists at this citation is unknown"
)


def check_case_citations(
    answer_text: str, *, courtlistener_client: CourtListener | None = None, use_courtlistener: bool = True
) -> list[CheckedCitation]:
    """Check every citation of ``answer_text`` (see the module docstring).

    CourtListener is asked only about full citations the local store does not hold, in one request,
    through ``courtlistener_client`` or, when none is given, the client of the settings' token (none when
    ``COURTLISTENER_API_TOKEN`` is unset); ``use_courtlistener=False`` checks against the local store only.
    Materializes the opinions CourtListener returns (each in a savepoint).
    """
    found = extract_citations(answer_text)
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

    checked: list[CheckedCitation] = []
    for citation in found:
        checked.append(_check(citation, lookups, checked))
    return checked


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
    if found.kind is Kind.FULL:
        if found.key is None:
            return replace(base, detail="no page number (a slip opinion or a case not yet paginated)")
        return _checked_full(base, lookups[found.key])
    if found.kind is Kind.STATUTE:
        return replace(base, detail="statutes and regulations are not checked")
    if found.kind is Kind.OTHER:
        return replace(base, detail="only case citations are checked")
    if found.antecedent is None:
        return replace(base, detail="refers to no full case citation earlier in the answer")
    antecedent = earlier[found.antecedent]
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
        return _compared(inherited, antecedent.opinion, (antecedent.opinion.case_name,), short_form=True)
    return inherited


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
    return replace(
        checked,
        status=Status.NAME_MISMATCH,
        opinion=opinion,
        detail=f"the answer names {checked.case_name!r}, but {checked.citation} is {opinion.case_name!r}",
    )
