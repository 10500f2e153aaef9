"""Retrieval at matter scale (``make bench`` item 10): a turn's KB retrieval in a matter of 10,000 documents
against one of 10, side by side (goal: <= 2 x).

The documents are real court opinions (``chats/data/opinions``) cut into windows of consecutive sentences
(2-8 KB, starting at a different sentence each), so the large matter's vocabulary is the small one's: every
question finds many more candidate passages in it, the hard case for an index. The timed call is the one a
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

from chats.assistant.extractive import ExtractiveBackend, matter_passages
from chats.models import Chat, Document, DocumentPassage, Project
from chats.passages import ensure_passages
from chats.retrieval import passages, rank_passages, rank_sources, sentence_spans

ROOT = Path(__file__).resolve().parent.parent
OPINIONS = sorted((ROOT / "chats" / "data" / "opinions").glob("*.txt"))
SMALL, LARGE = 10, 10_000
GOAL = 2.0
QUESTIONS = (
    "Must the reviewing court be satisfied that no workable race-neutral alternative exists?",
    "What did the attorney general conclude about the county ordinance?",
    "Which evidence showed the district map diluted the votes of minority voters?",
    "When may a hotel owner refuse an inspection of guest records without a warrant?",
    "Is the surety liable on the performance bond after the contractor defaulted?",
)


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


def _matter(owner: User, count: int) -> tuple[Chat, float]:
    """A matter of ``count`` documents, inserted in bulk, then their passages made (seconds it took)."""
    project = Project.objects.create(name=f"Retrieval benchmark, {count} documents", owner=owner)
    Document.objects.bulk_create(
        [Document(project=project, title=title, content=content) for title, content in documents(count, seed=count)],
        batch_size=1000,
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
    step(f"10. a matter of {SMALL} documents")
    small_chat, _ = _matter(owner, SMALL)
    step(f"10. a matter of {large:,} documents (inserted in bulk, then their passages made)")
    large_chat, made = _matter(owner, large)

    def retrieve(chat: Chat, question: str) -> float:
        started = time.perf_counter()
        found = matter_passages(
            chat, question, documents=ExtractiveBackend.candidate_documents, limit=ExtractiveBackend.kb_quotes
        )
        elapsed = time.perf_counter() - started
        assert found, (chat.project_id, question)
        return elapsed

    for chat in (small_chat, large_chat):  # warm-up
        retrieve(chat, QUESTIONS[0])
    step(f"10. {rounds} rounds of {len(QUESTIONS)} questions, the two matters alternating")
    times: dict[int, list[float]] = {SMALL: [], large: []}
    for index in range(rounds):
        for question in QUESTIONS:
            pairs = ((SMALL, small_chat), (large, large_chat))
            for size, chat in pairs if index % 2 == 0 else tuple(reversed(pairs)):
                times[size].append(retrieve(chat, question))
    step("10. for the record: splitting the best documents on every turn, once per matter")
    before_small = _before(small_chat, QUESTIONS[0])
    before_large = _before(large_chat, QUESTIONS[0])
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
