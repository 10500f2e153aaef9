"""Each finding of a draft checked, through the project's own checks: nothing here decides what verifies.

:func:`check_draft` gives every finding of :func:`drafts.finding.find_in_draft` a status and a detail: case
citations by the case-citation check (:func:`chats.case_citations.check_found_citations`: the local opinions,
then CourtListener when a token is set), their pin cites against the page of the passage quoted with them
(:func:`chats.case_citations.pins.check_pins_against_quoted_passages`); statute and regulation citations and
their quotations by the authority library (:mod:`authorities.selectors`); a case's quotations by the quote
verifier (:mod:`lqai_verify.verification`) against the opinion's text, or against the matter's document named
beside a quotation that cites nothing. The statuses (one vocabulary, in
:data:`STATUSES`) are the project's codes, read through :func:`lqai_verify.statuses.status_in_words`; the
verdict is :func:`lqai_verify.verdict.verdict_of`'s. Reads, and materializes what CourtListener returns.
"""

from __future__ import annotations

import bisect
from collections.abc import Callable, Generator, Sequence
from dataclasses import asdict, dataclass, field
from typing import TYPE_CHECKING, Any
from uuid import UUID

from authorities import selectors as library
from chats.case_citations import CheckedCitation, Kind, check_found_citations
from chats.case_citations.pins import check_pins_against_quoted_passages
from chats.models import CaseCitation, CaselawOpinion, Document, OpinionQuote, Project
from chats.pages import span_pin_cite
from chats.selectors import documents_of
from drafts.finding import Authority, DraftFindings, Finding
from lqai_verify import verdict as verdicts
from lqai_verify.statuses import status_in_words
from lqai_verify.verification import (
    LIMITED_AFTER,
    LIMITED_BEFORE,
    NEGATED_BEFORE,
    NormalizedSources,
    QuoteMatch,
    alterations_record,
    context_flags_record,
)

if TYPE_CHECKING:
    from courtlistener import CourtListener

UNCHECKED = "unchecked"
UNVERIFIED = verdicts.UNVERIFIED
#: Every status a finding may have (docs/drafts.md says each in words). Citations: the case-citation check's
#: statuses (``pin_unchecked``: a case verified whose pin cite nothing could check); a statute's ``verified`` or
#: ``not_found``. Quotations: the verifier's tiers, ``unverified``, and the library's ``found_elsewhere``.
STATUSES = (
    "verified",
    verdicts.PIN_UNCHECKED,
    "name_mismatch",
    "pin_mismatch",
    "not_found",
    "ambiguous",
    "exact_match",
    "tolerant_match",
    "altered",
    UNVERIFIED,
    library.FOUND_ELSEWHERE,
    UNCHECKED,
)
_QUOTE_STATUSES = {library.VERIFIED: "", library.ALTERED_QUOTE: "altered", library.FAILED: UNVERIFIED}
# A statute's own words where the case-citation words would mislead ("case verified").
_STATUTE_WORDS = {
    "verified": "section found in the authority library",
    "not_found": "no such section in the title loaded",
}
_FOUND_ELSEWHERE_WORDS = "found in another section than the one cited: review"
_CONTEXT_WORDS = {
    LIMITED_AFTER: "the source goes on with words that limit it, left out",
    NEGATED_BEFORE: "the source negates the clause just before the quotation",
    LIMITED_BEFORE: "the source limits the clause just before the quotation",
}
# How far from a quotation, in its paragraph, a matter document's title names its source.
_DOCUMENT_NAMED_WITHIN = 200
# A title shorter than this is too common a phrase to name a document.
_MIN_TITLE = 6
# American usage puts a sentence's period or comma inside the closing quotation mark: not the source's.
_INSIDE_PUNCTUATION = ".,;"


def quoted_words(text: str) -> str:
    """The words of a quotation as they are verified: its text without the period or comma American usage puts
    inside the closing mark."""
    return text.strip().rstrip(_INSIDE_PUNCTUATION)


@dataclass(frozen=True, slots=True)
class Check:
    """What the checks found of one finding: a status of :data:`STATUSES`, why, and a quotation's alterations
    and omissions (the verifier's records, offsets into the source's text). A quotation checked against an opinion
    or a matter's document names it (``opinion_id``, ``document_id``), so that the draft's record
    (:mod:`drafts.recording`) claims the quotation of that source; a quotation with nothing to check it against
    (no citation, a case nothing resolved, an opinion without its text, an authority the checks cannot read) says
    so in ``unchecked_reason``, and the record claims it as a quotation nothing could check. A quotation of a
    statute has neither: the turn's own statute check records it."""

    status: str
    detail: str
    alterations: list[dict[str, Any]] = field(default_factory=list)
    opinion_id: UUID | None = None
    document_id: UUID | None = None
    unchecked_reason: str = ""

    @property
    def words(self) -> str:
        return status_words(self.status, alterations=self.alterations)

    @property
    def needs_review(self) -> bool:
        """Failed, altered or unchecked: a person must look at it (the project's rule, unknown codes included)."""
        return status_in_words(self.status).needs_review


def status_words(status: str, *, of_a_statute: bool = False, alterations: Sequence[Any] = ()) -> str:
    """A finding's (or a table of authorities entry's) status in words: a statute's own words where the case
    citation's would mislead, the library's for a quotation found in another section, else the project's
    (:func:`lqai_verify.statuses.status_in_words`)."""
    if status == library.FOUND_ELSEWHERE:
        return _FOUND_ELSEWHERE_WORDS
    if of_a_statute and status in _STATUTE_WORDS:
        return _STATUTE_WORDS[status]
    return status_in_words(status, alterations=alterations).words


_SEVERITY = {"ok": 0, "info": 0, "review": 1, "fail": 2}
_NO_CITATION = Check(
    UNCHECKED,
    "No citation supports this quotation: cite its source to have it checked.",
    unchecked_reason="no citation supports this quotation",
)
_NOTHING_TO_CHECK = "nothing to check the quotation against"


@dataclass(frozen=True, slots=True)
class CheckedDraft:
    found: DraftFindings
    checks: list[Check]

    @property
    def verdict(self) -> str:
        """The verdict by the project's one rule: quotations count as quote rows, citations as case citations."""
        quotes = [c.status for f, c in zip(self.found.findings, self.checks, strict=True) if f.kind == "quote"]
        cited = [c.status for f, c in zip(self.found.findings, self.checks, strict=True) if f.kind != "quote"]
        return verdicts.verdict_of(methods=quotes, case_statuses=cited)

    def _of_a_statute(self, finding: Finding) -> bool:
        """A statute or regulation citation, or an ``id.`` of one."""
        if finding.kind == "quote" or finding.authority is None:
            return finding.kind == "statute_citation"
        return self.found.authorities[finding.authority].kind in ("statute", "regulation")

    def authority_statuses(self) -> list[str]:
        """Each entry of the table of authorities' status: the worst of its citations' (a failure before what
        needs review before what passed; ``unchecked`` for an entry only an ``id.`` of a statute cites)."""
        worst: dict[int, str] = {}
        for finding, check in zip(self.found.findings, self.checks, strict=True):
            if finding.kind == "quote" or finding.authority is None:
                continue
            held = worst.get(finding.authority)
            if held is None or _SEVERITY[status_in_words(check.status).tone] > _SEVERITY[status_in_words(held).tone]:
                worst[finding.authority] = check.status
        return [worst.get(index, UNCHECKED) for index in range(len(self.found.authorities))]

    def record(self, *, draft_id: str | None = None, matter: str) -> dict[str, object]:
        """The JSON of docs/drafts.md: ``id``, ``matter``, ``verdict``, ``findings`` and ``authorities``."""
        findings = []
        for finding, check in zip(self.found.findings, self.checks, strict=True):
            words = status_words(check.status, of_a_statute=self._of_a_statute(finding), alterations=check.alterations)
            findings.append(
                asdict(finding)
                | {"status": check.status, "words": words, "needs_review": check.needs_review, "detail": check.detail}
                | ({"alterations": check.alterations} if finding.kind == "quote" else {})
            )
        authorities = [
            asdict(entry) | {"status": status}
            for entry, status in zip(self.found.authorities, self.authority_statuses(), strict=True)
        ]
        return {
            "id": draft_id,
            "matter": matter,
            "verdict": self.verdict,
            "findings": findings,
            "authorities": authorities,
        }


@dataclass(frozen=True, slots=True)
class CheckStep:
    """One step of :func:`check_draft_in_steps` done: its name in words, how many findings it checked, and the
    checks it made final, by finding index (the quotations'; the citations' wait for the pin check)."""

    words: str
    count: int
    final: dict[int, Check] = field(default_factory=dict)


def check_draft(
    *,
    found: DraftFindings,
    matter: Project | None = None,
    courtlistener_client: CourtListener | None = None,
    use_courtlistener: bool = True,
    on_checked: Callable[[int], object] | None = None,
) -> CheckedDraft:
    """Every finding of ``found`` (:func:`~drafts.finding.find_in_draft`'s) checked, in order: see
    :func:`check_draft_in_steps`. ``on_checked`` is called with how many findings each step checked: a caller's
    progress."""
    done = on_checked or (lambda count: None)
    steps = check_draft_in_steps(
        found=found, matter=matter, courtlistener_client=courtlistener_client, use_courtlistener=use_courtlistener
    )
    while True:
        try:
            step = next(steps)
        except StopIteration as finished:
            checked: CheckedDraft = finished.value
            return checked
        done(step.count)


def check_draft_in_steps(
    *,
    found: DraftFindings,
    matter: Project | None = None,
    courtlistener_client: CourtListener | None = None,
    use_courtlistener: bool = True,
) -> Generator[CheckStep, None, CheckedDraft]:
    """Every finding of ``found`` checked, in order (see the module), yielding a :class:`CheckStep` as each step
    ends (the citations looked up, then the quotations checked, final) and returning the :class:`CheckedDraft`.
    CourtListener is asked (through ``courtlistener_client``, else the settings' token; never with
    ``use_courtlistener=False``) only about full citations the local opinions lack; its failures leave them
    ``unchecked`` saying why. A quotation no citation supports is checked against the document of ``matter``
    (only that matter's) whose title its paragraph names next to it, if one does (:func:`_named_document`)."""
    findings = found.findings
    checks: dict[int, Check] = {}
    cases = _case_checks(found, courtlistener_client=courtlistener_client, use=use_courtlistener)
    # An id. the draft ties to a statute (one eyecite does not read) is its statute's, not eyecite's antecedent's.
    cases = {i: c for i, c in cases.items() if _entry_kind(found, findings[i]) in (None, "case")}
    statutes = _statute_checks(found)
    yield CheckStep("citations looked up", sum(f.kind != "quote" for f in findings))
    quote_checks, opinion_quotes = _quote_checks(findings, found.authorities, cases, statutes)
    quote_checks |= _document_quote_checks(found, matter, [i for i, c in quote_checks.items() if c is _NO_CITATION])
    checks |= quote_checks
    yield CheckStep("quotations checked", len(quote_checks), dict(quote_checks))
    checks |= _pins_checked(findings, cases, opinion_quotes)
    checks |= {i: _statute_citation_check(c) for i, c in statutes.items()}
    for index in range(len(findings)):
        if index not in checks:  # an id. of a statute: its statute's check
            checks[index] = _antecedent_check(findings, checks, index)
    return CheckedDraft(found=found, checks=[checks[i] for i in range(len(findings))])


def _case_checks(
    found: DraftFindings, *, courtlistener_client: CourtListener | None, use: bool
) -> dict[int, CheckedCitation]:
    """The case-citation check of each case citation finding, by its index: the checked span that starts
    within it (the finding starts at the case name written before the citation)."""
    findings = found.findings
    checked = check_found_citations(
        found.case_citations, courtlistener_client=courtlistener_client, use_courtlistener=use
    )
    spans = sorted(((c.start, c) for c in checked if c.kind is not Kind.STATUTE), key=lambda pair: pair[0])
    starts = [start for start, _ in spans]
    out: dict[int, CheckedCitation] = {}
    for index, finding in enumerate(findings):
        if finding.kind != "case_citation":
            continue
        at = bisect.bisect_left(starts, finding.start)
        if at < len(spans) and spans[at][0] < finding.end:
            out[index] = spans[at][1]
    return out


def _statute_checks(found: DraftFindings) -> dict[int, library.StatuteCitationCheck]:
    """The library's check of each statute or regulation citation finding, by its index."""
    findings = found.findings
    resolved = library.resolve_statutes(found.statutes)
    by_start = {check.citation.start: check for check in resolved}
    return {
        index: by_start[finding.start]
        for index, finding in enumerate(findings)
        if finding.kind == "statute_citation" and finding.start in by_start
    }


def _statute_citation_check(check: library.StatuteCitationCheck) -> Check:
    status = check.status if check.status in (library.VERIFIED, library.NOT_FOUND) else UNCHECKED
    return Check(status=status, detail=_sentence(check.reason or check.cited))


def _quote_checks(
    findings: Sequence[Finding],
    authorities: Sequence[Authority],
    cases: dict[int, CheckedCitation],
    statutes: dict[int, library.StatuteCitationCheck],
) -> tuple[dict[int, Check], dict[int, list[tuple[Finding, CaselawOpinion, QuoteMatch]]]]:
    """Each quotation checked against the authority its citation names, by its index; and, per citation, the
    passages of its case verified with it (for its pin cite)."""
    sources = NormalizedSources()
    checks: dict[int, Check] = {}
    passages: dict[int, list[tuple[Finding, CaselawOpinion, QuoteMatch]]] = {}
    for index, finding in enumerate(findings):
        if finding.kind != "quote":
            continue
        quoted = quoted_words(finding.text)
        cited_by = _citing(findings, finding)
        if cited_by is None:
            checks[index] = _NO_CITATION
        elif cited_by in statutes:
            checks[index] = _statute_quote_check(quoted, statutes[cited_by])
        elif cited_by in cases:
            check, match = _case_quote_check(quoted, cases[cited_by], sources)
            checks[index] = check
            opinion = cases[cited_by].opinion
            if match is not None and opinion is not None:
                passages.setdefault(cited_by, []).append((finding, opinion, match))
        else:
            entry = authorities[finding.authority] if finding.authority is not None else None
            what = f"{entry.cite}" if entry is not None else "its citation"
            unreadable = f"{what} is not a case or a section the checks can read"
            checks[index] = Check(
                UNCHECKED, f"Not checked: {unreadable}.", unchecked_reason=f"{unreadable}: {_NOTHING_TO_CHECK}"
            )
    return checks, passages


def _entry_kind(found: DraftFindings, finding: Finding) -> str | None:
    return found.authorities[finding.authority].kind if finding.authority is not None else None


def _document_quote_checks(found: DraftFindings, matter: Project | None, indexes: list[int]) -> dict[int, Check]:
    """The quotations at ``indexes`` (no citation supports them) checked against the matter's document named
    next to each, by its index; those naming none are left out."""
    if matter is None or not indexes:
        return {}
    titles = [(pk, title) for pk, title in documents_of(matter).values_list("pk", "title") if len(title) >= _MIN_TITLE]
    named = {i: pk for i in indexes if (pk := _named_document(found.text, found.findings[i], titles)) is not None}
    documents = {d.pk: d for d in Document.objects.filter(project=matter, pk__in=set(named.values()))}
    sources = NormalizedSources()
    checks: dict[int, Check] = {}
    for index, pk in named.items():
        document = documents[pk]
        quoted = quoted_words(found.findings[index].text)
        match, why = sources.verify_detailed(pk, document.content, quoted)
        if match is None:
            checks[index] = Check(
                UNVERIFIED, f"Not found in the matter's document \u201c{document.title}\u201d: {why}.", document_id=pk
            )
            continue
        where = span_pin_cite(document.pages, match.start, match.end, citation=None)
        alterations = alterations_record(match)
        detail = f"Found in the matter's document \u201c{document.title}\u201d" + (f" at {where}" if where else "")
        detail += "." + _marked(alterations, context_flags_record(match), document.content)
        checks[index] = Check(match.method, detail, alterations, document_id=pk)
    return checks


def _named_document(text: str, quote: Finding, titles: Sequence[tuple[Any, str]]) -> Any:
    """The document whose title the quotation's paragraph writes closest to it (within
    :data:`_DOCUMENT_NAMED_WITHIN` characters before or after it), or None."""
    start = max(text.rfind("\n\n", 0, quote.start) + 1, quote.start - _DOCUMENT_NAMED_WITHIN)
    paragraph_end = text.find("\n\n", quote.end)
    end = min(paragraph_end if paragraph_end >= 0 else len(text), quote.end + _DOCUMENT_NAMED_WITHIN)
    before, after = text[start : quote.start].lower(), text[quote.end : end].lower()
    best: tuple[int, Any] | None = None
    for pk, title in titles:
        wanted = title.lower()
        distances = [len(before) - at - len(wanted) for at in [before.rfind(wanted)] if at >= 0]
        distances += [at for at in [after.find(wanted)] if at >= 0]
        if distances and (best is None or min(distances) < best[0]):
            best = (min(distances), pk)
    return best[1] if best is not None else None


def _citing(findings: Sequence[Finding], quote: Finding) -> int | None:
    """The citation that supports ``quote``; for an ``id.`` of a statute, that statute's citation."""
    index = quote.cited_by
    if index is not None and findings[index].kind == "case_citation" and findings[index].form == "id":
        for before in range(index - 1, -1, -1):
            earlier = findings[before]
            if earlier.kind == "statute_citation" and earlier.authority == findings[index].authority:
                return before
            if earlier.kind == "case_citation":
                break
    return index


def _statute_quote_check(quoted: str, citation: library.StatuteCitationCheck) -> Check:
    checked = library.verify_statute_quote(quote=quoted, check=citation)
    if checked.status == library.UNCHECKED:
        return Check(UNCHECKED, f"Not checked: {checked.reason}; {citation.reason}".rstrip("; "))
    if checked.status == library.FOUND_ELSEWHERE:
        return Check(library.FOUND_ELSEWHERE, _sentence(checked.reason), checked.alterations)
    status = _QUOTE_STATUSES.get(checked.status, UNCHECKED) or checked.method
    return Check(
        status,
        _sentence(checked.reason) + _marked(checked.alterations, checked.context_flags, None),
        checked.alterations,
    )


def _case_quote_check(
    quoted: str, case: CheckedCitation, sources: NormalizedSources
) -> tuple[Check, QuoteMatch | None]:
    opinion = case.opinion
    if opinion is None:
        why = f"the case cited ({case.citation}) could not be resolved to one opinion: {_in_a_draft(case.detail)}"
        return Check(UNCHECKED, f"Not checked: {why}.", unchecked_reason=_unresolved(case)), None
    if not opinion.text:
        unread = f"the text of {opinion.case_name} is not stored"
        return Check(UNCHECKED, f"Not checked: {unread}.", unchecked_reason=f"{unread}: {_NOTHING_TO_CHECK}"), None
    match, why = sources.verify_detailed(opinion.pk, opinion.text, quoted)
    if match is None:
        return Check(UNVERIFIED, f"Not found in {opinion.case_name}: {why}.", opinion_id=opinion.pk), None
    where = span_pin_cite(opinion.pages, match.start, match.end, citation=opinion.citation)
    detail = f"Found in {opinion.case_name}" + (f" at {where}" if where else "") + "."
    alterations = alterations_record(match)
    detail += _marked(alterations, context_flags_record(match), opinion.text)
    return Check(match.method, detail, alterations, opinion_id=opinion.pk), match


def _unresolved(case: CheckedCitation) -> str:
    """Why a quotation citing ``case``, which nothing resolved to one opinion, could not be checked."""
    cited = f"the case cited ({case.citation})"
    if case.status == CaseCitation.Status.NOT_FOUND:
        return f"{cited} could not be found in the local opinions or CourtListener: {_NOTHING_TO_CHECK}"
    if case.status == CaseCitation.Status.AMBIGUOUS:
        return f"{cited} matches several opinions: {_NOTHING_TO_CHECK} until one is chosen"
    detail = _in_a_draft(case.detail).rstrip(".")
    return f"{cited} could not be resolved: {detail}; {_NOTHING_TO_CHECK}"


def _marked(alterations: Sequence[dict[str, Any]], flags: Sequence[dict[str, Any]], source: str | None) -> str:
    """The alterations, omissions and limiting context of a match in words (`` Marked: ...``), "" if none."""
    said = []
    for alteration in alterations:
        written = str(alteration["quote_text"])
        held = source[int(alteration["source_start"]) : int(alteration["source_end"])] if source else ""
        held = " ".join(held.split())
        words = f"{written!r} stands for {held[:200]!r}" if held else repr(written)
        said.append(f"{words} ({alteration['alters']})" if alteration.get("alters") else words)
    for flag in flags:
        near = source[int(flag["source_start"]) : int(flag["source_end"])] if source else ""
        words = _CONTEXT_WORDS.get(str(flag["flag"]), str(flag["flag"]))
        said.append(f"{words}: {' '.join(near.split())[:200]!r}" if near else words)
    return (" Marked: " + "; ".join(said) + ".") if said else ""


def _pins_checked(
    findings: Sequence[Finding],
    cases: dict[int, CheckedCitation],
    passages: dict[int, list[tuple[Finding, CaselawOpinion, QuoteMatch]]],
) -> dict[int, Check]:
    """Each case citation's check, its pin cite compared with the page of the passages quoted with it (the
    draft's own pairing decides which those are: only they are given to the pin check, so its paragraph window
    does not apply)."""
    out: dict[int, Check] = {}
    for index, case in cases.items():
        row = CaseCitation(
            answer_offset_start=case.start,
            answer_offset_end=case.end,
            citation=case.citation,
            case_name=case.case_name,
            status=str(case.status),
            detail=case.detail,
            opinion=case.opinion,
            pin=case.pin,
            pin_status=case.pin_status,
        )
        quoted = [
            OpinionQuote(
                opinion=opinion,
                quote=finding.text,
                verification_method=match.method,
                source_offset_start=match.start,
                source_offset_end=match.end,
                answer_offset_start=finding.start,
                answer_offset_end=finding.end,
            )
            for finding, opinion, match in passages.get(index, [])
        ]
        if quoted and case.opinion is not None:
            check_pins_against_quoted_passages(citations=[row], quotes=quoted, answer=" " * (case.end + 1))
        status = verdicts.case_claim_status(row.status, row.pin_status)
        out[index] = Check(status, _sentence(_in_a_draft(row.detail)))
    return out


def _in_a_draft(detail: str) -> str:
    """The case-citation check's words, written of an answer, said of a draft (what a lawyer reads is right)."""
    return detail.replace("the answer", "the draft").replace("The answer", "The draft")


def _sentence(detail: str) -> str:
    detail = detail.strip()
    return detail[:1].upper() + detail[1:] + ("" if detail.endswith(".") else ".") if detail else detail


def _antecedent_check(findings: Sequence[Finding], checks: dict[int, Check], index: int) -> Check:
    """The check of the citation an ``id.`` refers to (a statute eyecite does not read as its antecedent)."""
    for before in range(index - 1, -1, -1):
        if findings[before].kind != "quote" and findings[before].authority == findings[index].authority:
            earlier = checks.get(before)
            if earlier is not None:
                return Check(earlier.status, f"Refers to the citation before it: {earlier.detail}")
    return Check(UNCHECKED, "Refers to no citation before it in the draft, so nothing could check it.")
