"""Retrieval at matter scale (``make bench`` item 10): a turn's KB retrieval in a matter of 10,000 documents
against one of 10, side by side (goal: <= 2 x).

The documents are real court opinions (``chats/data/opinions``) cut into windows of consecutive sentences
(2-8 KB, starting at a different sentence each); the large matter is the small one grown: its 10 documents
and 9,990 more of the same kind, so its vocabulary is the small one's and every question finds many more
candidate passages in it, the hard case for an index. The questions are made of words of the small
matter's sentences, so both matters answer each. The timed call is the one a
turn makes (``chats.assistant.extractive.matter_passages``: the extractive and OpenAI-compatible backends'
retrieval), for several questions, the two matters alternating, medians kept. The passages are made once
beforehand (``chats.passages.ensure_passages``, timed apart: what adding the documents costs once). For the
record, the retrieval that split the best documents on every turn (before ``document_passages``) is timed
once per matter.
"""

from __future__ import annotations

import random
import statistics
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from uuid import UUID

from django.contrib.auth.models import User
from django.db import connection

from chats.assistant.extractive import ExtractiveBackend, matter_passages
from chats.models import Chat, Document, DocumentPassage, Project
from chats.passages import ensure_passages
from chats.retrieval import passages, rank_passages, rank_sources, sentence_spans

ROOT = Path(__file__).resolve().parent.parent
OPINIONS = sorted((ROOT / "chats" / "data" / "opinions").glob("*.txt"))
SMALL, LARGE = 10, 10_000
GOAL = 2.0
QUESTIONS = 5


@dataclass(frozen=True, slots=True)
class RetrievalResult:
    small_s: float  # median seconds of one retrieval, small matter
    large_s: float
    make_passages_s: float  # making the passages of the large matter's documents, once
    large_documents: int
    large_megabytes: float
    passages: int
    before_small_s: float  # the retrieval that split documents on every turn, once per matter
    before_large_s: float

    @property
    def ratio(self) -> float:
        return self.large_s / self.small_s


def _sentences() -> list[str]:
    texts = [path.read_text(encoding="utf-8") for path in OPINIONS]
    return [text[start:end] for text in texts for start, end in sentence_spans(text)]


def documents(count: int, *, seed: int) -> list[tuple[str, str]]:
    """``count`` (title, content) windows of 2-8 KB of consecutive opinion sentences, deterministic."""
    sentences = _sentences()
    rng = random.Random(seed)
    result = []
    for n in range(count):
        size = rng.randint(2_000, 8_000)
        at = rng.randrange(len(sentences))
        chosen: list[str] = []
        while sum(len(s) + 1 for s in chosen) < size:
            chosen.append(sentences[at % len(sentences)])
            at += 1
        result.append((f"Exhibit {n + 1}", " ".join(chosen)))
    return result


def questions(contents: list[str], *, count: int) -> list[str]:
    """``count`` questions, each the first dozen words of a sentence of one of ``contents``."""
    rng = random.Random(0)
    result = []
    for n in range(count):
        content = contents[n % len(contents)]
        start, end = rng.choice(sentence_spans(content))
        result.append(" ".join(content[start:end].split()[:12]) + "?")
    return result


def _matter(owner: User, contents: list[tuple[str, str]]) -> tuple[Chat, float]:
    """A matter of the documents ``contents`` (title, content), inserted in bulk, then their passages made
    (the seconds that took)."""
    project = Project.objects.create(name=f"Retrieval benchmark, {len(contents)} documents", owner=owner)
    Document.objects.bulk_create(
        [Document(project=project, title=title, content=content) for title, content in contents], batch_size=1000
    )
    started = time.perf_counter()
    ensure_passages(project_id=project.pk)
    made = time.perf_counter() - started
    return Chat.objects.create(project=project, owner=owner, title="retrieval"), made


def _project_id(chat: Chat) -> UUID:
    assert chat.project_id is not None
    return chat.project_id


def _before(chat: Chat, question: str) -> float:
    """The retrieval before stored passages: rank the matter's documents, split the best five, rank."""
    started = time.perf_counter()
    ranked = rank_sources(
        Document.objects.filter(project_id=_project_id(chat)), field="content", question=question, limit=5
    )
    candidates = [p for i, d in enumerate(ranked) for p in passages(d.content, source=i)]
    rank_passages(candidates, question, limit=ExtractiveBackend.kb_quotes)
    return time.perf_counter() - started


def run(*, rounds: int = 5, large: int = LARGE, step: Callable[[str], None] = print) -> RetrievalResult:
    owner = User.objects.create(username=f"retrieval-bench-{time.monotonic_ns()}")
    small_documents = documents(SMALL, seed=SMALL)
    asked = questions([content for _, content in small_documents], count=QUESTIONS)
    step(f"10. a matter of {SMALL} documents")
    small_chat, _ = _matter(owner, small_documents)
    step(f"10. a matter of {large:,} documents (the same 10 and more; inserted in bulk, then their passages made)")
    large_chat, made = _matter(owner, small_documents + documents(large - SMALL, seed=large))
    with connection.cursor() as cursor:
        # Fresh statistics, as autovacuum gives a settled table: the planner then knows the matters' sizes.
        cursor.execute("VACUUM ANALYZE documents, document_passages, matter_terms")

    def retrieve(chat: Chat, question: str) -> float:
        started = time.perf_counter()
        found = matter_passages(
            chat, question, documents=ExtractiveBackend.candidate_documents, limit=ExtractiveBackend.kb_quotes
        )
        elapsed = time.perf_counter() - started
        assert found, (chat.project_id, question)
        return elapsed

    for chat in (small_chat, large_chat):  # warm-up
        retrieve(chat, asked[0])
    step(f"10. {rounds} rounds of {len(asked)} questions, the two matters alternating")
    times: dict[int, list[float]] = {SMALL: [], large: []}
    for index in range(rounds):
        for question in asked:
            pairs = ((SMALL, small_chat), (large, large_chat))
            for size, chat in pairs if index % 2 == 0 else tuple(reversed(pairs)):
                times[size].append(retrieve(chat, question))
    step("10. for the record: splitting the best documents on every turn, once per matter")
    before_small = _before(small_chat, asked[0])
    before_large = _before(large_chat, asked[0])
    contents = Document.objects.filter(project_id=_project_id(large_chat)).values_list("content", flat=True)
    return RetrievalResult(
        small_s=statistics.median(times[SMALL]),
        large_s=statistics.median(times[large]),
        make_passages_s=made,
        large_documents=large,
        large_megabytes=sum(len(c) for c in contents) / 1e6,
        passages=DocumentPassage.objects.filter(project_id=_project_id(large_chat)).count(),
        before_small_s=before_small,
        before_large_s=before_large,
    )
