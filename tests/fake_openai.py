"""A fake OpenAI-compatible chat-completions server on 127.0.0.1, for the tests and the benchmark.

It answers ``POST /v1/chat/completions`` with the responses it was given, in order: a streamed
answer replayed as the server-sent events real servers send (``data: {chunk}`` frames in chunked
transfer encoding, then ``data: [DONE]``), an error status (by default asking for a quick retry), a
stall (to trip the client's timeout), a stream cut mid-answer (the connection dropped without the
last chunk) or stalled mid-answer, or a 200 with a JSON body (a whole completion, as a server that
does not stream answers). Text may hold anything JSON can escape (NUL, lone surrogates). It records each request's
JSON body. Nothing here reaches the network.
"""

from __future__ import annotations

import json
import socket
import threading
import time
from collections import deque
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

MODEL = "fake-model-7b"


def _chunk(delta: dict[str, Any] | None, *, finish_reason: str | None = None, model: str = MODEL) -> dict[str, Any]:
    choices = [] if delta is None else [{"index": 0, "delta": delta, "logprobs": None, "finish_reason": finish_reason}]
    return {
        "id": "chatcmpl-fake",
        "object": "chat.completion.chunk",
        "created": 1764500000,
        "model": model,
        "system_fingerprint": "fp_fake",
        "choices": choices,
    }


def text_chunks(text: str, pieces: int | None = None) -> list[dict[str, Any]]:
    """The role chunk, then ``text`` in ``pieces`` content deltas (by default one per word, as models stream)."""
    if pieces is None:
        words = text.split(" ")
        parts = [word + (" " if i < len(words) - 1 else "") for i, word in enumerate(words)]
    else:
        size = -(-len(text) // pieces)
        parts = [text[i : i + size] for i in range(0, len(text), size)]
    return [_chunk({"role": "assistant", "content": ""})] + [_chunk({"content": part}) for part in parts if part]


def tool_call_chunks(calls: Sequence[tuple[str, str, str]]) -> list[dict[str, Any]]:
    """Chunks calling tools, as OpenAI streams them: per call, its id and name first, then its
    arguments (``(call_id, name, arguments_json)``) in two pieces."""
    chunks = []
    for index, (call_id, name, arguments) in enumerate(calls):
        head = {"index": index, "id": call_id, "type": "function", "function": {"name": name, "arguments": ""}}
        chunks.append(_chunk({"role": "assistant", "content": None, "tool_calls": [head]}))
        half = len(arguments) // 2
        for piece in (arguments[:half], arguments[half:]):
            chunks.append(_chunk({"tool_calls": [{"index": index, "function": {"arguments": piece}}]}))
    return chunks


def cite(call_id: str, source_id: str, quote: str) -> tuple[str, str, str]:
    return (call_id, "cite", json.dumps({"source_id": source_id, "quote": quote}))


def finish(reason: str, *, prompt_tokens: int = 100, completion_tokens: int = 20) -> list[dict[str, Any]]:
    """The finishing chunk and the usage chunk (``stream_options.include_usage``)."""
    usage = _chunk(None)
    usage["usage"] = {
        "prompt_tokens": prompt_tokens,
        "completion_tokens": completion_tokens,
        "total_tokens": prompt_tokens + completion_tokens,
    }
    return [_chunk({}, finish_reason=reason), usage]


@dataclass(frozen=True)
class Stream:
    """A streamed answer; ``cut_after`` drops the connection after that many chunks (no finish, no [DONE]);
    ``stall_after`` pauses ``stall_seconds`` there; ``raw_frames`` are sent as they are before the chunks'."""

    chunks: list[dict[str, Any]]
    raw_frames: tuple[bytes, ...] = ()
    cut_after: int | None = None
    stall_after: int | None = None
    stall_seconds: float = 0.0


@dataclass(frozen=True)
class Status:
    """An error response (e.g. 429 with ``Retry-After``, 500); by default it asks for a retry after 5 ms, so that
    the client's retries are quick in tests."""

    code: int
    headers: dict[str, str] = field(default_factory=lambda: {"retry-after-ms": "5"})
    message: str = "error"


@dataclass(frozen=True)
class Stall:
    """No answer for ``seconds`` (longer than the client's timeout), then a 500 if anyone is still listening."""

    seconds: float


@dataclass(frozen=True)
class Json:
    """A 200 answered with one JSON body (``application/json``), as servers that do not stream answer: a whole
    completion (:func:`completion`), or anything else a server might send instead of an event stream."""

    body: dict[str, Any]


Response = Stream | Status | Stall | Json


def completion(
    text: str | None = None,
    *,
    calls: Sequence[tuple[str, str, str]] = (),
    finish_reason: str | None = None,
    prompt_tokens: int = 100,
    completion_tokens: int = 20,
) -> Json:
    """A whole (non-streamed) chat completion: its text and/or tool calls ``(call_id, name, arguments_json)``."""
    message: dict[str, Any] = {"role": "assistant", "content": text}
    if calls:
        message["tool_calls"] = [
            {"id": call_id, "type": "function", "function": {"name": name, "arguments": arguments}}
            for call_id, name, arguments in calls
        ]
    return Json(
        {
            "id": "chatcmpl-fake",
            "object": "chat.completion",
            "created": 1764500000,
            "model": MODEL,
            "choices": [
                {
                    "index": 0,
                    "message": message,
                    "logprobs": None,
                    "finish_reason": finish_reason or ("tool_calls" if calls else "stop"),
                }
            ],
            "usage": {
                "prompt_tokens": prompt_tokens,
                "completion_tokens": completion_tokens,
                "total_tokens": prompt_tokens + completion_tokens,
            },
        }
    )


def answer(text: str, *, pieces: int | None = None, **usage: int) -> Stream:
    return Stream([*text_chunks(text, pieces), *finish("stop", **usage)])


def tool_round(*calls: tuple[str, str, str], text: str = "", **usage: int) -> Stream:
    return Stream([*(text_chunks(text) if text else []), *tool_call_chunks(calls), *finish("tool_calls", **usage)])


def sse(chunks: Sequence[dict[str, Any]]) -> Iterator[bytes]:
    """The event-stream frames of ``chunks``, ending with ``[DONE]``."""
    for chunk in chunks:
        yield b"data: " + json.dumps(chunk, separators=(",", ":")).encode() + b"\n\n"
    yield b"data: [DONE]\n\n"


class _QuietServer(ThreadingHTTPServer):
    daemon_threads = True

    def handle_error(self, request: Any, client_address: Any) -> None:
        # A client that gave up (a timeout test) leaves a broken pipe behind: expected, not worth a traceback.
        pass


class FakeOpenAIServer:
    """Serves the queued responses in order; a request with none queued gets a 500 saying so."""

    def __init__(self) -> None:
        self.requests: list[dict[str, Any]] = []
        self.connections = 0
        self._queue: deque[Response] = deque()
        self._lock = threading.Lock()
        self._server = _QuietServer(("127.0.0.1", 0), self._handler())
        self._thread = threading.Thread(target=self._server.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True)

    @property
    def base_url(self) -> str:
        host, port = self._server.server_address[:2]
        return f"http://{host!s}:{port}/v1"

    def respond(self, *responses: Response) -> None:
        with self._lock:
            self._queue.extend(responses)

    @property
    def pending(self) -> int:
        return len(self._queue)

    def start(self) -> FakeOpenAIServer:
        self._thread.start()
        return self

    def stop(self) -> None:
        self._server.shutdown()
        self._server.server_close()
        self._thread.join(timeout=5)

    def _next(self, body: dict[str, Any]) -> Response:
        with self._lock:
            self.requests.append(body)
            return self._queue.popleft() if self._queue else Status(500, message="the fake server has no response")

    def _handler(self) -> type[BaseHTTPRequestHandler]:
        server = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"
            timeout = 5  # an idle keep-alive connection is closed after this

            def setup(self) -> None:
                super().setup()
                with server._lock:
                    server.connections += 1
                # Each frame goes out as it is written, as real servers send them (no Nagle delay).
                self.connection.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)

            def log_message(self, format: str, *args: Any) -> None:
                pass

            def do_POST(self) -> None:
                length = int(self.headers.get("Content-Length", "0"))
                body = json.loads(self.rfile.read(length) or b"{}")
                response = server._next(body)
                if isinstance(response, Stall):
                    time.sleep(response.seconds)
                    response = Status(500, message="stalled")
                if isinstance(response, Status):
                    self._status(response)
                elif isinstance(response, Json):
                    self._json(response)
                else:
                    self._stream(response)

            def _json(self, response: Json) -> None:
                payload = json.dumps(response.body).encode()
                self.send_response(200)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(payload)))
                self.end_headers()
                self.wfile.write(payload)

            def _status(self, response: Status) -> None:
                payload = json.dumps({"error": {"message": response.message, "type": "server_error"}}).encode()
                self.send_response(response.code)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(payload)))
                for name, value in response.headers.items():
                    self.send_header(name, value)
                self.end_headers()
                self.wfile.write(payload)

            def _stream(self, response: Stream) -> None:
                self.send_response(200)
                self.send_header("Content-Type", "text/event-stream")
                self.send_header("Transfer-Encoding", "chunked")
                self.end_headers()
                for n, frame in enumerate([*response.raw_frames, *sse(response.chunks)]):
                    if n == response.cut_after:
                        # Drop the connection mid-body: no terminating chunk, no [DONE].
                        self.wfile.flush()
                        self.connection.shutdown(socket.SHUT_RDWR)
                        self.close_connection = True
                        return
                    if n == response.stall_after:
                        time.sleep(response.stall_seconds)
                    self.wfile.write(f"{len(frame):x}\r\n".encode() + frame + b"\r\n")
                    self.wfile.flush()
                self.wfile.write(b"0\r\n\r\n")
                self.wfile.flush()

        return Handler
