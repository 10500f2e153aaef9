"""Writing the citation ledger: one ``INSERT ... SELECT ... ON CONFLICT DO NOTHING`` per source table.

:data:`SOURCE_MAPPINGS` says declaratively how each source table's rows become ledger entries;
:data:`INSERT_TEMPLATE` is the one statement that writes them, filled in from the models' ``_meta``.
:func:`assemble` (one turn, inside its transaction) and :mod:`citations.backfill` (batches) both run it, so the
two paths cannot drift apart. Set-based, a conflict skipped by the unique constraints (never a second entry),
every writer inserting in one order (no deadlock); a row the ledger cannot hold is left out
(:attr:`SourceMapping.valid`). Why SQL rather than ``bulk_create``: docs/architecture.md.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from datetime import datetime
from typing import Any
from uuid import UUID

from django.db import connection, models, transaction
from django.db.backends.utils import CursorWrapper

from chats.models import (
    UNCHECKED,
    UNVERIFIED,
    VERIFIED_METHODS,
    CaseCitation,
    CaselawOpinion,
    Chat,
    DocumentQuote,
    Message,
    MessageToolSource,
    OpinionQuote,
    StatuteCitation,
)
from citations.models import (
    PROVENANCE,
    STATUTE_STATUSES,
    CitationLedgerEntry,
    LedgerPartitionDrop,
    SourceKind,
)

# The whole statement. ``{…}`` is filled per source table: table names and the ledger's column for the
# row from the models' ``_meta``, values from the table's mapping, and ``which_messages``, a predicate over
# the message ``m`` and chat ``c``; ``%(…)s`` are the query's parameters (those of ``which_messages``). The
# other column names are the models' own (tests/test_ledger.py holds them to it).
#
# An entry's ``created_at`` is its row's, which never changes: every writer of a row's entry, at any time,
# writes the same ``created_at``. On PostgreSQL the ledger is partitioned by month on ``created_at``
# (citations.0014) and its unique keys are ``(<source column>, created_at)``: with one ``created_at`` per
# row, they are unique exactly when the source column is, and the row's entry always lands in one
# partition, where ``ON CONFLICT DO NOTHING`` meets the other writer's.
#
# The first ``NOT EXISTS`` covers entries not at their row's time (written before that, stamped with their
# write time, or by hand): a row that has any entry gets no other. On PostgreSQL those rows are listed in
# ``citation_ledger_off_time`` (citations.0014; one primary-key lookup, where a look into the ledger would
# probe every partition); on SQLite, a plain table, the ledger itself is looked into.
#
# A row of a month whose ledger partition was dropped (``ledger_partition_drops``) gets no entry either:
# its entry went on purpose, with a tombstone, and must not come back into the default partition.
INSERT_TEMPLATE = """
INSERT INTO {ledger} (id, project_id, chat_id, message_id, source_kind, {source_column},
                      verification_status, confidence, provider, retrieved_at, created_at)
SELECT {new_id}, c.project_id, m.chat_id, m.id, {source_kind}, s.id,
       {verification_status}, {confidence}, {provider}, {retrieved_at}, s.created_at
FROM {source} s
JOIN {messages} m ON m.id = s.message_id
JOIN {chats} c ON c.id = m.chat_id
{joins}
WHERE ({which_messages}) AND ({valid})
  AND NOT EXISTS ({entry_at_another_time})
  AND NOT EXISTS (SELECT 1 FROM {drops} d WHERE s.created_at >= d.range_start AND s.created_at < d.range_end)
ORDER BY s.id
ON CONFLICT DO NOTHING
RETURNING source_kind, message_id
"""


# On PostgreSQL, the source rows whose entry is not at the row's time (citations.0014).
OFF_TIME_TABLE = "citation_ledger_off_time"
# Whether the row ``s`` has an entry not at its time, per backend (see INSERT_TEMPLATE).
_ENTRY_AT_ANOTHER_TIME = {
    "postgresql": "SELECT 1 FROM {off_time} o WHERE o.source_id = s.id AND o.source_column = '{source_column}'",
    "sqlite": "SELECT 1 FROM {ledger} e WHERE e.{source_column} = s.id",
}


@dataclass(frozen=True, slots=True)
class SourceMapping:
    """How one source table's rows become ledger entries. Each value is a SQL expression over the source
    row ``s`` (and ``joins``); ``valid`` is true for the rows the ledger can hold."""

    model: type[models.Model]
    entry_field: str  # the ledger's foreign key to the row
    source_kind: str
    verification_status: str
    valid: str
    confidence: str = "NULL"
    provider: str = "NULL"
    retrieved_at: str = "NULL"
    joins: str = ""

    @property
    def table(self) -> str:
        return self.model._meta.db_table

    @property
    def column(self) -> str:
        """The ledger's column naming a row of this table."""
        field = CitationLedgerEntry._meta.get_field(self.entry_field)
        return str(getattr(field, "column", ""))


def _sql_list(values: tuple[str, ...] | list[str]) -> str:
    return ", ".join("'" + value.replace("'", "''") + "'" for value in values)


# A quote row the ledger can hold: verified by a known method with a score in 0..1, or a failed claim or a
# quotation nothing could check, without a score (the quote tables' own constraints allow nothing else).
_QUOTE_VALID = (
    f"(s.verification_method IN ({_sql_list(VERIFIED_METHODS)}) "
    "AND s.verification_confidence >= 0 AND s.verification_confidence <= 1) "
    f"OR (s.verification_method IN ('{UNVERIFIED}', '{UNCHECKED}') AND s.verification_confidence IS NULL)"
)

# A statute row's entry status: ``statute_<status>`` for a citation, ``statute_quote_<status>`` for a quote.
STATUTE_STATUS_SQL = (
    f"(CASE WHEN s.kind = '{StatuteCitation.Kind.CITATION}' THEN 'statute_' ELSE 'statute_quote_' END || s.status)"
)

SOURCE_MAPPINGS: tuple[SourceMapping, ...] = (
    SourceMapping(
        model=DocumentQuote,
        entry_field="message_citation",
        source_kind=f"'{SourceKind.KB_DOCUMENT}'",
        verification_status="s.verification_method",
        confidence="s.verification_confidence",
        valid=_QUOTE_VALID,
    ),
    SourceMapping(
        model=OpinionQuote,
        entry_field="message_caselaw_citation",
        source_kind=f"'{SourceKind.CASELAW}'",
        verification_status="s.verification_method",
        confidence="s.verification_confidence",
        provider="o.provider",
        retrieved_at="s.created_at",
        valid=_QUOTE_VALID,
        # A failed claim may name no opinion.
        joins=f"LEFT JOIN {CaselawOpinion._meta.db_table} o ON o.id = s.opinion_id",
    ),
    SourceMapping(
        model=MessageToolSource,
        entry_field="message_tool_source",
        source_kind="s.source_kind",
        verification_status=f"'{PROVENANCE}'",
        provider="s.provider",
        retrieved_at="s.created_at",
        valid="s.source_kind IS NOT NULL AND s.source_kind <> ''",
    ),
    SourceMapping(
        model=CaseCitation,
        entry_field="message_case_citation",
        source_kind=f"'{SourceKind.CASELAW}'",
        verification_status="s.status",
        provider="NULLIF(s.provider, '')",
        retrieved_at="s.created_at",
        valid=f"s.status IN ({_sql_list(CaseCitation.Status.values)})",
    ),
    # Last: added after the four others, so that every writer keeps one lock order.
    SourceMapping(
        model=StatuteCitation,
        entry_field="message_statute_citation",
        source_kind=f"'{SourceKind.STATUTE}'",
        # lqai_verify.verdict.statute_claim_status, in SQL.
        verification_status=STATUTE_STATUS_SQL,
        confidence="s.verification_confidence",
        retrieved_at="s.created_at",
        valid=f"{STATUTE_STATUS_SQL} IN ({_sql_list(STATUTE_STATUSES)})",
    ),
)


def insert_sql(mapping: SourceMapping, *, which_messages: str) -> str:
    """:data:`INSERT_TEMPLATE` for ``mapping``'s table, writing the rows of the messages ``m`` (with their
    chat ``c``) that match ``which_messages``; it returns each new entry's ``source_kind, message_id``."""
    return INSERT_TEMPLATE.format(
        ledger=CitationLedgerEntry._meta.db_table,
        drops=LedgerPartitionDrop._meta.db_table,
        entry_at_another_time=_ENTRY_AT_ANOTHER_TIME.get(connection.vendor, _ENTRY_AT_ANOTHER_TIME["sqlite"]).format(
            ledger=CitationLedgerEntry._meta.db_table, off_time=OFF_TIME_TABLE, source_column=mapping.column
        ),
        source=mapping.table,
        source_column=mapping.column,
        messages=Message._meta.db_table,
        chats=Chat._meta.db_table,
        new_id=_new_uuid_sql(),
        source_kind=mapping.source_kind,
        verification_status=mapping.verification_status,
        confidence=mapping.confidence,
        provider=mapping.provider,
        retrieved_at=mapping.retrieved_at,
        joins=mapping.joins,
        which_messages=which_messages,
        valid=mapping.valid,
    )


def _new_uuid_sql() -> str:
    """A fresh time-ordered UUID (version 7) per row, as the backend stores a UUIDField: ``uuid_generate_v7()``
    is a database function on PostgreSQL (``chats.0018``) and registered on each SQLite connection
    (``chats.ids``), so new entries append to the right edge of the ledger's indexes (docs/scale.md)."""
    return "uuid_generate_v7()"


def db_value(value: object) -> Any:
    """A query parameter as the backend stores the column: on SQLite a UUIDField as 32 hex characters and a
    DateTimeField as the ORM writes it (a raw aware datetime would get a "+00:00" suffix that no ORM lookup
    on the column then matches); anything else as it is."""
    if isinstance(value, UUID):
        return value if connection.vendor == "postgresql" else value.hex
    if isinstance(value, datetime):
        return connection.ops.adapt_datetimefield_value(value)
    return value


def write_entries(
    cursor: CursorWrapper,
    *,
    which_messages: str,
    params: dict[str, Any],
    mappings: Sequence[SourceMapping] = SOURCE_MAPPINGS,
) -> dict[str, list[tuple[str, Any]]]:
    """Run the insert of each of ``mappings`` (in mapping order: the lock order) for the rows of the messages
    matching ``which_messages``; by source table, the ``(source_kind, message_id)`` of each entry created."""
    created: dict[str, list[tuple[str, Any]]] = {}
    for mapping in SOURCE_MAPPINGS:
        if mapping in mappings:
            cursor.execute(insert_sql(mapping, which_messages=which_messages), params)
            created[mapping.table] = cursor.fetchall()
    return created


# Bounds how long the next statements may wait on locks and run, for the rest of the current
# (sub)transaction, and returns the limits that were in force (read before they are set).
_BOUND_SQL = """
SELECT old.lock_timeout, old.statement_timeout,
       set_config('lock_timeout', %(limit)s, true), set_config('statement_timeout', %(limit)s, true)
FROM (SELECT current_setting('lock_timeout') AS lock_timeout,
             current_setting('statement_timeout') AS statement_timeout OFFSET 0) AS old
"""
_RESTORE_SQL = """
SELECT set_config('lock_timeout', %(lock_timeout)s, true), set_config('statement_timeout', %(statement_timeout)s, true)
"""


@contextmanager
def bounded_waits(timeout: float | None) -> Iterator[None]:
    """Inside the caller's savepoint: with ``timeout`` (seconds, PostgreSQL), the statements run in the block
    may wait on locks and run for no longer than that (``lock_timeout``/``statement_timeout``); past it, they
    fail. The caller's own limits are back in force afterwards, whether the block failed (the savepoint's
    rollback undoes the bound) or not (it is put back). Elsewhere, or without ``timeout``, nothing."""
    if timeout is None or connection.vendor != "postgresql":
        yield
        return
    with connection.cursor() as cursor:
        cursor.execute(_BOUND_SQL, {"limit": f"{max(1, round(timeout * 1000))}ms"})
        lock_timeout, statement_timeout, *_ = cursor.fetchone()
    yield
    with connection.cursor() as cursor:
        cursor.execute(_RESTORE_SQL, {"lock_timeout": lock_timeout, "statement_timeout": statement_timeout})


def assemble(message: Message, *, timeout: float | None = None) -> int:
    """Write one ledger entry for each source row of ``message`` that has none; return how many were created.

    All or nothing (in a savepoint inside the caller's transaction, so a failure leaves that transaction
    usable), idempotent and race-safe (conflicts on the per-row unique constraints are skipped); one
    statement per source table whatever the number of rows. With ``timeout`` (seconds, PostgreSQL) the
    statements may wait on locks and run for no longer than that (:func:`bounded_waits`).
    """
    with transaction.atomic(), bounded_waits(timeout), connection.cursor() as cursor:
        created = write_entries(
            cursor, which_messages="m.id = %(message_id)s", params={"message_id": db_value(message.pk)}
        )
    return sum(len(entries) for entries in created.values())
