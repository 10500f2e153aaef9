"""The chat domain schema: table names, and each database rule tested twice
(``full_clean()`` raises ``ValidationError``; a direct insert raises ``IntegrityError``)."""

from __future__ import annotations

import uuid
from collections.abc import Callable
from typing import Any

import pytest
from django.core.exceptions import ValidationError
from django.db import IntegrityError, connection, transaction
from django.db.models import Model

from chats.models import CaselawOpinion, DocumentQuote, Message, MessageToolSource, OpinionQuote, Project
from chats.record import purging
from tests import factories

pytestmark = pytest.mark.django_db

CHAT_TABLES = {
    "projects",
    "project_members",  # the members many-to-many of projects
    "project_invitations",  # one-time links to join a matter (chats.invitations)
    "chats",
    "messages",
    "documents",
    "document_passages",  # a document's passages, made once (chats.passages)
    "matter_terms",  # a matter's passages per word (chats.passages)
    "caselaw_opinions",
    "message_citations",
    "message_caselaw_citations",
    "message_tool_sources",
    "message_case_citations",
    "message_statute_citations",  # a turn's statute citations and quotes (chats.StatuteCitation)
    "turn_rate_counts",  # the turn rate's counts (chats.throttles)
}


def test_chats_migration_creates_exactly_the_named_tables() -> None:
    from django.apps import apps

    chat_models = list(apps.get_app_config("chats").get_models())
    tables = {m._meta.db_table for m in chat_models}
    tables |= {f.m2m_db_table() for m in chat_models for f in m._meta.local_many_to_many}
    assert tables == CHAT_TABLES
    assert set(connection.introspection.table_names()) >= CHAT_TABLES


@pytest.mark.parametrize(
    "table", ["message_citations", "message_caselaw_citations", "message_tool_sources", "message_case_citations"]
)
def test_per_turn_tables_are_indexed_on_message_id(table: str) -> None:
    with connection.cursor() as cursor:
        constraints = connection.introspection.get_constraints(cursor, table)
    assert any(c["index"] and c["columns"] == ["message_id"] for c in constraints.values())


def _kb_citation(**overrides: Any) -> DocumentQuote:
    return factories.DocumentQuoteFactory.build(
        message=factories.MessageFactory(), document=factories.DocumentFactory(), **overrides
    )


def _caselaw_citation(**overrides: Any) -> OpinionQuote:
    return factories.OpinionQuoteFactory.build(
        message=factories.MessageFactory(), opinion=factories.CaselawOpinionFactory(), **overrides
    )


def _tool_source(**overrides: Any) -> MessageToolSource:
    return factories.MessageToolSourceFactory.build(message=factories.MessageFactory(), **overrides)


def _message(**overrides: Any) -> Message:
    return factories.MessageFactory.build(chat=factories.ChatFactory(), **overrides)


def _project(**overrides: Any) -> Project:
    return factories.ProjectFactory.build(owner=factories.UserFactory(), **overrides)


TOLERANT = {"verification_method": "tolerant_match", "verification_confidence": 0.9}
ELLIPSIS = {"kind": "ellipsis", "detail": "", "quote_text": "...", "source_start": 3, "source_end": 9}
ALTERED_ROW = {"verification_method": "altered", "verification_confidence": 0.6}
FLAG = {"flag": "limited_after", "source_start": 10, "source_end": 16}


INVALID: dict[str, tuple[Callable[..., Model], dict[str, Any]]] = {
    "projects_name_not_empty": (_project, {"name": ""}),
    "messages_role_valid": (_message, {"role": "system"}),
    "messages_status_valid": (_message, {"status": "archived"}),
    "messages_usage_only_on_assistant": (_message, {"role": "user", "prompt_tokens": 12}),
    "message_citations_offset_start_non_negative": (_kb_citation, {"source_offset_start": -1}),
    "message_citations_offsets_ordered": (_kb_citation, {"source_offset_start": 10, "source_offset_end": 5}),
    # A method the ledger cannot hold for a quote: it would be refused there, so it is refused here.
    "message_citations_method_known": (_kb_citation, {"verification_method": "provenance"}),
    "message_citations_confidence_range": (_kb_citation, {"verification_confidence": 1.001}),
    "message_caselaw_citations_offset_start_non_negative": (_caselaw_citation, {"source_offset_start": -3}),
    "message_caselaw_citations_offsets_ordered": (
        _caselaw_citation,
        {"source_offset_start": 9, "source_offset_end": 2},
    ),
    "message_caselaw_citations_method_known": (_caselaw_citation, {"verification_method": ""}),
    "message_caselaw_citations_confidence_range": (_caselaw_citation, {"verification_confidence": -0.1}),
    "message_tool_sources_kind_not_empty": (_tool_source, {"source_kind": ""}),
    # Alterations are a list, and only a tolerant match has any.
    "message_citations_alterations_array": (_kb_citation, {**TOLERANT, "alterations": {"kind": "ellipsis"}}),
    "message_citations_alterations_only_tolerant": (_kb_citation, {"alterations": [ELLIPSIS]}),
    "message_caselaw_citations_alterations_array": (_caselaw_citation, {**TOLERANT, "alterations": "[]"}),
    "message_citations_altered_confidence_capped": (_kb_citation, {**ALTERED_ROW, "verification_confidence": 0.9}),
    "message_caselaw_citations_context_flags_array": (_caselaw_citation, {**ALTERED_ROW, "context_flags": {}}),
    "message_citations_context_flags_only_altered": (_kb_citation, {**TOLERANT, "context_flags": [FLAG]}),
    "message_caselaw_citations_alterations_only_tolerant": (
        _caselaw_citation,
        {**factories.FAILED_CLAIM, "unverified_reason": "not found in the opinion", "alterations": [ELLIPSIS]},
    ),
}


@pytest.mark.parametrize("constraint", sorted(INVALID))
def test_full_clean_rejects(constraint: str) -> None:
    build, overrides = INVALID[constraint]
    instance = build(**overrides)
    with pytest.raises(ValidationError) as excinfo:
        instance.full_clean()
    assert constraint in str(excinfo.value.error_dict) or excinfo.value.messages


@pytest.mark.parametrize("constraint", sorted(INVALID))
def test_database_rejects_direct_insert(constraint: str) -> None:
    build, overrides = INVALID[constraint]
    instance = build(**overrides)
    expected = constraint if connection.vendor == "postgresql" else None
    with pytest.raises(IntegrityError, match=expected), transaction.atomic():
        instance.save()


def test_valid_rows_pass_full_clean() -> None:
    for build in (_project, _message, _kb_citation, _caselaw_citation, _tool_source):
        build().full_clean()


@pytest.mark.parametrize(
    ("build", "overrides", "message"),
    [
        (_kb_citation, {**TOLERANT, "alterations": {"kind": "ellipsis"}}, "alterations must be a JSON array."),
        (_caselaw_citation, {**TOLERANT, "alterations": "[]"}, "alterations must be a JSON array."),
        (_kb_citation, {"alterations": [ELLIPSIS]}, "Only a tolerant or altered match has alterations."),
        (_caselaw_citation, {"alterations": [ELLIPSIS]}, "Only a tolerant or altered match has alterations."),
        (_kb_citation, {**TOLERANT, "context_flags": {"flag": "limited_after"}}, "context_flags must be a JSON array."),
        (_caselaw_citation, {**TOLERANT, "context_flags": [FLAG]}, "Only an altered match has context flags."),
        (
            _kb_citation,
            {**ALTERED_ROW, "verification_confidence": 0.9},
            "An altered quote's confidence must be at most 0.6.",
        ),
    ],
)
def test_full_clean_names_the_alterations_rule(build: Callable[..., Model], overrides: Any, message: str) -> None:
    with pytest.raises(ValidationError) as excinfo:
        build(**overrides).full_clean()
    assert message in excinfo.value.messages


def test_an_altered_match_lists_its_alterations_and_context_flags() -> None:
    _kb_citation(**ALTERED_ROW, alterations=[ELLIPSIS], context_flags=[FLAG]).full_clean()
    _caselaw_citation(**ALTERED_ROW, context_flags=[FLAG]).full_clean()  # an exact quote with a limiting edge


def test_a_tolerant_match_lists_its_alterations_and_the_default_is_none() -> None:
    _kb_citation(**TOLERANT, alterations=[ELLIPSIS]).full_clean()
    _caselaw_citation(**TOLERANT, alterations=[]).full_clean()
    # A row written without them (the database default, for raw SQL writers) has none.
    row = _kb_citation()
    row.save()
    copy_id = uuid.uuid4()
    with connection.cursor() as cursor:
        cursor.execute(
            "INSERT INTO message_citations (id, message_id, document_id, quote, source_offset_start, "
            "source_offset_end, verification_method, verification_confidence, created_at) "
            "SELECT %s, message_id, document_id, quote, source_offset_start, source_offset_end, "
            "verification_method, verification_confidence, created_at FROM message_citations WHERE id = %s",
            [copy_id.hex if connection.vendor == "sqlite" else copy_id, row.pk.hex],
        )
    assert DocumentQuote.objects.get(pk=copy_id).alterations == []


def test_confidence_bounds_are_inclusive() -> None:
    _kb_citation(verification_confidence=0.0).full_clean()
    _caselaw_citation(verification_confidence=1.0).full_clean()


def test_opinion_unique_per_provider() -> None:
    factories.CaselawOpinionFactory(provider="courtlistener", opinion_id="42")
    factories.CaselawOpinionFactory(provider="local", opinion_id="42")  # other provider: fine
    duplicate = factories.CaselawOpinionFactory.build(provider="courtlistener", opinion_id="42")
    with pytest.raises(ValidationError):
        duplicate.full_clean()
    with pytest.raises(IntegrityError), transaction.atomic():
        duplicate.save()


def test_deleting_a_message_cascades_to_its_rows() -> None:
    message = factories.MessageFactory.create()
    factories.DocumentQuoteFactory(message=message)
    factories.OpinionQuoteFactory(message=message)
    factories.MessageToolSourceFactory(message=message)
    with purging(message.chat.project_id):  # messages leave only with their matter's purge
        message.delete()
    assert DocumentQuote.objects.count() == 0
    assert OpinionQuote.objects.count() == 0
    assert MessageToolSource.objects.count() == 0
    assert CaselawOpinion.objects.count() == 1  # the materialized source stays


def test_a_cited_document_cannot_be_deleted_alone_but_goes_with_its_matter() -> None:
    from django.db.models import RestrictedError

    citation = factories.DocumentQuoteFactory.create()
    assert citation.document is not None
    with pytest.raises(RestrictedError):
        citation.document.delete()
    project = citation.message.chat.project
    assert project is not None
    with purging(project.pk):  # a matter with turns goes only through its purge
        project.delete()
    assert not DocumentQuote.objects.exists()
