"""An assistant backed by a model behind any OpenAI-compatible chat-completions server.

A hosted API, or a model served inside the firm's network (vLLM, Ollama, LM Studio, llama.cpp's
server), through the official ``openai`` package, configured by the ``LQAI_OPENAI_*`` settings
(:class:`OpenAICompatibleConfig`). One turn:

- **Sources.** The matter's most relevant passages (:mod:`chats.retrieval`, as the extractive
  backend ranks them) go into the system prompt, each under a short source id (``S1``, ``S2``, ...)
  that maps to its document. Opinions returned by ``caselaw_search`` get ids too (``C1``, ...,
  mapped to their opinion), added to the result the model reads.
- **Streaming.** The answer streams: each content delta is a :class:`TextDelta` as it arrives.
- **Tools.** The turn's tools (``caselaw_search``, MCP tools) are offered through tool calling; the
  backend runs each call and yields its :class:`ToolCall` and :class:`ToolResult`, then sends the
  result back to the model for the next round. Arguments that are not a JSON object, or an unknown
  tool, are answered to the model as a tool error (no event, nothing run); it may try again. More
  than ``max_tool_rounds`` rounds of calls end the turn ``failed``.
- **Claims.** The model claims each quote with the ``cite(source_id, quote)`` tool (answered to the
  model, no event). Every claim becomes a :class:`ClaimedCitation` of the :class:`FinalAnswer`, so it
  goes through the same verification in ``finalize_turn`` as any backend's. A claim naming a source
  id the turn did not provide names neither a document nor an opinion: it is reported unverified,
  never stored.
- **Failures.** A request refused with 429 or 5xx, or that times out or cannot connect, is retried
  ``max_retries`` times with exponential backoff (honouring ``Retry-After`` up to
  :data:`MAX_RETRY_WAIT`), then ends the turn ``failed`` with a :class:`BackendError` naming the
  cause; any other refusal (4xx) fails at once. Once a round's stream has begun, a dropped
  connection, a read timeout, an error event or an undecodable one from the server, or a stream
  that ends before the model finished raises :class:`BackendInterrupted`: the turn ends
  ``interrupted`` with what was produced, resumable. In every case the quotes claimed so far and
  the usage come first, in a :class:`FinalAnswer`.
- **Usage.** The model's name, prompt and completion tokens summed over the turn's requests (as the
  server reports them with ``stream_options.include_usage``) and the time spent waiting on the
  model (requests and streams, not tools) go into the :class:`FinalAnswer` and onto the message.
- **Resume.** Given a partial answer, the model is shown it and asked to continue after it.

``openai`` is imported on the first turn, not with this module: every ``manage.py`` command imports
the backends, and the package is slow to import.
"""

from __future__ import annotations

import itertools
import json
import logging
import time
import uuid
from collections.abc import Generator, Iterator, Mapping
from dataclasses import dataclass, field
from functools import lru_cache
from typing import TYPE_CHECKING, Any
from urllib.parse import urlsplit

from django.conf import settings
from django.core.exceptions import ImproperlyConfigured

from chats.assistant.backends import BackendError, BackendInterrupted
from chats.assistant.events import AssistantEvent, FinalAnswer, TextDelta, ToolCall, ToolResult, Turn
from chats.assistant.extractive import matter_passages
from chats.services import ClaimedCitation, TurnUsage

if TYPE_CHECKING:
    import httpx2
    import openai

    from chats.tools import Tool

logger = logging.getLogger(__name__)

CITE_TOOL = "cite"
# The longest wait before a retry, whatever the server's Retry-After says.
MAX_RETRY_WAIT = 30.0

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
and the exact quoted words. Never quote anything you were not given; if the sources do not answer the \
question, say so.

Sources from the matter's documents:
{sources}"""
CASELAW_HINT = " and from court opinions you find with the `caselaw_search` tool (each result has a source_id)"
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
    retry_backoff: float

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
            max_retries=settings.LQAI_OPENAI_MAX_RETRIES,
            retry_backoff=settings.LQAI_OPENAI_RETRY_BACKOFF,
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
        if self.max_retries < 0:
            problems.append(f"LQAI_OPENAI_MAX_RETRIES={self.max_retries} must be 0 or more")
        if self.retry_backoff < 0:
            problems.append(f"LQAI_OPENAI_RETRY_BACKOFF={self.retry_backoff} must be 0 or more seconds")
        return problems


@lru_cache(maxsize=8)
def _client(config: OpenAICompatibleConfig) -> openai.OpenAI:
    """One client per configuration, so turns reuse its connections. Retries are ours (see ``_open``)."""
    import openai  # slow to import: paid on the first turn (see the module docstring)

    return openai.OpenAI(
        base_url=config.base_url,
        # Local servers need no key, but the client requires one: a placeholder they ignore.
        api_key=config.api_key or "unused",
        timeout=config.timeout,
        max_retries=0,
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

    @classmethod
    def check_configuration(cls) -> None:
        """Raise :class:`ImproperlyConfigured` if the settings cannot run this backend (start-up check)."""
        OpenAICompatibleConfig.from_settings()

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
            result = yield from self._stream(messages, tools, state)
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
        self, messages: list[dict[str, Any]], tools: list[dict[str, Any]], state: _TurnState
    ) -> Generator[TextDelta, None, _Round]:
        """One request: yields its text as it streams, returns what it produced."""
        text: list[str] = []
        calls: dict[int, _PendingCall] = {}
        finish_reason = ""
        started = time.perf_counter()
        stream = None
        try:
            stream = self._open(messages, tools)
            for chunk in _payloads(stream.response):
                self._usage(chunk, state)
                choices = chunk.get("choices") or ()
                choice = choices[0] if choices else {}
                delta = choice.get("delta") or {}
                content = delta.get("content")
                if content:
                    text.append(content)
                    yield TextDelta(content)
                for piece in delta.get("tool_calls") or ():
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
        finally:
            if stream is not None:
                stream.close()
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

    def _open(self, messages: list[dict[str, Any]], tools: list[dict[str, Any]]) -> openai.Stream[object]:
        """Start a streamed request; 429, 5xx, timeouts and connection errors are retried (see the module).

        Posted with the client's generic ``post``: the typed ``create()`` walks every message through
        the package's parameter transform on each request, several times the cost of the rest of the
        turn. The HTTP, the retry-worthy status errors and the timeouts are the package's; the body is
        read by :func:`_payloads`.
        """
        import openai  # slow to import: paid on the first turn (see the module docstring)

        config = self.config
        body = {
            "model": config.model,
            "messages": messages,
            "tools": tools,
            "max_tokens": config.max_tokens,
            "temperature": config.temperature,
            "stream": True,
            "stream_options": {"include_usage": True},
        }
        for attempt in range(config.max_retries + 1):
            try:
                return _client(config).post(
                    "/chat/completions", body=body, cast_to=object, stream=True, stream_cls=openai.Stream[object]
                )
            except (openai.RateLimitError, openai.InternalServerError, openai.APIConnectionError) as exc:
                cause = _describe(exc)
                if attempt == config.max_retries:
                    raise BackendError(f"the model server failed {attempt + 1} time(s): {cause}") from exc
                wait = _retry_wait(exc, backoff=config.retry_backoff * 2**attempt)
                logger.warning("model request failed (%s); retry %d in %.2f s", cause, attempt + 1, wait)
                time.sleep(wait)
            except openai.APIStatusError as exc:
                raise BackendError(f"the model server refused the request: {_describe(exc)}") from exc
        raise AssertionError("unreachable: the last attempt returns or raises")  # pragma: no cover

    def _dispatch(
        self, call: _PendingCall, tools: Mapping[str, Tool], state: _TurnState
    ) -> Generator[ToolCall | ToolResult, None, str]:
        """Run one tool call; yields its events, returns the tool message's content for the model."""
        raw = "".join(call.arguments) or "{}"
        try:
            arguments = json.loads(raw)
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


def _payloads(response: httpx2.Response) -> Iterator[dict[str, Any]]:
    """The JSON objects of a chat-completions event stream (``data: {...}`` events), up to ``data: [DONE]``.

    The rest of the body is read after ``[DONE]``, so the connection goes back to the client's pool
    (the package's own stream reader closes it there, and every request of a turn would connect
    anew). A dropped connection, a read timeout, an undecodable event or an error event raise
    :class:`BackendInterrupted`; a body that ends without ``[DONE]`` just ends (the caller checks that
    the model finished).
    """
    import httpx2  # with openai, which depends on it: not imported before the first turn

    pieces = response.iter_bytes()
    buffer = b""
    try:
        for piece in itertools.chain(pieces, [b"\n\n"]):
            # Events end with a blank line; CRLF line ends are allowed too.
            buffer = (buffer + piece).replace(b"\r\n", b"\n")
            *events, buffer = buffer.split(b"\n\n")
            for event in events:
                data = b"\n".join(
                    line[6:] if line.startswith(b"data: ") else line[5:]
                    for line in event.split(b"\n")
                    if line.startswith(b"data:")
                )
                if not data:
                    continue  # comments (": ping"), event:/id:/retry: fields alone
                if data.strip() == b"[DONE]":
                    for _rest in pieces:
                        pass
                    return
                yield _chunk(data)
    except httpx2.HTTPError as exc:
        raise BackendInterrupted(f"the model's stream broke off: {type(exc).__name__}: {exc}") from exc


def _chunk(data: bytes) -> dict[str, Any]:
    """One event's JSON object; an error event or an undecodable one raises :class:`BackendInterrupted`."""
    try:
        chunk = json.loads(data)
    except ValueError:
        raise BackendInterrupted(f"the model server sent an undecodable event: {data[:200]!r}") from None
    if not isinstance(chunk, dict):
        raise BackendInterrupted(f"the model server sent an event that is not an object: {data[:200]!r}")
    if chunk.get("error"):
        error = chunk["error"]
        message = error.get("message") if isinstance(error, dict) else error
        raise BackendInterrupted(f"the model server reported an error mid-answer: {str(message)[:200]}")
    return chunk


def _describe(exc: Exception) -> str:
    import openai  # slow to import: paid on the first turn (see the module docstring)

    if isinstance(exc, openai.APIStatusError):
        return f"HTTP {exc.status_code}"
    return "timed out" if isinstance(exc, openai.APITimeoutError) else "could not connect"


def _retry_wait(exc: Exception, *, backoff: float) -> float:
    """The server's ``Retry-After`` (seconds, or ``retry-after-ms``) if it gave one, else ``backoff``; capped."""
    response = getattr(exc, "response", None)
    headers = response.headers if response is not None else {}
    for header, scale in (("retry-after-ms", 0.001), ("retry-after", 1.0)):
        try:
            return min(max(float(headers[header]) * scale, 0.0), MAX_RETRY_WAIT)
        except (KeyError, ValueError):
            continue
    return min(backoff, MAX_RETRY_WAIT)
