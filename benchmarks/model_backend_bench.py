"""The OpenAI-compatible backend's own cost per turn, against a fake server that answers at once.

A turn of three requests, as a tool-using model answers: two rounds of tool calls (five calls in all:
three to a tool that returns at once, two ``cite`` claims), then an answer streamed in 50 chunks. The
same three requests are also replayed raw: posted with the HTTP client the ``openai`` package uses
(``httpx2``, keep-alive) and their streamed bytes read to the end, with no parsing. The backend's
overhead is the difference of the medians: the ``openai`` package's request building, its stream of
typed chunks, events, tool dispatch and claims. The goal is what a user feels: that CPU time of this
process against a turn answered at a model's pace (:data:`PACED_TURN_S`, a 1,000-token answer at 40
tokens a second), at most :data:`GOAL_SHARE` of it; wall time is reported too (a busy machine inflates
it, the CPU time much less). Turns and replays alternate; no database is used (a chat
outside any matter). The fake server runs in a child process, as a real server would, so that its
own Python work does not compete with the backend's for this process's interpreter lock.

``python -m benchmarks.model_backend_bench`` runs it alone; ``make bench`` runs it as item 7.
"""

from __future__ import annotations

import json
import logging
import multiprocessing
import os
import statistics
import sys
import time
from collections.abc import Mapping
from multiprocessing.connection import Connection
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

CHUNKS = 50
TOOL_CALLS = 5
# A turn as a user waits for it: 1,000 tokens at a model's 40 tokens a second.
PACED_TURN_S = 1000 / 40
GOAL_SHARE = 0.01


def _serve(script: tuple[Any, ...], repeats: int, conn: Connection) -> None:
    """In the child process: serve ``script`` ``repeats`` times over, report the URL and the first requests."""
    from tests.fake_openai import FakeOpenAIServer

    server = FakeOpenAIServer().start()
    server.respond(*(script * repeats))
    conn.send(server.base_url)
    conn.recv()  # the warm-up turn is done
    conn.send(server.requests[: len(script)])
    conn.recv()  # the parent is done
    server.stop()


def _script() -> tuple[Any, ...]:
    from tests.fake_openai import answer, cite, tool_round

    lookup = json.dumps({"q": "strict scrutiny"})
    return (
        tool_round(("call_1", "lookup", lookup), ("call_2", "lookup", lookup)),
        tool_round(("call_3", "lookup", lookup), cite("call_4", "S1", "a quote"), cite("call_5", "C9", "another")),
        answer("word " * CHUNKS, pieces=CHUNKS),
    )


def run(turns: int = 200) -> dict[str, float]:
    """Median ms of a backend turn and of the raw replay of its requests, and their difference: wall
    time, and this process's CPU time (the server is another process), which a busy machine inflates less."""
    import httpx2
    from django.test import override_settings

    from chats.assistant.events import HistoryEntry, Turn
    from chats.assistant.openai_compatible import OpenAICompatibleBackend, _client
    from chats.models import Chat
    from chats.tools import ToolOutput

    class InstantTool:
        name = "lookup"
        description = "Returns at once."
        parameters: Mapping[str, Any] = {"type": "object", "properties": {"q": {"type": "string"}}}

        def run(self, arguments: Mapping[str, Any]) -> ToolOutput:
            return ToolOutput(payload={"results": [], "q": arguments.get("q")})

    logging.getLogger("httpx2").setLevel(logging.WARNING)
    script = _script()
    parent, child = multiprocessing.get_context("fork").Pipe()
    # Fork before this process starts any thread: the child only serves.
    server = multiprocessing.get_context("fork").Process(target=_serve, args=(script, 2 * turns + 1, child))
    server.start()
    turn = Turn(
        chat=Chat(title="bench", project=None),
        history=(HistoryEntry(role="user", content="Does strict scrutiny apply?"),),
        tools={"lookup": InstantTool()},
    )
    try:
        if not parent.poll(30):
            raise RuntimeError("the fake server did not start")
        base_url = parent.recv()
        overrides = {"LQAI_OPENAI_BASE_URL": base_url, "LQAI_OPENAI_MODEL": "bench", "LQAI_OPENAI_MAX_RETRIES": 0}
        with override_settings(**overrides), httpx2.Client(timeout=10) as raw_client:
            backend = OpenAICompatibleBackend()
            # One turn to record its requests (and warm the client's connection and imports).
            events = list(backend.respond(turn))
            assert sum(type(e).__name__ == "TextDelta" for e in events) == CHUNKS
            assert sum(type(e).__name__ == "ToolCall" for e in events) == 3  # and two cite claims
            parent.send("warm")
            bodies = parent.recv()
            assert len(bodies) == len(script), bodies
            url = f"{base_url}/chat/completions"
            turn_ms: list[float] = []
            raw_ms: list[float] = []
            turn_cpu: list[float] = []
            raw_cpu: list[float] = []
            for _ in range(turns):
                started, cpu = time.perf_counter(), time.process_time()
                for _event in backend.respond(turn):
                    pass
                turn_ms.append((time.perf_counter() - started) * 1000)
                turn_cpu.append((time.process_time() - cpu) * 1000)

                started, cpu = time.perf_counter(), time.process_time()
                for body in bodies:
                    with raw_client.stream("POST", url, json=body) as response:
                        for _bytes in response.iter_bytes():
                            pass
                raw_ms.append((time.perf_counter() - started) * 1000)
                raw_cpu.append((time.process_time() - cpu) * 1000)
    finally:
        parent.send("stop")
        server.join(timeout=10)
        if server.is_alive():
            server.kill()
        _client.cache_clear()
    median = statistics.median
    return {
        "turns": float(turns),
        "turn_ms": median(turn_ms),
        "raw_ms": median(raw_ms),
        "overhead_ms": median(turn_ms) - median(raw_ms),
        "turn_cpu_ms": median(turn_cpu),
        "raw_cpu_ms": median(raw_cpu),
        "overhead_cpu_ms": median(turn_cpu) - median(raw_cpu),
    }


def main() -> None:
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "lqai.settings_test")
    import django

    django.setup()
    result = run(turns=int(sys.argv[1]) if len(sys.argv) > 1 else 200)
    print(
        f"{CHUNKS} streamed chunks, {TOOL_CALLS} tool calls, 3 requests; median of {result['turns']:.0f} turns:\n"
        f"  wall: backend turn {result['turn_ms']:.2f} ms, raw HTTP replay {result['raw_ms']:.2f} ms, "
        f"backend overhead {result['overhead_ms']:.2f} ms\n"
        f"  CPU:  backend turn {result['turn_cpu_ms']:.2f} ms, raw HTTP replay {result['raw_cpu_ms']:.2f} ms, "
        f"backend overhead {result['overhead_cpu_ms']:.2f} ms = "
        f"{result['overhead_cpu_ms'] / 1000 / PACED_TURN_S:.3%} of a {PACED_TURN_S:.0f} s model-paced turn "
        f"(goal <= {GOAL_SHARE:.0%})"
    )


if __name__ == "__main__":
    main()
