"""A bulk import stays linear (``make bench`` item 15): adding documents to a matter, one by one or many in one
transaction, and retrieval in a matter of 2,000 documents against one of 10.

Every document is added through the service every upload path ends in (``chats.documents.add_document``):
its passages made, its words counted into the matter's ``matter_terms`` after the commit. Timed, on
PostgreSQL, with documents of 2-8 KB cut from real opinions (``benchmarks.retrieval_bench.documents``):

- 1,000 documents added one by one, each committed: each hundred's time (goal: the 10th <= 1.5 x the first);
- 1,000 documents added in one transaction, as a bulk import adds them: each hundred's time inside it, and the
  commit with the count of their words (goal: the 10th hundred <= 1.5 x the first);
- 300 documents in one transaction against the same 300 committed one by one, alternating (goal: <= 1.5 x);
  and, for the record, the same transaction counting each document's words as it is added, as before
  (``chats.passages.count_terms`` after each), whose updates of the same count rows walk each other's versions;
- a turn's retrieval in a matter of 2,000 documents against one of 10 (``retrieval_bench.run``; goal: <= 2 x).
"""

from __future__ import annotations

import statistics
import time
from collections.abc import Callable
from contextlib import nullcontext
from dataclasses import dataclass

from django.contrib.auth.models import User
from django.db import transaction

from benchmarks import retrieval_bench
from chats.documents import add_document
from chats.models import Project
from chats.passages import count_terms

GOAL = 1.5
RETRIEVAL_GOAL = 2.0
HUNDRED = 100


@dataclass(frozen=True, slots=True)
class BulkImportResult:
    one_by_one_hundreds_s: list[float]  # each hundred of 1,000 documents committed one by one
    one_transaction_hundreds_s: list[float]  # each hundred of 1,000 documents in one transaction
    one_transaction_commit_s: float  # its commit, with the count of their words
    batch: int
    batch_one_by_one_s: float
    batch_one_transaction_s: float
    batch_counted_each_s: float  # the same transaction counting each document's words as it is added (before)
    retrieval: retrieval_bench.RetrievalResult

    @staticmethod
    def growth(hundreds: list[float]) -> float:
        return hundreds[-1] / hundreds[0]


def _matter(owner: User, name: str) -> Project:
    return Project.objects.create(name=name, owner=owner)


def _add(project: Project, contents: list[tuple[str, str]], *, count_each: bool = False) -> None:
    for title, content in contents:
        add_document(project=project, title=title, text=content)
        if count_each:
            count_terms(project_id=project.pk)


def _hundreds(project: Project, contents: list[tuple[str, str]], *, one_transaction: bool) -> tuple[list[float], float]:
    """Each hundred's seconds, and (in one transaction) the commit's."""
    hundreds: list[float] = []
    with transaction.atomic() if one_transaction else nullcontext():
        for start in range(0, len(contents), HUNDRED):
            started = time.perf_counter()
            _add(project, contents[start : start + HUNDRED])
            hundreds.append(time.perf_counter() - started)
        started = time.perf_counter()
    return hundreds, time.perf_counter() - started


def _batch(project: Project, contents: list[tuple[str, str]], *, one_transaction: bool, count_each: bool) -> float:
    started = time.perf_counter()
    if one_transaction:
        with transaction.atomic():
            _add(project, contents, count_each=count_each)
    else:
        _add(project, contents)
    return time.perf_counter() - started


def run(
    *, documents: int = 1000, batch: int = 300, rounds: int = 2, step: Callable[[str], None] = print
) -> BulkImportResult:
    """The measurements (see the module); everything is committed, in matters of its own."""
    owner = User.objects.create(username=f"bulk-import-bench-{time.monotonic_ns()}")
    contents = retrieval_bench.documents(documents, seed=documents)
    step(f"15. {documents:,} documents added one by one, each committed")
    one_by_one, _ = _hundreds(_matter(owner, "one by one"), contents, one_transaction=False)
    step(f"15. {documents:,} documents added in one transaction")
    in_one, commit = _hundreds(_matter(owner, "one transaction"), contents, one_transaction=True)
    times: dict[str, list[float]] = {"one by one": [], "one transaction": [], "counted each": []}
    kinds = [("one by one", False, False), ("one transaction", True, False), ("counted each", True, True)]
    step(f"15. {batch} documents: one by one, in one transaction, and as before; {rounds} rounds alternating")
    for n in range(rounds):
        for name, one_transaction, count_each in kinds if n % 2 == 0 else list(reversed(kinds)):
            project = _matter(owner, f"{name} {n}")
            times[name].append(
                _batch(project, contents[:batch], one_transaction=one_transaction, count_each=count_each)
            )
    step("15. retrieval in a matter of 2,000 documents against one of 10")
    retrieval = retrieval_bench.run(rounds=3, large=2000, step=step)
    return BulkImportResult(
        one_by_one_hundreds_s=one_by_one,
        one_transaction_hundreds_s=in_one,
        one_transaction_commit_s=commit,
        batch=batch,
        batch_one_by_one_s=statistics.median(times["one by one"]),
        batch_one_transaction_s=statistics.median(times["one transaction"]),
        batch_counted_each_s=statistics.median(times["counted each"]),
        retrieval=retrieval,
    )
