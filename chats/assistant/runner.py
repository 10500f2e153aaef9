"""Running one assistant turn, whatever the view: the service between a backend and ``finalize_turn``.

A :class:`TurnRun` iterates the backend's events for one assistant message, passes them on, accumulates the
content, the consulted sources and the claimed quotes, and always ends in :func:`chats.services.finalize_turn`:
``complete``, ``failed`` or ``interrupted`` (the backend was cut off, or the consumer stopped early). It then
yields :class:`TurnFinalized`, or :class:`RunSuperseded` (having written nothing) when the turn is no longer
this run's. A paced run (``heartbeat_seconds``, ``max_seconds``) runs the backend in a :class:`BackendPump`
thread that never outlives the request and yields :class:`Heartbeat` and :class:`TurnTimedOut`. If not even a
``failed`` turn can be written, :meth:`TurnRun.run_to_end` raises :class:`TurnNotSaved`. How each ending,
the pacing, the case citations read while the answer streams and the bounds work: docs/architecture-turns.md.
"""

from __future__ import annotations

import contextvars
import logging
import queue
import threading
import time
from collections.abc import Callable, Generator, Iterator, Mapping, Sequence
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING
from uuid import UUID

from django.conf import settings
from django.db import DatabaseError, InterfaceError, OperationalError, connection, connections
from django.db.models import Q
from django.db.models.functions import Length

from chats.assistant.backends import AssistantBackend, BackendError, BackendInterrupted
from chats.assistant.events import (
    FinalAnswer,
    HistoryEntry,
    TextDelta,
    ToolCall,
    ToolResult,
    Turn,
    clean_json,
    clean_text,
)
from chats.case_citations import StreamedCitations
from chats.models import Message, MessageToolSource
from chats.services import (
    ClaimedCitation,
    ConsultedSource,
    FinalizedTurn,
    TurnSuperseded,
    TurnUsage,
    finalize_turn,
    record_progress,
)

if TYPE_CHECKING:
    from chats.tools import Tool

logger = logging.getLogger(__name__)

BACKEND_FAILED = "The assistant failed while answering. The turn was saved as failed; please ask again."
FINALIZE_FAILED = "The answer could not be recorded as given. The turn was saved as failed; please ask again."
NOT_SAVED = "The answer could not be saved: the database is unavailable. The turn stays unfinished; resume it later."
ANSWER_LIMIT_NOTE = "\n\n[The answer reached the maximum length (LQAI_MAX_ANSWER_CHARS) and was cut here.]"


@dataclass(frozen=True, slots=True)
class TurnFailed:
    """The backend raised: the turn ends as ``failed``."""

    detail: str


@dataclass(frozen=True, slots=True)
class TurnFinalized:
    """The turn is persisted; ``result`` holds its verified and unverified quotes."""

    result: FinalizedTurn


@dataclass(frozen=True, slots=True)
class Heartbeat:
    """The backend has been silent for ``heartbeat_seconds``; the run is alive."""


@dataclass(frozen=True, slots=True)
class TurnTimedOut:
    """The run reached ``max_seconds``: the turn ends ``interrupted`` and can be resumed."""

    detail: str


class TurnNotSaved(Exception):
    """Not even a ``failed`` turn could be written (the database is unavailable): the turn stays unfinished,
    and becomes resumable once its progress is stale."""


@dataclass(frozen=True, slots=True)
class RunSuperseded:
    """The run's finalize was refused: the turn is another run's now (or already final); nothing of this
    run was written and the turn's current answer stands."""

    detail: str


RunEvent = TextDelta | ToolCall | ToolResult | Heartbeat | TurnFailed | TurnTimedOut | TurnFinalized | RunSuperseded

_DONE = object()


class BackendPump:
    """Iterates a backend's events in a thread of its own, handing them over through a queue, so that the
    consumer can wait for the next one with a timeout (:meth:`next_within`).

    The thread runs in a copy of the caller's context, uses its own database connection and closes it
    when it ends. :meth:`close` stops it: it calls ``cancel`` (the backend's way to abandon the call it is
    blocked in, e.g. shutting the model's stream), then joins the thread for at most ``join_seconds``; the
    thread closes the backend's iterator as it ends. Returns whether the thread has ended.
    """

    def __init__(self, events: Iterator[object], *, cancel: Callable[[], None] | None = None) -> None:
        self._events = events
        self._cancel = cancel
        self._queue: queue.Queue[tuple[object, BaseException | None]] = queue.Queue(maxsize=16)
        self._stop = threading.Event()
        context = contextvars.copy_context()
        self.thread = threading.Thread(target=context.run, args=(self._pump,), name="assistant-backend", daemon=True)
        self.thread.start()

    def _put(self, item: object, error: BaseException | None = None) -> bool:
        while not self._stop.is_set():
            try:
                self._queue.put((item, error), timeout=0.1)
            except queue.Full:
                continue
            return True
        return False

    def _pump(self) -> None:
        try:
            for event in self._events:
                if not self._put(event):
                    break
            else:
                self._put(_DONE)
        except Exception as exc:  # the consumer re-raises it: a backend failure ends the turn `failed`
            self._put(_DONE, exc)
        finally:
            close = getattr(self._events, "close", None)
            if close is not None:
                close()
            connections.close_all()  # this thread's own connections

    def next_within(self, seconds: float) -> object | None:
        """The next event; ``None`` if none came within ``seconds``. Raises what the backend raised, and
        ``StopIteration`` at its end."""
        try:
            item, error = self._queue.get(timeout=seconds)
        except queue.Empty:
            return None
        if error is not None:
            raise error
        if item is _DONE:
            raise StopIteration
        return item

    def close(self, join_seconds: float) -> bool:
        self._stop.set()
        if self.thread.is_alive() and self._cancel is not None:
            try:
                self._cancel()
            except Exception:
                logger.exception("cancelling the assistant backend failed")
        self.thread.join(timeout=join_seconds)
        if self.thread.is_alive():
            logger.warning("the assistant backend's thread did not stop within %g s", join_seconds)
            return False
        return True


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
    """What a backend may read for the turn of ``message``: the chat's user messages and the answers
    that were given, in order (``created_at``, then ``id``), ending with the question it answers.

    The question is ``message.reply_to``: the history stops there (inclusive), so messages posted to
    the chat after it (another turn's question, running at the same time) are never part of this
    turn. A message stored before ``reply_to`` existed (null) falls back to every message created up
    to it, so its question is the latest user message before it.

    The history has a budget, ``LQAI_HISTORY_MAX_CHARS`` characters: the question is always kept, then
    the earlier messages from the newest back, each whole, as long as they fit; the first that does not
    fit ends the history there (older ones are left out too, so the model never sees a gap).
    """
    if message.reply_to_id is not None:
        question = Message.objects.only("created_at").get(pk=message.reply_to_id)
        up_to = Q(created_at__lt=question.created_at) | Q(created_at=question.created_at, id__lte=question.pk)
    else:
        up_to = Q(created_at__lte=message.created_at)
    rows = list(
        Message.objects.filter(up_to, chat_id=message.chat_id)
        .exclude(pk=message.pk)
        .filter(
            Q(role=Message.Role.USER)
            | Q(status__in=[Message.Status.COMPLETE, Message.Status.INTERRUPTED], role=Message.Role.ASSISTANT)
        )
        .order_by("created_at", "id")
        .annotate(length=Length("content"))
        .values_list("pk", "length")
    )
    # The budget: the question always, then the newest earlier messages while they fit (read in two steps,
    # so that a long answer left out is never loaded).
    budget = settings.LQAI_HISTORY_MAX_CHARS
    kept: list[UUID] = []
    for n, (pk, length) in enumerate(reversed(rows)):
        if n > 0 and length > budget:
            break
        kept.append(pk)
        budget -= length
    contents = {
        pk: (role, content)
        for pk, role, content in Message.objects.filter(pk__in=kept).values_list("pk", "role", "content")
    }
    return tuple(HistoryEntry(role=contents[pk][0], content=contents[pk][1]) for pk in reversed(kept))


class TurnRun:
    """One backend run for one assistant message; an iterator of :data:`RunEvent` with ``close()``.

    Iterate it to the end (single-shot) or stream it; ``close()`` it when the consumer goes away.
    """

    def __init__(
        self,
        *,
        message: Message,
        backend: AssistantBackend,
        tools: Mapping[str, Tool],
        heartbeat_seconds: float = 0,
        max_seconds: float = 0,
        progress_every: float | None = None,
    ) -> None:
        """``heartbeat_seconds`` and ``max_seconds`` pace a streamed run (0: off, see the module's
        docstring); the turn's progress is recorded at each heartbeat, and at an event if ``progress_every``
        seconds (by default a quarter of ``LQAI_STALE_TURN_SECONDS``) have passed since the last time."""
        self.message = message
        # The claim this run holds on the turn (see finalize_turn): taken before the run starts.
        self.attempt = message.attempt
        self.superseded: TurnSuperseded | None = None
        self.backend = backend
        self.heartbeat_seconds = heartbeat_seconds
        self.max_seconds = max_seconds
        self.progress_every = settings.LQAI_STALE_TURN_SECONDS / 4 if progress_every is None else progress_every
        self.timed_out = False
        # On a resume the message holds what was produced before the interruption.
        self._content: list[str] = [message.content]
        # The answer's case citations, read paragraph by paragraph as it arrives (in this thread, between its
        # deltas: the run waits on the model anyway), so that finalize reads only the last paragraph.
        self._case_citations = StreamedCitations(max_chars=settings.LQAI_CASE_CITATION_MAX_CHARS)
        self._case_citations.feed(message.content)
        self._claims: list[ClaimedCitation] = []
        self._sources: list[ConsultedSource] = []
        self._seen: set[SourceKey] = {
            _key(*row)
            for row in MessageToolSource.objects.filter(message=message).values_list(
                "source_kind", "tool", "provider", "label", "url", "external_ref"
            )
        }
        self._last_progress = time.monotonic()
        self.turn = Turn(
            chat=message.chat,
            history=turn_history(message),
            tools=tools,
            partial=message.content,
            progress=lambda: self._progress(force=True),  # a backend's call: it is waiting, record it
        )
        self._usage: TurnUsage | None = None
        self.failure: str | None = None
        self.answer_limit_reached = False
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

    @property
    def timeout_detail(self) -> str:
        """What the client is told when the run reached ``max_seconds``."""
        return f"The answer took longer than {self.max_seconds:g} s and was saved as interrupted; resume it to go on."

    def run_to_end(self) -> FinalizedTurn:
        """Run the turn to its end; raises :class:`~chats.services.TurnSuperseded` if its finalize was refused,
        :class:`TurnNotSaved` if it could not be written at all."""
        for _ in self:
            pass
        if self.superseded is not None:
            raise self.superseded
        if self.result is None:
            raise TurnNotSaved(self.failure or NOT_SAVED)
        return self.result

    def _progress(self, *, force: bool = False) -> None:
        """Record that the turn is alive, at most every ``progress_every`` seconds (unless ``force``). A
        database error here is logged and the run goes on: progress is a hint, the answer is what matters."""
        now = time.monotonic()
        if not force and now - self._last_progress < self.progress_every:
            return
        self._last_progress = now
        try:
            record_progress(message=self.message)
        except DatabaseError:
            logger.warning("turn %s: could not record progress; the run goes on", self.message.pk, exc_info=True)
            if not connection.in_atomic_block:
                connection.close()  # the next query opens a fresh connection

    def _paced(self, events: Iterator[object]) -> Generator[object, None, None]:
        """The backend's events, with a :class:`Heartbeat` whenever it is silent for ``heartbeat_seconds``
        (the backend then runs in a :class:`BackendPump`), up to ``max_seconds``; progress recorded on the way."""
        started = time.monotonic()
        pump = BackendPump(events, cancel=getattr(self.backend, "cancel", None)) if self.heartbeat_seconds > 0 else None
        try:
            while True:
                if pump is None:
                    event = next(events, _DONE)
                else:
                    try:
                        event = pump.next_within(self.heartbeat_seconds)
                    except StopIteration:
                        event = _DONE
                if event is _DONE:
                    return
                if self.max_seconds > 0 and time.monotonic() - started >= self.max_seconds:
                    self.timed_out = True
                    return
                self._progress(force=event is None)
                yield Heartbeat() if event is None else event
        finally:
            if pump is not None:
                pump.close(settings.LQAI_BACKEND_STOP_SECONDS)

    def _generate(self) -> Generator[RunEvent, None, None]:
        status = Message.Status.INTERRUPTED
        try:
            backend_events = self.backend.respond(self.turn)
            paced = self._paced(backend_events)
            try:
                for raw in paced:
                    if isinstance(raw, Heartbeat):
                        yield raw
                        continue
                    event = self._record(raw)
                    if event is not None:
                        yield event
                    if self.answer_limit_reached:
                        break
            except BackendInterrupted as exc:
                logger.warning("turn %s: the answer was cut off (%s); saved as interrupted", self.message.pk, exc)
                status = Message.Status.INTERRUPTED
            except Exception as exc:
                logger.exception("turn %s: the assistant backend failed", self.message.pk)
                status = Message.Status.FAILED
                self.failure = f"{BACKEND_FAILED} ({exc})" if isinstance(exc, BackendError) else BACKEND_FAILED
            else:
                if self.timed_out:
                    logger.warning(
                        "turn %s: stopped after %g s, saved as interrupted", self.message.pk, self.max_seconds
                    )
                else:
                    status = Message.Status.COMPLETE
            finally:
                paced.close()  # stops the pump, if any, when the consumer went away
                # With a pump the backend's own thread closes it (a running generator cannot be closed
                # from another thread); otherwise it is closed here.
                close = getattr(backend_events, "close", None)
                if close is not None and self.heartbeat_seconds <= 0:
                    close()
        finally:
            # Runs on completion, on a backend error and on GeneratorExit (the consumer went away).
            self._finalize(status)
        if self.superseded is not None:
            yield RunSuperseded(str(self.superseded))
            return
        if self.failure is not None:
            yield TurnFailed(self.failure)
        if self.result is None:
            return  # nothing was saved: no `done`
        if self.timed_out:
            yield TurnTimedOut(self.timeout_detail)
        yield TurnFinalized(self.result)

    def _record(self, event: object) -> RunEvent | None:
        """Take one backend event in, sanitized (:func:`clean_text`); returns what the consumer is shown
        (nothing for the :class:`FinalAnswer`). A delta past ``LQAI_MAX_ANSWER_CHARS`` is cut to fit, the
        note added and :attr:`answer_limit_reached` set (the run stops there)."""
        if isinstance(event, TextDelta):
            text = clean_text(event.text)
            room = settings.LQAI_MAX_ANSWER_CHARS - sum(map(len, self._content))
            if len(text) >= room:
                logger.warning("turn %s: the answer reached LQAI_MAX_ANSWER_CHARS; cut there", self.message.pk)
                text = text[: max(room, 0)] + ANSWER_LIMIT_NOTE
                self.answer_limit_reached = True
            self._content.append(text)
            self._case_citations.feed(text)
            return TextDelta(text)
        if isinstance(event, ToolResult):
            sources = tuple(_clean_source(source) for source in event.sources)
            for source in sources:
                key = _key(
                    source.source_kind, source.tool, source.provider, source.label, source.url, source.external_ref
                )
                if key not in self._seen:
                    self._seen.add(key)
                    self._sources.append(source)
            return replace(event, payload=clean_json(event.payload), sources=sources)
        if isinstance(event, FinalAnswer):
            self._claims.extend(
                replace(claim, quote=clean_text(claim.quote), named_source=clean_text(claim.named_source))
                for claim in event.citations
            )
            if event.usage is not None:
                self._usage = _add_usage(
                    self.message, replace(event.usage, model_name=clean_text(event.usage.model_name))
                )
            return None
        if isinstance(event, ToolCall):
            return replace(event, arguments=clean_json(event.arguments))
        raise TypeError(f"an assistant backend yielded {type(event).__name__}, not an assistant event")

    def _finalize(self, status: str) -> None:
        """Finalize the turn once, whatever happens: a database error is retried once on a fresh connection;
        if finalize still raises, the turn is finalized ``failed`` (without its claims, sources and usage,
        which may be what broke it) and :attr:`failure` says so."""
        if self.result is not None or self.superseded is not None:
            return
        content = "".join(self._content)
        self._progress(force=True)  # a slow finalize (case-citation lookups) must not look stale
        try:
            try:
                self.result = self._finalize_as(
                    status, content, claims=self._claims, sources=self._sources, usage=self._usage
                )
                return
            except (OperationalError, InterfaceError):
                if connection.in_atomic_block:
                    raise
                logger.warning("turn %s: finalize lost the database; retrying once", self.message.pk, exc_info=True)
                connection.close()
                self.message.refresh_from_db()
                self.result = self._finalize_as(
                    status, content, claims=self._claims, sources=self._sources, usage=self._usage
                )
                return
        except TurnSuperseded as exc:  # logged by finalize_turn; this run's answer is dropped, never `failed`
            self.superseded = exc
            return
        except Exception:
            logger.exception("turn %s: finalize failed; saving the turn as failed", self.message.pk)
        self.failure = FINALIZE_FAILED
        try:
            self.message.refresh_from_db()
            self.result = self._finalize_as(Message.Status.FAILED, content, claims=(), sources=(), usage=None)
        except TurnSuperseded as exc:
            self.superseded = exc
        except Exception:
            logger.exception("turn %s: not even a failed turn could be saved; it stays unfinished", self.message.pk)
            self.failure = NOT_SAVED

    def _finalize_as(
        self,
        status: str,
        content: str,
        *,
        claims: Sequence[ClaimedCitation],
        sources: Sequence[ConsultedSource],
        usage: TurnUsage | None,
    ) -> FinalizedTurn:
        return finalize_turn(
            message=self.message,
            content=content,
            status=status,
            claimed_citations=claims,
            tool_sources=sources,
            usage=usage,
            attempt=self.attempt,
            case_citations_streamed=self._case_citations,
        )


def _clean_source(source: ConsultedSource) -> ConsultedSource:
    return replace(
        source,
        source_kind=clean_text(source.source_kind),
        tool=clean_text(source.tool),
        label=clean_text(source.label),
        provider=None if source.provider is None else clean_text(source.provider),
        subtitle=clean_text(source.subtitle),
        url=clean_text(source.url),
        external_ref=clean_text(source.external_ref),
    )
