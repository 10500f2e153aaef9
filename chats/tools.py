"""Tools an assistant backend may call during a turn, and the sources they consult.

A :class:`Tool` takes JSON-able arguments and returns a :class:`ToolOutput`: a JSON-able
payload (what the model and the client see) and the :class:`~chats.services.ConsultedSource`
list it drew on. The turn runner turns those into ``message_tool_sources`` rows at finalize,
whatever the tool (``caselaw_search`` here; any other tool, such as an MCP server's, the same way).
"""

from __future__ import annotations

import logging
from collections.abc import Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Protocol

import httpx

from chats import courtlistener
from chats.models import CaselawOpinion, MessageToolSource
from chats.retrieval import passages, rank_passages, rank_sources
from chats.services import ConsultedSource

if TYPE_CHECKING:
    from courtlistener import CourtListener

logger = logging.getLogger(__name__)


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


def default_tools() -> dict[str, Tool]:
    """The tools of a streamed (tool-loop) turn."""
    tools: list[Tool] = [CaselawSearchTool.from_settings()]
    return {tool.name: tool for tool in tools}
