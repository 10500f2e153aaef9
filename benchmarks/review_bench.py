"""Item 18 of ``make bench``: review at matter scale (issue 52).

A matter grows from :data:`SMALL` turns to :data:`LARGE` (each turn a question and an answer whose one quote was
not found in its source, verdict ``fail``: every turn is in the review queue), generated in SQL in the transaction
that finalizes them, as ``benchmarks.dataset`` does. At each size it counts the queries of recording a decision
(``citations.reviews.record_decision``), of issuing a certificate (``citations.certificates.issue_certificate``) and
of reading the first and a deep page of the "needs review" queue (``citations.review_queue.review_queue``), and
times each (median of ``repeats``). Goals: the same number of queries at both sizes.
"""

from __future__ import annotations

import statistics
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

SMALL = 100
LARGE = 10_000


@dataclass
class Size:
    turns: int
    queries: dict[str, int] = field(default_factory=dict)
    median_ms: dict[str, float] = field(default_factory=dict)


@dataclass
class ReviewResult:
    small: Size
    large: Size


def _add_turns(cursor: Any, *, project: str, chat: str, document: str, first: int, last: int) -> None:
    """Turns ``first``..``last`` of the matter: question, answer (``fail``) and its failed quote, finalized."""
    at = "timestamptz '2025-01-01' + g * interval '1 minute'"
    cursor.execute(
        "INSERT INTO messages (id, chat_id, role, content, status, finalized_at, created_at, updated_at) "
        f"SELECT md5('q' || g)::uuid, %(chat)s, 'user', 'Question ' || g, 'complete', {at}, {at}, {at} "
        "FROM generate_series(%(first)s, %(last)s) g",
        {"chat": chat, "first": first, "last": last},
    )
    cursor.execute(
        "INSERT INTO messages (id, chat_id, role, content, status, verdict, reply_to_id, finalized_at, created_at, "
        f"updated_at) SELECT md5('a' || g)::uuid, %(chat)s, 'assistant', 'Answer ' || g, 'complete', 'fail', "
        f"md5('q' || g)::uuid, {at}, {at}, {at} FROM generate_series(%(first)s, %(last)s) g",
        {"chat": chat, "first": first, "last": last},
    )
    cursor.execute(
        "INSERT INTO message_citations (id, message_id, document_id, quote, verification_method, "
        f"unverified_reason, created_at) SELECT gen_random_uuid(), md5('a' || g)::uuid, %(document)s, "
        f"'words not in the memo ' || g, 'unverified', 'not found in the source', {at} "
        "FROM generate_series(%(first)s, %(last)s) g",
        {"document": document, "first": first, "last": last},
    )


def _measure(run: Callable[[], object], *, repeats: int) -> tuple[int, float]:
    from django.db import connection
    from django.test.utils import CaptureQueriesContext

    with CaptureQueriesContext(connection) as captured:
        run()
    timings = []
    for _ in range(repeats):
        started = time.perf_counter()
        run()
        timings.append((time.perf_counter() - started) * 1000)
    return len(captured), statistics.median(timings)


def run(*, step: Callable[[str], None], repeats: int = 5) -> ReviewResult:
    from django.contrib.auth.models import User
    from django.db import connection, transaction

    from chats.models import Chat, Document, Message, Project, Role
    from citations.certificates import issue_certificate
    from citations.claims import claims_of
    from citations.review_queue import parse_after, review_queue
    from citations.reviews import record_decision
    from citations.seals import seal_turn

    owner = User.objects.create(username="bench-owner")
    reviewer = User.objects.create(username="bench-reviewer")
    project = Project.objects.create(owner=owner, name="Review bench")
    project.members.add(reviewer, through_defaults={"role": Role.REVIEWER})
    chat = Chat.objects.create(project=project, owner=owner, title="Review bench")
    document = Document.objects.create(project=project, title="Memo", content="The memo's words.")
    names = {"project": str(project.pk), "chat": str(chat.pk), "document": str(document.pk)}
    sizes = []
    made = 0
    for turns in (SMALL, LARGE):
        step(f"review: a matter of {turns:,} turns")
        with transaction.atomic(), connection.cursor() as cursor:
            _add_turns(cursor, **names, first=made, last=turns - 1)
            cursor.execute("ANALYZE")
        made = turns
        size = Size(turns)
        answers = Message.objects.select_related("chat__project").filter(chat=chat, role="assistant")
        # A turn of the middle of the matter: decided on (removing its failed quote), then certified.
        turn = answers.order_by("finalized_at", "id")[turns // 2]
        claim = claims_of(turn)[0]
        seal_turn(message_id=turn.pk, late=True)  # a certificate names the turn's seal

        def decide(turn: Message = turn, claim_id: Any = claim.id) -> object:
            return record_decision(message=turn, claim_id=claim_id, decision="removed", by=reviewer)

        size.queries["decision"], size.median_ms["decision"] = _measure(decide, repeats=repeats)

        def certify(turn: Message = turn) -> object:
            return issue_certificate(message=turn, by=reviewer)

        size.queries["certificate"], size.median_ms["certificate"] = _measure(certify, repeats=repeats)
        size.queries["queue, first page"], size.median_ms["queue, first page"] = _measure(
            lambda: review_queue(project_id=project.pk), repeats=repeats
        )
        deep = answers.order_by("finalized_at", "id")[turns - 30]
        after = parse_after(f"{deep.finalized_at.isoformat() if deep.finalized_at else ''},{deep.pk}")

        def deep_page(after: Any = after) -> object:
            return review_queue(project_id=project.pk, after=after)

        size.queries["queue, a deep page"], size.median_ms["queue, a deep page"] = _measure(deep_page, repeats=repeats)
        sizes.append(size)
    return ReviewResult(small=sizes[0], large=sizes[1])
