"""The passages of KB documents: made once per content, searched per turn.

:func:`make_passages` stores a document's quotable passages (:func:`chats.retrieval.passages`) in
``document_passages``; the document services (``chats.documents``) call it when they store a document, and
:func:`ensure_passages` makes those of documents inserted in bulk or in SQL (or changed below the services)
on first use. :func:`search_matter_passages` answers a turn's question from the matter's stored passages:
on PostgreSQL through the full-text index, choosing the candidates by the question's rarer words
(``matter_terms``) so that a turn ranks a bounded number of passages whatever the matter's size; on SQLite
by a plain scan with the same term-overlap scorer. The design and its measurements: docs/scale.md,
"Retrieval at matter scale".
"""

from __future__ import annotations

import hashlib
from collections.abc import Sequence
from uuid import UUID

from django.db import connection, transaction
from django.db.models import Q

from chats.models import Document, DocumentPassage, MatterTerm
from chats.retrieval import Passage, passages, query_terms, rank_by_overlap, tsquery, without_overlaps

# How many ranked passages are read for each one kept: overlapping ones (a short sentence alone and joined
# with the next) are dropped after ranking, as rank_passages does.
MARGIN = 4
# Documents whose passages are made in one transaction on first use.
BATCH = 200

# At most this many of a matter's passages are ranked against a question (see the module docstring).
CANDIDATE_PASSAGES = 1000

# The question's words (as the index holds them: stemmed lexemes) with how many of the matter's passages hold
# each, rarest first.
WORDS_SQL = """
SELECT w.lexeme, coalesce(m.passages, 0)
FROM unnest(tsvector_to_array(to_tsvector('english', %(words)s))) AS w(lexeme)
LEFT JOIN {terms} m ON m.project_id = %(project)s AND m.lexeme = w.lexeme
ORDER BY 2, 1
"""
# The candidates hold any of the chosen words (raw lexemes); the whole question ranks them.
SEARCH_SQL = """
SELECT p.document_id, p.start, p."end", p.text
FROM (
    SELECT * FROM {passages}
    WHERE project_id = %(project)s AND search_vector @@ %(candidates)s::tsquery
    LIMIT %(candidate_limit)s
) AS p, to_tsquery('english', %(query)s) AS q
ORDER BY ts_rank(p.search_vector, q) DESC, p.id
LIMIT %(margin)s
"""
# The matter's count of passages per word, by the passages of the given documents: +1 each (counted) or -1
# (about to be replaced). Sorted, so that two writers in one matter lock the rows of shared words in one
# order (no deadlock). Each count row is written once per statement: run once per batch of documents, never
# once per document of a transaction, whose updates of one row would each walk the versions left before.
COUNT_WORDS_SQL = """
INSERT INTO {terms} (project_id, lexeme, passages)
SELECT p.project_id, w.lexeme, %(sign)s * count(*)
FROM {passages} p, unnest(tsvector_to_array(p.search_vector)) AS w(lexeme)
WHERE p.document_id = ANY(%(documents)s)
GROUP BY p.project_id, w.lexeme
ORDER BY p.project_id, w.lexeme
ON CONFLICT (project_id, lexeme) DO UPDATE SET passages = {terms}.passages + EXCLUDED.passages
"""


def content_sha256(content: str) -> str:
    return hashlib.sha256(content.encode("utf-8")).hexdigest()


def make_passages(*, document_ids: Sequence[UUID]) -> int:
    """Stores the passages of each document's current content (as the database holds it), replacing those
    of an earlier content; nothing for a document whose passages are already made from it. Returns how
    many documents it made them for. Their words are counted later, with the matter's other new documents
    (:func:`count_terms`); the words of replaced passages that were counted are counted off here.

    One transaction; the documents' rows are locked first, in primary-key order (one lock order, so two
    makers never deadlock), so that two turns making the passages of one document at once make them once:
    the second finds them made."""
    made = 0
    with transaction.atomic(savepoint=False):  # inside a caller's: its transaction (see chats.documents)
        rows = list(
            Document.objects.select_for_update()
            .filter(pk__in=document_ids)
            .order_by("pk")
            .values_list("pk", "content", "passages_sha256", "project_id", "terms_counted")
        )
        stale = {
            pk: (content, project_id)
            for pk, content, made_from, project_id, _ in rows
            if made_from != content_sha256(content)
        }
        counted = [pk for pk, _, made_from, _, terms_counted in rows if pk in stale and terms_counted]
        if stale:
            if counted:
                _count_words(counted, sign=-1)
            DocumentPassage.objects.filter(document_id__in=stale).delete()
            DocumentPassage.objects.bulk_create(
                [
                    DocumentPassage(
                        document_id=pk,
                        project_id=project_id,
                        position=position,
                        start=passage.start,
                        end=passage.end,
                        text=passage.text,
                    )
                    for pk, (content, project_id) in stale.items()
                    for position, passage in enumerate(passages(content))
                ],
                batch_size=1000,
            )
            Document.objects.bulk_update(
                [
                    Document(pk=pk, passages_sha256=content_sha256(content), terms_counted=False)
                    for pk, (content, _) in stale.items()
                ],
                ["passages_sha256", "terms_counted"],
                batch_size=1000,
            )
            made = len(stale)
    return made


def count_terms(*, project_id: UUID) -> int:
    """Adds the words of the matter's documents whose passages are made but not counted yet to its counts
    (``matter_terms``, PostgreSQL; elsewhere only marks them counted), in one statement whatever their
    number; returns how many documents it counted. One transaction; the documents are locked first, in
    primary-key order, so that two counters count each document once."""
    with transaction.atomic():
        pending = list(
            Document.objects.select_for_update()
            .filter(project_id=project_id, terms_counted=False)
            .exclude(passages_sha256="")
            .order_by("pk")
            .values_list("pk", flat=True)
        )
        if pending:
            _count_words(pending, sign=1)
            Document.objects.filter(pk__in=pending).update(terms_counted=True)
    return len(pending)


def _count_words(document_ids: list[UUID], *, sign: int) -> None:
    if connection.vendor != "postgresql":
        return
    with connection.cursor() as cursor:
        cursor.execute(
            COUNT_WORDS_SQL.format(terms=MatterTerm._meta.db_table, passages=DocumentPassage._meta.db_table),
            {"sign": sign, "documents": document_ids},
        )


def _candidate_words(*, project_id: UUID, terms: Sequence[str]) -> list[str]:
    """The question's words that choose the candidate passages: all of them when they hold at most
    CANDIDATE_PASSAGES passages in all, else the rarest ones up to that total (the rarest at least)."""
    with connection.cursor() as cursor:
        cursor.execute(
            WORDS_SQL.format(terms=MatterTerm._meta.db_table), {"words": " ".join(terms), "project": project_id}
        )
        counted = cursor.fetchall()
    chosen: list[str] = []
    total = 0
    for lexeme, passages_holding in counted:
        if chosen and total + passages_holding > CANDIDATE_PASSAGES:
            break
        chosen.append(lexeme)
        total += passages_holding
    return chosen


def ensure_passages(*, project_id: UUID) -> int:
    """Makes the passages of the matter's documents that have none for their content (inserted in bulk or
    SQL, or changed outside the document services), :data:`BATCH` documents per transaction, then counts
    the words of those not counted yet (:func:`count_terms`); the number of documents it made passages for.
    One indexed look-up (``documents_passages_pending_idx``) when there are none, as on nearly every turn."""
    pending = list(
        Document.objects.filter(Q(passages_sha256="") | Q(terms_counted=False), project_id=project_id).values_list(
            "pk", "passages_sha256"
        )
    )
    if not pending:
        return 0
    missing = [pk for pk, made_from in pending if not made_from]
    made = sum(make_passages(document_ids=missing[i : i + BATCH]) for i in range(0, len(missing), BATCH))
    count_terms(project_id=project_id)
    return made


def search_matter_passages(
    *, project_id: UUID, question: str, limit: int, documents: int
) -> list[tuple[Document, Passage]]:
    """The ``limit`` passages of the matter's documents that best answer ``question`` (best first), none
    overlapping another, drawn from at most ``documents`` documents; none that share no term with it.
    Ties go to the earlier stored passage (an earlier document, then its order)."""
    terms = query_terms(question)
    if not terms or limit <= 0 or documents <= 0:
        return []
    ensure_passages(project_id=project_id)
    margin = limit * MARGIN
    if connection.vendor == "postgresql":
        words = _candidate_words(project_id=project_id, terms=terms)
        if not words:
            return []
        with connection.cursor() as cursor:
            cursor.execute(
                SEARCH_SQL.format(passages=DocumentPassage._meta.db_table),
                {
                    "project": project_id,
                    # Lexemes are [a-z0-9]+ (query_terms, stemmed): a valid raw tsquery.
                    "candidates": " | ".join(words),
                    "candidate_limit": 2 * CANDIDATE_PASSAGES,
                    "query": tsquery(terms),
                    "margin": margin,
                },
            )
            rows = cursor.fetchall()
        document_ids = [document_id for document_id, *_ in rows]
        order = {document_id: n for n, document_id in enumerate(dict.fromkeys(document_ids))}
        ranked = [
            Passage(source=order[document_id], start=start, end=end, text=text)
            for document_id, start, end, text in rows
        ]
    else:
        stored = list(
            DocumentPassage.objects.filter(project_id=project_id)
            .order_by("id")
            .values_list("document_id", "start", "end", "text")
        )
        order = {document_id: n for n, document_id in enumerate(dict.fromkeys(row[0] for row in stored))}
        candidates = [
            Passage(source=order[document_id], start=start, end=end, text=text)
            for document_id, start, end, text in stored
        ]
        ranked = rank_by_overlap(candidates, terms, limit=margin)
    by_source = {n: document_id for document_id, n in order.items()}
    chosen = _choose(ranked, limit=limit, documents=documents)
    loaded = Document.objects.filter(project_id=project_id).in_bulk([by_source[p.source] for p in chosen])
    if any(by_source[p.source] not in loaded for p in chosen):
        # A document moved out of the matter below save() keeps its passages here until the new matter's next
        # turn makes them again there (chats.0030): only the matter's own documents are quoted.
        current = set(Document.objects.filter(project_id=project_id, pk__in=list(order)).values_list("pk", flat=True))
        chosen = _choose([p for p in ranked if by_source[p.source] in current], limit=limit, documents=documents)
        loaded = Document.objects.filter(project_id=project_id).in_bulk([by_source[p.source] for p in chosen])
    return [(loaded[by_source[p.source]], p) for p in chosen if by_source[p.source] in loaded]


def _choose(ranked: list[Passage], *, limit: int, documents: int) -> list[Passage]:
    """The first ``limit`` of ``ranked`` (best first) that overlap none chosen before, from at most ``documents``
    documents."""
    chosen: list[Passage] = []
    for passage in without_overlaps(ranked, limit=len(ranked)):
        kept_documents = {p.source for p in chosen}
        if passage.source in kept_documents or len(kept_documents) < documents:
            chosen.append(passage)
        if len(chosen) == limit:
            break
    return chosen
