"""Migrations that tighten a rule check existing rows first and stop, changing nothing, if any would break it."""

from __future__ import annotations

import importlib
import uuid
from collections.abc import Iterator

import pytest
from django.db import connection, transaction
from django.db.migrations.executor import MigrationExecutor

from tests import factories

BEFORE = ("chats", "0003_messages_created_idx")
TIGHTENING = ("chats", "0004_quote_rows_known_methods_and_float_confidence")
Refused = importlib.import_module(f"chats.migrations.{TIGHTENING[1]}").RowsWouldViolateNewConstraints


def _migrate(*targets: tuple[str, str]) -> MigrationExecutor:
    executor = MigrationExecutor(connection)
    executor.migrate(list(targets))
    return MigrationExecutor(connection)  # a fresh loader sees what is applied now


@pytest.fixture
def back_to_latest() -> Iterator[None]:
    """Every app migrated to its latest again after the test, whatever it migrated back to."""
    try:
        yield
    finally:
        executor = MigrationExecutor(connection)
        _migrate(*executor.loader.graph.leaf_nodes())


def _constraints(table: str) -> set[str]:
    with connection.cursor() as cursor:
        return set(connection.introspection.get_constraints(cursor, table))


@pytest.mark.django_db(transaction=True)
@pytest.mark.usefixtures("back_to_latest")
def test_the_quote_rows_migration_refuses_rows_it_cannot_accept_and_applies_nothing() -> None:
    # Given, before the migration, a KB quote whose method the ledger cannot hold (allowed until then)
    with transaction.atomic():  # a finalized turn and its row, in one transaction as a finalize writes them
        citation = factories.DocumentQuoteFactory.create()  # made with today's models, then migrated back
    _migrate(BEFORE)
    bad_id = uuid.uuid4()
    with connection.cursor() as cursor:
        cursor.execute(
            "INSERT INTO message_citations (id, message_id, document_id, quote, source_offset_start, "
            "source_offset_end, verification_method, verification_confidence, created_at) "
            "SELECT %s, message_id, document_id, quote, 0, 1, 'provenance', 1, created_at "
            "FROM message_citations WHERE id = %s",
            [bad_id.hex if connection.vendor == "sqlite" else bad_id, citation.pk.hex],
        )

    # When the migration runs, it stops with a clear message naming the offending row
    with pytest.raises(Refused, match=r"chats\.0004 not applied") as refused:
        _migrate(TIGHTENING)
    assert str(bad_id) in str(refused.value) or bad_id.hex in str(refused.value)
    assert "message_citations: 1 row(s)" in str(refused.value)

    # Then nothing of it is applied: not recorded, no new constraint, the old one still there
    executor = MigrationExecutor(connection)
    assert TIGHTENING not in executor.loader.applied_migrations
    assert "message_citations_method_known" not in _constraints("message_citations")
    assert "message_citations_method_not_empty" in _constraints("message_citations")

    # And once the row is corrected, it applies
    with connection.cursor() as cursor:
        cursor.execute(
            "UPDATE message_citations SET verification_method = 'exact_match' WHERE verification_method = 'provenance'"
        )
    executor = _migrate(TIGHTENING)
    assert TIGHTENING in executor.loader.applied_migrations
    assert "message_citations_method_known" in _constraints("message_citations")


def _columns(table: str) -> set[str]:
    with connection.cursor() as cursor:
        return {column.name for column in connection.introspection.get_table_description(cursor, table)}


@pytest.mark.django_db(transaction=True)
@pytest.mark.usefixtures("back_to_latest")
def test_the_alterations_migration_goes_back_and_forth_and_existing_quotes_get_none() -> None:
    # Given a tolerant quote stored before alterations were recorded
    with transaction.atomic():  # a finalized turn and its row, in one transaction as a finalize writes them
        citation = factories.OpinionQuoteFactory.create(
            verification_method="tolerant_match", verification_confidence=0.9
        )
    _migrate(("chats", "0010_message_case_citations"))
    assert "alterations" not in _columns("message_caselaw_citations")
    assert "message_caselaw_citations_alterations_array" not in _constraints("message_caselaw_citations")

    # When the migration runs again
    _migrate(("chats", "0011_quote_rows_alterations"))

    # Then the column and its rules are back, and the existing quote lists no alterations
    for table in ("message_citations", "message_caselaw_citations"):
        assert "alterations" in _columns(table)
        assert {f"{table}_alterations_array", f"{table}_alterations_only_tolerant"} <= _constraints(table)
    with connection.cursor() as cursor:
        cursor.execute("SELECT alterations FROM message_caselaw_citations WHERE id = %s", [citation.pk.hex])
        (stored,) = cursor.fetchone()
    assert stored in ([], "[]")
