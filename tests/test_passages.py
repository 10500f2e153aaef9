"""KB passages made once per document and searched per turn (chats.passages): made by the document services
(chats.documents) and on first use, kept in step with the content, scoped to the matter, the same answers as
splitting the documents on every turn, and a constant number of queries whatever the matter's size."""

from __future__ import annotations

import json
import threading
from pathlib import Path
from typing import Any

import pytest
from django.db import connection, connections
from django.test.utils import CaptureQueriesContext

import chats.passages
from chats.documents import add_document, save_document
from chats.models import Document, DocumentPassage, MatterTerm, Project
from chats.passages import content_sha256, ensure_passages, make_passages, search_matter_passages
from chats.retrieval import Passage, passages, rank_passages, rank_sources
from tests import factories

pytestmark = pytest.mark.django_db

OPINIONS = sorted((Path(__file__).resolve().parent.parent / "chats" / "data" / "opinions").glob("*.txt"))
QUESTIONS = [
    "workable race-neutral alternatives strict scrutiny",
    "attorney general opinion county ordinance",
    "voting district map evidence",
    "the court held that the statute",
    "diversity educational benefits university admissions",
]


def stored(document: Document) -> list[tuple[int, int, str]]:
    return list(document.passages.order_by("position").values_list("start", "end", "text"))


def expected(content: str) -> list[tuple[int, int, str]]:
    return [(p.start, p.end, p.text) for p in passages(content)]


def split_every_turn(project: Project, question: str, *, documents: int, limit: int) -> list[tuple[Document, str]]:
    """The retrieval before stored passages: rank the matter's documents, split the best, rank their passages."""
    ranked = rank_sources(Document.objects.filter(project=project), field="content", question=question, limit=documents)
    candidates = [p for i, d in enumerate(ranked) for p in passages(d.content, source=i)]
    return [(ranked[p.source], p.text) for p in rank_passages(candidates, question, limit=limit)]


def test_adding_a_document_makes_its_passages() -> None:
    document = factories.DocumentFactory.create(content=OPINIONS[0].read_text(encoding="utf-8"))
    assert stored(document) == expected(document.content)
    assert len(stored(document)) > 10
    assert set(document.passages.values_list("project_id", flat=True)) == {document.project_id}
    for start, end, text in stored(document):
        assert document.content[start:end] == text
    document.refresh_from_db()
    assert document.passages_sha256 == content_sha256(document.content)


def test_saving_a_new_content_remakes_the_passages() -> None:
    document = factories.DocumentFactory.create()
    document.content = OPINIONS[1].read_text(encoding="utf-8")
    save_document(document=document)
    assert stored(document) == expected(document.content)


def test_saving_other_fields_keeps_the_passages() -> None:
    document = factories.DocumentFactory.create()
    ids = list(document.passages.values_list("id", flat=True))
    document.title = "Renamed memo"
    save_document(document=document)
    assert list(document.passages.values_list("id", flat=True)) == ids


def test_saving_a_document_loaded_without_its_content_keeps_the_passages() -> None:
    document = factories.DocumentFactory.create()
    ids = list(document.passages.values_list("id", flat=True))
    partial = Document.objects.only("id", "title", "project_id").get(pk=document.pk)
    partial.title = "Renamed"
    save_document(document=partial)
    assert list(document.passages.values_list("id", flat=True)) == ids


def test_a_content_changed_below_save_gets_new_passages_on_first_use() -> None:
    # Given a document whose content is changed by an UPDATE that the document services never see
    document = factories.DocumentFactory.create()
    new_content = OPINIONS[2].read_text(encoding="utf-8")
    Document.objects.filter(pk=document.pk).update(content=new_content)
    # Then the database's trigger marked its passages as to be made again
    assert Document.objects.get(pk=document.pk).passages_sha256 == ""
    # And the next search makes them from the new content and finds its words
    found = search_matter_passages(
        project_id=document.project_id, question="voting district map evidence", limit=2, documents=5
    )
    assert stored(document) == expected(new_content)
    assert found
    assert all(new_content[p.start : p.end] == p.text for _, p in found)


def test_documents_inserted_in_bulk_get_their_passages_on_first_use_once() -> None:
    project = factories.ProjectFactory.create()
    Document.objects.bulk_create(
        [Document(project=project, title=path.name, content=path.read_text(encoding="utf-8")) for path in OPINIONS]
    )
    assert not DocumentPassage.objects.filter(project=project).exists()
    assert ensure_passages(project_id=project.pk) == len(OPINIONS)
    for document in Document.objects.filter(project=project):
        assert stored(document) == expected(document.content)
    assert ensure_passages(project_id=project.pk) == 0


@pytest.mark.postgres
def test_the_search_answers_as_splitting_the_documents_on_every_turn() -> None:
    # A matter of up to five documents (the assistant's candidate documents): the passages found are the
    # ones the retrieval that split every document on every turn found. On PostgreSQL: ts_rank scores a
    # passage alone, so the same passages rank the same. (SQLite's term-overlap scorer weighs each term by
    # how rare it is among the candidates, which are now all of the matter's passages, not only those of
    # the documents that matched: its order can differ where weights are close.)
    project = factories.ProjectFactory.create()
    for path in OPINIONS[:5]:
        factories.DocumentFactory.create(project=project, title=path.stem, content=path.read_text(encoding="utf-8"))
    for question in QUESTIONS:
        for limit in (1, 2, 5):
            before = split_every_turn(project, question, documents=5, limit=limit)
            now = search_matter_passages(project_id=project.pk, question=question, limit=limit, documents=5)
            assert [(d.pk, p.text) for d, p in now] == [(d.pk, text) for d, text in before], (question, limit)


def test_the_search_stays_in_its_matter() -> None:
    ours = factories.DocumentFactory.create(content=OPINIONS[0].read_text(encoding="utf-8"))
    factories.DocumentFactory.create(content=OPINIONS[0].read_text(encoding="utf-8"))  # another matter
    found = search_matter_passages(project_id=ours.project_id, question=QUESTIONS[3], limit=10, documents=5)
    assert found
    assert {d.pk for d, _ in found} == {ours.pk}


def test_the_search_keeps_to_the_number_of_documents_asked_for() -> None:
    project = factories.ProjectFactory.create()
    for path in OPINIONS:
        factories.DocumentFactory.create(project=project, content=path.read_text(encoding="utf-8"))
    found = search_matter_passages(project_id=project.pk, question=QUESTIONS[3], limit=20, documents=2)
    assert len(found) > 2
    assert len({d.pk for d, _ in found}) == 2
    spans = [(d.pk, p.start, p.end) for d, p in found]
    for i, (doc, start, end) in enumerate(spans):
        assert not any(doc == o and start < oe and os_ < end for o, os_, oe in spans[:i]), "overlapping passages"


def test_a_question_without_terms_finds_nothing() -> None:
    document = factories.DocumentFactory.create()
    assert search_matter_passages(project_id=document.project_id, question="of the and", limit=2, documents=5) == []


@pytest.mark.parametrize("documents", [3, 30])
def test_the_search_takes_the_same_queries_whatever_the_matter_size(
    documents: int, django_capture_on_commit_callbacks: Any
) -> None:
    project = factories.ProjectFactory.create()
    with django_capture_on_commit_callbacks(execute=True):
        for n in range(documents):
            factories.DocumentFactory.create(project=project, title=f"Memo {n}")
    with CaptureQueriesContext(connection) as queries:
        found = search_matter_passages(project_id=project.pk, question=QUESTIONS[0], limit=2, documents=5)
    assert found
    # The look-up of documents without passages, (on PostgreSQL) the question's words counted in the matter,
    # the search, the documents of the passages found.
    assert len(queries) == (4 if connection.vendor == "postgresql" else 3), [q["sql"] for q in queries]


def test_deleting_a_document_deletes_its_passages() -> None:
    document = factories.DocumentFactory.create()
    assert document.passages.exists()
    document.delete()
    assert not DocumentPassage.objects.filter(document_id=document.pk).exists()


def test_making_the_passages_of_unchanged_content_again_stores_nothing() -> None:
    document = factories.DocumentFactory.create()
    assert make_passages(document_ids=[document.pk]) == 0


@pytest.mark.postgres
def test_the_search_vector_and_its_index_are_the_databases() -> None:
    document = factories.DocumentFactory.create()
    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT count(*) FROM document_passages WHERE document_id = %s "
            "AND search_vector = to_tsvector('english', text)",
            [document.pk],
        )
        assert cursor.fetchone()[0] == document.passages.count() > 0
        cursor.execute(
            "EXPLAIN SELECT id FROM document_passages WHERE search_vector @@ to_tsquery('english', 'scrutiny')"
        )
        cursor.execute(
            "SELECT indexdef FROM pg_indexes WHERE tablename = 'document_passages' AND indexdef LIKE '%gin%'"
        )
        assert [row[0].split(" USING ")[1] for row in cursor.fetchall()] == ["gin (project_id, search_vector)"]


@pytest.mark.postgres
@pytest.mark.django_db(transaction=True)
def test_two_turns_making_the_same_passages_at_once_make_them_once() -> None:
    project = factories.ProjectFactory.create()
    Document.objects.bulk_create(
        [Document(project=project, title="memo", content=OPINIONS[0].read_text(encoding="utf-8"))]
    )
    document = Document.objects.get(project=project)
    barrier = threading.Barrier(2, timeout=10)
    errors: list[BaseException] = []

    def make() -> None:
        try:
            barrier.wait()
            ensure_passages(project_id=project.pk)
        except BaseException as exc:  # reported by the assertion below
            errors.append(exc)
        finally:
            connections.close_all()

    threads = [threading.Thread(target=make) for _ in range(2)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=30)
    assert not any(thread.is_alive() for thread in threads)
    assert errors == []
    assert stored(document) == expected(document.content)


def test_passages_are_verbatim_spans() -> None:
    # A passage is a quotable span, as Passage promises for the turn's claims.
    document = factories.DocumentFactory.create(content=OPINIONS[3].read_text(encoding="utf-8"))
    for _, passage in search_matter_passages(
        project_id=document.project_id, question=QUESTIONS[2], limit=5, documents=5
    ):
        assert isinstance(passage, Passage)
        assert document.content[passage.start : passage.end] == passage.text


def _counted_words(project: Project) -> dict[str, int]:
    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT w.lexeme, count(*) FROM document_passages p, unnest(tsvector_to_array(p.search_vector)) "
            "AS w(lexeme) WHERE p.project_id = %s GROUP BY 1",
            [project.pk],
        )
        return dict(cursor.fetchall())


@pytest.mark.postgres
def test_the_matters_word_counts_follow_its_passages(django_capture_on_commit_callbacks: Any) -> None:
    project = factories.ProjectFactory.create()
    with django_capture_on_commit_callbacks(execute=True):
        document = factories.DocumentFactory.create(project=project, content=OPINIONS[0].read_text(encoding="utf-8"))
        factories.DocumentFactory.create(project=project, content=OPINIONS[1].read_text(encoding="utf-8"))
    kept = dict(MatterTerm.objects.filter(project=project).values_list("lexeme", "passages"))
    assert kept == _counted_words(project)
    # A new content: the old passages' words are counted off, the new ones' on.
    document.content = OPINIONS[2].read_text(encoding="utf-8")
    with django_capture_on_commit_callbacks(execute=True):
        save_document(document=document)
    kept = {w: n for w, n in MatterTerm.objects.filter(project=project).values_list("lexeme", "passages") if n}
    assert kept == _counted_words(project)


@pytest.mark.postgres
def test_documents_added_in_one_transaction_are_counted_once_after_it(django_capture_on_commit_callbacks: Any) -> None:
    # Given documents added to a matter in one transaction, as a bulk import adds them
    project = factories.ProjectFactory.create()
    with django_capture_on_commit_callbacks(execute=True) as callbacks:
        with CaptureQueriesContext(connection) as adding:
            for path in OPINIONS[:3]:
                add_document(project=project, title=path.stem, text=path.read_text(encoding="utf-8"))
        # Then no document's addition wrote the matter's counts: each would rewrite the rows the others wrote
        assert not [q["sql"] for q in adding.captured_queries if "matter_terms" in q["sql"]]
        assert not MatterTerm.objects.filter(project=project).exists()
    # And after the commit the counts hold every document's words, counted in one statement
    assert callbacks
    assert dict(MatterTerm.objects.filter(project=project).values_list("lexeme", "passages")) == _counted_words(project)
    assert not Document.objects.filter(project=project, terms_counted=False).exists()


@pytest.mark.postgres
def test_the_words_of_documents_never_counted_are_counted_by_the_next_search() -> None:
    # Given documents whose transaction's counting never ran (the process stopped after the commit)
    project = factories.ProjectFactory.create()
    for path in OPINIONS[:2]:
        factories.DocumentFactory.create(project=project, content=path.read_text(encoding="utf-8"))
    assert not MatterTerm.objects.filter(project=project).exists()
    # When the matter is next searched
    found = search_matter_passages(project_id=project.pk, question=QUESTIONS[3], limit=2, documents=5)
    # Then it counted them first
    assert found
    assert dict(MatterTerm.objects.filter(project=project).values_list("lexeme", "passages")) == _counted_words(project)


@pytest.mark.postgres
def test_a_large_matter_ranks_the_passages_of_the_questions_rarer_words(
    monkeypatch: pytest.MonkeyPatch, django_capture_on_commit_callbacks: Any
) -> None:
    # Given a matter whose passages hold "court" far more often than "scrutiny", and a cap below their total
    project = factories.ProjectFactory.create()
    with django_capture_on_commit_callbacks(execute=True):
        for path in OPINIONS:
            factories.DocumentFactory.create(project=project, content=path.read_text(encoding="utf-8"))
    counts = dict(MatterTerm.objects.filter(project=project).values_list("lexeme", "passages"))
    assert counts["scrutini"] < counts["court"]
    monkeypatch.setattr(chats.passages, "CANDIDATE_PASSAGES", counts["scrutini"])
    # When the question asks about both
    found = search_matter_passages(project_id=project.pk, question="court strict scrutiny", limit=3, documents=5)
    # Then the candidates were the passages holding the rarer words, ranked by all of them
    assert found
    assert all("scrutiny" in p.text.lower() or "strict" in p.text.lower() for _, p in found)
    exhaustive = split_every_turn(project, "court strict scrutiny", documents=len(OPINIONS), limit=1)
    assert "scrutiny" in exhaustive[0][1].lower()


def _rows_read(plan: dict[str, Any]) -> int:
    """The rows a plan's nodes produced or threw away (removed by a filter or an index recheck), in all."""
    read = int(plan.get("Actual Rows", 0)) * int(plan.get("Actual Loops", 1))
    read += int(plan.get("Rows Removed by Filter", 0)) + int(plan.get("Rows Removed by Index Recheck", 0))
    return read + sum(_rows_read(child) for child in plan.get("Plans", []))


@pytest.mark.postgres
def test_a_matters_search_reads_its_own_passages_not_every_matters() -> None:
    # Given a matter with the opinions, and 100 other matters holding the same texts (the same words)
    project = factories.ProjectFactory.create()
    for path in OPINIONS:
        factories.DocumentFactory.create(project=project, content=path.read_text(encoding="utf-8"))
    own = DocumentPassage.objects.filter(project=project).count()
    others = [factories.ProjectFactory.create(owner=project.owner).pk for _ in range(100)]
    with connection.cursor() as cursor:
        cursor.execute(
            'INSERT INTO document_passages (project_id, document_id, position, start, "end", text) '
            'SELECT o.id, p.document_id, p.position, p.start, p."end", p.text '
            "FROM unnest(%s::uuid[]) AS o(id), document_passages p WHERE p.project_id = %s",
            [others, project.pk],
        )
        cursor.execute("ANALYZE document_passages")
    # When the matter is searched
    with CaptureQueriesContext(connection) as queries:
        found = search_matter_passages(
            project_id=project.pk, question="the court held that the statute", limit=3, documents=1
        )
    assert found
    (search,) = [q["sql"] for q in queries.captured_queries if "ts_rank" in q["sql"]]
    with connection.cursor() as cursor:
        cursor.execute(f"EXPLAIN (ANALYZE, FORMAT JSON) {search}")
        (plan,) = cursor.fetchone()[0]
    # Then it reads the matter's passages at most (not the 100 x as many of the other matters)
    assert _rows_read(plan["Plan"]) <= 3 * own, json.dumps(plan, indent=1)[:4000]


def _counted_in(project: Project) -> dict[str, int]:
    """The matter's word counts as stored, without the words no passage holds any more."""
    return {w: n for w, n in MatterTerm.objects.filter(project=project).values_list("lexeme", "passages") if n}


def test_a_document_moved_by_the_service_has_its_passages_in_its_new_matter_only() -> None:
    # Given a document filed in matter A, beside another of A's
    old, new = factories.ProjectFactory.create(), factories.ProjectFactory.create()
    moved = factories.DocumentFactory.create(project=old, content=OPINIONS[0].read_text(encoding="utf-8"))
    stays = factories.DocumentFactory.create(project=old, content=OPINIONS[1].read_text(encoding="utf-8"))

    # When it is moved to matter B by the document service (the admin's form)
    moved.project = new
    save_document(document=moved)

    # Then its passages are B's, made again from the same content, and A's search no longer finds them
    assert set(moved.passages.values_list("project_id", flat=True)) == {new.pk}
    assert stored(moved) == expected(moved.content)
    in_old = search_matter_passages(project_id=old.pk, question=QUESTIONS[3], limit=10, documents=5)
    in_new = search_matter_passages(project_id=new.pk, question=QUESTIONS[3], limit=10, documents=5)
    assert {d.pk for d, _ in in_old} == {stays.pk}
    assert {d.pk for d, _ in in_new} == {moved.pk}
    if connection.vendor == "postgresql":  # the matters' word counts follow the passages
        assert _counted_in(old) == _counted_words(old)
        assert _counted_in(new) == _counted_words(new)


def test_a_document_moved_below_save_is_quoted_in_neither_matter_but_its_new_one() -> None:
    # Given a document of matter A, beside another of A's
    old, new = factories.ProjectFactory.create(), factories.ProjectFactory.create()
    moved = factories.DocumentFactory.create(project=old, content=OPINIONS[0].read_text(encoding="utf-8"))
    stays = factories.DocumentFactory.create(project=old, content=OPINIONS[0].read_text(encoding="utf-8"))

    # When an UPDATE that the document services never see moves it to matter B
    Document.objects.filter(pk=moved.pk).update(project=new)

    # Then the database's trigger marked its passages as to be made again
    assert Document.objects.get(pk=moved.pk).passages_sha256 == ""
    # And A's search, though its passages are still filed under A, quotes only A's own document
    assert DocumentPassage.objects.filter(document=moved, project=old).exists()
    in_old = search_matter_passages(project_id=old.pk, question=QUESTIONS[3], limit=10, documents=5)
    assert in_old
    assert {d.pk for d, _ in in_old} == {stays.pk}
    # And B's next search makes them again under B and finds them
    in_new = search_matter_passages(project_id=new.pk, question=QUESTIONS[3], limit=10, documents=5)
    assert {d.pk for d, _ in in_new} == {moved.pk}
    assert set(DocumentPassage.objects.filter(document=moved).values_list("project_id", flat=True)) == {new.pk}
