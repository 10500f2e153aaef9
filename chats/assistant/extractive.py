"""The default assistant: offline, deterministic and extractive.

It answers with verbatim passages of the chat's matter documents that best match the question
(see :mod:`chats.retrieval`), each claimed with its document id. With tools (the
streamed tool loop) it first calls ``caselaw_search`` and also quotes the best passage of the
best opinion found, claimed with the opinion id; when the question cites a statute or regulation and
``statute_lookup`` is offered, it looks the citation up and quotes the best passage of each section found
right after its citation (statute quotes are checked against the section from the answer's text, not
claimed). Same chat data and question, same answer.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from typing import Any
from uuid import UUID

from authorities.selectors import VERIFIED, find_statutes
from chats.assistant.events import AssistantEvent, FinalAnswer, TextDelta, ToolCall, ToolResult, Turn
from chats.models import Chat, Document
from chats.passages import search_matter_passages
from chats.retrieval import Passage, passages
from chats.services import ClaimedCitation

CASELAW_TOOL = "caselaw_search"
STATUTE_TOOL = "statute_lookup"
# The longest section (or subsection) quoted whole when it has no passage of its own to quote.
MAX_WHOLE_SECTION_QUOTE = 1200
NOTHING_FOUND = "I found no passage in this matter's documents or the caselaw consulted that addresses the question.\n"


def _display(quote: str) -> str:
    # The claim keeps the verbatim text (line breaks and all); the answer shows it on one line.
    return " ".join(quote.split())


def matter_passages(chat: Chat, question: str, *, documents: int, limit: int) -> list[tuple[Document, Passage]]:
    """The ``limit`` passages of the chat's matter documents that best answer ``question`` (best first),
    drawn from at most ``documents`` documents; none for a chat outside a matter. Searched among the
    passages stored once per document (:mod:`chats.passages`), not by splitting the documents again."""
    if chat.project_id is None:
        return []
    return search_matter_passages(project_id=chat.project_id, question=question, limit=limit, documents=documents)


class ExtractiveBackend:
    kb_quotes = 2
    candidate_documents = 5

    def respond(self, turn: Turn) -> Iterator[AssistantEvent]:
        question = turn.question
        claims: list[ClaimedCitation] = []
        lines: list[str] = []

        caselaw: Mapping[str, Any] | None = None
        if CASELAW_TOOL in turn.tools:
            call = ToolCall(call_id="call_1", tool=CASELAW_TOOL, arguments={"query": question})
            yield call
            output = turn.tools[CASELAW_TOOL].run(call.arguments)
            yield ToolResult(call_id=call.call_id, tool=call.tool, payload=output.payload, sources=output.sources)
            caselaw = next((r for r in output.payload.get("results", []) if r.get("passage")), None)
        statutes: list[tuple[str, str]] = []
        if STATUTE_TOOL in turn.tools and find_statutes(question):
            call = ToolCall(call_id="call_2", tool=STATUTE_TOOL, arguments={"citation": question, "query": question})
            yield call
            output = turn.tools[STATUTE_TOOL].run(call.arguments)
            yield ToolResult(call_id=call.call_id, tool=call.tool, payload=output.payload, sources=output.sources)
            statutes = self._statute_quotes(output.payload)

        kb = self._kb_passages(turn.chat, question)
        if kb:
            lines.append("From the matter's documents:\n")
            for document, passage in kb:
                lines.append(f'- "{_display(passage.text)}" ({document.title})\n')
                claims.append(ClaimedCitation(quote=passage.text, document_id=document.pk))
        if caselaw is not None:
            quote = caselaw["passage"]["text"]
            cited_as = ", ".join(part for part in (caselaw["case_name"], caselaw["citation"]) if part)
            lines.append(("\n" if lines else "") + "From the caselaw consulted:\n")
            lines.append(f'- "{_display(quote)}" ({cited_as})\n')
            claims.append(ClaimedCitation(quote=quote, opinion_id=UUID(caselaw["opinion_id"])))
        if statutes:
            lines.append(("\n" if lines else "") + "From the statutes looked up:\n")
            # The citation right before its quotation: the answer's statute check attributes the quote to it.
            lines.extend(f'- {cited} ("{_display(quote)}")\n' for cited, quote in statutes)
        if not lines:
            lines.append(NOTHING_FOUND)

        for chunk in self._continuation(lines, partial=turn.partial):
            yield TextDelta(chunk)
        yield FinalAnswer(citations=tuple(claims))

    @staticmethod
    def _statute_quotes(payload: Mapping[str, Any]) -> list[tuple[str, str]]:
        """``(citation as written, quote)`` for each section found: the passage that best matches the question,
        else the text's first passage, else (a section of one long sentence, as many are) its whole text when
        short enough to quote; a section with none of these is not quoted."""
        quotes = []
        for result in payload.get("results", []):
            text = result.get("text") or ""
            if result.get("status") != VERIFIED or not text:
                continue
            best = result.get("passage") or next(({"text": p.text} for p in passages(text)), None)
            if best is None and len(text) <= MAX_WHOLE_SECTION_QUOTE and not result.get("truncated"):
                best = {"text": text}
            if best is not None:
                quotes.append((result["cite"], best["text"]))
        return quotes

    def _kb_passages(self, chat: Chat, question: str) -> list[tuple[Document, Passage]]:
        return matter_passages(chat, question, documents=self.candidate_documents, limit=self.kb_quotes)

    @staticmethod
    def _continuation(lines: list[str], *, partial: str) -> list[str]:
        """The deltas still to send: all lines, or after a resume what follows the partial answer."""
        if not partial:
            return lines
        answer = "".join(lines)
        if answer.startswith(partial):
            rest = answer[len(partial) :]
            return rest.splitlines(keepends=True)
        # The sources changed since the interruption: answer anew after what was already said.
        return ["\n\n", *lines]
