"""Whether the ledger and the turns it indexes agree: the checks of ``backfill_ledger --check`` beyond presence.

For a batch of messages (a predicate over the message ``m``, as :mod:`citations.backfill` walks them),
set-based, a constant number of statements per batch:

- an entry whose status or confidence differs from its source row's, as the shared mapping
  (:data:`citations.ledger.SOURCE_MAPPINGS`) says it should be;
- a finalized turn whose stored verdict differs from the verdict of its rows, by the rule finalize applies
  (:func:`chats.services.turn_verdict`; a resumed turn's verdict, the worse of its runs', is the verdict of
  all its rows), or by the rule before ``review`` for a turn finalized under it;
- two rows of one turn at the same position (its quotes, KB and caselaw numbered together; its tool
  sources).

Each disagreement names its message. Turns without a verdict (stored before verdicts were recorded) are
not held to one.
"""

from __future__ import annotations

from collections import defaultdict
from dataclasses import dataclass
from typing import Any
from uuid import UUID

from django.db.backends.utils import CursorWrapper

from chats.models import CaseCitation, DocumentQuote, Message, MessageToolSource, OpinionQuote, StatuteCitation
from chats.services import turn_verdict
from citations.ledger import SOURCE_MAPPINGS, STATUTE_STATUS_SQL
from citations.models import CitationLedgerEntry
from lqai_verify.verdict import verdict_of

# Entries of the batch's rows of one source table that do not mirror the row's status and confidence.
_ENTRY_MISMATCH_TEMPLATE = """
SELECT s.message_id, e.id, s.id, e.verification_status, {verification_status}, e.confidence, {confidence}
FROM {source} s
JOIN {messages} m ON m.id = s.message_id
JOIN {ledger} e ON e.{column} = s.id
WHERE ({which_messages})
  AND (e.verification_status <> {verification_status} OR e.confidence IS DISTINCT FROM {confidence})
"""
# What the verdict of each finalized turn of the batch is made of: its stored verdict, then each distinct
# method of its quotes and status of its case citations and statute rows.
_VERDICT_INPUTS_TEMPLATE = """
SELECT m.id, m.verdict, NULL, NULL FROM {messages} m
WHERE ({which_messages}) AND m.verdict IS NOT NULL
UNION
SELECT m.id, m.verdict, 'method', s.verification_method FROM {kb_quotes} s JOIN {messages} m ON m.id = s.message_id
WHERE ({which_messages}) AND m.verdict IS NOT NULL
UNION
SELECT m.id, m.verdict, 'method', s.verification_method
FROM {caselaw_quotes} s JOIN {messages} m ON m.id = s.message_id
WHERE ({which_messages}) AND m.verdict IS NOT NULL
UNION
SELECT m.id, m.verdict, 'status', s.status FROM {case_citations} s JOIN {messages} m ON m.id = s.message_id
WHERE ({which_messages}) AND m.verdict IS NOT NULL
UNION
SELECT m.id, m.verdict, 'status', {statute_status} FROM {statute_citations} s JOIN {messages} m ON m.id = s.message_id
WHERE ({which_messages}) AND m.verdict IS NOT NULL
"""
# Positions held by more than one row of a turn: among its quotes (numbered together), among its tools' sources.
_SHARED_POSITIONS_TEMPLATE = """
SELECT q.message_id, 'quotes', q.position, count(*)
FROM (SELECT message_id, position FROM {kb_quotes} UNION ALL SELECT message_id, position FROM {caselaw_quotes}) q
JOIN {messages} m ON m.id = q.message_id
WHERE ({which_messages})
GROUP BY q.message_id, q.position HAVING count(*) > 1
UNION ALL
SELECT s.message_id, 'tool sources', s.position, count(*)
FROM {tool_sources} s JOIN {messages} m ON m.id = s.message_id
WHERE ({which_messages})
GROUP BY s.message_id, s.position HAVING count(*) > 1
"""


@dataclass(frozen=True, slots=True)
class Disagreement:
    message_id: UUID
    what: str


def _uuid(value: Any) -> UUID:
    """An id as read by a raw query (a UUID on PostgreSQL, 32 hex digits on SQLite)."""
    return value if isinstance(value, UUID) else UUID(str(value))


def disagreements(cursor: CursorWrapper, *, which_messages: str, params: dict[str, Any]) -> list[Disagreement]:
    """Every disagreement among the messages matching ``which_messages`` (with ``params``)."""
    tables = {
        "messages": Message._meta.db_table,
        "ledger": CitationLedgerEntry._meta.db_table,
        "kb_quotes": DocumentQuote._meta.db_table,
        "caselaw_quotes": OpinionQuote._meta.db_table,
        "tool_sources": MessageToolSource._meta.db_table,
        "case_citations": CaseCitation._meta.db_table,
        "statute_citations": StatuteCitation._meta.db_table,
        "statute_status": STATUTE_STATUS_SQL,
        "which_messages": which_messages,
    }
    found: list[Disagreement] = []
    for mapping in SOURCE_MAPPINGS:
        sql = _ENTRY_MISMATCH_TEMPLATE.format(
            **tables,
            table=mapping.table,
            source=mapping.table,
            column=mapping.column,
            verification_status=mapping.verification_status,
            confidence=mapping.confidence,
        )
        cursor.execute(sql, params)
        found += [
            Disagreement(
                _uuid(message_id),
                f"entry {_uuid(entry_id)} of {mapping.table} row {_uuid(row_id)}: "
                f"status {status}, confidence {confidence} where the row gives {row_status}, {row_confidence}",
            )
            for message_id, entry_id, row_id, status, row_status, confidence, row_confidence in cursor.fetchall()
        ]

    cursor.execute(_VERDICT_INPUTS_TEMPLATE.format(**tables), params)
    stored: dict[Any, str] = {}
    inputs: dict[Any, dict[str, set[str]]] = defaultdict(lambda: {"method": set(), "status": set()})
    for message_id, verdict, kind, value in cursor.fetchall():
        stored[message_id] = verdict
        if kind is not None:
            inputs[message_id][kind].add(value)
    for message_id, verdict in stored.items():
        rows = inputs[message_id]
        expected = turn_verdict(methods=rows["method"], case_statuses=rows["status"])
        earlier = verdict_of(methods=rows["method"], case_statuses=rows["status"], earlier_rules=True)
        if verdict not in (expected, earlier):
            found.append(Disagreement(_uuid(message_id), f"verdict {verdict} where its rows give {expected}"))

    cursor.execute(_SHARED_POSITIONS_TEMPLATE.format(**tables), params)
    found += [
        Disagreement(_uuid(message_id), f"{count} of its {rows} at position {position}")
        for message_id, rows, position, count in cursor.fetchall()
    ]
    return found
