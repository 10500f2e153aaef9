"""An assistant backend for tests that run the real server in another process (tests/test_production_server.py):
it answers a first sentence, then waits (bounded) until the file named by ``LQAI_TEST_GATE`` exists."""

from __future__ import annotations

import os
import time
from collections.abc import Iterator
from pathlib import Path

from chats.assistant import AssistantEvent, FinalAnswer, TextDelta, Turn

GATE_WAIT_SECONDS = 30


class FileGatedBackend:
    def respond(self, turn: Turn) -> Iterator[AssistantEvent]:
        yield TextDelta("Thinking. ")
        gate = Path(os.environ["LQAI_TEST_GATE"])
        deadline = time.monotonic() + GATE_WAIT_SECONDS
        while not gate.exists() and time.monotonic() < deadline:
            time.sleep(0.05)
        yield TextDelta(f"Asked: {turn.question}")
        yield FinalAnswer()
