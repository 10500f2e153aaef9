"""Tools an assistant backend may call during a turn, and the sources they consult.

A :class:`Tool` takes JSON-able arguments and returns a :class:`ToolOutput`: a JSON-able
payload (what the model and the client see) and the :class:`~chats.services.ConsultedSource`
list it drew on. The turn runner turns those into ``message_tool_sources`` rows at finalize,
whatever the tool (``caselaw_search`` and ``statute_lookup`` here; any other tool, such as an MCP server's, the
same way).
"""

from __future__ import annotations

import logging
from collections.abc import Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Protocol

import httpx

from authorities.selectors import VERIFIED, StatuteText, library_holds_a_title, look_up_statutes
from chats import courtlistener
from chats.models import CaselawOpinion, MessageToolSource, SourceKind
from chats.retrieval import passages, rank_passages, rank_sources
from chats.services import ConsultedSource

if TYPE_CHECKING:
    from courtlistener import CourtListener

logger = logging.getLogger(__name__)

# The kind of a statute or regulation consulted: the ledger's ``statute`` kind, which the answer's statute
# citations and quotes (``message_statute_citations``) have too; a consulted one's entry is ``provenance``.
STATUTE_SOURCE_KIND = SourceKind.STATUTE.value


@dataclass(frozen=True, slots=True)
class ToolOutput:
    payload: Mapping[str, Any]
    sources: tuple[ConsultedSource, ...] = ()


class Tool(Protocol):
    """A callable tool: a name, a description and a JSON schema of its arguments for the model."""

    @property
    def name(self) -> str: ...

    @property
    def description(self) -> str: ...

    @property
    def parameters(self) -> Mapping[str, Any]: ...

    def run(self, arguments: Mapping[str, Any]) -> ToolOutput: ...


class CaselawSearchTool:
    """Search court opinions: the materialized ``caselaw_opinions`` (seeded ``local`` ones and
    earlier fetches) and, when a CourtListener client is configured, CourtListener itself, whose
    hits are materialized first. A CourtListener failure degrades to local results (logged)."""

    name = "caselaw_search"
    description = (
        "Search court opinions for a query. Returns the best-matching opinions, each with a verbatim "
        "passage that may be quoted with its opinion_id."
    )
    parameters: Mapping[str, Any] = {
        "type": "object",
        "properties": {"query": {"type": "string", "description": "What to look for, in plain words."}},
        "required": ["query"],
    }

    def __init__(self, *, courtlistener_client: CourtListener | None = None, limit: int = 3) -> None:
        self.courtlistener_client = courtlistener_client
        self.limit = limit

    @classmethod
    def from_settings(cls) -> CaselawSearchTool:
        return cls(courtlistener_client=courtlistener.client_from_settings())

    def run(self, arguments: Mapping[str, Any]) -> ToolOutput:
        query = str(arguments.get("query") or "").strip()
        opinions = self._fetch_courtlistener(query) if query else []
        fetched = {o.pk for o in opinions}
        local = rank_sources(
            CaselawOpinion.objects.exclude(pk__in=fetched), field="text", question=query, limit=self.limit
        )
        opinions += local
        results = [self._result(opinion, query) for opinion in opinions]
        return ToolOutput(
            payload={"query": query, "results": results},
            sources=tuple(caselaw_source(opinion, tool=self.name) for opinion in opinions),
        )

    def _fetch_courtlistener(self, query: str) -> list[CaselawOpinion]:
        if self.courtlistener_client is None:
            return []
        from courtlistener import CourtListenerAPIError  # imported with the client: see chats.courtlistener

        try:
            return courtlistener.search_and_materialize(self.courtlistener_client, query, limit=self.limit)
        except (CourtListenerAPIError, httpx.HTTPError, ValueError, KeyError, TypeError) as exc:
            # The turn goes on with local opinions; the warning says why CourtListener's are missing.
            logger.warning("caselaw_search: CourtListener failed (%s); using local opinions only", exc, exc_info=True)
            return []

    @staticmethod
    def _result(opinion: CaselawOpinion, query: str) -> dict[str, Any]:
        best = rank_passages(passages(opinion.text), query, limit=1)
        return {
            "opinion_id": str(opinion.pk),
            "provider": opinion.provider,
            "case_name": opinion.case_name,
            "citation": opinion.citation,
            "court": opinion.court,
            "date_filed": opinion.date_filed.isoformat() if opinion.date_filed else None,
            "url": opinion.absolute_url,
            "passage": {"text": best[0].text, "start": best[0].start, "end": best[0].end} if best else None,
        }


def caselaw_source(opinion: CaselawOpinion, *, tool: str) -> ConsultedSource:
    """The provenance of a consulted opinion: case name, then citation · court · date."""
    date = opinion.date_filed.isoformat() if opinion.date_filed else ""
    return ConsultedSource(
        source_kind=MessageToolSource.SourceKind.CASELAW,
        tool=tool,
        provider=opinion.provider,
        label=opinion.case_name,
        subtitle=" · ".join(part for part in (opinion.citation, opinion.court, date) if part),
        url=opinion.absolute_url,
        external_ref=opinion.cluster_id,
    )


class StatuteLookupTool:
    """Look up U.S. Code and C.F.R. sections by citation in the authority library (``authorities``): each
    section's (or pinned subdivision's) words in the release a check of the answer uses (the latest loaded),
    with its status in the library (verified, not found, unchecked) and why. A section found is a consulted
    source (``statute``), named the way a lawyer cites it (``9 U.S.C. § 2 (Online@117-80)``)."""

    name = "statute_lookup"
    description = (
        "Look up a section of the U.S. Code or the Code of Federal Regulations by its citation (9 U.S.C. § 2, "
        "35 U.S.C. § 112(a), 27 C.F.R. § 478.11) in the official text loaded. Returns the section's words as the "
        "named release gives them. To quote a statute, copy its words verbatim in double quotes right after its "
        "citation in the answer: the quote is checked against this text (no cite call)."
    )
    parameters: Mapping[str, Any] = {
        "type": "object",
        "properties": {
            "citation": {"type": "string", "description": "One citation, or a few, as a lawyer writes them."},
            "query": {"type": "string", "description": "Optional: words to find the passage that answers them."},
        },
        "required": ["citation"],
    }
    # The most characters of one section's text the model is sent (a long section is cut, and says so).
    max_text = 12_000

    def run(self, arguments: Mapping[str, Any]) -> ToolOutput:
        citation = str(arguments.get("citation") or "").strip()
        query = str(arguments.get("query") or "").strip()
        looked_up = look_up_statutes(citation=citation) if citation else []
        payload: dict[str, Any] = {"citation": citation, "results": [self._result(s, query) for s in looked_up]}
        if not looked_up:
            payload["error"] = f"no U.S. Code or C.F.R. section or part is cited in {citation!r}"
        return ToolOutput(
            payload=payload,
            sources=tuple(statute_source(s, tool=self.name) for s in looked_up if s.check.status == VERIFIED),
        )

    def _result(self, statute: StatuteText, query: str) -> dict[str, Any]:
        check = statute.check
        release = check.release
        result: dict[str, Any] = {
            # As a lawyer cites it, with the release checked: 9 U.S.C. § 2 (Online@117-80).
            "citation": check.cited or check.citation.written,
            # How an answer cites it before a quotation of it: 9 U.S.C. § 2.
            "cite": check.cited.removesuffix(f" ({release.cite_date})") if release else check.citation.written,
            "status": check.status,
            "reason": check.reason,
            "identifier": check.identifier,
            "release": release.release_point if release else None,
            "official": release.official if release else None,
        }
        if check.status != VERIFIED:
            return result
        text = statute.text[: self.max_text]
        # Ranked over the whole text, so that a passage past the cut is found; its offsets index the whole text.
        best = rank_passages(passages(statute.text), query, limit=1) if query else []
        return result | {
            "heading": statute.heading,
            "legal_status": statute.legal_status,
            "text": text,
            "truncated": len(statute.text) > len(text),
            "contents": list(statute.contents),
            "passage": {"text": best[0].text, "start": best[0].start, "end": best[0].end} if best else None,
        }


def statute_source(statute: StatuteText, *, tool: str) -> ConsultedSource:
    """The provenance of a statute looked up: its cite with the release (``9 U.S.C. § 2 (Online@117-80)``), then
    heading · whether the edition is official."""
    check = statute.check
    edition = "official edition" if check.release and check.release.official else "not the official edition"
    return ConsultedSource(
        source_kind=STATUTE_SOURCE_KIND,
        tool=tool,
        provider=statute.publisher,
        label=check.cited,
        subtitle=" · ".join(part for part in (statute.heading, edition) if part),
        external_ref=f"{check.identifier}@{check.release.release_point}" if check.release else check.identifier,
    )


def default_tools() -> dict[str, Tool]:
    """The tools of a streamed (tool-loop) turn: ``statute_lookup`` once the authority library holds a title."""
    tools: list[Tool] = [CaselawSearchTool.from_settings()]
    if library_holds_a_title():
        tools.append(StatuteLookupTool())
    return {tool.name: tool for tool in tools}
