"""The citation ledger: what ``assemble()`` writes, what the database refuses, idempotency and races,
query counts, rows it skips, the ``post_finalize`` receiver and deletes.

Each ledger rule is tested three ways: ``full_clean()`` raises ``ValidationError``, an ORM ``save()``
raises ``IntegrityError``, and a raw SQL ``INSERT`` (bypassing Django) raises ``IntegrityError``.
"""

from __future__ import annotations

import logging
import re
import threading
import time
from collections import Counter
from collections.abc import Callable
from typing import Any, NamedTuple

import pytest
from django.core.exceptions import ValidationError
from django.db import IntegrityError, connection, transaction

from chats.models import (
    CaseCitation,
    Chat,
    DocumentQuote,
    Message,
    MessageToolSource,
    OpinionQuote,
    Project,
)
from chats.record import purging
from chats.signals import post_finalize
from citations import ledger
from citations.backfill import backfill_ledger
from citations.models import PROVENANCE, SOURCE_FIELDS, CitationLedgerEntry
from tests import factories

DISPATCH_UID = "citations.assemble_ledger_on_finalize"

SourceRow = DocumentQuote | OpinionQuote | MessageToolSource | CaseCitation

# The columns an entry mirrors from its source row (everything but its own id and created_at).
MIRRORED_FIELDS = (
    "project_id",
    "chat_id",
    "message_id",
    "source_kind",
    "message_citation_id",
    "message_caselaw_citation_id",
    "message_tool_source_id",
    "message_case_citation_id",
    "verification_status",
    "confidence",
    "provider",
    "retrieved_at",
    "treatment_id",
)


def expected_entry(row: SourceRow) -> dict[str, Any]:
    """The ledger entry ``row`` should get, per the issue's mapping (an oracle independent of ``ledger.py``).

    ``row`` is re-read so that the comparison is against what the database holds.
    """
    row = type(row).objects.select_related("message__chat").get(pk=row.pk)
    chat = row.message.chat
    entry: dict[str, Any] = {
        "project_id": chat.project_id,
        "chat_id": chat.pk,
        "message_id": row.message_id,
        "message_citation_id": None,
        "message_caselaw_citation_id": None,
        "message_tool_source_id": None,
        "message_case_citation_id": None,
        "treatment_id": None,
    }
    if isinstance(row, DocumentQuote):
        return entry | {
            "source_kind": "kb_document",
            "message_citation_id": row.pk,
            "verification_status": row.verification_method,
            "confidence": row.verification_confidence,
            "provider": None,
            "retrieved_at": None,
        }
    if isinstance(row, OpinionQuote):
        return entry | {
            "source_kind": "caselaw",
            "message_caselaw_citation_id": row.pk,
            "verification_status": row.verification_method,
            "confidence": row.verification_confidence,
            "provider": row.opinion.provider if row.opinion is not None else None,
            "retrieved_at": row.created_at,
        }
    if isinstance(row, CaseCitation):
        return entry | {
            "source_kind": "caselaw",
            "message_case_citation_id": row.pk,
            "verification_status": row.status,
            "confidence": None,
            "provider": row.provider or None,
            "retrieved_at": row.created_at,
        }
    return entry | {
        "source_kind": row.source_kind,
        "message_tool_source_id": row.pk,
        "verification_status": "provenance",
        "confidence": None,
        "provider": row.provider,
        "retrieved_at": row.created_at,
    }


def mirrored(entry: CitationLedgerEntry) -> dict[str, Any]:
    return {name: getattr(entry, name) for name in MIRRORED_FIELDS}


def entries_by_source(message: Message) -> dict[Any, CitationLedgerEntry]:
    return {e.source_row_id: e for e in CitationLedgerEntry.objects.filter(message=message)}


class Turn(NamedTuple):
    message: Message
    kb: DocumentQuote
    caselaw: OpinionQuote
    tool: MessageToolSource


def make_turn(message: Message | None = None) -> Turn:
    """A finalized assistant message with one row in each of the three per-turn tables, with
    non-default verification values so that a mapping that ignored them would be caught."""
    with transaction.atomic():  # a turn and its rows, in one transaction as a finalize writes them
        message = message or factories.MessageFactory.create()
        kb = factories.DocumentQuoteFactory.create(
            message=message, verification_method="tolerant_match", verification_confidence=0.87
        )
        caselaw = factories.OpinionQuoteFactory.create(
            message=message,
            opinion=factories.CaselawOpinionFactory.create(provider="courtlistener"),
            verification_method="tolerant_match",
            verification_confidence=0.95,
        )
        tool = factories.MessageToolSourceFactory.create(message=message, provider="courtlistener")
    return Turn(message, kb, caselaw, tool)


# --- What assemble() writes --------------------------------------------------------------------------------------


@pytest.mark.django_db
def test_assemble_mirrors_each_checked_case_citation() -> None:
    # Given a turn whose answer cited a real case under another name, a case that does not exist, and a statute
    message = factories.MessageFactory.create()
    mismatch = factories.CaseCitationFactory.create(
        message=message,
        opinion=factories.CaselawOpinionFactory.create(provider="courtlistener"),
        case_name="Smith v. Jones",
        status="name_mismatch",
        provider="courtlistener",
    )
    missing = factories.CaseCitationFactory.create(
        message=message, opinion=None, citation="999 U.S. 999", status="not_found", detail="no case"
    )
    statute = factories.CaseCitationFactory.create(
        message=message, opinion=None, kind="statute", citation="42 U.S.C. 1983", status="unchecked", provider=""
    )

    # When the ledger is assembled, then each checked citation has one caselaw entry carrying the check's status
    assert ledger.assemble(message) == 3
    entries = entries_by_source(message)
    for row in (mismatch, missing, statute):
        assert mirrored(entries[row.pk]) == expected_entry(row)
    assert {e.verification_status for e in entries.values()} == {"name_mismatch", "not_found", "unchecked"}
    assert entries[statute.pk].provider is None


@pytest.mark.django_db
def test_assemble_mirrors_each_source_row() -> None:
    # Given a turn with a KB quote, a caselaw quote, a caselaw tool source and an MCP tool source
    turn = make_turn()
    mcp = factories.MessageToolSourceFactory.create(
        message=turn.message, source_kind="mcp", tool="mcp:westlaw.search", provider=None
    )
    # When the ledger is assembled
    created = ledger.assemble(turn.message)
    # Then each row has one entry mirroring it, and only those
    entries = entries_by_source(turn.message)
    assert created == 4
    assert set(entries) == {turn.kb.pk, turn.caselaw.pk, turn.tool.pk, mcp.pk}
    for row in (turn.kb, turn.caselaw, turn.tool, mcp):
        assert mirrored(entries[row.pk]) == expected_entry(row)
    assert entries[mcp.pk].source_kind == "mcp"
    assert turn.message.chat.project_id is not None


@pytest.mark.django_db
def test_a_matter_less_chat_gives_entries_without_a_project() -> None:
    chat = factories.ChatFactory.create(project=None)
    message = factories.MessageFactory.create(chat=chat)
    tool = factories.MessageToolSourceFactory.create(message=message)
    caselaw = factories.OpinionQuoteFactory.create(message=message)

    assert ledger.assemble(message) == 2

    entries = entries_by_source(message)
    assert {e.project_id for e in entries.values()} == {None}
    assert mirrored(entries[tool.pk]) == expected_entry(tool)
    assert mirrored(entries[caselaw.pk]) == expected_entry(caselaw)


@pytest.mark.django_db
@pytest.mark.parametrize("writer", ["assemble", "backfill"])
def test_entries_store_created_at_as_the_orm_does(writer: str) -> None:
    # A raw insert must store its timestamp as the ORM would, or ORM lookups on it silently miss
    # (on SQLite an aware datetime passed as is was stored with a "+00:00" suffix).
    turn = make_turn()
    if writer == "assemble":
        ledger.assemble(turn.message)
    else:
        backfill_ledger()
    entry = CitationLedgerEntry.objects.filter(message=turn.message).first()
    assert entry is not None

    assert CitationLedgerEntry.objects.filter(pk=entry.pk, created_at=entry.created_at).exists()
    assert CitationLedgerEntry.objects.filter(pk=entry.pk, created_at__lte=entry.created_at).exists()
    assert CitationLedgerEntry.objects.filter(pk=entry.pk, created_at__date=entry.created_at.date()).exists()


@pytest.mark.django_db
def test_assemble_only_touches_the_given_message() -> None:
    turn = make_turn()
    other = make_turn()

    assert ledger.assemble(turn.message) == 3

    assert not CitationLedgerEntry.objects.filter(message=other.message).exists()


@pytest.mark.django_db
def test_assemble_of_a_turn_without_rows_writes_nothing() -> None:
    message = factories.MessageFactory.create()

    assert ledger.assemble(message) == 0
    assert not CitationLedgerEntry.objects.exists()


# --- What the database refuses -----------------------------------------------------------------------------------


def _kb_entry(**overrides: Any) -> CitationLedgerEntry:
    """An unsaved, valid entry for a fresh KB quote, then ``overrides`` set on it as they are."""
    entry = factories.CitationLedgerEntryFactory.build(message_citation=factories.DocumentQuoteFactory.create())
    for name, value in overrides.items():
        setattr(entry, name, value)
    return entry


def _caselaw_entry(**overrides: Any) -> CitationLedgerEntry:
    entry = factories.CitationLedgerEntryFactory.build(
        caselaw=True, message_caselaw_citation=factories.OpinionQuoteFactory.create()
    )
    for name, value in overrides.items():
        setattr(entry, name, value)
    return entry


def _tool_entry(**overrides: Any) -> CitationLedgerEntry:
    entry = factories.CitationLedgerEntryFactory.build(
        tool_source=True, message_tool_source=factories.MessageToolSourceFactory.create(source_kind="mcp")
    )
    for name, value in overrides.items():
        setattr(entry, name, value)
    return entry


def _case_entry(**overrides: Any) -> CitationLedgerEntry:
    entry = factories.CitationLedgerEntryFactory.build(
        case_citation=True, message_case_citation=factories.CaseCitationFactory.create()
    )
    for name, value in overrides.items():
        setattr(entry, name, value)
    return entry


def _duplicate_of(**traits: bool) -> Callable[[], CitationLedgerEntry]:
    def make() -> CitationLedgerEntry:
        existing = factories.CitationLedgerEntryFactory.create(**traits)
        return factories.CitationLedgerEntryFactory.build(
            **traits,
            message_citation=existing.message_citation,
            message_caselaw_citation=existing.message_caselaw_citation,
            message_tool_source=existing.message_tool_source,
            message_case_citation=existing.message_case_citation,
        )

    return make


def _unique_violation(constraint: str, column: str) -> str:
    # PostgreSQL names the constraint; SQLite names the table.column of the unique index.
    return rf"{constraint}|citation_ledger_entry\.{column}"


class Invalid(NamedTuple):
    make: Callable[[], CitationLedgerEntry]
    # What the database error names (a regex): the violated constraint (on SQLite, a unique index's column).
    database_error: str
    # The message full_clean() must report.
    clean_error: str


EXACTLY_ONE = (
    "Exactly one of message_citation, message_caselaw_citation, message_tool_source, message_case_citation and "
    "message_statute_citation must be set."
)

CONFIDENCE_EXACTLY_WHEN_VERIFIED = (
    "Confidence must be empty for 'provenance', 'unverified' and case-citation entries, and set for every "
    "verified quote."
)
CASE_STATUS = (
    "A case-citation entry has the check's status (verified, name_mismatch, pin_mismatch, not_found, ambiguous, "
    "unchecked), "
    "and only a case-citation entry has one (but 'unchecked', also a quote's)."
)

INVALID: dict[str, Invalid] = {
    "no_source": Invalid(
        lambda: _kb_entry(message_citation=None), "citation_ledger_entry_exactly_one_source", EXACTLY_ONE
    ),
    "two_sources": Invalid(
        # Status and confidence fit a tool source, the kind fits a KB quote: "exactly one" is broken, and a KB
        # quote's entry with a tool source's status (the database names whichever it checks first: PostgreSQL goes
        # by name, SQLite by the order the table was last rebuilt with).
        lambda: _kb_entry(
            message_tool_source=factories.MessageToolSourceFactory.create(),
            verification_status=PROVENANCE,
            confidence=None,
        ),
        "citation_ledger_entry_exactly_one_source|citation_ledger_entry_quote_status_known",
        EXACTLY_ONE,
    ),
    "three_sources": Invalid(
        lambda: _kb_entry(
            message_caselaw_citation=factories.OpinionQuoteFactory.create(),
            message_tool_source=factories.MessageToolSourceFactory.create(),
            verification_status=PROVENANCE,
            confidence=None,
        ),
        # A KB and a caselaw quote at once also breaks a kind rule; the database may report either.
        "citation_ledger_entry_exactly_one_source|citation_ledger_entry_caselaw_kind",
        EXACTLY_ONE,
    ),
    "confidence_below_zero": Invalid(
        lambda: _kb_entry(confidence=-0.1),
        "citation_ledger_entry_confidence_range",
        "Confidence must be empty or within 0..1.",
    ),
    "confidence_above_one": Invalid(
        lambda: _caselaw_entry(confidence=1.1),
        "citation_ledger_entry_confidence_range",
        "Confidence must be empty or within 0..1.",
    ),
    "kb_quote_with_caselaw_kind": Invalid(
        lambda: _kb_entry(source_kind="caselaw"),
        "citation_ledger_entry_kb_kind",
        "An entry for a document quote must have source_kind 'kb_document'.",
    ),
    "caselaw_quote_with_kb_kind": Invalid(
        lambda: _caselaw_entry(source_kind="kb_document"),
        "citation_ledger_entry_caselaw_kind",
        "An entry for an opinion quote must have source_kind 'caselaw'.",
    ),
    "kb_quote_as_provenance": Invalid(
        lambda: _kb_entry(verification_status=PROVENANCE, confidence=None),
        "citation_ledger_entry_provenance_only_for_tool_sources",
        "Only tool-source entries may have status 'provenance'.",
    ),
    "caselaw_quote_as_provenance": Invalid(
        lambda: _caselaw_entry(verification_status=PROVENANCE, confidence=None),
        "citation_ledger_entry_provenance_only_for_tool_sources",
        "Only tool-source entries may have status 'provenance'.",
    ),
    "tool_source_with_confidence": Invalid(
        lambda: _tool_entry(confidence=0.5),
        "citation_ledger_entry_confidence_exactly_when_verified",
        CONFIDENCE_EXACTLY_WHEN_VERIFIED,
    ),
    "tool_source_as_verified_quote": Invalid(
        lambda: _tool_entry(verification_status="exact_match", confidence=1.0),
        "citation_ledger_entry_tool_source_is_provenance",
        "A tool-source entry must have status 'provenance'.",
    ),
    "four_sources": Invalid(
        lambda: _case_entry(
            message_citation=factories.DocumentQuoteFactory.create(),
            message_caselaw_citation=factories.OpinionQuoteFactory.create(),
            message_tool_source=factories.MessageToolSourceFactory.create(),
        ),
        "citation_ledger_entry_exactly_one_source|citation_ledger_entry_kb_kind|citation_ledger_entry_case_citation",
        EXACTLY_ONE,
    ),
    "case_citation_with_kb_kind": Invalid(
        lambda: _case_entry(source_kind="kb_document"),
        "citation_ledger_entry_case_citation_kind",
        "An entry for a case citation must have source_kind 'caselaw'.",
    ),
    "case_citation_with_a_quote_status": Invalid(
        lambda: _case_entry(verification_status="exact_match", confidence=1.0),
        "citation_ledger_entry_case_citation_status",
        CASE_STATUS,
    ),
    "quote_with_a_case_status": Invalid(
        lambda: _caselaw_entry(verification_status="name_mismatch", confidence=None),
        "citation_ledger_entry_case_citation_status",
        CASE_STATUS,
    ),
    "quote_with_an_unknown_status": Invalid(
        lambda: _kb_entry(verification_status="paraphrased", confidence=0.5),
        "citation_ledger_entry_quote_status_known",
        "A quote's entry has a quote's status (exact_match, tolerant_match, altered, unverified, unchecked).",
    ),
    # A quote nothing could check is 'unchecked', like a case citation: no other kind of entry may be.
    "tool_source_unchecked": Invalid(
        lambda: _tool_entry(verification_status="unchecked", confidence=None),
        "citation_ledger_entry_tool_source_is_provenance",
        "A tool-source entry must have status 'provenance'.",
    ),
    "unchecked_quote_with_a_score": Invalid(
        lambda: _kb_entry(verification_status="unchecked", confidence=0.5),
        "citation_ledger_entry_confidence_exactly_when_verified",
        "Confidence must be empty for 'provenance', 'unverified' and case-citation entries, and set for every "
        "verified quote.",
    ),
    "altered_quote_scored_above_its_cap": Invalid(
        lambda: _caselaw_entry(verification_status="altered", confidence=0.9),
        "citation_ledger_entry_altered_confidence_capped",
        "An altered quote's confidence must be at most 0.6.",
    ),
    "case_citation_with_confidence": Invalid(
        lambda: _case_entry(confidence=0.9),
        "citation_ledger_entry_confidence_exactly_when_verified",
        CONFIDENCE_EXACTLY_WHEN_VERIFIED,
    ),
    "second_entry_for_a_case_citation": Invalid(
        _duplicate_of(case_citation=True),
        _unique_violation("citation_ledger_entry_case_citation_uniq", "message_case_citation_id"),
        "This case citation already has a ledger entry.",
    ),
    "verified_quote_without_confidence": Invalid(
        lambda: _kb_entry(confidence=None),
        "citation_ledger_entry_confidence_exactly_when_verified",
        CONFIDENCE_EXACTLY_WHEN_VERIFIED,
    ),
    "unverified_claim_with_confidence": Invalid(
        lambda: _caselaw_entry(verification_status="unverified", confidence=0.4),
        "citation_ledger_entry_confidence_exactly_when_verified",
        CONFIDENCE_EXACTLY_WHEN_VERIFIED,
    ),
    "empty_kind": Invalid(
        # full_clean() stops at the field (blank=False) before evaluating the constraint on it.
        lambda: _tool_entry(source_kind=""),
        "citation_ledger_entry_status_and_kind_not_empty",
        "This field cannot be blank.",
    ),
    "second_entry_for_a_kb_quote": Invalid(
        _duplicate_of(),
        _unique_violation("citation_ledger_entry_message_citation_uniq", "message_citation_id"),
        "This document quote already has a ledger entry.",
    ),
    "second_entry_for_a_caselaw_quote": Invalid(
        _duplicate_of(caselaw=True),
        _unique_violation("citation_ledger_entry_caselaw_citation_uniq", "message_caselaw_citation_id"),
        "This opinion quote already has a ledger entry.",
    ),
    "second_entry_for_a_tool_source": Invalid(
        _duplicate_of(tool_source=True),
        _unique_violation("citation_ledger_entry_tool_source_uniq", "message_tool_source_id"),
        "This tool source already has a ledger entry.",
    ),
}

VALID: dict[str, Callable[[], CitationLedgerEntry]] = {
    "kb_quote": _kb_entry,
    "caselaw_quote": _caselaw_entry,
    "tool_source": _tool_entry,
    "confidence_zero": lambda: _kb_entry(confidence=0.0),
    "confidence_one": lambda: _caselaw_entry(confidence=1.0),
    "unverified_kb_claim": lambda: _kb_entry(verification_status="unverified", confidence=None),
    "case_citation": _case_entry,
    "case_citation_name_mismatch": lambda: _case_entry(verification_status="name_mismatch"),
    "unverified_caselaw_claim": lambda: _caselaw_entry(verification_status="unverified", confidence=None),
}


def raw_insert(entry: CitationLedgerEntry) -> None:
    """INSERT ``entry`` with plain SQL, bypassing the ORM (values prepared as the backend stores them)."""
    fields = CitationLedgerEntry._meta.concrete_fields
    columns = ", ".join(connection.ops.quote_name(f.column) for f in fields)
    placeholders = ", ".join(["%s"] * len(fields))
    values = [f.get_db_prep_save(getattr(entry, f.attname), connection) for f in fields]
    with transaction.atomic(), connection.cursor() as cursor:
        cursor.execute(f"INSERT INTO citation_ledger_entry ({columns}) VALUES ({placeholders})", values)


@pytest.mark.django_db
@pytest.mark.parametrize("case", sorted(INVALID))
def test_full_clean_rejects(case: str) -> None:
    invalid = INVALID[case]
    entry = invalid.make()
    with pytest.raises(ValidationError) as excinfo:
        entry.full_clean()
    assert invalid.clean_error in excinfo.value.messages


@pytest.mark.django_db
@pytest.mark.parametrize("case", sorted(INVALID))
def test_orm_save_is_refused_by_the_database(case: str) -> None:
    invalid = INVALID[case]
    entry = invalid.make()
    with pytest.raises(IntegrityError, match=invalid.database_error), transaction.atomic():
        entry.save()


@pytest.mark.django_db
@pytest.mark.parametrize("case", sorted(INVALID))
def test_raw_sql_insert_is_refused_by_the_database(case: str) -> None:
    invalid = INVALID[case]
    entry = invalid.make()
    with pytest.raises(IntegrityError, match=invalid.database_error):
        raw_insert(entry)


@pytest.mark.django_db
@pytest.mark.parametrize("case", sorted(VALID))
def test_valid_entries_pass_every_check(case: str) -> None:
    # The negative tests above mean something only if the same builders, unaltered, are accepted.
    entry = VALID[case]()
    entry.full_clean()
    raw_insert(entry)
    assert CitationLedgerEntry.objects.filter(pk=entry.pk).exists()
    # and through the ORM (a second entry, for a row of its own: entries are never deleted)
    other = VALID[case]()
    other.save(force_insert=True)
    assert CitationLedgerEntry.objects.filter(pk=other.pk).count() == 1


# --- Idempotency, races and query counts -------------------------------------------------------------------------


@pytest.mark.django_db
def test_assemble_twice_creates_nothing_new() -> None:
    turn = make_turn()

    assert ledger.assemble(turn.message) == 3
    first = set(CitationLedgerEntry.objects.values_list("id", flat=True))
    assert ledger.assemble(turn.message) == 0

    assert set(CitationLedgerEntry.objects.values_list("id", flat=True)) == first


@pytest.mark.django_db
@pytest.mark.parametrize("rows_per_kind", [1, 50])
def test_assemble_runs_a_constant_number_of_queries(
    rows_per_kind: int, django_assert_num_queries: Callable[..., Any]
) -> None:
    message = factories.MessageFactory.create()
    document = factories.DocumentFactory.create(project=message.chat.project)
    opinion = factories.CaselawOpinionFactory.create()
    factories.DocumentQuoteFactory.create_batch(rows_per_kind, message=message, document=document)
    factories.OpinionQuoteFactory.create_batch(rows_per_kind, message=message, opinion=opinion)
    factories.MessageToolSourceFactory.create_batch(rows_per_kind, message=message)
    factories.CaseCitationFactory.create_batch(rows_per_kind, message=message)

    # Whatever the row count: one INSERT ... SELECT per source table, plus the savepoint around them (two
    # queries: SAVEPOINT and RELEASE).
    with django_assert_num_queries(len(ledger.SOURCE_MAPPINGS) + 2):
        created = ledger.assemble(message)

    assert created == 4 * rows_per_kind
    assert CitationLedgerEntry.objects.filter(message=message).count() == 4 * rows_per_kind


@pytest.mark.postgres
@pytest.mark.django_db
def test_assemble_inserts_in_the_lock_order_every_writer_uses() -> None:
    # Given a turn with several rows of each kind (random UUIDs: creation order is not id order)
    message = factories.MessageFactory.create()
    document = factories.DocumentFactory.create(project=message.chat.project)
    kb = factories.DocumentQuoteFactory.create_batch(5, message=message, document=document)
    caselaw = factories.OpinionQuoteFactory.create_batch(5, message=message)
    tool = factories.MessageToolSourceFactory.create_batch(5, message=message)

    ledger.assemble(message)

    # Then the heap holds the entries in insertion order (ctid, on a table with no deletes): mapping order,
    # then source id, the order the backfill also inserts in, so that two writers cannot deadlock.
    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT coalesce(message_citation_id, message_caselaw_citation_id, message_tool_source_id) "
            "FROM citation_ledger_entry WHERE message_id = %s ORDER BY ctid",
            [message.pk],
        )
        inserted = [row[0] for row in cursor.fetchall()]
    assert inserted == [row.pk for rows in (kb, caselaw, tool) for row in sorted(rows, key=lambda r: str(r.pk))]


@pytest.mark.postgres
@pytest.mark.django_db(transaction=True)
def test_concurrent_assembly_writes_one_entry_per_row() -> None:
    # Given a committed turn with several rows of each kind
    with transaction.atomic():  # a turn and its rows, in one transaction as a finalize writes them
        message = factories.MessageFactory.create()
        document = factories.DocumentFactory.create(project=message.chat.project)
        factories.DocumentQuoteFactory.create_batch(20, message=message, document=document)
        factories.OpinionQuoteFactory.create_batch(20, message=message)
        factories.MessageToolSourceFactory.create_batch(20, message=message)
    barrier = threading.Barrier(2)
    created: list[int] = []
    errors: list[BaseException] = []

    def assemble_in_own_connection() -> None:
        try:
            own = Message.objects.get(pk=message.pk)
            barrier.wait(timeout=10)
            with transaction.atomic():
                created.append(ledger.assemble(own))
                # Hold the transaction open: the other thread's insert meets these uncommitted entries.
                time.sleep(0.3)
        except BaseException as exc:
            errors.append(exc)
        finally:
            connection.close()

    # When two threads assemble it at the same moment
    threads = [threading.Thread(target=assemble_in_own_connection) for _ in range(2)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=30)

    # Then neither fails, one wrote every entry, and each row has exactly one
    assert not any(thread.is_alive() for thread in threads)
    assert errors == []
    assert sorted(created) == [0, 60]
    assert CitationLedgerEntry.objects.filter(message=message).count() == 60
    assert len(entries_by_source(message)) == 60


# --- Rows the ledger cannot hold ---------------------------------------------------------------------------------
# The quote tables refuse them (tests/test_chat_models.py); rows written before those constraints are filtered
# by the mapping, so that they never make the insert fail, and counted by the backfill (tests/test_backfill.py).


@pytest.mark.django_db
@pytest.mark.usefixtures("quote_checks_off")
def test_a_quote_row_from_before_the_constraints_is_skipped_not_fatal() -> None:
    # Given a turn with a caselaw quote whose method is "provenance" (written before the quote tables' checks)
    turn = make_turn()
    odd = factories.OpinionQuoteFactory.create(message=turn.message, verification_method=PROVENANCE)
    out_of_range = factories.DocumentQuoteFactory.create(
        message=turn.message, document=turn.kb.document, verification_confidence=1.5
    )

    # When the ledger is assembled, the odd rows are skipped and the other rows still get their entries
    assert ledger.assemble(turn.message) == 3
    entries = entries_by_source(turn.message)
    assert set(entries) == {turn.kb.pk, turn.caselaw.pk, turn.tool.pk}
    assert not {odd.pk, out_of_range.pk} & set(entries)


# --- The post_finalize receiver ----------------------------------------------------------------------------------


def _ledger_receivers() -> list[Any]:
    return [r for r in post_finalize.receivers if r[0][0] == DISPATCH_UID]


@pytest.mark.django_db
def test_the_receiver_is_connected_once_under_its_dispatch_uid(monkeypatch: pytest.MonkeyPatch) -> None:
    assert post_finalize.has_listeners(Message)
    assert len(_ledger_receivers()) == 1
    calls: list[str] = []

    def counting_assemble(message: Message, **kwargs: Any) -> int:
        calls.append("assemble")
        return 0

    monkeypatch.setattr(ledger, "assemble", counting_assemble)

    def impostor(sender: type[Message], **kwargs: Any) -> None:
        calls.append("impostor")

    # Connecting again under the same uid (as a second ready() would) is a no-op: the first receiver stays.
    post_finalize.connect(impostor, sender=Message, dispatch_uid=DISPATCH_UID)
    post_finalize.send(sender=Message, message=factories.MessageFactory.build())

    assert len(_ledger_receivers()) == 1
    assert calls == ["assemble"]


@pytest.mark.django_db
def test_a_receiver_failure_is_swallowed_and_logged(
    monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    turn = make_turn()

    def broken_assemble(message: Message, **kwargs: Any) -> int:
        raise RuntimeError("ledger exploded")

    monkeypatch.setattr(ledger, "assemble", broken_assemble)

    with caplog.at_level(logging.ERROR, logger="citations.receivers"):
        post_finalize.send(sender=Message, message=turn.message)  # must not raise

    (record,) = [r for r in caplog.records if r.name == "citations.receivers" and r.levelno == logging.ERROR]
    assert str(turn.message.pk) in record.getMessage()
    assert record.exc_info is not None
    assert isinstance(record.exc_info[1], RuntimeError)
    assert Message.objects.filter(pk=turn.message.pk).exists()


@pytest.mark.django_db
def test_the_receiver_assembles_the_turn() -> None:
    turn = make_turn()

    post_finalize.send(sender=Message, message=turn.message)

    assert set(entries_by_source(turn.message)) == {turn.kb.pk, turn.caselaw.pk, turn.tool.pk}


@pytest.mark.postgres
@pytest.mark.django_db
@pytest.mark.usefixtures("ledger_refuses_every_row")
def test_a_ledger_failure_inside_an_open_transaction_leaves_it_usable(caplog: pytest.LogCaptureFixture) -> None:
    # Given a ledger table that refuses every row
    turn = make_turn()

    with caplog.at_level(logging.ERROR, logger="citations.receivers"), transaction.atomic():
        written_before = factories.ProjectFactory.create(name="written before the signal")
        # When the signal is sent inside the caller's open transaction and the ledger insert fails
        post_finalize.send(sender=Message, message=turn.message)
        # Then the caller's transaction still works: PostgreSQL would refuse every statement of an aborted
        # transaction, so this passes only because the failure was confined to the receiver's savepoint.
        assert Project.objects.filter(pk=written_before.pk).exists()
        written_after = factories.ProjectFactory.create(name="written after the signal")

    assert Project.objects.filter(pk__in=[written_before.pk, written_after.pk]).count() == 2
    assert not CitationLedgerEntry.objects.exists()
    assert any(
        str(turn.message.pk) in r.getMessage() and "test_refuse_all" in (r.exc_text or "") for r in caplog.records
    )


# --- Deletes -----------------------------------------------------------------------------------------------------


@pytest.mark.django_db
@pytest.mark.parametrize("kind", ["kb", "caselaw", "tool"])
def test_deleting_a_source_row_deletes_its_entry_only(kind: str) -> None:
    turn = make_turn()
    ledger.assemble(turn.message)
    row: SourceRow = getattr(turn, kind)

    with purging(turn.message.chat.project_id):  # rows leave only with their matter's purge
        row.delete()

    remaining = set(entries_by_source(turn.message))
    assert remaining == {r.pk for r in (turn.kb, turn.caselaw, turn.tool)} - {row.pk}


@pytest.mark.django_db
@pytest.mark.parametrize("parent", ["message", "chat", "project"])
def test_deleting_a_message_chat_or_project_deletes_its_entries(parent: str) -> None:
    turn = make_turn()
    other = make_turn()
    ledger.assemble(turn.message)
    ledger.assemble(other.message)
    chat = turn.message.chat
    doomed: Message | Chat | Project | None = {"message": turn.message, "chat": chat, "project": chat.project}[parent]
    assert doomed is not None

    with purging(chat.project_id):  # rows leave only with their matter's purge
        doomed.delete()

    assert not CitationLedgerEntry.objects.filter(message_id=turn.message.pk).exists()
    assert not CitationLedgerEntry.objects.filter(chat_id=chat.pk).exists()
    assert CitationLedgerEntry.objects.filter(message=other.message).count() == 3


@pytest.mark.django_db
def test_the_project_foreign_key_cascades_on_its_own() -> None:
    # Given an entry whose project is reachable only through the ledger's own project FK (its chat is matter-less)
    project = factories.ProjectFactory.create()
    entry = factories.CitationLedgerEntryFactory.create(
        tool_source=True, message_tool_source__message__chat__project=None, project=project
    )
    assert entry.chat.project_id is None

    with purging(project.pk):
        project.delete()

    assert not CitationLedgerEntry.objects.filter(pk=entry.pk).exists()


@pytest.mark.postgres
@pytest.mark.django_db
def test_every_ledger_foreign_key_cascades_in_the_database() -> None:
    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT conname, confdeltype FROM pg_constraint "
            "WHERE conrelid = 'citation_ledger_entry'::regclass AND contype = 'f'"
        )
        actions = dict(cursor.fetchall())
    assert len(actions) == 8  # project, chat, message and the five source rows
    assert set(actions.values()) == {"c"}


@pytest.mark.django_db
def test_every_foreign_key_is_the_leading_column_of_exactly_one_index() -> None:
    # Each FK is looked up (trace API, cascades) through an index that starts with it, and only one: every
    # further index costs each new entry a write. chat_id's is ledger_chat_created_idx (chat_id, created_at).
    with connection.cursor() as cursor:
        constraints = connection.introspection.get_constraints(cursor, CitationLedgerEntry._meta.db_table)
    leading = Counter(c["columns"][0] for c in constraints.values() if c["index"] or c["unique"])
    foreign_keys = [f.column for f in CitationLedgerEntry._meta.concrete_fields if f.is_relation]
    assert {column: leading[column] for column in foreign_keys} == dict.fromkeys(foreign_keys, 1)
    assert any(c["columns"] == ["chat_id", "created_at"] for c in constraints.values() if c["index"])


@pytest.mark.postgres
@pytest.mark.django_db
@pytest.mark.parametrize("table", ["message_citations", "message_caselaw_citations", "message_tool_sources"])
def test_a_raw_delete_of_a_source_row_cascades_in_the_database(table: str) -> None:
    turn = make_turn()
    ledger.assemble(turn.message)
    row = {"message_citations": turn.kb, "message_caselaw_citations": turn.caselaw, "message_tool_sources": turn.tool}[
        table
    ]

    # (inside the purge of its matter, the only transaction the append-only triggers let delete it)
    with purging(turn.message.chat.project_id), connection.cursor() as cursor:
        cursor.execute(f"DELETE FROM {table} WHERE id = %s", [row.pk])
        assert cursor.rowcount == 1

    assert set(entries_by_source(turn.message)) == {turn.kb.pk, turn.caselaw.pk, turn.tool.pk} - {row.pk}


@pytest.mark.postgres
@pytest.mark.django_db
@pytest.mark.parametrize("table", ["messages", "chats", "projects"])
def test_a_raw_delete_of_a_message_chat_or_project_cascades_in_the_database(table: str) -> None:
    # Given two assembled turns, in two matters
    turn = make_turn()
    other = make_turn()
    ledger.assemble(turn.message)
    ledger.assemble(other.message)
    chat = turn.message.chat
    target = {"messages": turn.message.pk, "chats": chat.pk, "projects": chat.project_id}[table]

    # When one turn's message, chat or matter is deleted with plain SQL, bypassing the ORM (in its matter's
    # purge, the only transaction the append-only triggers let delete it)
    with purging(chat.project_id):
        with connection.cursor() as cursor:
            cursor.execute(f"DELETE FROM {table} WHERE id = %s", [target])
            assert cursor.rowcount == 1

        # Then PostgreSQL itself removed that turn's entries (its per-turn rows are still there: only the
        # ledger's own message/chat/project foreign key can have done it), and no other entry
        assert MessageToolSource.objects.filter(pk=turn.tool.pk).exists()
        assert not CitationLedgerEntry.objects.filter(message_id=turn.message.pk).exists()
        assert CitationLedgerEntry.objects.filter(message=other.message).count() == 3

        # The per-turn tables cascade in the ORM only, and Django's foreign keys are DEFERRABLE INITIALLY
        # DEFERRED: the delete above passed at statement time, while ON DELETE CASCADE acted at once. Remove the
        # rows it left dangling, then prove nothing else dangles (the checks would otherwise fail at the end).
        with connection.cursor() as cursor:
            for per_turn_table in ("message_citations", "message_caselaw_citations", "message_tool_sources"):
                cursor.execute(f"DELETE FROM {per_turn_table} WHERE message_id = %s", [turn.message.pk])
            cursor.execute("DELETE FROM messages WHERE chat_id = %s", [chat.pk])
            cursor.execute("DELETE FROM chats WHERE project_id = %s", [chat.project_id])
            cursor.execute("DELETE FROM documents WHERE project_id = %s", [chat.project_id])
            cursor.execute("SET CONSTRAINTS ALL IMMEDIATE")


# --- The shared statement --------------------------------------------------------------------------------------------


def test_the_insert_template_names_only_columns_the_models_have() -> None:
    # The template writes the ledger's own column names; the source tables' come from each mapping's model.
    columns = re.search(r"INSERT INTO \{ledger\} \((.*?)\)\nSELECT", ledger.INSERT_TEMPLATE, re.DOTALL)
    assert columns is not None
    named = [c.strip() for c in columns.group(1).split(",")]
    ledger_columns = {f.column for f in CitationLedgerEntry._meta.concrete_fields}
    assert set(named) - {"{source_column}"} <= ledger_columns
    assert {m.column for m in ledger.SOURCE_MAPPINGS} == {
        getattr(CitationLedgerEntry._meta.get_field(f), "column", None) for f in SOURCE_FIELDS
    }
    for mapping in ledger.SOURCE_MAPPINGS:
        assert getattr(mapping.model._meta.get_field("message"), "column", None) == "message_id"
    assert getattr(Message._meta.get_field("chat"), "column", None) == "chat_id"
    assert getattr(Chat._meta.get_field("project"), "column", None) == "project_id"
