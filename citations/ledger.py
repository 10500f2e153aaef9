"""Writing the citation ledger.

The mapping from source rows to ledger entries is defined once, here: each ledger column's SQL
expression over a source row (:func:`_entry_values`, with :data:`SOURCE_MAPPINGS`), inserted by
``INSERT ... SELECT ... ON CONFLICT DO NOTHING``. :func:`assemble_turns` (turns just finalized, by the
ledger writer or the receiver; :func:`assemble` for one) and ``manage.py backfill_ledger`` (ranges of
rows, in bulk: :func:`insert_sql`, :func:`counted_insert_sql`) all execute it, so the paths cannot drift
apart.

Why SQL rather than ``bulk_create``: the insert is set-based (constant query
count), and conflicts are skipped by the unique constraints, not by a
read-then-write check, so two processes assembling the same turn at once never
create a second entry. Rows are inserted in mapping order, then source-id order,
so that concurrent writers take index locks in the same order and cannot deadlock.

On PostgreSQL :func:`assemble_turns` runs the three selects as one statement
(:func:`assemble_sql`): a batch of turns costs one round trip, one plan and one
commit (``benchmarks/RESULTS.md``).

Rows whose shape the ledger cannot hold (an empty or ``provenance``
verification method on a quote, a confidence outside 0..1, an empty kind) are
filtered out by :attr:`SourceMapping.valid` so the insert never violates a
check constraint; :func:`assemble_turns` logs each one with its id and message.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from contextlib import nullcontext
from dataclasses import dataclass
from datetime import datetime
from typing import Any
from uuid import UUID

from django.db import connection, transaction
from django.utils import timezone

from chats.models import Message
from citations.models import PROVENANCE, CitationLedgerEntry, SourceKind

logger = logging.getLogger(__name__)

LEDGER_TABLE = CitationLedgerEntry._meta.db_table
SOURCE_FK_COLUMNS = ("message_citation_id", "message_caselaw_citation_id", "message_tool_source_id")


@dataclass(frozen=True, slots=True)
class SourceMapping:
    """How one source table maps to ledger entries. Every field is a SQL expression over
    the source row ``s``, its message ``m`` and chat ``c`` (plus ``joins``)."""

    table: str
    fk_column: str
    source_kind: str
    verification_status: str
    confidence: str
    provider: str
    retrieved_at: str
    valid: str
    joins: str = ""


_QUOTE_VALID = (
    f"s.verification_method IS NOT NULL AND s.verification_method <> '' AND s.verification_method <> '{PROVENANCE}' "
    "AND s.verification_confidence IS NOT NULL AND s.verification_confidence >= 0 "
    "AND s.verification_confidence <= 1"
)

# NULLs are typed (CAST works on both backends) so that the three selects can be one UNION ALL.
SOURCE_MAPPINGS: tuple[SourceMapping, ...] = (
    SourceMapping(
        table="message_citations",
        fk_column="message_citation_id",
        source_kind=f"'{SourceKind.KB_DOCUMENT.value}'",
        verification_status="s.verification_method",
        confidence="CAST(s.verification_confidence AS DOUBLE PRECISION)",
        provider="CAST(NULL AS VARCHAR)",
        retrieved_at="CAST(NULL AS TIMESTAMPTZ)",
        valid=_QUOTE_VALID,
    ),
    SourceMapping(
        table="message_caselaw_citations",
        fk_column="message_caselaw_citation_id",
        source_kind=f"'{SourceKind.CASELAW.value}'",
        verification_status="s.verification_method",
        confidence="s.verification_confidence",
        provider="o.provider",
        retrieved_at="s.created_at",
        valid=_QUOTE_VALID,
        joins="JOIN caselaw_opinions o ON o.id = s.opinion_id",
    ),
    SourceMapping(
        table="message_tool_sources",
        fk_column="message_tool_source_id",
        source_kind="s.source_kind",
        verification_status=f"'{PROVENANCE}'",
        confidence="CAST(NULL AS DOUBLE PRECISION)",
        provider="s.provider",
        retrieved_at="s.created_at",
        valid="s.source_kind IS NOT NULL AND s.source_kind <> ''",
    ),
)


def new_uuid_sql(vendor: str) -> str:
    """A fresh UUID per row, as the backend stores UUIDField (uuid on PostgreSQL, 32 hex chars on SQLite)."""
    if vendor == "postgresql":
        return "gen_random_uuid()"
    return "lower(hex(randomblob(16)))"


def source_from_sql(mapping: SourceMapping) -> str:
    """The ``FROM`` clause of every query over ``mapping``'s rows: the source row ``s``, its message ``m``,
    its chat ``c`` and ``mapping.joins`` (shared so that the backfill's counts read exactly these rows)."""
    return f"{mapping.table} s JOIN messages m ON m.id = s.message_id JOIN chats c ON c.id = m.chat_id {mapping.joins}"


def _entry_values(mapping: SourceMapping, *, vendor: str) -> list[tuple[str, str]]:
    """The mapping proper: each ledger column with the SQL expression that fills it from a source row (over
    ``s``/``m``/``c`` and ``mapping.joins``; ``created_at`` is the statement's first parameter)."""
    return [
        ("id", new_uuid_sql(vendor)),
        ("project_id", "c.project_id"),
        ("chat_id", "m.chat_id"),
        ("message_id", "s.message_id"),
        ("source_kind", mapping.source_kind),
        *((column, "s.id" if column == mapping.fk_column else "CAST(NULL AS UUID)") for column in SOURCE_FK_COLUMNS),
        ("verification_status", mapping.verification_status),
        ("confidence", mapping.confidence),
        ("provider", mapping.provider),
        ("retrieved_at", mapping.retrieved_at),
        ("treatment_id", "CAST(NULL AS UUID)"),
        ("created_at", "%s"),
    ]


_LEDGER_COLUMNS = ", ".join(column for column, _ in _entry_values(SOURCE_MAPPINGS[0], vendor="postgresql"))


def _source_select(mapping: SourceMapping, *, vendor: str, where: str) -> str:
    values = ", ".join(expression for _, expression in _entry_values(mapping, vendor=vendor))
    # Built only from this module's constants and callers' fixed predicates; values go in as parameters.
    return f"SELECT {values} FROM {source_from_sql(mapping)} WHERE ({mapping.valid}) AND ({where})"  # noqa: S608


def counted_insert_sql(mapping: SourceMapping, *, where: str) -> str:
    """PostgreSQL: :func:`insert_sql`'s entries for the rows of ``mapping.table`` matching ``where``, reading
    those rows once and counting them on the way (for the backfill's first pass over rows without entries).

    Returns ``(source_kind, message_id, entries created, NULL)`` per kind and message written, then one
    ``(NULL, NULL, rows the ledger can hold, rows it cannot)`` row. Same mapping, same order (source id),
    same ``ON CONFLICT DO NOTHING``; parameters: ``created_at`` then those of ``where``.
    """
    values = ", ".join(
        f"{expression} AS {column}" for column, expression in _entry_values(mapping, vendor="postgresql")
    )
    return (
        f"WITH batch AS MATERIALIZED (SELECT {values}, coalesce(({mapping.valid}), false) AS valid "  # noqa: S608
        f"FROM {source_from_sql(mapping)} WHERE ({where})), "
        f"written AS (INSERT INTO {LEDGER_TABLE} ({_LEDGER_COLUMNS}) SELECT {_LEDGER_COLUMNS} FROM batch "
        f"WHERE valid ORDER BY {mapping.fk_column} ON CONFLICT DO NOTHING RETURNING source_kind, message_id) "
        "SELECT source_kind, message_id, count(*), NULL::bigint FROM written GROUP BY 1, 2 UNION ALL "
        "SELECT NULL, NULL, count(*) FILTER (WHERE valid), count(*) FILTER (WHERE NOT valid) FROM batch"
    )


def insert_sql(
    mapping: SourceMapping,
    *,
    vendor: str,
    where: str,
    returning: bool = False,
    returning_columns: Sequence[str] = ("source_kind",),
) -> str:
    """``INSERT ... SELECT ... ON CONFLICT DO NOTHING`` of the entries for the rows of ``mapping.table``
    matching ``where`` (a SQL predicate over ``s``/``m``/``c``). Its first parameter is ``created_at``,
    followed by those of ``where``. With ``returning``, yields ``returning_columns`` (ledger columns;
    by default the ``source_kind``) of each inserted entry."""
    return (
        f"INSERT INTO {LEDGER_TABLE} ({_LEDGER_COLUMNS}) "
        f"{_source_select(mapping, vendor=vendor, where=where)} ORDER BY s.id "
        f"ON CONFLICT DO NOTHING" + (f" RETURNING {', '.join(returning_columns)}" if returning else "")
    )


def invalid_rows_sql(*, where: str) -> str:
    """The ``(table, id, message_id)`` of source rows matching ``where`` (a predicate over ``s`` alone) that the
    ledger cannot hold, across all tables; its parameters are those of ``where``, once per source table."""
    return " UNION ALL ".join(_invalid_select(m, where=where) for m in SOURCE_MAPPINGS)


def _invalid_select(mapping: SourceMapping, *, where: str, extra_columns: str = "") -> str:
    m = mapping
    return (
        f"SELECT '{m.table}', s.id, s.message_id{extra_columns} FROM {m.table} s "  # noqa: S608
        f"WHERE NOT ({m.valid}) AND ({where})"
    )


def assemble_sql(*, where: str) -> str:
    """PostgreSQL: one statement writing the entries of every source table's rows matching ``where`` (a
    predicate over ``s`` alone) and returning ``(table, id, message_id, created)`` rows: first
    ``(NULL, NULL, NULL, number of entries created)``, then one row per source row the ledger cannot hold
    (see :func:`invalid_rows_sql`).

    The statement is the per-table selects of :func:`insert_sql`, as one ``UNION ALL`` whose branches are
    read in order (mapping order, then source id: the lock order every writer uses) and fed to one
    ``INSERT ... ON CONFLICT DO NOTHING``. Parameters: ``created_at`` then those of ``where``, once per
    source table; then those of ``where`` once per source table again (the invalid rows).
    """
    selects = " UNION ALL ".join(
        f"({_source_select(m, vendor='postgresql', where=where)} ORDER BY s.id)" for m in SOURCE_MAPPINGS
    )
    return (
        f"WITH written AS (INSERT INTO {LEDGER_TABLE} ({_LEDGER_COLUMNS}) {selects} "  # noqa: S608
        "ON CONFLICT DO NOTHING RETURNING 1) "
        "SELECT NULL, NULL, NULL, count(*) FROM written UNION ALL "
        + " UNION ALL ".join(_invalid_select(m, where=where, extra_columns=", NULL") for m in SOURCE_MAPPINGS)
    )


def assemble_statement(message_ids: Sequence[UUID | str], created_at: Any) -> tuple[str, list[Any]]:
    """PostgreSQL: :func:`assemble_sql` for the rows of ``message_ids``, with its parameters in order."""
    tables = len(SOURCE_MAPPINGS)
    ids = list(message_ids)
    return assemble_sql(where="s.message_id = ANY(%s)"), [created_at, ids] * tables + [ids] * tables


def db_value(value: object) -> Any:
    """A query parameter as the backend stores the column: on SQLite a UUIDField as 32 hex characters and
    a DateTimeField as the ORM writes it (a raw aware datetime would get a "+00:00" suffix that no ORM
    lookup on the column then matches); anything else as it is."""
    if isinstance(value, UUID):
        return value if connection.vendor == "postgresql" else value.hex
    if isinstance(value, datetime):
        return connection.ops.adapt_datetimefield_value(value)
    return value


def assemble(message: Message) -> int:
    """Write one ledger entry for each citation and tool-source row of ``message``; see :func:`assemble_turns`."""
    return assemble_turns([message.pk])


def assemble_turns(message_ids: Sequence[UUID]) -> int:
    """Write one ledger entry for each citation and tool-source row of the messages ``message_ids``.

    All or nothing, idempotent and race-safe (conflicts on the per-row unique constraints are skipped).
    Runs a constant number of queries whatever the number of messages and rows: on PostgreSQL one
    statement (:func:`assemble_sql`), elsewhere one insert per source table and one check for rows it
    cannot hold. Inside a caller's transaction it runs in a savepoint, so that a failure leaves that
    transaction usable. Rows the ledger cannot hold are logged with their ids. Returns the number of
    entries created.
    """
    if not message_ids:
        return 0
    ids = [db_value(message_id) for message_id in message_ids]
    now = db_value(timezone.now())
    if connection.vendor == "postgresql":
        # One statement is a transaction of its own; in the caller's, it needs a savepoint.
        with transaction.atomic() if connection.in_atomic_block else nullcontext(), connection.cursor() as cursor:
            sql, params = assemble_statement(ids, now)
            cursor.execute(sql, params)
            rows = cursor.fetchall()
        created = next(count for table, _, _, count in rows if table is None)
        invalid = [(table, row_id, message_id) for table, row_id, message_id, _ in rows if table is not None]
    else:
        where = f"s.message_id IN ({', '.join(['%s'] * len(ids))})"
        created = 0
        with transaction.atomic(), connection.cursor() as cursor:
            for mapping in SOURCE_MAPPINGS:
                cursor.execute(insert_sql(mapping, vendor=connection.vendor, where=where), [now, *ids])
                created += max(cursor.rowcount, 0)
            cursor.execute(invalid_rows_sql(where=where), ids * len(SOURCE_MAPPINGS))
            invalid = cursor.fetchall()
    for table, row_id, message_id in invalid:
        logger.warning(
            "ledger: skipped %s row %s of message %s: its verification shape cannot be held by the ledger",
            table,
            UUID(str(row_id)),
            UUID(str(message_id)),
        )
    return int(created)
