"""The passages of KB documents: made once per content, searched per turn.

A document's quotable passages (:func:`chats.retrieval.passages`) are stored in ``document_passages``
(:class:`chats.models.DocumentPassage`) when the document is saved (``Document.save()``, the one hook every
ORM creator goes through: pages, API, admin, demo), or on first use for documents inserted in bulk or in
SQL and for those whose content changed below ``save()`` (a trigger empties ``passages_sha256`` then).
A turn's retrieval then searches the matter's stored passages instead of reading and splitting its
documents:

- on PostgreSQL through the GIN index on ``document_passages.search_vector`` (``to_tsvector('english',
  text)``, a stored generated column: migration chats.0019), ranked by ``ts_rank``, the same ranking
  :func:`chats.retrieval.rank_passages` gives;
- elsewhere (SQLite) by a plain scan of the matter's stored passages with the same term-overlap scorer.
"""

from __future__ import annotations

import hashlib
from uuid import UUID

from django.db import connection, transaction

from chats.models import Document, DocumentPassage
from chats.retrieval import Passage, passages, query_terms, rank_by_overlap, tsquery, without_overlaps

# How many ranked passages are read for each one kept: overlapping ones (a short sentence alone and joined
# with the next) are dropped after ranking, as rank_passages does.
MARGIN = 4

SEARCH_SQL = """
SELECT p.document_id, p.start, p."end", p.text
FROM {passages} p, to_tsquery('english', %(query)s) AS q
WHERE p.project_id = %(project)s AND p.search_vector @@ q
ORDER BY ts_rank(p.search_vector, q) DESC, p.id
LIMIT %(margin)s
"""


def content_sha256(content: str) -> str:
    return hashlib.sha256(content.encode("utf-8")).hexdigest()


def make_passages(*, document: Document) -> int:
    """Stores the passages of ``document``'s current content (as the database holds it), replacing those of
    an earlier content; nothing if they are already made from it. Returns how many it stored.

    The document's row is locked first, so that two turns making the passages of one document at once
    make them once (the second finds them made); each document is its own transaction."""
    with transaction.atomic():
        row = (
            Document.objects.select_for_update()
            .filter(pk=document.pk)
            .values_list("content", "passages_sha256", "project_id")
            .first()
        )
        if row is None:
            return 0
        content, made_from, project_id = row
        digest = content_sha256(content)
        if made_from != digest:
            DocumentPassage.objects.filter(document_id=document.pk).delete()
            DocumentPassage.objects.bulk_create(
                [
                    DocumentPassage(
                        document_id=document.pk,
                        project_id=project_id,
                        position=position,
                        start=passage.start,
                        end=passage.end,
                        text=passage.text,
                    )
                    for position, passage in enumerate(passages(content))
                ],
                batch_size=1000,
            )
            Document.objects.filter(pk=document.pk).update(passages_sha256=digest)
            made = DocumentPassage.objects.filter(document_id=document.pk).count()
        else:
            made = 0
    document.passages_sha256 = digest
    return made


def ensure_passages(*, project_id: UUID) -> int:
    """Makes the passages of the matter's documents that have none for their content (inserted in bulk or
    SQL, or changed below ``save()``); the number of documents it made them for. One indexed look-up
    (``documents_passages_missing_idx``) when there are none, as on nearly every turn."""
    missing = list(Document.objects.filter(project_id=project_id, passages_sha256="").only("pk"))
    for document in missing:
        make_passages(document=document)
    return len(missing)


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
        with connection.cursor() as cursor:
            cursor.execute(
                SEARCH_SQL.format(passages=DocumentPassage._meta.db_table),
                {"query": tsquery(terms), "project": project_id, "margin": margin},
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
    chosen: list[Passage] = []
    for passage in without_overlaps(ranked, limit=len(ranked)):
        kept_documents = {p.source for p in chosen}
        if passage.source in kept_documents or len(kept_documents) < documents:
            chosen.append(passage)
        if len(chosen) == limit:
            break
    loaded = Document.objects.in_bulk([by_source[p.source] for p in chosen])
    return [(loaded[by_source[p.source]], p) for p in chosen]
