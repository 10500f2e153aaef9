"""Writing the citation ledger.

The mapping from source rows to ledger entries is defined once, here: each ledger column's SQL
expression over a source row (:func:`_entry_values`, with :data:`SOURCE_MAPPINGS`), inserted by
``INSERT ... SELECT ... ON CONFLICT DO NOTHING``. :func:`assemble` (one turn, inside the turn's
transaction, from the ``post_finalize`` receiver) and ``manage.py backfill_ledger`` (ranges of rows, in
bulk: :func:`insert_sql`, :func:`counted_insert_sql`) both execute it, so the paths cannot drift apart.

Why SQL rather than ``bulk_create``: the insert is set-based (constant query
count), and conflicts are skipped by the unique constraints, not by a
read-then-write check, so two processes assembling the same turn at once never
create a second entry. Rows are inserted in mapping order, then source-id order,
so that concurrent writers take index locks in the same order and cannot deadlock.

The quote tables' own constraints (a known verification method; a confidence in
0..1 exactly for verified quotes) make every row they hold one the ledger can hold:
a failed claim is an ``unverified`` entry without a confidence. Rows written before
those constraints that the ledger cannot hold are filtered out by
:attr:`SourceMapping.valid`, so the insert never violates a check constraint;
``backfill_ledger`` counts and reports them.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any
from uuid import UUID

from django.db import connection, transaction
from django.utils import timezone

from chats.models import UNVERIFIED, VERIFIED_METHODS, Message
from citations.models import CASE_CITATION_STATUSES, PROVENANCE, CitationLedgerEntry, SourceKind

LEDGER_TABLE = CitationLedgerEntry._meta.db_table
SOURCE_FK_COLUMNS = (
    "message_citation_id",
    "message_caselaw_citation_id",
    "message_tool_source_id",
    "message_case_citation_id",
)


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


# A quote row the ledger can hold: verified by a known method with a score in 0..1, or a failed claim
# without a score (the quote tables' own constraints allow nothing else since chats.0004/0005).
_QUOTE_VALID = (
    f"(s.verification_method IN ({', '.join(repr(m) for m in VERIFIED_METHODS)}) "
    "AND s.verification_confidence >= 0 AND s.verification_confidence <= 1) "
    f"OR (s.verification_method = '{UNVERIFIED}' AND s.verification_confidence IS NULL)"
)

# NULLs are typed (CAST works on both backends) so that the three selects can be one UNION ALL.
SOURCE_MAPPINGS: tuple[SourceMapping, ...] = (
    SourceMapping(
        table="message_citations",
        fk_column="message_citation_id",
        source_kind=f"'{SourceKind.KB_DOCUMENT.value}'",
        verification_status="s.verification_method",
        confidence="s.verification_confidence",
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
        joins="LEFT JOIN caselaw_opinions o ON o.id = s.opinion_id",  # a failed claim may name no opinion
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
    SourceMapping(
        table="message_case_citations",
        fk_column="message_case_citation_id",
        source_kind=f"'{SourceKind.CASELAW.value}'",
        verification_status="s.status",
        confidence="CAST(NULL AS DOUBLE PRECISION)",
        provider="CAST(NULLIF(s.provider, '') AS VARCHAR)",
        retrieved_at="s.created_at",
        valid=f"s.status IN ({', '.join(repr(status) for status in CASE_CITATION_STATUSES)})",
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


def _entry_values(mapping: SourceMapping, *, vendor: str, created_at: str = "%s") -> list[tuple[str, str]]:
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
        ("created_at", created_at),
    ]


_LEDGER_COLUMNS = ", ".join(column for column, _ in _entry_values(SOURCE_MAPPINGS[0], vendor="postgresql"))


def _source_select(mapping: SourceMapping, *, vendor: str, where: str, created_at: str = "%s") -> str:
    values = ", ".join(expression for _, expression in _entry_values(mapping, vendor=vendor, created_at=created_at))
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


def assemble_sql(*, bounded: bool) -> str:
    """PostgreSQL: one statement writing the entries of one turn's rows of every source table; it returns
    the number of entries created.

    The per-table selects of :func:`insert_sql`, as one ``UNION ALL`` whose branches are read in order
    (mapping order, then source id: the lock order every writer uses), feed one ``INSERT ... ON CONFLICT DO
    NOTHING``. Named parameters: ``created_at`` and ``message_id``; when ``bounded``, also ``lock_timeout``
    and ``statement_timeout``: the values the outer ``SELECT`` puts back once the insert has run (see
    :data:`_BOUND_SQL`, which set the bound).
    """
    selects = " UNION ALL ".join(
        f"({_source_select(m, vendor='postgresql', where='s.message_id = %(message_id)s', created_at='%(created_at)s')}"
        " ORDER BY s.id)"
        for m in SOURCE_MAPPINGS
    )
    restore = (
        ", set_config('lock_timeout', %(lock_timeout)s, true), "
        "set_config('statement_timeout', %(statement_timeout)s, true)"
        if bounded
        else ""
    )
    return (
        f"WITH written AS (INSERT INTO {LEDGER_TABLE} ({_LEDGER_COLUMNS}) {selects} "  # noqa: S608
        f"ON CONFLICT DO NOTHING RETURNING 1) SELECT count(*){restore} FROM written"
    )


# Bounds the time the next statements may wait on locks and run, for the rest of the current
# (sub)transaction, and returns the limits in force before (the inner query reads them first).
_BOUND_SQL = (
    "SELECT old.lock_timeout, old.statement_timeout, set_config('lock_timeout', %(limit)s, true), "
    "set_config('statement_timeout', %(limit)s, true) FROM (SELECT current_setting('lock_timeout') AS lock_timeout, "
    "current_setting('statement_timeout') AS statement_timeout OFFSET 0) AS old"
)


def db_value(value: object) -> Any:
    """A query parameter as the backend stores the column: on SQLite a UUIDField as 32 hex characters and
    a DateTimeField as the ORM writes it (a raw aware datetime would get a "+00:00" suffix that no ORM
    lookup on the column then matches); anything else as it is."""
    if isinstance(value, UUID):
        return value if connection.vendor == "postgresql" else value.hex
    if isinstance(value, datetime):
        return connection.ops.adapt_datetimefield_value(value)
    return value


def assemble(message: Message, *, timeout: float | None = None) -> int:
    """Write one ledger entry for each citation and tool-source row of ``message``; return how many were created.

    All or nothing (in a savepoint inside the caller's transaction, so a failure leaves that transaction
    usable), idempotent and race-safe (conflicts on the per-row unique constraints are skipped). A constant
    number of queries whatever the number of rows: on PostgreSQL one statement (:func:`assemble_sql`),
    elsewhere one insert per source table. With ``timeout`` (seconds, PostgreSQL) the statement may wait on
    locks and run for no longer than that: past it, it fails (``lock_timeout``/``statement_timeout``), and
    the caller's own limits are back in force afterwards, whether it failed or not.
    """
    message_id = db_value(message.pk)
    now = db_value(timezone.now())
    with transaction.atomic(), connection.cursor() as cursor:
        if connection.vendor != "postgresql":
            created = 0
            for mapping in SOURCE_MAPPINGS:
                sql = insert_sql(mapping, vendor=connection.vendor, where="s.message_id = %s")
                cursor.execute(sql, [now, message_id])
                created += max(cursor.rowcount, 0)
            return created
        params: dict[str, Any] = {"created_at": now, "message_id": message_id}
        if timeout is not None:
            # Limits set in the savepoint are undone by its rollback if the insert fails; restored by it if not.
            cursor.execute(_BOUND_SQL, {"limit": f"{max(1, round(timeout * 1000))}ms"})
            params["lock_timeout"], params["statement_timeout"], *_ = cursor.fetchone()
        cursor.execute(assemble_sql(bounded=timeout is not None), params)
        created, *_ = cursor.fetchone()
    return int(created)
