"""Sealing finalized turns: each finalize of a turn gets a seal over its facts, chained per matter and
signed with the ledger key (``citations.keys``). The byte formats are :mod:`lqai_verify.record`'s, shared
with the offline verifier.

:func:`turn_facts` reads the facts of a batch of turns (one query per table, whatever the batch size), for
sealing, for ``verify_ledger`` and for the export alike; :func:`seal_turn` writes one seal.

Lock order (no deadlock): a turn's transaction locks its message row first (finalize), then, as its very
last write, the head row of its chain (``seal_chain_heads``, by an upsert that locks it); nothing else is
locked after it, so the head is held only from the seal's write to the commit, never across the model call
or the verification. Seals of one chain are therefore numbered in commit order.
"""

from __future__ import annotations

import datetime
import json
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any, cast
from uuid import UUID

from django.conf import settings
from django.db import connection, transaction
from django.db.models import Count, Exists, OuterRef, Q, QuerySet
from django.utils import timezone

from chats.models import (
    CaseCitation,
    CaselawOpinion,
    Chat,
    DocumentQuote,
    Message,
    MessageToolSource,
    OpinionQuote,
)
from citations import keys
from citations.models import SealChainHead, TurnSeal
from lqai_verify import record
from lqai_verify.verification import VERIFIER_VERSION

HEADS_TABLE = SealChainHead._meta.db_table


def iso(value: datetime.datetime | None) -> str | None:
    """A timestamp as sealed: UTC, ISO 8601 with microseconds."""
    if value is None:
        return None
    if value.utcoffset() != _ZERO:
        value = value.astimezone(datetime.UTC)
    return value.isoformat(timespec="microseconds")


_ZERO = datetime.timedelta(0)


def _id(value: UUID | None) -> str | None:
    """A UUID as sealed: its canonical hyphenated form (the ORM gives UUIDs on every backend)."""
    return None if value is None else str(value)


@dataclass(slots=True)
class TurnFacts:
    """A turn's sealed facts: the turn object and its rows (``lqai_verify.record``'s fields), plus its answer
    (the turn object holds only its digest)."""

    turn: dict[str, Any]
    answer: str
    rows: list[dict[str, Any]] = field(default_factory=list)

    @property
    def chain(self) -> str:
        return chain_of(project_id=self.turn["project"], chat_id=self.turn["chat"])

    def digests(self) -> dict[str, Any]:
        return {
            "format": record.FACTS_FORMAT,
            "turn": record.turn_sha256(self.turn),
            "rows": {record.row_key(row): record.row_sha256(row) for row in self.rows},
        }


def chain_of(*, project_id: str | None, chat_id: str) -> str:
    """The chain a turn's seals go to: its matter's, or its chat's when the chat has no matter."""
    return f"matter:{project_id}" if project_id else f"chat:{chat_id}"


# A turn's facts in one statement: its message (tag 0) and its rows of the four tables (tags 1-4, in the order
# of lqai_verify.record.ROW_TABLES), each row laid out on the same typed columns (u* ids, ts its timestamp,
# i* integers, f1 a confidence, t* texts, j1 alterations; NULL where a table has no such column), ordered by
# table, then by id. Facts format /2 added i4, i5, t8 and j2 at the end (a quote's place in the answer and its
# context flags, a case citation's pin status; its pin is in t7). Ids are read as text (no UUID object made per
# id only to be printed again); the text of UUIDs sorts as the UUIDs do (same length, hyphens in the same places,
# lowercase hex). Timestamps too, on PostgreSQL, already as sealed (:func:`iso_sql`). The turns are one
# parameter, ``%(turns)s`` (:func:`in_ids`).
_FACTS_SQL = f"""
SELECT 0 AS tag, CAST(c.id AS text) AS id, CAST(m.id AS text) AS message,
       CAST(c.project_id AS text) AS u3, CAST(m.reply_to_id AS text) AS u4, {{finalized_at}} AS ts,
       NULL AS i1, NULL AS i2, NULL AS i3, NULL AS f1,
       q.content AS t1, m.content AS t2, m.status AS t3, m.verdict AS t4, m.model_name AS t5,
       NULL AS t6, NULL AS t7, NULL AS j1, NULL AS i4, NULL AS i5, NULL AS t8, NULL AS j2
  FROM {Message._meta.db_table} m
  JOIN {Chat._meta.db_table} c ON c.id = m.chat_id
  LEFT JOIN {Message._meta.db_table} q ON q.id = m.reply_to_id
 WHERE m.id {{in_turns}}
UNION ALL
SELECT 1, CAST(r.id AS text), CAST(r.message_id AS text), CAST(r.document_id AS text), NULL, {{created_at}},
       r.position, r.source_offset_start, r.source_offset_end, r.verification_confidence,
       r.quote, r.verification_method, r.unverified_reason, r.passage_sha256, NULL, NULL, NULL, r.alterations,
       r.answer_offset_start, r.answer_offset_end, r.answer_unplaced_reason, r.context_flags
  FROM {DocumentQuote._meta.db_table} r
 WHERE r.message_id {{in_turns}}
UNION ALL
SELECT 2, CAST(r.id AS text), CAST(r.message_id AS text), CAST(r.opinion_id AS text), NULL, {{created_at}},
       r.position, r.source_offset_start, r.source_offset_end, r.verification_confidence,
       r.quote, r.verification_method, r.unverified_reason, r.passage_sha256, o.provider, NULL, NULL, r.alterations,
       r.answer_offset_start, r.answer_offset_end, r.answer_unplaced_reason, r.context_flags
  FROM {OpinionQuote._meta.db_table} r
  LEFT JOIN {CaselawOpinion._meta.db_table} o ON o.id = r.opinion_id
 WHERE r.message_id {{in_turns}}
UNION ALL
SELECT 3, CAST(r.id AS text), CAST(r.message_id AS text), NULL, NULL, {{created_at}},
       r.position, NULL, NULL, NULL,
       r.source_kind, r.tool, r.provider, r.label, r.subtitle, r.url, r.external_ref, NULL,
       NULL, NULL, NULL, NULL
  FROM {MessageToolSource._meta.db_table} r
 WHERE r.message_id {{in_turns}}
UNION ALL
SELECT 4, CAST(r.id AS text), CAST(r.message_id AS text), CAST(r.opinion_id AS text), NULL, {{created_at}},
       r.answer_offset_start, r.answer_offset_end, NULL, NULL,
       r.kind, r.citation, r.case_name, r.status, r.detail, r.provider, r.pin, NULL,
       NULL, NULL, r.pin_status, NULL
  FROM {CaseCitation._meta.db_table} r
 WHERE r.message_id {{in_turns}}
ORDER BY tag, id
"""  # noqa: S608 - table names from the models' _meta, values as parameters


def _facts_sql() -> str:
    """:data:`_FACTS_SQL` on this connection's database."""
    return _FACTS_SQL.format(
        in_turns=in_ids("turns"), finalized_at=iso_sql("m.finalized_at"), created_at=iso_sql("r.created_at")
    )


def iso_sql(column: str) -> str:
    """SQL for a timestamp column as :func:`timestamp_text` reads it: on PostgreSQL, its text as :func:`iso`
    prints it (UTC, microseconds, "+00:00"), formatted by the server, so that no datetime object is made per
    value only to be printed again; elsewhere the column itself."""
    if connection.vendor == "postgresql":
        return f"""to_char({column} AT TIME ZONE 'UTC', 'YYYY-MM-DD"T"HH24:MI:SS.US"+00:00"')"""
    return column


def in_ids(name: str) -> str:
    """SQL saying that the column before it is one of the ids of the ``%(<name>)s`` parameter
    (:func:`ids_parameter`): ``= ANY`` of a ``uuid[]`` on PostgreSQL (planned as one ``IN`` list: for one turn's
    facts in about half the time of a join with a ``VALUES`` list, no faster for a batch of 2,000), the values
    of a JSON array on SQLite."""
    if connection.vendor == "postgresql":
        return f"= ANY(CAST(%({name})s AS uuid[]))"
    return f"IN (SELECT value FROM json_each(%({name})s))"  # noqa: S608 - a parameter's name, no value


def ids_parameter(ids: Iterable[UUID | str]) -> str:
    """The value of an :func:`in_ids` parameter, one text whatever the number of ids (so the driver quotes one
    value, not one per id): PostgreSQL's array literal of the distinct ids, or a JSON array of them as SQLite
    stores them (32 hex digits)."""
    distinct = dict.fromkeys(UUID(str(i)) for i in ids)
    if connection.vendor == "postgresql":
        return "{" + ",".join(map(str, distinct)) + "}"
    return json.dumps([i.hex for i in distinct])


def id_text(value: str | None) -> str | None:
    """An id as sealed (canonical hyphenated form), from its text: PostgreSQL's (already canonical) or the
    32 hex digits of SQLite's."""
    if value is None or len(value) == 36:
        return value
    return str(UUID(value))


def row_key_text(value: str | None) -> str | None:
    """A row's key (``lqai_verify.record.row_key``) as sealed, from the database's ``<table>:<id text>``
    (see :func:`id_text`)."""
    if value is None:
        return None
    table, _, row_id = value.partition(":")
    return f"{table}:{id_text(row_id)}"


def timestamp_text(value: Any) -> str | None:
    """A timestamp as sealed, from what the backend returns: PostgreSQL's text as sealed (:func:`iso_sql`),
    an aware datetime, or SQLite's naive UTC text."""
    if isinstance(value, str) and len(value) == 32 and value[10] == "T" and value.endswith("+00:00"):
        return value
    if isinstance(value, str):
        value = datetime.datetime.fromisoformat(value)
    if value is not None and value.tzinfo is None:
        value = value.replace(tzinfo=datetime.UTC)
    return iso(value)


def json_value(value: Any) -> Any:
    """A JSON column's value, from what the backend returns (its text, or the value already decoded)."""
    if value == "[]":  # most quotes' alterations: no decoder for them
        return []
    return json.loads(value) if isinstance(value, str | bytes) else value


def sealed_forms(values: Sequence[Any]) -> tuple[Any, ...]:
    """A row of :data:`_FACTS_SQL` with its ids (columns 1-4) and its timestamp (column 5) as sealed, from what
    SQLite returns; PostgreSQL's rows already hold them so (ids and timestamps printed by the server)."""
    tag, row_id, message_id, u3, u4, ts, *rest = values
    return (tag, id_text(row_id), id_text(message_id), id_text(u3), id_text(u4), timestamp_text(ts), *rest)


def _fact_row(values: Sequence[Any]) -> dict[str, Any]:
    """One row of :data:`_FACTS_SQL` (tags 1-4, in :func:`sealed_forms`) as ``lqai_verify.record`` fields."""
    tag, row_id, message_id, u3, _, created_at, i1, i2, i3, f1, t1, t2, t3, t4, t5, t6, t7, j1, i4, i5, t8, j2 = values
    row: dict[str, Any] = {
        "table": record.ROW_TABLES[tag - 1],
        "id": row_id,
        "message": message_id,
        "created_at": created_at,
    }
    if tag in (1, 2):
        row.update({"document": u3} if tag == 1 else {"opinion": u3, "opinion_provider": t5})
        row.update(
            {
                "position": i1,
                "quote": t1,
                "offset_start": i2,
                "offset_end": i3,
                "method": t2,
                "confidence": f1,
                "unverified_reason": t3,
                "passage_sha256": t4,
                "alterations": json_value(j1),
                "answer_offset_start": i4,
                "answer_offset_end": i5,
                "answer_unplaced_reason": t8,
                "context_flags": json_value(j2),
            }
        )
    elif tag == 3:
        row.update(zip(record.ROW_FIELDS[record.TOOL][4:], (i1, t1, t2, t3, t4, t5, t6, t7), strict=True))
    else:
        row.update(zip(record.ROW_FIELDS[record.CASE][4:], (i1, i2, t1, t2, t3, t4, t5, u3, t6, t7, t8), strict=True))
    return row


def turn_facts(message_ids: Iterable[UUID | str]) -> dict[str, TurnFacts]:
    """The facts of the given assistant messages, by message id (str): one query (:data:`_FACTS_SQL`),
    whatever the number of turns. Rows are in the order of their table in
    :data:`lqai_verify.record.ROW_TABLES`, then by id."""
    ids = list(message_ids)
    return facts_of(ids_parameter(ids)) if ids else {}


def facts_of(turns: str) -> dict[str, TurnFacts]:
    """:func:`turn_facts` of the turns of an :func:`ids_parameter` (for a caller that reads more than the facts
    of the same turns, with one parameter)."""
    facts: dict[str, TurnFacts] = {}
    with connection.cursor() as cursor:
        cursor.execute(_facts_sql(), {"turns": turns})
        rows: Iterable[Sequence[Any]] = cursor.fetchall()
    if connection.vendor != "postgresql":
        rows = map(sealed_forms, rows)
    for values in rows:
        if values[0] == 0:
            _, chat_id, message_id, project_id, question_id, finalized_at, *_ = values
            question, answer, status, verdict, model = values[10:15]
            turn: dict[str, Any] = {
                "message": message_id,
                "chat": chat_id,
                "project": project_id,
                "question_message": question_id,
                "question": question,
                "answer_sha256": record.text_sha256(answer),
                "status": status,
                "verdict": verdict,
                "finalized_at": finalized_at,
                "model_name": model,
            }
            facts[turn["message"]] = TurnFacts(turn=turn, answer=answer)
        else:
            row = _fact_row(values)
            turn_of_row = facts.get(row["message"])
            if turn_of_row is not None:  # a row whose message is gone belongs to no turn: the turn is missing
                turn_of_row.rows.append(row)
    return facts


def seal_fields(seal: TurnSeal) -> dict[str, Any]:
    """A seal as ``lqai_verify.record`` reads it (the export's ``seals.jsonl`` lines)."""
    return {
        "chain": seal.chain,
        "sequence": seal.sequence,
        "previous_sha256": seal.previous_sha256,
        "message": _id(seal.message_id),
        "finalize_number": seal.finalize_number,
        "finalized_at": iso(seal.finalized_at),
        "verifier_version": seal.verifier_version,
        "row_digests": seal.row_digests,
        "facts_sha256": seal.facts_sha256,
        "sealed_at": iso(seal.sealed_at),
        "late": seal.late,
        "key_fingerprint": seal.key_fingerprint,
        "seal_sha256": seal.seal_sha256,
        "signature": seal.signature,
    }


# Takes (creating them if needed) and locks the head rows of the chains listed, in the order listed (sorted:
# one lock order for every writer), returning where each chain ends: the upsert locks each conflicting row
# and returns its latest committed version, like SELECT ... FOR UPDATE. One row per chain in VALUES.
_LOCK_HEADS_SQL = (
    f"INSERT INTO {HEADS_TABLE} (chain, sequence, seal_sha256, project_id, chat_id) VALUES {{values}} "  # noqa: S608
    f"ON CONFLICT (chain) DO UPDATE SET sequence = {HEADS_TABLE}.sequence RETURNING chain, sequence, seal_sha256"
)
# Moves each chain's head to its new last seal. One (chain, sequence, digest) row per chain in VALUES (whose
# columns are column1, column2, column3 on both PostgreSQL and SQLite).
_MOVE_HEADS_SQL = (
    f"UPDATE {HEADS_TABLE} SET sequence = moved.column2, seal_sha256 = moved.column3 "  # noqa: S608
    f"FROM (VALUES {{values}}) AS moved WHERE {HEADS_TABLE}.chain = moved.column1"
)
# PostgreSQL: the seals' insert, returning each seal's id. Then, in a statement of its own, the move of their
# heads (:data:`_MOVE_HEADS_SQL`), which also puts the lock bound set by :data:`_BOUND_LOCK_HEADS_SQL` back: the
# triggers of ``citations.0020`` take each seal after its chain's head, then the head to its chain's last seal.
_INSERT_SEALS_SQL = f"""
INSERT INTO {TurnSeal._meta.db_table} ({{columns}}) VALUES {{seals}}
RETURNING id, CAST(message_id AS text), finalize_number
"""  # noqa: S608 - table and column names from the model's _meta, values as parameters
_MOVE_HEADS_AND_UNBOUND_SQL = """
WITH moved AS (
    {move} RETURNING 1
)
SELECT set_config('lock_timeout', %s, true)
"""
# PostgreSQL: the lock of the head rows in one round trip with what sealing needs before it. ``bound`` bounds
# the wait for the head rows for the rest of the (sub)transaction (``set_config(..., true)`` is ``SET LOCAL``)
# and keeps the bound before, to put back; the upsert (as above, sorted) reads from ``bound``, so the bound is
# set before the first head is locked; ``sealed`` counts the seals each turn already has (its finalize number
# is one more). Rows: ('head', chain, sequence, digest), ('sealed', message id, count, NULL),
# ('lock_timeout', the bound before, NULL, NULL).
_BOUND_LOCK_HEADS_SQL = f"""
WITH bound AS (
    SELECT old.lock_timeout, set_config('lock_timeout', %s, true) AS lock_timeout_now
      FROM (SELECT current_setting('lock_timeout') AS lock_timeout OFFSET 0) AS old
), heads AS (
    INSERT INTO {HEADS_TABLE} (chain, sequence, seal_sha256, project_id, chat_id)
    SELECT chains.chain, 0, '', chains.project_id, chains.chat_id
      FROM (VALUES {{chains}}) AS chains (chain, project_id, chat_id) CROSS JOIN bound
     ORDER BY chains.chain
    ON CONFLICT (chain) DO UPDATE SET sequence = {HEADS_TABLE}.sequence
    RETURNING chain, sequence, seal_sha256
)
SELECT 'head', chain, sequence, seal_sha256 FROM heads
UNION ALL
SELECT 'sealed', CAST(message_id AS text), COUNT(*), NULL FROM {TurnSeal._meta.db_table}
 WHERE message_id IN ({{messages}}) GROUP BY message_id
UNION ALL
SELECT 'lock_timeout', lock_timeout, NULL, NULL FROM bound
"""  # noqa: S608 - table names from the models' _meta, values as parameters


def _owner(turn: dict[str, Any]) -> tuple[Any, Any]:
    """A chain's owner columns (project_id, chat_id), as the backend stores a UUID (32 hex digits on SQLite)."""
    owner = UUID(turn["project"] or turn["chat"])
    stored = owner if connection.vendor == "postgresql" else owner.hex
    return (stored, None) if turn["project"] else (None, stored)


def seal_turn(*, message_id: UUID | str, late: bool = False) -> TurnSeal:
    """Seal the current facts of one finalized turn, as the next seal of its chain (the ``post_finalize``
    receiver's call, in the turn's transaction): :func:`seal_turns` of that one turn, read and written in one
    savepoint, so that a database error in the read too leaves the caller's transaction usable."""
    with transaction.atomic():
        facts = turn_facts([message_id]).get(str(UUID(str(message_id))))
        if facts is None:
            raise ValueError(f"message {message_id} is not a finalized turn")
        return _write_seals([facts], late=late)[0]


def seal_turns(turns: Sequence[TurnFacts], *, late: bool = False) -> list[TurnSeal]:
    """Seal each turn's facts (as read by :func:`turn_facts`), in the order given, as the next seals of their
    chains; all or nothing, in a savepoint of the caller's transaction. A constant number of queries whatever
    the number of turns: one upsert locking every chain head concerned (sorted by chain) that also reads the
    seals' finalize numbers, one insert of the seals, one update of the heads. On PostgreSQL the wait for the
    heads is bounded by ``LQAI_LEDGER_TIMEOUT``, set in the statement that locks them and put back in the one
    that moves them. Raises ``ValueError`` if a turn is not finalized."""
    with transaction.atomic():
        return _write_seals(turns, late=late)


def _write_seals(turns: Sequence[TurnFacts], *, late: bool) -> list[TurnSeal]:
    """:func:`seal_turns`' writes, in the caller's savepoint."""
    for facts in turns:
        if facts.turn["finalized_at"] is None:
            raise ValueError(f"message {facts.turn['message']} is not a finalized turn")
    if not turns:
        return []
    chains = sorted({facts.chain for facts in turns})
    fingerprint = keys.current_fingerprint()
    private_key = keys.signing_key()
    owners = {facts.chain: _owner(facts.turn) for facts in turns}
    messages = list(dict.fromkeys(UUID(facts.turn["message"]) for facts in turns))
    with connection.cursor() as cursor:
        bounded = connection.vendor == "postgresql"
        heads: dict[str, tuple[int, str]] = {}
        finalized_before: dict[UUID, int] = {}
        if bounded:
            cursor.execute(
                _BOUND_LOCK_HEADS_SQL.format(
                    chains=", ".join(["(%s, CAST(%s AS uuid), CAST(%s AS uuid))"] * len(chains)),
                    messages=", ".join(["%s"] * len(messages)),
                ),
                [
                    f"{max(1, round(settings.LQAI_LEDGER_TIMEOUT * 1000))}ms",
                    *(value for chain in chains for value in (chain, *owners[chain])),
                    *messages,
                ],
            )
            for kind, key, number, digest in cursor.fetchall():
                if kind == "head":
                    heads[key] = (int(number), digest)
                elif kind == "sealed":
                    finalized_before[UUID(key)] = int(number)
                else:
                    old_lock_timeout = key
        else:
            finalized_before = dict(
                TurnSeal.objects.filter(message_id__in=messages)
                .order_by()
                .values("message_id")
                .annotate(count=Count("id"))
                .values_list("message_id", "count")
            )
            cursor.execute(
                _LOCK_HEADS_SQL.format(values=", ".join(["(%s, 0, '', %s, %s)"] * len(chains))),
                [value for chain in chains for value in (chain, *owners[chain])],
            )
            heads = {chain: (int(sequence), digest) for chain, sequence, digest in cursor.fetchall()}
        sealed_at = iso(timezone.now())
        created = []
        for facts in turns:
            digests = facts.digests()
            last_sequence, last_digest = heads[facts.chain]
            message = UUID(facts.turn["message"])
            finalize_number = finalized_before.get(message, 0) + 1
            finalized_before[message] = finalize_number
            fields: dict[str, Any] = {
                "chain": facts.chain,
                "sequence": last_sequence + 1,
                "previous_sha256": last_digest,
                "message": facts.turn["message"],
                "finalize_number": finalize_number,
                "finalized_at": facts.turn["finalized_at"],
                "facts_sha256": record.facts_sha256(
                    turn_digest=digests["turn"],
                    row_digests=digests["rows"],
                    verifier_version=VERIFIER_VERSION,
                    facts_format=record.sealed_format(digests),
                ),
                "sealed_at": sealed_at,
                "late": late,
                "key_fingerprint": fingerprint,
            }
            payload = record.seal_payload(fields)
            seal = TurnSeal(
                message_id=message,
                chain=facts.chain,
                sequence=fields["sequence"],
                previous_sha256=last_digest,
                finalize_number=finalize_number,
                finalized_at=datetime.datetime.fromisoformat(fields["finalized_at"]),
                verifier_version=VERIFIER_VERSION,
                row_digests=digests,
                facts_sha256=fields["facts_sha256"],
                sealed_at=datetime.datetime.fromisoformat(sealed_at),  # type: ignore[arg-type]
                late=late,
                key_fingerprint=fingerprint,
                seal_sha256=record.sha256_hex(payload),
                signature=record.sign(private_key, payload),
            )
            heads[facts.chain] = (seal.sequence, seal.seal_sha256)
            created.append(seal)
        moved = [value for chain in chains for value in (chain, heads[chain][0], heads[chain][1])]
        move = _MOVE_HEADS_SQL.format(values=", ".join(["(%s, CAST(%s AS BIGINT), %s)"] * len(chains)))
        if not bounded:
            TurnSeal.objects.bulk_create(created)
            cursor.execute(move, moved)
            return created
        columns = [f for f in TurnSeal._meta.concrete_fields if not f.primary_key]
        cursor.execute(
            _INSERT_SEALS_SQL.format(
                columns=", ".join(f.column for f in columns),
                seals=", ".join([f"({', '.join(['%s'] * len(columns))})"] * len(created)),
            ),
            [f.get_db_prep_save(getattr(seal, f.attname), connection) for seal in created for f in columns],
        )
        ids = {(message_id, number): pk for pk, message_id, number in cursor.fetchall()}
        cursor.execute(_MOVE_HEADS_AND_UNBOUND_SQL.format(move=move), [*moved, old_lock_timeout])
        for seal in created:
            seal.pk = ids[(str(seal.message_id), seal.finalize_number)]
            seal._state.adding = False
    return created


def finalized_turns(matter_id: UUID | None = None) -> QuerySet[Message]:
    """The finalized turns (assistant messages), of every matter or of one."""
    finalized = Message.objects.filter(role=Message.Role.ASSISTANT, finalized_at__isnull=False)
    return finalized if matter_id is None else finalized.filter(chat__project_id=matter_id)


def unsealed_turns(matter_id: UUID | None = None) -> QuerySet[Message]:
    """Finalized turns whose last finalize has no seal (a sealing failure, or a turn from before sealing)."""
    return unsealed_turns_of(finalized_turns(matter_id))


def unsealed_turns_of(turns: QuerySet[Message]) -> QuerySet[Message]:
    """Those of the finalized ``turns`` whose last finalize has no seal."""
    sealed = TurnSeal.objects.filter(message_id=OuterRef("pk"), finalized_at=OuterRef("finalized_at"))
    return turns.filter(~Exists(sealed))


DEFAULT_LATE_BATCH = 500


def unsealed_after(after: tuple[datetime.datetime, UUID] | None, *, matter_id: UUID | None = None) -> QuerySet[Message]:
    """:func:`unsealed_turns` in finalize order, from after the turn finalized at ``after = (finalized_at,
    id)`` (from the first when ``None``): an index range scan of ``messages_finalized_idx`` from there."""
    pending = unsealed_turns(matter_id)
    if after is not None:
        # The ``>=`` bounds the range scan; the OR alone would read the index from its start.
        finalized_at, message_id = after
        pending = pending.filter(
            Q(finalized_at__gte=finalized_at), Q(finalized_at__gt=finalized_at) | Q(id__gt=message_id)
        )
    return pending.order_by("finalized_at", "id")


def seal_late(
    *,
    matter_id: UUID | None = None,
    batch_size: int = DEFAULT_LATE_BATCH,
    on_batch: Callable[[int], object] | None = None,
) -> int:
    """Seal every finalized turn whose last finalize has no seal, marked ``late`` (``manage.py seal_turns``):
    in finalize order, one transaction per batch (each turn's facts read with the batch's, one query per
    table). Each batch starts after the last turn of the one before (keyset on ``(finalized_at, id)``, through
    ``messages_finalized_idx``), so a batch costs its own turns, not a scan of every turn sealed before it.
    Resumable and idempotent: every batch is chosen among the turns still unsealed, so a rerun (or a run
    stopped half-way and started again) seals only what is left; a turn whose finalize commits behind the
    walk (finalized before its last batch, committed after it) is left to the next run, as ``verify_ledger``
    lists it unsealed. Returns the number sealed."""
    sealed = 0
    after: tuple[datetime.datetime, UUID] | None = None
    while True:
        with transaction.atomic():
            batch = list(unsealed_after(after, matter_id=matter_id).values_list("pk", "finalized_at")[:batch_size])
            if not batch:
                return sealed
            ids = [message_id for message_id, _ in batch]
            facts = turn_facts(ids)
            seal_turns([facts[str(message_id)] for message_id in ids], late=True)
        sealed += len(ids)
        message_id, finalized_at = batch[-1]
        after = (cast(datetime.datetime, finalized_at), message_id)  # unsealed turns are finalized
        if on_batch is not None:
            on_batch(len(ids))
