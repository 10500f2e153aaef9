"""An assistant backed by a model behind any OpenAI-compatible chat-completions server.

:class:`OpenAICompatibleBackend` runs one turn through the official ``openai`` package, configured by the
``LQAI_OPENAI_*`` settings (:class:`OpenAICompatibleConfig`): the matter's passages go into the system prompt
under short source ids, the answer streams as :class:`TextDelta` events, tools are offered through tool
calling, and every quote the model claims with the ``cite`` tool becomes a :class:`ClaimedCitation` of the
:class:`FinalAnswer`, verified by ``finalize_turn`` like any backend's. A failure before a round's stream
begins raises :class:`BackendError` (the turn ends ``failed``), one after it :class:`BackendInterrupted`
(``interrupted``, resumable); either way the claims and usage so far come first. ``openai`` is imported on
the first turn, not with this module. Sources, tools, claims, failures, liveness, usage and resume, each
step by step: docs/architecture-turns.md.
"""

from __future__ import annotations

import contextlib
import contextvars
import json
import logging
import socket
import time
import uuid
from collections.abc import Callable, Generator, Iterator, Mapping
from dataclasses import dataclass, field
from functools import lru_cache
from typing import TYPE_CHECKING, Any
from urllib.parse import urlsplit

from django.conf import settings
from django.core.exceptions import ImproperlyConfigured

from chats.assistant.backends import BackendError, BackendInterrupted
from chats.assistant.events import (
    AssistantEvent,
    FinalAnswer,
    TextDelta,
    ToolCall,
    ToolResult,
    Turn,
    clean_json,
)
from chats.assistant.extractive import matter_passages
from chats.services import ClaimedCitation, TurnUsage

if TYPE_CHECKING:
    import httpx2
    import openai

    from chats.tools import Tool

logger = logging.getLogger(__name__)

CITE_TOOL = "cite"
# The longest ``Retry-After`` the ``openai`` package honours before a retry (it does not retry a server asking
# for more); its own backoff, without that header, is shorter. Used for the worst case of one request.
SDK_MAX_RETRY_WAIT = 120.0
# Status codes the package retries besides 5xx: a failure with one of them names the attempts made.
RETRIED_STATUSES = frozenset({408, 409, 429})

# Called at each attempt of a request (see ``_on_attempt``): the running turn's ``progress``, per thread.
_attempt_callback: contextvars.ContextVar[Callable[[], None] | None] = contextvars.ContextVar(
    "lqai_openai_attempt", default=None
)

CITE_SPEC: dict[str, Any] = {
    "type": "function",
    "function": {
        "name": CITE_TOOL,
        "description": (
            "Claim a quotation. Call it once for every passage you quote, with the id of the source it comes "
            "from (S1, C2, ...) and the exact words quoted, copied verbatim from that source."
        ),
        "parameters": {
            "type": "object",
            "properties": {
                "source_id": {"type": "string", "description": "The id of the quoted source, e.g. S1 or C1."},
                "quote": {"type": "string", "description": "The quoted words, verbatim."},
            },
            "required": ["source_id", "quote"],
        },
    },
}

SYSTEM_PROMPT = """You are a legal research assistant working on a law firm's matter.
Answer the user's question from the sources below{caselaw}.
Quote sources verbatim, in double quotes, and for every quotation call the `cite` tool with the source id \
and the exact quoted words.{statutes} Never quote anything you were not given; if the sources do not answer the \
question, say so.

Sources from the matter's documents:
{sources}"""
CASELAW_HINT = " and from court opinions you find with the `caselaw_search` tool (each result has a source_id)"
# Statutes are not claimed with `cite`: the answer's statute check attributes a quote to the citation before it.
STATUTE_HINT = (
    " A statute or regulation you look up with the `statute_lookup` tool has no source id: quote it right after "
    'its citation, as in 9 U.S.C. § 2 ("A written provision ..."), without calling `cite`.'
)
NO_SOURCES = "(none matched this question)"
CONTINUE_PROMPT = (
    "Your answer above was cut off. Continue it exactly where it stopped, without repeating anything, "
    "and cite any quotation you make."
)


@dataclass(frozen=True, slots=True)
class OpenAICompatibleConfig:
    """The ``LQAI_OPENAI_*`` settings, checked."""

    base_url: str
    api_key: str
    model: str
    timeout: float
    max_tokens: int
    temperature: float
    max_tool_rounds: int
    max_retries: int
    max_tool_calls: int = 24
    stream: bool = True
    max_response_bytes: int = 64 * 1024 * 1024

    @classmethod
    def from_settings(cls) -> OpenAICompatibleConfig:
        """The configuration, or :class:`ImproperlyConfigured` listing every bad setting."""
        config = cls(
            base_url=settings.LQAI_OPENAI_BASE_URL,
            api_key=settings.LQAI_OPENAI_API_KEY,
            model=settings.LQAI_OPENAI_MODEL,
            timeout=settings.LQAI_OPENAI_TIMEOUT,
            max_tokens=settings.LQAI_OPENAI_MAX_TOKENS,
            temperature=settings.LQAI_OPENAI_TEMPERATURE,
            max_tool_rounds=settings.LQAI_OPENAI_MAX_TOOL_ROUNDS,
            max_tool_calls=settings.LQAI_OPENAI_MAX_TOOL_CALLS,
            max_retries=settings.LQAI_OPENAI_MAX_RETRIES,
            stream=settings.LQAI_OPENAI_STREAM,
            max_response_bytes=settings.LQAI_OPENAI_MAX_RESPONSE_BYTES,
        )
        problems = config._problems()
        if problems:
            raise ImproperlyConfigured(
                "LQAI_ASSISTANT_BACKEND selects the OpenAI-compatible backend, but: " + "; ".join(problems) + "."
            )
        return config

    def _problems(self) -> list[str]:
        problems = []
        url = urlsplit(self.base_url)
        if url.scheme not in {"http", "https"} or not url.netloc:
            problems.append(
                f"LQAI_OPENAI_BASE_URL={self.base_url!r} is not an http(s) URL "
                "(e.g. http://127.0.0.1:11434/v1 or https://api.openai.com/v1)"
            )
        if not self.model:
            problems.append("LQAI_OPENAI_MODEL is not set (the model name the server knows)")
        if not self.timeout > 0:
            problems.append(f"LQAI_OPENAI_TIMEOUT={self.timeout} must be above 0 seconds")
        if self.max_tokens < 1:
            problems.append(f"LQAI_OPENAI_MAX_TOKENS={self.max_tokens} must be at least 1")
        if not 0 <= self.temperature <= 2:
            problems.append(f"LQAI_OPENAI_TEMPERATURE={self.temperature} must be between 0 and 2")
        if self.max_tool_rounds < 1:
            problems.append(f"LQAI_OPENAI_MAX_TOOL_ROUNDS={self.max_tool_rounds} must be at least 1")
        if self.max_tool_calls < 0:
            problems.append(f"LQAI_OPENAI_MAX_TOOL_CALLS={self.max_tool_calls} must be 0 or more")
        if self.max_retries < 0:
            problems.append(f"LQAI_OPENAI_MAX_RETRIES={self.max_retries} must be 0 or more")
        if self.max_response_bytes < 1:
            problems.append(f"LQAI_OPENAI_MAX_RESPONSE_BYTES={self.max_response_bytes} must be at least 1")
        return problems

    def worst_case_wait_seconds(self) -> float:
        """The longest one request can keep a run waiting before it answers or fails: every attempt timing
        out, and the longest wait the package honours between two."""
        return self.timeout * (self.max_retries + 1) + SDK_MAX_RETRY_WAIT * self.max_retries


def _on_attempt(request: httpx2.Request) -> None:
    """The HTTP client's request hook: each attempt (first try or retry) tells the running turn it is alive."""
    callback = _attempt_callback.get()
    if callback is not None:
        callback()


@lru_cache(maxsize=8)
def _client(config: OpenAICompatibleConfig) -> openai.OpenAI:
    """One client per configuration, so turns reuse its connections; the package's timeouts and retries, and
    each response read uncompressed up to ``max_response_bytes`` (:mod:`chats.assistant.bounded_body`)."""
    import openai  # slow to import: paid on the first turn (see the module docstring)

    from chats.assistant.bounded_body import bounded_responses

    hooks: dict[str, list[Callable[..., None]]] = {
        "request": [_on_attempt],
        "response": [bounded_responses(config.max_response_bytes)],
    }
    return openai.OpenAI(
        base_url=config.base_url,
        # Local servers need no key, but the client requires one: a placeholder they ignore.
        api_key=config.api_key or "unused",
        timeout=config.timeout,
        max_retries=config.max_retries,
        default_headers={"Accept-Encoding": "identity"},
        http_client=openai.DefaultHttpxClient(event_hooks=hooks),
    )


@dataclass(slots=True)
class _PendingCall:
    """A tool call as its chunks arrive: the id and name come first, the arguments in pieces."""

    call_id: str = ""
    name: str = ""
    arguments: list[str] = field(default_factory=list)


@dataclass(slots=True)
class _Round:
    """What one request's stream produced."""

    text: str
    calls: list[_PendingCall]
    finish_reason: str


@dataclass(slots=True)
class _TurnState:
    """What the turn has produced so far: sources offered, claims, usage."""

    model_name: str
    sources: dict[str, ClaimedCitation] = field(default_factory=dict)
    opinion_ids: dict[str, str] = field(default_factory=dict)
    claims: list[ClaimedCitation] = field(default_factory=list)
    prompt_tokens: int | None = None
    completion_tokens: int | None = None
    waited: float = 0.0
    unnamed_calls: int = 0  # tool calls the server sent without an id, numbered for the turn
    tools_run: int = 0  # tool calls run (cite excepted), bounded by max_tool_calls

    def final_answer(self) -> FinalAnswer:
        usage = TurnUsage(
            model_name=self.model_name,
            prompt_tokens=self.prompt_tokens,
            completion_tokens=self.completion_tokens,
            latency_ms=round(self.waited * 1000),
        )
        return FinalAnswer(citations=tuple(self.claims), usage=usage)

    def add_usage(self, prompt_tokens: int | None, completion_tokens: int | None) -> None:
        if prompt_tokens is not None:
            self.prompt_tokens = (self.prompt_tokens or 0) + prompt_tokens
        if completion_tokens is not None:
            self.completion_tokens = (self.completion_tokens or 0) + completion_tokens

    def opinion_source(self, opinion_id: str) -> str | None:
        """The source id of an opinion found by a tool (assigned on first sight), or None if not an id."""
        if opinion_id in self.opinion_ids:
            return self.opinion_ids[opinion_id]
        try:
            pk = uuid.UUID(opinion_id)
        except ValueError:
            return None
        source_id = f"C{len(self.opinion_ids) + 1}"
        self.opinion_ids[opinion_id] = source_id
        self.sources[source_id] = ClaimedCitation(quote="", opinion_id=pk)
        return source_id

    def claim(self, source_id: str, quote: str) -> bool:
        """Record a claim; False if ``source_id`` is not a source of this turn (the claim names none)."""
        source = self.sources.get(source_id) or self.sources.get(self.opinion_ids.get(source_id, ""))
        if source is None:
            self.claims.append(ClaimedCitation(quote=quote, named_source=source_id))
            return False
        self.claims.append(ClaimedCitation(quote=quote, document_id=source.document_id, opinion_id=source.opinion_id))
        return True


def _tool_error(message: str) -> str:
    return json.dumps({"error": message})


class OpenAICompatibleBackend:
    """Answers a turn with a model behind an OpenAI-compatible chat-completions server (see the module)."""

    # How many of the matter's passages go into the prompt, from how many of its best documents.
    kb_passages = 6
    candidate_documents = 5

    def __init__(self, config: OpenAICompatibleConfig | None = None) -> None:
        self.config = config or OpenAICompatibleConfig.from_settings()
        self._live: httpx2.Response | None = None  # the response being read, for cancel()
        self._cancelled = False

    @classmethod
    def check_configuration(cls) -> None:
        """Raise :class:`ImproperlyConfigured` if the settings cannot run this backend (start-up check)."""
        OpenAICompatibleConfig.from_settings()

    @classmethod
    def worst_case_wait_seconds(cls) -> float:
        """How long one request of the configured backend can keep a run waiting (start-up check)."""
        return OpenAICompatibleConfig.from_settings().worst_case_wait_seconds()

    def cancel(self) -> None:
        """Stop the turn from another thread: the connection of the stream being read is shut down, so the
        read waiting on it returns at once (the run then ends ``interrupted``), and no further request is made.
        A request still waiting for its response headers ends within its timeout."""
        self._cancelled = True
        response = self._live
        network_stream = response.extensions.get("network_stream") if response is not None else None
        sock = network_stream.get_extra_info("socket") if network_stream is not None else None
        if isinstance(sock, socket.socket):
            with contextlib.suppress(OSError):  # already closed: the stream has ended anyway
                sock.shutdown(socket.SHUT_RDWR)

    def respond(self, turn: Turn) -> Iterator[AssistantEvent]:
        state = _TurnState(model_name=self.config.model)
        try:
            yield from self._answer(turn, state)
        except Exception:
            # What was claimed and spent before the failure is recorded with the turn.
            yield state.final_answer()
            raise
        yield state.final_answer()

    def _answer(self, turn: Turn, state: _TurnState) -> Generator[AssistantEvent, None, None]:
        messages = self._messages(turn, state)
        tools = [self._spec(tool) for tool in turn.tools.values() if tool.name != CITE_TOOL] + [CITE_SPEC]
        rounds = 0
        while True:
            result = yield from self._stream(messages, tools, state, turn)
            if not result.calls:
                if result.finish_reason == "length":
                    logger.warning("the model reached LQAI_OPENAI_MAX_TOKENS: its answer is cut short")
                return
            rounds += 1
            if rounds > self.config.max_tool_rounds:
                raise BackendError(
                    f"the model was still calling tools after {self.config.max_tool_rounds} rounds "
                    "(LQAI_OPENAI_MAX_TOOL_ROUNDS)"
                )
            messages.append(
                {
                    "role": "assistant",
                    "content": result.text or None,
                    "tool_calls": [
                        {
                            "id": call.call_id,
                            "type": "function",
                            "function": {"name": call.name, "arguments": "".join(call.arguments)},
                        }
                        for call in result.calls
                    ],
                }
            )
            for call in result.calls:
                content = yield from self._dispatch(call, turn.tools, state)
                messages.append({"role": "tool", "tool_call_id": call.call_id, "content": content})

    def _messages(self, turn: Turn, state: _TurnState) -> list[dict[str, Any]]:
        lines = []
        kb = matter_passages(turn.chat, turn.question, documents=self.candidate_documents, limit=self.kb_passages)
        for n, (document, passage) in enumerate(kb, start=1):
            state.sources[f"S{n}"] = ClaimedCitation(quote="", document_id=document.pk)
            lines.append(f"[S{n}] {document.title}\n{passage.text}\n")
        system = SYSTEM_PROMPT.format(
            caselaw=CASELAW_HINT if "caselaw_search" in turn.tools else "",
            statutes=STATUTE_HINT if "statute_lookup" in turn.tools else "",
            sources="\n".join(lines) if lines else NO_SOURCES,
        )
        messages: list[dict[str, Any]] = [{"role": "system", "content": system}]
        messages += [{"role": entry.role, "content": entry.content} for entry in turn.history]
        if turn.partial:
            messages += [
                {"role": "assistant", "content": turn.partial},
                {"role": "user", "content": CONTINUE_PROMPT},
            ]
        return messages

    @staticmethod
    def _spec(tool: Tool) -> dict[str, Any]:
        return {
            "type": "function",
            "function": {"name": tool.name, "description": tool.description, "parameters": dict(tool.parameters)},
        }

    def _stream(
        self, messages: list[dict[str, Any]], tools: list[dict[str, Any]], state: _TurnState, turn: Turn
    ) -> Generator[TextDelta, None, _Round]:
        """One request: yields its text as it streams (or at once, from a server that does not stream),
        returns what it produced."""
        import openai  # slow to import: paid on the first turn (see the module docstring)

        text: list[str] = []
        calls: dict[int, _PendingCall] = {}
        held = 0  # the characters of the round's tool calls, each piece counted at least once: bounded
        finish_reason = ""
        started = time.perf_counter()
        try:
            if not self.config.stream:
                completion = self._request(messages, tools, turn)
                chunks: Iterator[dict[str, Any]] = iter([_as_chunk(completion.to_dict())])
                stream = None
            else:
                stream = self._request(messages, tools, turn)
                chunks = (chunk.to_dict() for chunk in stream)
            try:
                for chunk in chunks:
                    wrong = _misshapen(chunk)
                    if wrong:
                        raise BackendError(
                            f"the model server sent something that is not a chat completion chunk ({wrong}): "
                            f"{json.dumps(chunk, default=str)[:200]}"
                        )
                    self._usage(chunk, state)
                    choices = chunk.get("choices") or ()
                    choice = choices[0] if choices else {}
                    delta = choice.get("delta") or {}
                    content = delta.get("content")
                    if content:
                        text.append(content)
                        yield TextDelta(content)
                    for piece in delta.get("tool_calls") or ():
                        held += 1 + len((piece.get("function") or {}).get("arguments") or "")
                        if held > settings.LQAI_MAX_ANSWER_CHARS:
                            raise BackendError(
                                "the model's tool calls in one round outgrew LQAI_MAX_ANSWER_CHARS "
                                f"({settings.LQAI_MAX_ANSWER_CHARS} characters)"
                            )
                        index = piece.get("index")
                        if not isinstance(index, int):
                            # A server that omits the index starts each call with its id or name; the rest continues it.
                            starts = piece.get("id") or (piece.get("function") or {}).get("name")
                            index = len(calls) if starts or not calls else max(calls)
                        call = calls.setdefault(index, _PendingCall())
                        call.call_id = call.call_id or piece.get("id") or ""
                        function = piece.get("function") or {}
                        call.name = call.name or function.get("name") or ""
                        if function.get("arguments"):
                            call.arguments.append(function["arguments"])
                    finish_reason = choice.get("finish_reason") or finish_reason
            except openai.APIError as exc:
                # Raised by the package's stream: an error event, a read timeout, a dropped connection.
                raise BackendInterrupted(f"the model's stream broke off: {_describe_stream_error(exc)}") from exc
            except ValueError as exc:
                raise BackendInterrupted(f"the model server sent an undecodable event: {exc}") from exc
            finally:
                self._live = None
                if stream is not None:
                    stream.close()
        finally:
            state.waited += time.perf_counter() - started
        if not finish_reason:
            raise BackendInterrupted("the model's stream ended before the model finished")
        ordered = [calls[index] for index in sorted(calls)]
        for call in ordered:
            if not call.call_id:
                state.unnamed_calls += 1
                call.call_id = f"call_{state.unnamed_calls}"
        return _Round(text="".join(text), calls=ordered, finish_reason=finish_reason)

    @staticmethod
    def _usage(chunk: dict[str, Any], state: _TurnState) -> None:
        if chunk.get("model"):
            state.model_name = chunk["model"]
        usage = chunk.get("usage")
        if isinstance(usage, dict):
            state.add_usage(usage.get("prompt_tokens"), usage.get("completion_tokens"))

    def _request(self, messages: list[dict[str, Any]], tools: list[dict[str, Any]], turn: Turn) -> Any:
        """Send one chat-completions request through the package (its timeouts and retries, see the module):
        the stream of chunks, or with ``LQAI_OPENAI_STREAM=false`` the whole completion. Every failure is a
        :class:`BackendError` naming its cause, and so is a 200 that is not an event stream."""
        import openai  # slow to import: paid on the first turn (see the module docstring)

        if self._cancelled:
            raise BackendInterrupted("the turn was stopped")
        config = self.config
        options: dict[str, Any] = {"stream_options": {"include_usage": True}} if config.stream else {}
        attempts = 0

        def attempt() -> None:
            nonlocal attempts
            attempts += 1
            turn.progress()

        token = _attempt_callback.set(attempt)
        try:
            response = _client(config).chat.completions.create(
                model=config.model,
                messages=messages,  # type: ignore[arg-type]  # the package's TypedDicts, built as plain dicts
                tools=tools,  # type: ignore[arg-type]
                max_tokens=config.max_tokens,
                temperature=config.temperature,
                stream=config.stream,
                **options,
            )
        except openai.APIStatusError as exc:
            if exc.status_code in RETRIED_STATUSES or exc.status_code >= 500:
                raise BackendError(f"the model server failed {attempts} time(s): HTTP {exc.status_code}") from exc
            raise BackendError(f"the model server refused the request: HTTP {exc.status_code}") from exc
        except openai.APIConnectionError as exc:
            cause = "timed out" if isinstance(exc, openai.APITimeoutError) else "could not connect"
            raise BackendError(f"the model server failed {attempts} time(s): {cause}") from exc
        except openai.APIError as exc:
            raise BackendError(f"the model server answered with something that is not a completion: {exc}") from exc
        finally:
            _attempt_callback.reset(token)
        if isinstance(response, openai.Stream):
            content_type = response.response.headers.get("content-type", "")
            if not content_type.startswith("text/event-stream"):
                response.close()
                raise BackendError(
                    f"the model server answered 200 with {content_type or 'no content type'}, not an event stream "
                    "(for a server that does not stream, set LQAI_OPENAI_STREAM=false)"
                )
            self._live = response.response
            if self._cancelled:  # cancelled while the request was on its way: cancel() found no stream to shut
                response.close()
                raise BackendInterrupted("the turn was stopped")
        return response

    def _dispatch(
        self, call: _PendingCall, tools: Mapping[str, Tool], state: _TurnState
    ) -> Generator[ToolCall | ToolResult, None, str]:
        """Run one tool call; yields its events, returns the tool message's content for the model."""
        raw = "".join(call.arguments) or "{}"
        try:
            arguments = clean_json(json.loads(raw))  # the model's words, as the runner cleans the rest
        except ValueError:
            arguments = None
        if not isinstance(arguments, dict):
            logger.warning("the model called %r with arguments that are not a JSON object: %.200r", call.name, raw)
            return _tool_error(f"the arguments of {call.name} must be a JSON object; got {raw[:200]!r}")
        if call.name == CITE_TOOL:
            source_id, quote = arguments.get("source_id"), arguments.get("quote")
            if not isinstance(source_id, str) or not isinstance(quote, str) or not quote.strip():
                return _tool_error("cite needs a source_id and a non-empty quote, both strings")
            if not state.claim(source_id.strip(), quote):
                return _tool_error(f"unknown source_id {source_id!r}: cite only the sources you were given")
            return json.dumps({"ok": True})
        tool = tools.get(call.name)
        if tool is None:
            return _tool_error(f"there is no tool named {call.name!r}")
        if state.tools_run >= self.config.max_tool_calls:
            return _tool_error(
                f"this turn has run its {self.config.max_tool_calls} tool calls (LQAI_OPENAI_MAX_TOOL_CALLS): "
                "answer from what you have"
            )
        state.tools_run += 1
        yield ToolCall(call_id=call.call_id, tool=call.name, arguments=arguments)
        output = tool.run(arguments)
        yield ToolResult(call_id=call.call_id, tool=call.name, payload=output.payload, sources=output.sources)
        return json.dumps(self._for_model(output.payload, state), default=str)

    @staticmethod
    def _for_model(payload: Mapping[str, Any], state: _TurnState) -> Mapping[str, Any]:
        """The payload the model reads: each opinion result gets its citable ``source_id``."""
        results = payload.get("results")
        if not isinstance(results, list):
            return payload
        labelled = []
        for result in results:
            if isinstance(result, Mapping) and isinstance(result.get("opinion_id"), str):
                source_id = state.opinion_source(result["opinion_id"])
                result = {"source_id": source_id, **result} if source_id else result
            labelled.append(result)
        return {**payload, "results": labelled}


def _misshapen(chunk: Mapping[str, Any]) -> str | None:
    """What in a chunk is not where or what a chat completion chunk has it (the parts this backend reads), or
    None: a chunk of the wrong shape fails the turn saying so, rather than breaking the code that reads it."""
    optional: tuple[tuple[str, object, type], ...] = (
        ("model", chunk.get("model"), str),
        ("usage", chunk.get("usage"), dict),
        ("choices", chunk.get("choices"), list),
    )
    wrong = [name for name, value, kind in optional if value is not None and not isinstance(value, kind)]
    usage = chunk.get("usage")
    counts = [usage.get(name) for name in ("prompt_tokens", "completion_tokens")] if isinstance(usage, dict) else []
    if any(count is not None and type(count) is not int for count in counts):
        wrong.append("usage's token counts")
    choices = chunk.get("choices") if isinstance(chunk.get("choices"), list) else []
    if wrong or not choices:
        return ", ".join(wrong) or None
    choice = choices[0]
    if not isinstance(choice, dict):
        return "choices[0]"
    delta = choice.get("delta") or {}
    if not isinstance(delta, dict):
        return "delta"
    pieces = delta.get("tool_calls") or []
    checks: list[tuple[str, object, type]] = [
        ("finish_reason", choice.get("finish_reason"), str),
        ("delta.content", delta.get("content"), str),
        ("delta.tool_calls", pieces, list),
    ]
    for piece in pieces if isinstance(pieces, list) else ():
        if not isinstance(piece, dict):
            return "a tool call"
        function = piece.get("function") or {}
        checks += [
            ("a tool call's index", piece.get("index"), int),
            ("a tool call's id", piece.get("id"), str),
            ("a tool call's function", function, dict),
        ]
        if isinstance(function, dict):
            checks += [
                ("a tool call's name", function.get("name"), str),
                ("a tool call's arguments", function.get("arguments"), str),
            ]
    return next((name for name, value, kind in checks if value is not None and not isinstance(value, kind)), None)


def _as_chunk(completion: dict[str, Any]) -> dict[str, Any]:
    """A whole (non-streamed) completion as the one chunk it amounts to: its message as the delta."""
    choices = [
        {"delta": choice.get("message") or {}, "finish_reason": choice.get("finish_reason")}
        for choice in completion.get("choices") or ()
        if isinstance(choice, dict)
    ]
    return {**completion, "choices": choices}


def _describe_stream_error(exc: Exception) -> str:
    import openai  # slow to import: paid on the first turn (see the module docstring)

    if isinstance(exc, openai.APITimeoutError):
        return "the read timed out"
    if isinstance(exc, openai.APIConnectionError):
        return f"the connection failed ({type(exc.__cause__).__name__})"
    message = getattr(exc, "message", "") or str(exc)
    return f"the model server reported an error mid-answer: {message[:200]}"
