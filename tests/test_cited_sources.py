"""Cited evidence is immutable: once a quote row cites a document or an opinion, its text cannot change.

On PostgreSQL a trigger refuses the change to any UPDATE (raw SQL included); on both databases the
model's ``save()`` refuses it with the same exception (``IntegrityError``). Each quote row stores the
SHA-256 of the passage it verified, and the trace recomputes it from the passage it reads
(``passage_intact``), so a change made below the application (trigger disabled) shows.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from typing import TypeVar

import pytest
from django.contrib.auth.models import User
from django.core.exceptions import ValidationError
from django.db import IntegrityError, connection, transaction
from django.test import Client
from django.urls import reverse
from rest_framework.test import APIClient

from chats.assistant import FinalAnswer, ScriptedBackend, TurnRun
from chats.models import CaselawOpinion, Chat, CitedTextChangeError, Document, DocumentQuote, Message
from chats.record import purging
from chats.services import ClaimedCitation, finalize_turn, passage_sha256, start_turn
from citations import ledger
from lqai_verify.verification import NormalizedSource
from tests import factories
from tests.test_tools import QUERY, fake_courtlistener, tool_with

pytestmark = pytest.mark.django_db


@pytest.fixture
def cited_document(matter_chat: Chat) -> Document:
    """The matter's document, quoted by a turn whose ledger entry is written."""
    document = Document.objects.get(project=matter_chat.project)
    message = factories.MessageFactory.create(chat=matter_chat)
    factories.DocumentQuoteFactory.create(message=message, document=document)
    return document


@pytest.fixture
def cited_opinion(matter_chat: Chat) -> CaselawOpinion:
    citation = factories.OpinionQuoteFactory.create(message__chat=matter_chat)
    assert citation.opinion is not None
    return citation.opinion


def _text(source: Document | CaselawOpinion) -> str:
    return source.content if isinstance(source, Document) else source.text


SourceT = TypeVar("SourceT", Document, CaselawOpinion)


def _fresh(source: SourceT) -> SourceT:
    return type(source)._default_manager.get(pk=source.pk)


# --- the database refuses (PostgreSQL) --------------------------------------------------------------------------------


@pytest.mark.postgres
def test_a_raw_sql_update_of_a_cited_documents_content_fails(cited_document: Document) -> None:
    refused = pytest.raises(IntegrityError, match="is cited: its content cannot change")
    with refused, transaction.atomic(), connection.cursor() as cursor:
        cursor.execute("UPDATE documents SET content = 'rewritten' WHERE id = %s", [cited_document.pk])

    assert _fresh(cited_document).content == factories.TEXT


@pytest.mark.postgres
def test_a_raw_sql_update_of_a_cited_opinions_text_fails(cited_opinion: CaselawOpinion) -> None:
    refused = pytest.raises(IntegrityError, match="is cited: its text cannot change")
    with refused, transaction.atomic(), connection.cursor() as cursor:
        cursor.execute("UPDATE caselaw_opinions SET text = text || ' amended' WHERE id = %s", [cited_opinion.pk])

    assert _fresh(cited_opinion).text == factories.TEXT


def test_a_queryset_update_of_cited_text_fails_too(cited_document: Document, cited_opinion: CaselawOpinion) -> None:
    # QuerySet.update() bypasses save(): the queryset refuses it (CitedSourceQuerySet), and on PostgreSQL the
    # trigger below it
    with pytest.raises(IntegrityError), transaction.atomic():
        Document.objects.filter(pk=cited_document.pk).update(content="rewritten")
    with pytest.raises(IntegrityError), transaction.atomic():
        CaselawOpinion.objects.filter(pk=cited_opinion.pk).update(text="rewritten")


@pytest.mark.postgres
def test_the_trigger_lets_an_uncited_text_and_a_cited_opinions_other_metadata_change(
    matter_chat: Chat, cited_document: Document, cited_opinion: CaselawOpinion
) -> None:
    """What the record does not show of a cited opinion (its court, say) may be refreshed; its title, pages,
    case name and citation may not (tests/test_cited_sources_and_chain_heads.py)."""
    uncited = factories.DocumentFactory.create(project=matter_chat.project)
    with connection.cursor() as cursor:
        cursor.execute("UPDATE documents SET content = 'rewritten', title = 'Renamed' WHERE id = %s", [uncited.pk])
        cursor.execute("UPDATE caselaw_opinions SET court = 'Renamed' WHERE id = %s", [cited_opinion.pk])
        # Setting the same text is no change
        cursor.execute("UPDATE documents SET content = content WHERE id = %s", [cited_document.pk])

    assert (_fresh(uncited).content, _fresh(uncited).title) == ("rewritten", "Renamed")
    assert _fresh(cited_opinion).court == "Renamed"


@pytest.mark.postgres
def test_a_raw_sql_update_of_a_cited_opinions_provider_fails(
    cited_opinion: CaselawOpinion, local_opinion: CaselawOpinion
) -> None:
    """Which provider a quoted opinion came from is one of its quote's sealed facts (``citations.seals``):
    changing it would make the sealed turn read as tampered with."""
    refused = pytest.raises(IntegrityError, match="is cited: its provider cannot change")
    with refused, transaction.atomic(), connection.cursor() as cursor:
        cursor.execute("UPDATE caselaw_opinions SET provider = 'elsewhere' WHERE id = %s", [cited_opinion.pk])
    with connection.cursor() as cursor:  # an uncited opinion's provider may still change
        cursor.execute("UPDATE caselaw_opinions SET provider = 'elsewhere' WHERE id = %s", [local_opinion.pk])

    assert _fresh(cited_opinion).provider != "elsewhere"
    assert _fresh(local_opinion).provider == "elsewhere"


# --- the model refuses (both databases) -------------------------------------------------------------------------------


@pytest.mark.parametrize("kind", ["document", "opinion"])
def test_saving_a_changed_cited_text_fails(kind: str, cited_document: Document, cited_opinion: CaselawOpinion) -> None:
    source: Document | CaselawOpinion = cited_document if kind == "document" else cited_opinion
    setattr(source, source.cited_text_field, "rewritten")

    with pytest.raises(CitedTextChangeError, match="is cited"), transaction.atomic():
        source.save()
    with pytest.raises(IntegrityError), transaction.atomic():  # the same family as the trigger's refusal
        source.save(update_fields=[source.cited_text_field])

    stored = type(source)._default_manager.get(pk=source.pk)
    assert getattr(stored, source.cited_text_field) == factories.TEXT


def test_saving_a_cited_opinion_with_another_provider_fails(
    cited_opinion: CaselawOpinion, admin_client: Client
) -> None:
    cited_opinion.provider = "elsewhere"

    with (
        pytest.raises(CitedTextChangeError, match="is cited: its provider cannot change"),
        transaction.atomic(),
    ):
        cited_opinion.save()
    page = admin_client.get(reverse("admin:chats_caselawopinion_change", args=[cited_opinion.pk]))

    assert _fresh(cited_opinion).provider != "elsewhere"
    assert "provider" in page.context["adminform"].readonly_fields


def test_a_cited_source_still_saves_what_the_record_does_not_show(
    cited_document: Document, cited_opinion: CaselawOpinion
) -> None:
    cited_document.save()  # writes every column, none changed
    cited_opinion.court = "Renamed court"
    cited_opinion.save(update_fields=["court"])
    cited_opinion.absolute_url = "https://example.com/renamed/"
    cited_opinion.save()  # writes every column, the guarded ones unchanged
    deferred = Document.objects.defer("content").get(pk=cited_document.pk)
    deferred.save()
    deferred.title = "Renamed memo"
    with pytest.raises(CitedTextChangeError, match="is cited: its title cannot change"), transaction.atomic():
        deferred.save()

    assert _fresh(cited_document).title == "Strict scrutiny memo"
    assert (_fresh(cited_opinion).court, _fresh(cited_opinion).absolute_url) == (
        "Renamed court",
        "https://example.com/renamed/",
    )


def test_an_uncited_document_stays_editable(matter_chat: Chat, cited_document: Document) -> None:
    draft = factories.DocumentFactory.create(project=matter_chat.project, content="First draft of the memo.")

    draft.content = "Second draft of the memo."
    draft.save()
    Document.objects.filter(pk=draft.pk).update(content="Third draft of the memo.")

    assert _fresh(draft).content == "Third draft of the memo."
    assert not draft.is_cited()
    assert cited_document.is_cited()


def test_once_its_quote_is_deleted_a_text_is_editable_again(cited_document: Document) -> None:
    with purging(cited_document.project_id):  # a quote goes only with its matter's purge
        DocumentQuote.objects.filter(document=cited_document).delete()

    cited_document.content = "rewritten"
    cited_document.save()

    assert _fresh(cited_document).content == "rewritten"


# --- the admin --------------------------------------------------------------------------------------------------------


@pytest.mark.parametrize("kind", ["document", "opinion"])
def test_the_admin_shows_a_cited_text_read_only(
    admin_client: Client, kind: str, matter_chat: Chat, cited_document: Document, cited_opinion: CaselawOpinion
) -> None:
    cited: Document | CaselawOpinion = cited_document if kind == "document" else cited_opinion
    uncited: Document | CaselawOpinion = (
        factories.DocumentFactory.create(project=matter_chat.project)
        if kind == "document"
        else factories.CaselawOpinionFactory.create()
    )
    field = cited.cited_text_field
    name = f"admin:chats_{cited._meta.model_name}_change"

    cited_page = admin_client.get(reverse(name, args=[cited.pk]))
    uncited_page = admin_client.get(reverse(name, args=[uncited.pk]))

    assert cited_page.status_code == uncited_page.status_code == 200
    assert field not in cited_page.context["adminform"].form.fields
    assert field in cited_page.context["adminform"].readonly_fields
    assert field in uncited_page.context["adminform"].form.fields


def test_posting_a_changed_cited_text_through_the_admin_changes_nothing(
    admin_client: Client, cited_document: Document
) -> None:
    url = reverse("admin:chats_document_change", args=[cited_document.pk])
    form = {"project": str(cited_document.project_id), "title": "Renamed", "content": "rewritten"}

    response = admin_client.post(url, form)

    assert response.status_code == 302
    stored = Document.objects.get(pk=cited_document.pk)
    assert (stored.title, stored.content) == ("Strict scrutiny memo", factories.TEXT)


# --- re-fetching a cited opinion --------------------------------------------------------------------------------------


def test_refetching_a_cited_opinion_keeps_what_its_quotes_show_and_refreshes_the_rest(matter_chat: Chat) -> None:
    # Given a CourtListener opinion materialized, then quoted, whose stored text and metadata differ from upstream's
    tool = tool_with(fake_courtlistener())
    tool.run({"query": QUERY})
    opinion = CaselawOpinion.objects.get(provider="courtlistener", opinion_id="910001")
    CaselawOpinion.objects.filter(pk=opinion.pk).update(
        text="An older copy of the opinion, as quoted.", case_name="Stale", court="Stale court"
    )
    factories.OpinionQuoteFactory.create(message__chat=matter_chat, opinion=_fresh(opinion), quote="as quoted")

    # When a turn's tool fetches it again
    output = tool.run({"query": QUERY})

    # Then the turn goes on, the quoted text and the case name its quote is shown with are kept, and the rest
    # of the metadata is refreshed
    refreshed = CaselawOpinion.objects.get(pk=opinion.pk)
    assert refreshed.text == "An older copy of the opinion, as quoted."
    assert refreshed.case_name == "Stale"
    assert refreshed.court not in {"Stale court", ""}
    assert str(opinion.pk) in {r["opinion_id"] for r in output.payload["results"]}
    # An uncited one is refreshed in full
    other = CaselawOpinion.objects.get(provider="courtlistener", opinion_id="910002")
    assert "SUSAN JANE HOGARTH" in other.text


# --- the digest and passage_intact ------------------------------------------------------------------------------------


def test_finalize_stores_the_digest_of_each_verified_passage(matter_chat: Chat, local_opinion: CaselawOpinion) -> None:
    document = Document.objects.get(project=matter_chat.project)
    _, message = start_turn(chat=matter_chat, content="strict scrutiny")
    claims = (
        ClaimedCitation(quote="must  ultimately be satisfied", document_id=document.pk),  # tolerant: whitespace
        ClaimedCitation(quote="strict scrutiny", opinion_id=local_opinion.pk),
    )

    with ScriptedBackend.scripted(FinalAnswer(citations=claims)):
        result = TurnRun(message=message, backend=ScriptedBackend(), tools={}).run_to_end()

    (kb,) = result.citations
    (caselaw,) = result.caselaw_citations
    assert kb.passage_sha256 == passage_sha256(document.content[kb.source_offset_start : kb.source_offset_end])
    assert kb.passage_sha256 != passage_sha256(kb.quote)  # the passage as in the source, not the claim
    assert caselaw.passage_sha256 == passage_sha256(
        local_opinion.text[caselaw.source_offset_start : caselaw.source_offset_end]
    )
    assert len(kb.passage_sha256) == 64


def change_below_the_application(source: Document | CaselawOpinion, text: str) -> None:
    """Change a cited text the way only someone with the database could: an UPDATE that bypasses the model
    layer (save() and the guarded queryset), on PostgreSQL with the trigger disabled (inside the test's
    transaction, so the rollback enables it again; pending deferred checks are run first, as ALTER TABLE
    requires)."""
    table = source._meta.db_table
    column = source.cited_text_field
    if connection.vendor == "postgresql":
        with connection.cursor() as cursor:
            cursor.execute("SET CONSTRAINTS ALL IMMEDIATE")
            cursor.execute(f"ALTER TABLE {table} DISABLE TRIGGER {table}_cited_{column}_immutable")
    type(source)._base_manager.filter(pk=source.pk).update(**{column: text})


@pytest.mark.parametrize("kind", ["kb_document", "caselaw"])
def test_passage_intact_turns_false_when_the_text_changed_below_the_application(
    api_client: APIClient, user: User, kind: str
) -> None:
    # Given a quote in the ledger, intact
    chat = factories.ChatFactory.create(project__owner=user)
    message = factories.assembled_turn(chat, kb=int(kind == "kb_document"), caselaw=int(kind == "caselaw"), tools=1)
    url = reverse("citations:chat-ledger", kwargs={"chat_id": chat.pk})
    quote_entry, tool_entry = sorted(api_client.get(url).json()["results"], key=lambda e: e["passage"] is None)
    assert (quote_entry["source_kind"], quote_entry["passage_intact"]) == (kind, True)
    assert (tool_entry["passage"], tool_entry["passage_intact"]) == (None, None)  # a consulted source

    # When the cited text is changed below the application, at the quote's offsets
    if kind == "kb_document":
        kb = message.citations.get()
        assert kb.document is not None
        source: Document | CaselawOpinion = kb.document
        start, end = kb.source_offset_start, kb.source_offset_end
    else:
        caselaw = message.caselaw_citations.get()
        assert caselaw.opinion is not None
        source = caselaw.opinion
        start, end = caselaw.source_offset_start, caselaw.source_offset_end
    assert start is not None
    assert end is not None
    text = _text(source)
    change_below_the_application(source, text[:start] + "X" * (end - start) + text[end:])

    # Then the trace shows the passage as it reads now, and says it is not the one verified
    (entry,) = [e for e in api_client.get(url).json()["results"] if e["passage"] is not None]
    assert entry["passage"]["text"] == "X" * (end - start)
    assert entry["passage_intact"] is False


def test_the_admin_flags_a_passage_changed_since_verified(admin_client: Client, user: User) -> None:
    chat = factories.ChatFactory.create(project__owner=user)
    message = factories.assembled_turn(chat, kb=1, caselaw=0, tools=0)
    url = reverse("admin:chats_message_change", args=[message.pk])
    assert "changed since verified" not in admin_client.get(url).content.decode()

    kb = message.citations.get()
    assert kb.document is not None
    assert kb.source_offset_start is not None
    text = kb.document.content
    change_below_the_application(kb.document, text[: kb.source_offset_start] + "X" + text[kb.source_offset_start + 1 :])

    assert "changed since verified" in admin_client.get(url).content.decode()


def test_passage_intact_is_null_for_a_quote_stored_before_digests(api_client: APIClient, user: User) -> None:
    chat = factories.ChatFactory.create(project__owner=user)
    message = factories.MessageFactory.create(chat=chat)
    factories.DocumentQuoteFactory.create(message=message, passage_sha256="")  # as stored before digests
    ledger.assemble(message)

    (entry,) = api_client.get(reverse("citations:chat-ledger", kwargs={"chat_id": chat.pk})).json()["results"]

    assert entry["passage"] is not None
    assert entry["passage_intact"] is None


# --- the digest column ------------------------------------------------------------------------------------------------


@pytest.mark.parametrize("digest", ["abc", "A" * 64, "g" * 64])
def test_a_digest_is_64_lowercase_hex_digits_full_clean(cited_document: Document, digest: str) -> None:
    citation = DocumentQuote.objects.get(document=cited_document)
    citation.passage_sha256 = digest

    with pytest.raises(ValidationError, match="passage_sha256 must be 64 lowercase hex digits"):
        citation.full_clean()


@pytest.mark.parametrize("digest", ["abc", "A" * 64, "g" * 64])
def test_a_digest_is_64_lowercase_hex_digits_insert(cited_document: Document, digest: str) -> None:
    expected = "message_citations_passage_sha256_hex" if connection.vendor == "postgresql" else None

    message = DocumentQuote.objects.get(document=cited_document).message
    with pytest.raises(IntegrityError, match=expected), transaction.atomic():
        factories.DocumentQuoteFactory.create(message=message, document=cited_document, passage_sha256=digest)


@pytest.mark.postgres
def test_a_quote_written_by_raw_sql_without_a_digest_gets_an_empty_one(cited_document: Document) -> None:
    # Writers that predate the digest (the benchmark's dataset, older tools) still insert
    message = DocumentQuote.objects.get(document=cited_document).message
    with connection.cursor() as cursor:
        cursor.execute(
            "INSERT INTO message_citations (id, message_id, document_id, quote, source_offset_start, "
            "source_offset_end, verification_method, verification_confidence, created_at) "
            "VALUES (gen_random_uuid(), %s, %s, 'must', 0, 4, 'exact_match', 1.0, now()) RETURNING passage_sha256",
            [message.pk, cited_document.pk],
        )
        (digest,) = cursor.fetchone()

    assert digest == ""


@pytest.mark.postgres
@pytest.mark.django_db(transaction=True)
def test_a_text_cannot_change_between_its_quotes_verification_and_commit(
    monkeypatch: pytest.MonkeyPatch, committed_matter_chat: tuple[APIClient, Chat]
) -> None:
    # Given a turn finalizing a quote of a not yet cited document, held just after reading its text
    _, chat = committed_matter_chat
    document = Document.objects.get(project=chat.project)
    _, message = start_turn(chat=chat, content="What must the court be satisfied of?")
    entered, gate = threading.Event(), threading.Event()
    build = NormalizedSource.build

    def held_build(text: str) -> NormalizedSource:
        entered.set()
        assert gate.wait(30)
        return build(text)

    monkeypatch.setattr(NormalizedSource, "build", staticmethod(held_build))
    outcomes: dict[str, object] = {}

    def in_thread(name: str, work: Callable[[], object]) -> threading.Thread:
        def run() -> None:
            try:
                outcomes[name] = work()
            except Exception as exc:
                outcomes[name] = exc
            finally:
                connection.close()

        thread = threading.Thread(target=run, daemon=True)
        thread.start()
        return thread

    claim = ClaimedCitation(quote="must ultimately be satisfied", document_id=document.pk)
    turn = in_thread(
        "turn",
        lambda: finalize_turn(
            message=message, content="Quoted.", status=Message.Status.COMPLETE, claimed_citations=[claim]
        ),
    )
    try:
        assert entered.wait(30)

        # When someone edits the document meanwhile
        edit = in_thread("edit", lambda: Document.objects.filter(pk=document.pk).update(content="rewritten"))

        # Then the edit waits for the turn, and once the quote is committed it is refused
        edit.join(timeout=0.5)
        assert edit.is_alive(), f"the edit did not wait for the turn: {outcomes.get('edit')!r}"
    finally:
        gate.set()
    turn.join(timeout=30)
    edit.join(timeout=30)
    assert not turn.is_alive()
    assert not edit.is_alive()
    assert not isinstance(outcomes["turn"], Exception), outcomes["turn"]
    assert isinstance(outcomes["edit"], IntegrityError)
    assert Document.objects.get(pk=document.pk).content == factories.TEXT
    kb = DocumentQuote.objects.get(message=message)
    assert kb.passage_sha256 == passage_sha256(factories.TEXT[kb.source_offset_start : kb.source_offset_end])
