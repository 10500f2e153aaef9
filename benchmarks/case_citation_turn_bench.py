"""The case-citation check as a user feels it: a streamed answer at a model's pace, then the turn's end.

A turn of the OpenAI-compatible backend against the local fake server (``tests/fake_openai.py``, in a child
process) streaming an answer of about 1,000 tokens citing 10 cases held in the local store, one token per chunk
at ``--tokens-per-second``; then ``finalize_turn`` (with the ledger as shipped), whose end is when the stream
sends its ``done`` event; the turn runs as a streamed request runs it (``TurnRun``: the case citations are
read paragraph by paragraph while the answer streams). Measured with the check and without it, alternating: the
whole turn (request to end of finalize) and the time from the last token to the end of finalize. Also, for the
record: how the check grows with the answer's size up to ``LQAI_CASE_CITATION_MAX_CHARS``, and what the pin-cite
and short-form volume checks add to the check of a 20 KB answer citing 50 times.

Needs Django set up on a PostgreSQL database (it writes in one transaction, rolled back). Standalone:
``DATABASE_URL=postgres://.../<your db> .venv/bin/python -m benchmarks.case_citation_turn_bench`` (migrates first).
"""

from __future__ import annotations

import multiprocessing
import os
import statistics
import sys
import time
from collections.abc import Iterator
from contextlib import ExitStack, contextmanager
from multiprocessing.connection import Connection
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

TOKENS = 1000
CITED_CASES = 10
SIZES_KB = (5, 20, 40, 80, 100)
TURN_SHARE_GOAL = 0.03  # of the whole turn
TAIL_GROWTH_GOAL = 0.50  # of the time from the last token to done


def _serve(stream: Any, repeats: int, conn: Connection) -> None:
    from tests.fake_openai import FakeOpenAIServer

    server = FakeOpenAIServer().start()
    server.respond(*([stream] * repeats))
    conn.send(server.base_url)
    conn.recv()
    server.stop()


def _tokens(answer: str) -> list[str]:
    """The answer in about ``TOKENS`` pieces, as a model streams it (each word with its following space)."""
    words = answer.split(" ")
    return [word + " " for word in words[:-1]] + [words[-1]]


@contextmanager
def _without_pin_and_volume_checks() -> Iterator[None]:
    """The check without its pin-cite and short-form volume comparisons (restored afterwards)."""
    from chats.case_citations import checker

    saved = checker._pin_checked, checker._written_volume_disagrees
    checker._pin_checked = lambda checked, first_page: checked
    checker._written_volume_disagrees = lambda found, antecedent: ""
    try:
        yield
    finally:
        checker._pin_checked, checker._written_volume_disagrees = saved


@contextmanager
def _not_read_while_streaming() -> Iterator[None]:
    """A run that reads no case citations while the answer streams (restored afterwards)."""
    from chats.assistant import runner

    class NotRead(runner.StreamedCitations):
        def feed(self, text: str) -> None:
            pass

    saved = runner.StreamedCitations
    runner.StreamedCitations = NotRead  # type: ignore[misc]
    try:
        yield
    finally:
        runner.StreamedCitations = saved  # type: ignore[misc]


def run(*, turns: int = 2, tokens_per_second: float = 60.0, repeats: int = 20) -> dict[str, Any]:
    """The measurements (see the module), in one transaction rolled back at the end: the turns it finalizes are
    permanent records, which no delete may remove."""
    from django.db import transaction

    with transaction.atomic():
        result = _run(turns=turns, tokens_per_second=tokens_per_second, repeats=repeats)
        transaction.set_rollback(True)
    return result


def _run(*, turns: int, tokens_per_second: float, repeats: int) -> dict[str, Any]:
    from django.contrib.auth.models import User
    from django.test.utils import override_settings

    from benchmarks.case_citations_bench import _without_the_check, build_answer, cases
    from chats.assistant.events import TextDelta
    from chats.assistant.openai_compatible import OpenAICompatibleBackend, _client
    from chats.assistant.runner import TurnRun
    from chats.case_citations import Status, StreamedCitations, check_case_citations
    from chats.models import CaselawOpinion, Chat, Project
    from chats.services import start_turn
    from tests.fake_openai import Stream, finish, text_chunks

    cited = cases()
    CaselawOpinion.objects.bulk_create(
        CaselawOpinion(
            provider="local",
            opinion_id=f"case-citation-turn-bench-{n}",
            case_name=case.name.replace("Bd.", "Board").replace("Educ.", "Education"),
            citation=case.stored_citation,
            # Star paging, so that the pin cites are checked against a last page.
            text=f"bench opinion text *{case.page + 1} more *{case.page + 9} end",
        )
        for n, case in enumerate(cited)
    )
    answer = build_answer(cited[:CITED_CASES], chars=TOKENS * 45 // 10)
    pieces = _tokens(answer)
    stream = Stream([*text_chunks("".join(pieces), len(pieces)), *finish("stop")], chunk_seconds=1 / tokens_per_second)
    owner = User.objects.create(username="case-citation-turn-bench")
    parent, child = multiprocessing.get_context("fork").Pipe()
    server = multiprocessing.get_context("fork").Process(target=_serve, args=(stream, 2 * turns + 1, child))
    server.start()
    results: dict[bool, dict[str, list[float]]] = {flag: {"turn": [], "tail": []} for flag in (True, False)}
    try:
        project = Project.objects.create(name="Case-citation turn benchmark", owner=owner)
        checked = check_case_citations(answer, use_courtlistener=False)
        assert len(checked) == 2 * CITED_CASES, len(checked)
        assert all(c.status is Status.VERIFIED for c in checked), [(c.text, c.detail) for c in checked]
        if not parent.poll(30):
            raise RuntimeError("the fake server did not start")
        base_url = parent.recv()
        overrides = {"LQAI_OPENAI_BASE_URL": base_url, "LQAI_OPENAI_MODEL": "bench", "LQAI_OPENAI_MAX_RETRIES": 0}
        with override_settings(**overrides):
            backend = OpenAICompatibleBackend()

            def one_turn(with_check: bool) -> None:
                chat = Chat.objects.create(project=project, owner=owner, title="paced turn")
                _, message = start_turn(chat=chat, content="question")
                text: list[str] = []
                with ExitStack() as stack:
                    if not with_check:
                        stack.enter_context(_without_the_check())
                        stack.enter_context(_not_read_while_streaming())
                    # The run as a streamed request runs it: deltas passed on as they come (the case citations
                    # read paragraph by paragraph between them), then finalize, whose end is the `done` event.
                    started = time.perf_counter()
                    last_token = started
                    for event in TurnRun(message=message, backend=backend, tools={}):
                        if isinstance(event, TextDelta):
                            text.append(event.text)
                            last_token = time.perf_counter()
                    done = time.perf_counter()
                assert "".join(text) == answer
                results[with_check]["turn"].append(done - started)
                results[with_check]["tail"].append(done - last_token)

            one_turn(True)  # warm-up: connection, imports, eyecite (not counted)
            results[True] = {"turn": [], "tail": []}
            for n in range(turns):
                for flag in (True, False) if n % 2 == 0 else (False, True):
                    one_turn(flag)

        growth: dict[int, float] = {}
        streamed_growth: dict[int, tuple[float, float]] = {}
        for kb in SIZES_KB:
            text_kb = build_answer(cited, chars=kb * 1000)
            times = []
            for _ in range(max(3, repeats // 4)):
                started = time.perf_counter()
                check_case_citations(text_kb, use_courtlistener=False)
                times.append(time.perf_counter() - started)
            growth[kb] = statistics.median(times)
            # Read while it streams: the reads between the deltas, then what is left for finalize.
            fed, rest = [], []
            for _ in range(3):
                streamed = StreamedCitations()
                started = time.perf_counter()
                for piece in _tokens(text_kb):
                    streamed.feed(piece)
                between = time.perf_counter()
                streamed.citations(text_kb)
                fed.append(between - started)
                rest.append(time.perf_counter() - between)
            streamed_growth[kb] = (statistics.median(fed), statistics.median(rest))

        text_20 = build_answer(cited, chars=20_000)
        with_checks: list[float] = []
        without: list[float] = []
        for n in range(repeats):
            for flag in (True, False) if n % 2 == 0 else (False, True):
                with ExitStack() as stack:
                    if not flag:
                        stack.enter_context(_without_pin_and_volume_checks())
                    started = time.perf_counter()
                    check_case_citations(text_20, use_courtlistener=False)
                    (with_checks if flag else without).append(time.perf_counter() - started)
    finally:
        parent.send("stop")
        server.join(timeout=10)
        if server.is_alive():
            server.kill()
        _client.cache_clear()

    median = statistics.median
    turn_on, turn_off = median(results[True]["turn"]), median(results[False]["turn"])
    tail_on, tail_off = median(results[True]["tail"]), median(results[False]["tail"])
    return {
        "answer_chars": len(answer),
        "tokens": len(pieces),
        "tokens_per_second": tokens_per_second,
        "turn_on_s": turn_on,
        "turn_off_s": turn_off,
        "turn_share": turn_on / turn_off - 1,
        "tail_on_s": tail_on,
        "tail_off_s": tail_off,
        "tail_growth": tail_on / tail_off - 1,
        "tails_on_s": results[True]["tail"],
        "tails_off_s": results[False]["tail"],
        "growth_s": growth,
        "streamed_growth_s": streamed_growth,  # (read between the deltas, read at finalize)
        "pin_volume_on_s": median(with_checks),
        "pin_volume_off_s": median(without),
        "pin_volume_share": median(with_checks) / median(without) - 1,
    }


def main() -> None:
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "lqai.settings_test")
    import django

    django.setup()
    from django.core.management import call_command

    call_command("migrate", verbosity=0)
    result = run(turns=int(sys.argv[1]) if len(sys.argv) > 1 else 2)
    for name, value in result.items():
        print(f"{name:<18} {value}")


if __name__ == "__main__":
    main()
