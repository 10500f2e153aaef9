"""The case-citation check (``chats.case_citations``) against a turn's ``finalize_turn``, item 7 of ``make bench``.

A 20 KB answer citing 50 times (25 full citations of 25 cases held in the local store, each followed by a
short form or an ``id.``) is checked against the local store only (no CourtListener); the time is compared
with ``finalize_turn`` of a turn with that answer and 50 quotes of a real KB document (the per-turn setup of
:mod:`benchmarks.ledger_bench`) without the check and with no ``post_finalize`` receiver: what the check adds
to the rest of finalize, measured interleaved in the same run.

Needs Django set up on a PostgreSQL database it may write to (it deletes what it created). Standalone:
``DATABASE_URL=postgres://.../<your db> .venv/bin/python -m benchmarks.case_citations_bench`` (migrates first).
"""

from __future__ import annotations

import os
import statistics
import subprocess
import sys
import time
from collections.abc import Iterator
from contextlib import ExitStack, contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
PER_TURN_DOCUMENT = ROOT / "chats" / "data" / "opinions" / "alabama-ago-2018-046.txt"
ANSWER_CHARS = 20_000
CASES = 25  # each cited in full, then by a short form (even cases) or id. (odd ones): 50 citations
PLAINTIFFS = [
    "Abbott", "Barnes", "Calloway", "Dempsey", "Ellison", "Fairbanks", "Garland", "Hollis", "Ingram", "Jarvis",
    "Kendrick", "Lambert", "Mercer", "Norwood", "Osborne", "Prescott", "Quinlan", "Radford", "Sherwood",
    "Thornton", "Upton", "Vance", "Whitaker", "Yardley", "Zimmerman",
]  # fmt: skip
DEFENDANTS = [
    "Board of Elections",
    "City of Raleigh",
    "State Bd. of Educ.",
    "Cnty. Comm'n",
    "Secretary of State",
]
REPORTERS = [("F.3d", "4th Cir."), ("F. Supp. 3d", "M.D.N.C."), ("F.4th", "5th Cir.")]
FILLER = (
    "The record shows that the election officials applied the statute as written, and the parties dispute "
    "only whether the burden it places on voters is justified by the interests the State asserts. "
)


@dataclass(frozen=True, slots=True)
class Case:
    plaintiff: str
    defendant: str
    volume: int
    reporter: str
    court: str
    page: int

    @property
    def name(self) -> str:
        return f"{self.plaintiff} v. {self.defendant}"

    @property
    def stored_citation(self) -> str:
        return f"{self.volume} {self.reporter} {self.page} ({self.court} 2021)"


def cases() -> list[Case]:
    return [
        Case(
            plaintiff=PLAINTIFFS[n],
            defendant=DEFENDANTS[n % len(DEFENDANTS)],
            volume=101 + n,
            reporter=REPORTERS[n % len(REPORTERS)][0],
            court=REPORTERS[n % len(REPORTERS)][1],
            page=301 + 13 * n,
        )
        for n in range(CASES)
    ]


def build_answer(cited: list[Case], chars: int = ANSWER_CHARS) -> str:
    """About ``chars`` of answer: a paragraph per case, its full citation then a short form or ``id.``."""
    per_paragraph = chars // len(cited) - 2
    paragraphs = []
    for n, case in enumerate(cited):
        full = f"In {case.name}, {case.volume} {case.reporter} {case.page}, {case.page + 4} ({case.court} 2021), "
        later = (
            f" {case.plaintiff}, {case.volume} {case.reporter}, at {case.page + 6}."
            if n % 2 == 0
            else f" Id. at {case.page + 6}."
        )
        body = "the court held that the burden was justified. "
        room = per_paragraph - len(full) - len(body) - len(later)
        filler = (FILLER * (room // len(FILLER) + 1))[:room].rsplit(" ", 1)[0].rstrip(",") + "."
        paragraphs.append(f"{full}{body}{filler}{later}")
    return "\n\n".join(paragraphs)


@contextmanager
def _without_the_check() -> Iterator[None]:
    """``finalize_turn`` without the case-citation check (restored afterwards)."""
    from chats import services

    def no_check(answer_text: str, **kwargs: Any) -> list[Any]:
        return []

    saved = services.check_case_citations
    services.check_case_citations = no_check
    try:
        yield
    finally:
        services.check_case_citations = saved


@contextmanager
def _finalize_without_the_check() -> Iterator[None]:
    """``finalize_turn`` without the case-citation check, and without the receivers of ``post_finalize`` (the
    ledger, the seal), all restored afterwards as shipped."""
    from benchmarks.ledger_bench import post_finalize_receivers
    from citations.receivers import POST_FINALIZE_RECEIVERS

    with post_finalize_receivers(without=[uid for uid, _ in POST_FINALIZE_RECEIVERS]), _without_the_check():
        yield


FIRST_CALL = """
import os, time
os.environ.setdefault("DJANGO_SETTINGS_MODULE", "lqai.settings_test")
import django
django.setup()
from chats.case_citations.extraction import extract_citations
started = time.perf_counter()
extract_citations("Fisher v. University of Texas at Austin, 570 U.S. 297 (2013).")
print(time.perf_counter() - started)
"""


def first_call_in_a_new_process() -> float:
    """Seconds of the first extraction of a process (Django already set up): eyecite's import and tokenizer."""
    done = subprocess.run(  # noqa: S603 - this interpreter, a constant script
        [sys.executable, "-c", FIRST_CALL], cwd=ROOT, capture_output=True, text=True, check=True, timeout=120
    )
    return float(done.stdout.strip().splitlines()[-1])


def whole_turns(*, project: Any, answer: str, claims: list[Any], turns: int) -> dict[str, float]:
    """Medians of whole single-shot API turns (request to response, in-process) answering ``answer`` with
    ``claims`` through the scripted backend (no model time: the worst case for the check's share), with the
    case-citation check and without it, interleaved turn by turn in alternating order, each in a fresh chat.
    The ledger is connected as shipped in both arms."""
    from django.test.utils import override_settings
    from rest_framework.test import APIClient

    from benchmarks.ledger_bench import SCRIPTED, TURN_SETTINGS, alternating
    from chats.assistant import FinalAnswer, ScriptedBackend, TextDelta
    from chats.models import Chat

    client = APIClient()
    client.force_authenticate(user=project.owner)
    steps = (TextDelta(answer), FinalAnswer(tuple(claims)))

    def one_turn(checked: bool) -> float:
        chat = Chat.objects.create(project=project, owner=project.owner, title="case citations, whole turn")
        with ExitStack() as stack:
            if not checked:
                stack.enter_context(_without_the_check())
            stack.enter_context(override_settings(LQAI_ASSISTANT_BACKEND=SCRIPTED, **TURN_SETTINGS))
            stack.enter_context(ScriptedBackend.scripted(*steps))
            started = time.perf_counter()
            response = client.post(f"/api/chats/{chat.pk}/messages/", {"content": "question"}, format="json")
            elapsed = time.perf_counter() - started
        assert response.status_code == 201, response.content
        message = response.json()["message"]
        assert len(message["citations"]) == len(claims), "every benchmark quote must verify"
        assert len(message["case_citations"]) == (2 * CASES if checked else 0), len(message["case_citations"])
        return elapsed

    one_turn(True)  # warm-up
    times = alternating(one_turn, rounds=turns)
    on, off = statistics.median(times[True]), statistics.median(times[False])
    return {"turn_on_s": on, "turn_off_s": off, "turn_share": on / off - 1}


def run(*, repeats: int = 50, turns: int = 20) -> dict[str, float]:
    """Medians of ``repeats`` interleaved runs: the check (its extraction alone, and eyecite's tokenization
    alone) and ``finalize_turn``; then the check's share of ``turns`` whole API turns (:func:`whole_turns`)."""
    from django.contrib.auth.models import User
    from eyecite.tokenizers import default_tokenizer

    from chats.case_citations import Status, check_case_citations
    from chats.case_citations.extraction import extract_citations
    from chats.documents import add_document
    from chats.models import CaselawOpinion, Chat, Project
    from chats.services import ClaimedCitation, finalize_turn, start_turn

    cited = cases()
    answer = build_answer(cited)
    opinions = CaselawOpinion.objects.bulk_create(
        CaselawOpinion(
            provider="local",
            opinion_id=f"case-citations-bench-{n}",
            case_name=case.name.replace("Bd.", "Board").replace("Educ.", "Education"),
            citation=case.stored_citation,
            text="bench opinion text",
        )
        for n, case in enumerate(cited)
    )
    owner = User.objects.create(username="case-citations-bench")
    try:
        project = Project.objects.create(name="Case-citation benchmark", owner=owner)
        chat = Chat.objects.create(project=project, owner=owner, title="case citations")
        text = PER_TURN_DOCUMENT.read_text(encoding="utf-8")
        document = add_document(project=project, title="memo", text=text)
        words = text.split()
        step = max(1, (len(words) - 12) // 50)
        claims = [
            ClaimedCitation(quote=" ".join(words[i * step : i * step + 12]), document_id=document.id) for i in range(50)
        ]

        checked = check_case_citations(answer, use_courtlistener=False)
        assert len(checked) == 2 * CASES, len(checked)
        assert all(c.status is Status.VERIFIED for c in checked), [(c.text, c.detail) for c in checked]

        check_times: list[float] = []
        extract_times: list[float] = []
        tokenize_times: list[float] = []
        finalize_times: list[float] = []
        for _ in range(repeats):
            _, message = start_turn(chat=chat, content="question")
            with _finalize_without_the_check():
                started = time.perf_counter()
                turn = finalize_turn(message=message, content=answer, status="complete", claimed_citations=claims)
                finalize_times.append(time.perf_counter() - started)
            assert len(turn.citations) == len(claims), "every benchmark quote must verify"
            assert turn.case_citations == []

            started = time.perf_counter()
            check_case_citations(answer, use_courtlistener=False)
            check_times.append(time.perf_counter() - started)

            started = time.perf_counter()
            extract_citations(answer)
            extract_times.append(time.perf_counter() - started)

            started = time.perf_counter()
            default_tokenizer.tokenize(answer)
            tokenize_times.append(time.perf_counter() - started)

        whole = whole_turns(project=project, answer=answer, claims=claims, turns=turns)
    finally:
        # A matter's turns are a permanent record: they go only with its purge (which leaves a tombstone).
        from citations.purge import purge_matter

        for matter in Project.objects.filter(owner=owner):
            purge_matter(project_id=matter.pk, purged_by="case-citations-bench")
        owner.delete()
        CaselawOpinion.objects.filter(pk__in=[o.pk for o in opinions]).delete()

    check_s = statistics.median(check_times)
    finalize_s = statistics.median(finalize_times)
    return {
        "answer_chars": float(len(answer)),
        "citations": float(len(checked)),
        "first_call_s": first_call_in_a_new_process(),
        "check_s": check_s,
        "extract_s": statistics.median(extract_times),
        "tokenize_s": statistics.median(tokenize_times),
        "finalize_s": finalize_s,
        "ratio": check_s / finalize_s,
    } | whole


def main() -> None:
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "lqai.settings_test")
    import django

    django.setup()
    from django.core.management import call_command

    call_command("migrate", verbosity=0)
    results = run()
    for name, value in results.items():
        print(f"{name:<14} {value * 1000:10.2f} ms" if name.endswith("_s") else f"{name:<14} {value:10.3f}")


if __name__ == "__main__":
    main()
