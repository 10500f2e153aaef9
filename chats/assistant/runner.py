"""Running one assistant turn, whatever the view: the service between a backend and ``finalize_turn``.

A :class:`TurnRun` iterates the backend's events for one assistant message, passes them on
(text deltas, tool calls and results), accumulates the content, the consulted sources and the
claimed quotes, and always ends in :func:`chats.services.finalize_turn`:

- the backend finished: ``complete``;
- the backend raised: ``failed`` (logged; a :class:`TurnFailed` event says so), or ``interrupted``
  if it raised :class:`~chats.assistant.backends.BackendInterrupted` (its answer was cut off);
- the consumer stopped early (the client disconnected, the run was closed, even before its
  first event): ``interrupted``, with the content and sources produced so far.

It then yields :class:`TurnFinalized` with the verified and unverified quotes. A run on an
``interrupted`` message (a resume) continues after its content, and never records a tool
source the message already has.
"""

from __future__ import annotations

import logging
from collections.abc import Generator, Iterator, Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING

from django.db.models import Q

from chats.assistant.backends import AssistantBackend, BackendError, BackendInterrupted
from chats.assistant.events import FinalAnswer, HistoryEntry, TextDelta, ToolCall, ToolResult, Turn
from chats.models import Message, MessageToolSource
from chats.services import ClaimedCitation, ConsultedSource, FinalizedTurn, TurnUsage, finalize_turn

if TYPE_CHECKING:
    from chats.tools import Tool

logger = logging.getLogger(__name__)

BACKEND_FAILED = "The assistant failed while answering. The turn was saved as failed; please ask again."


@dataclass(frozen=True, slots=True)
class TurnFailed:
    """The backend raised: the turn ends as ``failed``."""

    detail: str


@dataclass(frozen=True, slots=True)
class TurnFinalized:
    """The turn is persisted; ``result`` holds its verified and unverified quotes."""

    result: FinalizedTurn


RunEvent = TextDelta | ToolCall | ToolResult | TurnFailed | TurnFinalized

SourceKey = tuple[str, str, str | None, str, str, str]


def _key(kind: str, tool: str, provider: str | None, label: str, url: str, external_ref: str) -> SourceKey:
    # Truncated as finalize_turn stores them, so a consulted source and its row compare equal.
    return (kind, tool, provider, label[:500], url[:500], external_ref[:200])


def _add_usage(message: Message, usage: TurnUsage) -> TurnUsage:
    """``usage`` plus what the message already records (a resumed turn's earlier runs)."""

    def total(earlier: int | None, now: int | None) -> int | None:
        return None if earlier is None and now is None else (earlier or 0) + (now or 0)

    return TurnUsage(
        model_name=usage.model_name or message.model_name,
        prompt_tokens=total(message.prompt_tokens, usage.prompt_tokens),
        completion_tokens=total(message.completion_tokens, usage.completion_tokens),
        latency_ms=total(message.latency_ms, usage.latency_ms),
    )


def turn_history(message: Message) -> tuple[HistoryEntry, ...]:
    """The chat's messages before ``message`` that a backend may read: the user's, and answers that were given."""
    rows = (
        Message.objects.filter(chat_id=message.chat_id, created_at__lte=message.created_at)
        .exclude(pk=message.pk)
        .filter(
            Q(role=Message.Role.USER)
            | Q(status__in=[Message.Status.COMPLETE, Message.Status.INTERRUPTED], role=Message.Role.ASSISTANT)
        )
        .order_by("created_at", "id")
        .values_list("role", "content")
    )
    return tuple(HistoryEntry(role=role, content=content) for role, content in rows)


class TurnRun:
    """One backend run for one assistant message; an iterator of :data:`RunEvent` with ``close()``.

    Iterate it to the end (single-shot) or stream it; ``close()`` it when the consumer goes away.
    """

    def __init__(self, *, message: Message, backend: AssistantBackend, tools: Mapping[str, Tool]) -> None:
        self.message = message
        self.backend = backend
        # On a resume the message holds what was produced before the interruption.
        self._content: list[str] = [message.content]
        self._claims: list[ClaimedCitation] = []
        self._sources: list[ConsultedSource] = []
        self._seen: set[SourceKey] = {
            _key(*row)
            for row in MessageToolSource.objects.filter(message=message).values_list(
                "source_kind", "tool", "provider", "label", "url", "external_ref"
            )
        }
        self.turn = Turn(chat=message.chat, history=turn_history(message), tools=tools, partial=message.content)
        self._usage: TurnUsage | None = None
        self.failure: str | None = None
        self.result: FinalizedTurn | None = None
        self._events = self._generate()

    def __iter__(self) -> Iterator[RunEvent]:
        return self

    def __next__(self) -> RunEvent:
        return next(self._events)

    def close(self) -> None:
        """Stop the run; if it had not finished, finalize what it produced as ``interrupted``."""
        self._events.close()
        # Closing a generator that never started runs none of its code: finalize here instead.
        self._finalize(Message.Status.INTERRUPTED)

    def run_to_end(self) -> FinalizedTurn:
        for _ in self:
            pass
        assert self.result is not None  # noqa: S101 - _generate always finalizes before it ends
        return self.result

    def _generate(self) -> Generator[RunEvent, None, None]:
        status = Message.Status.INTERRUPTED
        try:
            backend_events = self.backend.respond(self.turn)
            try:
                for event in backend_events:
                    self._record(event)
                    if not isinstance(event, FinalAnswer):
                        yield event
            except BackendInterrupted as exc:
                logger.warning("turn %s: the answer was cut off (%s); saved as interrupted", self.message.pk, exc)
                status = Message.Status.INTERRUPTED
            except Exception as exc:
                logger.exception("turn %s: the assistant backend failed", self.message.pk)
                status = Message.Status.FAILED
                self.failure = f"{BACKEND_FAILED} ({exc})" if isinstance(exc, BackendError) else BACKEND_FAILED
            else:
                status = Message.Status.COMPLETE
            finally:
                close = getattr(backend_events, "close", None)
                if close is not None:
                    close()
        finally:
            # Runs on completion, on a backend error and on GeneratorExit (the consumer went away).
            self._finalize(status)
        if self.failure is not None:
            yield TurnFailed(self.failure)
        assert self.result is not None  # noqa: S101 - set by _finalize just above
        yield TurnFinalized(self.result)

    def _record(self, event: object) -> None:
        if isinstance(event, TextDelta):
            self._content.append(event.text)
        elif isinstance(event, ToolResult):
            for source in event.sources:
                key = _key(
                    source.source_kind, source.tool, source.provider, source.label, source.url, source.external_ref
                )
                if key not in self._seen:
                    self._seen.add(key)
                    self._sources.append(source)
        elif isinstance(event, FinalAnswer):
            self._claims.extend(event.citations)
            if event.usage is not None:
                self._usage = _add_usage(self.message, event.usage)
        elif not isinstance(event, ToolCall):
            raise TypeError(f"an assistant backend yielded {type(event).__name__}, not an assistant event")

    def _finalize(self, status: str) -> None:
        if self.result is not None:
            return
        self.result = finalize_turn(
            message=self.message,
            content="".join(self._content),
            status=status,
            claimed_citations=self._claims,
            tool_sources=self._sources,
            usage=self._usage,
        )
