"""The OpenAI-compatible backend's own cost per turn, against a fake server that answers at once.

A turn of three requests, as a tool-using model answers: two rounds of tool calls (five calls in all:
three to a tool that returns at once, two ``cite`` claims), then an answer streamed in 50 chunks. The
same three requests are also replayed raw: posted with the HTTP client the ``openai`` package uses
(``httpx2``, keep-alive) and their streamed bytes read to the end, with no parsing. The backend's
overhead is the difference of the medians: building requests, parsing chunks, events, tool dispatch
and claims. Turns and replays alternate; no database is used (a chat outside any matter).

``python -m benchmarks.model_backend_bench`` runs it alone; ``make bench`` runs it as item 7.
"""

from __future__ import annotations

import json
import logging
import os
import statistics
import sys
import time
from collections.abc import Mapping
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

CHUNKS = 50
TOOL_CALLS = 5
GOAL_MS = 5.0


def run(turns: int = 200) -> dict[str, float]:
    """Median ms of a backend turn and of the raw replay of its requests, and their difference."""
    import httpx2
    from django.test import override_settings

    from chats.assistant.events import HistoryEntry, Turn
    from chats.assistant.openai_compatible import OpenAICompatibleBackend, _client
    from chats.models import Chat
    from chats.tools import ToolOutput
    from tests.fake_openai import FakeOpenAIServer, answer, cite, tool_round

    class InstantTool:
        name = "lookup"
        description = "Returns at once."
        parameters: Mapping[str, Any] = {"type": "object", "properties": {"q": {"type": "string"}}}

        def run(self, arguments: Mapping[str, Any]) -> ToolOutput:
            return ToolOutput(payload={"results": [], "q": arguments.get("q")})

    def script() -> tuple[Any, ...]:
        lookup = json.dumps({"q": "strict scrutiny"})
        return (
            tool_round(("call_1", "lookup", lookup), ("call_2", "lookup", lookup)),
            tool_round(("call_3", "lookup", lookup), cite("call_4", "S1", "a quote"), cite("call_5", "C9", "another")),
            answer("word " * CHUNKS, pieces=CHUNKS),
        )

    logging.getLogger("httpx2").setLevel(logging.WARNING)
    server = FakeOpenAIServer().start()
    overrides = {
        "LQAI_OPENAI_BASE_URL": server.base_url,
        "LQAI_OPENAI_MODEL": "bench",
        "LQAI_OPENAI_MAX_RETRIES": 0,
    }
    turn = Turn(
        chat=Chat(title="bench", project=None),
        history=(HistoryEntry(role="user", content="Does strict scrutiny apply?"),),
        tools={"lookup": InstantTool()},
    )
    try:
        with override_settings(**overrides), httpx2.Client(timeout=10) as raw_client:
            backend = OpenAICompatibleBackend()
            # One turn to record its requests (and warm the client's connection and imports).
            server.respond(*script())
            events = list(backend.respond(turn))
            bodies = list(server.requests)
            assert len(bodies) == 3, bodies
            assert sum(type(e).__name__ == "TextDelta" for e in events) == CHUNKS
            url = f"{server.base_url}/chat/completions"
            turn_ms: list[float] = []
            raw_ms: list[float] = []
            for _ in range(turns):
                server.respond(*script())
                started = time.perf_counter()
                for _event in backend.respond(turn):
                    pass
                turn_ms.append((time.perf_counter() - started) * 1000)

                server.respond(*script())
                started = time.perf_counter()
                for body in bodies:
                    with raw_client.stream("POST", url, json=body) as response:
                        for _bytes in response.iter_bytes():
                            pass
                raw_ms.append((time.perf_counter() - started) * 1000)
            assert server.pending == 0
    finally:
        server.stop()
        _client.cache_clear()
    turn_median, raw_median = statistics.median(turn_ms), statistics.median(raw_ms)
    return {
        "turns": float(turns),
        "turn_ms": turn_median,
        "raw_ms": raw_median,
        "overhead_ms": turn_median - raw_median,
    }


def main() -> None:
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "lqai.settings_test")
    import django

    django.setup()
    result = run(turns=int(sys.argv[1]) if len(sys.argv) > 1 else 200)
    print(
        f"{CHUNKS} streamed chunks, {TOOL_CALLS} tool calls, 3 requests; median of {result['turns']:.0f} turns:\n"
        f"  backend turn {result['turn_ms']:.2f} ms, raw HTTP replay {result['raw_ms']:.2f} ms, "
        f"backend overhead {result['overhead_ms']:.2f} ms (goal <= {GOAL_MS:.0f} ms)"
    )


if __name__ == "__main__":
    main()
