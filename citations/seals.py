"""Sealing finalized turns: each finalize of a turn gets a seal over its facts, chained per matter and
signed with the ledger key (``citations.keys``). The byte formats are :mod:`lqai_verify.record`'s, shared
with the offline verifier.

:func:`turn_facts` reads the facts of a batch of turns (one query per table, whatever the batch size), for
sealing, for ``verify_ledger`` and for the export alike; :func:`seal_turn` writes one seal.

Lock order (no deadlock): a turn's transaction locks its message row first (finalize), then, as its very
last write, the head row of its chain (``seal_chain_heads``, ``SELECT ... FOR UPDATE``); nothing else is
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
from django.db.models import Exists, OuterRef, Q, QuerySet
from django.utils import timezone

from chats.models import (
    CaseCitation,
    CaselawOpinion,
    Chat,
    DocumentQuote,
    Message,
    MessageToolSource,
    OpinionQuote,
    StatuteCitation,
)
from citations import keys
from citations.ledger import bounded_waits
from citations.models import SealChainHead, TurnSeal
from lqai_verify import record
from lqai_verify.verification import VERIFIER_VERSION


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
    # How many seals the turn had when its facts were read (its next seal's finalize number is one more).
    seals: int = 0

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


# The SQL below reads ids and (on PostgreSQL) timestamps as text; these print them as sealed on both databases.
def iso_sql(column: str) -> str:
    """SQL for a timestamp column as :func:`timestamp_text` reads it: on PostgreSQL its text as :func:`iso`
    prints it (UTC, microseconds, "+00:00"); elsewhere the column itself."""
    if connection.vendor == "postgresql":
        return f"""to_char({column} AT TIME ZONE 'UTC', 'YYYY-MM-DD"T"HH24:MI:SS.US"+00:00"')"""
    return column


def in_ids(name: str) -> str:
    """SQL saying that the column before it is one of the ids of the ``%(<name>)s`` parameter
    (:func:`ids_parameter`): ``= ANY`` of a ``uuid[]`` on PostgreSQL, the values of a JSON array on SQLite."""
    if connection.vendor == "postgresql":
        return f"= ANY(CAST(%({name})s AS uuid[]))"
    return f"IN (SELECT value FROM json_each(%({name})s))"  # noqa: S608 - a parameter's name, no value


def ids_parameter(ids: Iterable[UUID | str]) -> str:
    """The value of an :func:`in_ids` parameter: PostgreSQL's array literal of the distinct ids, or a JSON
    array of them as SQLite stores them (32 hex digits)."""
    distinct = dict.fromkeys(UUID(str(i)) for i in ids)
    if connection.vendor == "postgresql":
        return "{" + ",".join(map(str, distinct)) + "}"
    return json.dumps([i.hex for i in distinct])


def id_text(value: str | None) -> str | None:
    """An id as sealed (canonical hyphenated form), from its text: PostgreSQL's, or SQLite's 32 hex digits."""
    if value is None or len(value) == 36:
        return value
    return str(UUID(value))


def row_key_text(value: str | None) -> str | None:
    """A row's key (``lqai_verify.record.row_key``) as sealed, from the database's ``<table>:<id text>``."""
    if value is None:
        return None
    table, _, row_id = value.partition(":")
    return f"{table}:{id_text(row_id)}"


def timestamp_text(value: Any) -> str | None:
    """A timestamp as sealed, from what the backend returns: PostgreSQL's text (:func:`iso_sql`), an aware
    datetime, or SQLite's naive UTC text."""
    if isinstance(value, str):
        value = datetime.datetime.fromisoformat(value)
    if value is not None and value.tzinfo is None:
        value = value.replace(tzinfo=datetime.UTC)
    return iso(value)


def json_value(value: Any) -> Any:
    """A JSON column's value, from what the backend returns (its text, or the value already decoded)."""
    return json.loads(value) if isinstance(value, str | bytes) else value


# A batch of turns' facts: one statement per table, each naming the sealed field it reads (``AS <field>``,
# lqai_verify.record.TURN_FIELDS and ROW_FIELDS), rows by id. Ids are read as text and, on PostgreSQL,
# timestamps printed as sealed by the server (:func:`iso_sql`): no UUID or datetime object is made per value
# only to be printed again. The turns are one parameter, ``%(turns)s`` (:func:`in_ids`).
_TURNS_SQL = f"""
SELECT CAST(m.id AS text) AS message, CAST(m.chat_id AS text) AS chat, CAST(c.project_id AS text) AS project,
       CAST(m.reply_to_id AS text) AS question_message, q.content AS question, m.status AS status,
       m.verdict AS verdict, {{finalized_at}} AS finalized_at, m.model_name AS model_name, m.content AS answer,
       (SELECT COUNT(*) FROM {TurnSeal._meta.db_table} s WHERE s.message_id = m.id) AS seals
  FROM {Message._meta.db_table} m
  JOIN {Chat._meta.db_table} c ON c.id = m.chat_id
  LEFT JOIN {Message._meta.db_table} q ON q.id = m.reply_to_id
 WHERE m.id {{in_turns}}
"""  # noqa: S608 - table names from the models' _meta, values as parameters
ROWS_SQL = {
    record.KB: f"""
SELECT CAST(r.id AS text) AS id, CAST(r.message_id AS text) AS message, {{created_at}} AS created_at,
       CAST(r.document_id AS text) AS document, r.position AS position, r.quote AS quote,
       r.source_offset_start AS offset_start, r.source_offset_end AS offset_end,
       r.verification_method AS method, r.verification_confidence AS confidence,
       r.unverified_reason AS unverified_reason, r.passage_sha256 AS passage_sha256, r.alterations AS alterations,
       r.answer_offset_start AS answer_offset_start, r.answer_offset_end AS answer_offset_end,
       r.answer_unplaced_reason AS answer_unplaced_reason, r.context_flags AS context_flags
  FROM {DocumentQuote._meta.db_table} r
 WHERE r.message_id {{in_turns}}
 ORDER BY r.id
""",  # noqa: S608 - table names from the models' _meta, values as parameters
    record.CASELAW: f"""
SELECT CAST(r.id AS text) AS id, CAST(r.message_id AS text) AS message, {{created_at}} AS created_at,
       CAST(r.opinion_id AS text) AS opinion, o.provider AS opinion_provider, r.position AS position,
       r.quote AS quote, r.source_offset_start AS offset_start, r.source_offset_end AS offset_end,
       r.verification_method AS method, r.verification_confidence AS confidence,
       r.unverified_reason AS unverified_reason, r.passage_sha256 AS passage_sha256, r.alterations AS alterations,
       r.answer_offset_start AS answer_offset_start, r.answer_offset_end AS answer_offset_end,
       r.answer_unplaced_reason AS answer_unplaced_reason, r.context_flags AS context_flags
  FROM {OpinionQuote._meta.db_table} r
  LEFT JOIN {CaselawOpinion._meta.db_table} o ON o.id = r.opinion_id
 WHERE r.message_id {{in_turns}}
 ORDER BY r.id
""",  # noqa: S608
    record.TOOL: f"""
SELECT CAST(r.id AS text) AS id, CAST(r.message_id AS text) AS message, {{created_at}} AS created_at,
       r.position AS position, r.source_kind AS source_kind, r.tool AS tool, r.provider AS provider,
       r.label AS label, r.subtitle AS subtitle, r.url AS url, r.external_ref AS external_ref
  FROM {MessageToolSource._meta.db_table} r
 WHERE r.message_id {{in_turns}}
 ORDER BY r.id
""",  # noqa: S608
    record.CASE: f"""
SELECT CAST(r.id AS text) AS id, CAST(r.message_id AS text) AS message, {{created_at}} AS created_at,
       r.answer_offset_start AS answer_offset_start, r.answer_offset_end AS answer_offset_end,
       r.kind AS kind, r.citation AS citation, r.case_name AS case_name, r.status AS status, r.detail AS detail,
       CAST(r.opinion_id AS text) AS opinion, r.provider AS provider, r.pin AS pin, r.pin_status AS pin_status
  FROM {CaseCitation._meta.db_table} r
 WHERE r.message_id {{in_turns}}
 ORDER BY r.id
""",  # noqa: S608
    record.STATUTE: f"""
SELECT CAST(r.id AS text) AS id, CAST(r.message_id AS text) AS message, {{created_at}} AS created_at,
       r.position AS position, r.kind AS kind, r.citation AS citation,
       r.answer_offset_start AS answer_offset_start, r.answer_offset_end AS answer_offset_end, r.cited AS cited,
       r.identifier AS identifier, r.pin AS pin, r.section_id AS section, r.code AS code, r.title AS title,
       r.release_point AS release_point, r.release_label AS release_label, r.release_official AS release_official,
       r.status AS status, r.reason AS reason, r.quote AS quote, r.verification_method AS method,
       r.verification_confidence AS confidence, r.source_offset_start AS offset_start,
       r.source_offset_end AS offset_end, r.passage_sha256 AS passage_sha256, r.alterations AS alterations,
       r.context_flags AS context_flags, r.found_in AS found_in
  FROM {StatuteCitation._meta.db_table} r
 WHERE r.message_id {{in_turns}}
 ORDER BY r.id
""",  # noqa: S608
}
# What turns a column's value into its sealed form, by the field it is read as: PostgreSQL's ids and timestamps
# are already (CAST, iso_sql); SQLite keeps 32 hex digits and naive UTC text, which it has no function to print.
_PRINTED_BY_POSTGRESQL: dict[str, Callable[[Any], Any]] = {
    **dict.fromkeys(("id", "message", "chat", "project", "question_message", "document", "opinion"), id_text),
    **dict.fromkeys(("created_at", "finalized_at"), timestamp_text),
}


def _boolean(value: Any) -> bool | None:
    """A boolean column as sealed: SQLite returns 0 or 1."""
    return None if value is None else bool(value)


_DECODED = {**dict.fromkeys(("alterations", "context_flags"), json_value), "release_official": _boolean}


def _sealed_rows(sql: str, parameters: dict[str, Any]) -> list[dict[str, Any]]:
    """The rows of one statement of :func:`turn_facts`, each by the fields its columns are named as, in their
    sealed form."""
    postgresql = connection.vendor == "postgresql"
    with connection.cursor() as cursor:
        cursor.execute(sql, parameters)
        names = [column[0] for column in cursor.description]
        rows = [dict(zip(names, values, strict=True)) for values in cursor.fetchall()]
    converters = {**({} if postgresql else _PRINTED_BY_POSTGRESQL), **_DECODED}
    convert = [(name, converters[name]) for name in names if name in converters]
    for row in rows:
        for name, function in convert:
            row[name] = function(row[name])
    return rows


def turn_facts(message_ids: Iterable[UUID | str]) -> dict[str, TurnFacts]:
    """The facts of the given assistant messages, by message id (str): one query for the messages (with their
    chats, questions and numbers of seals), then one per row table, whatever the number of turns. Rows are in
    the order of their table in :data:`lqai_verify.record.ROW_TABLES`, then by id. A row whose message is not
    among them is left out (a turn deleted below the application has no facts)."""
    ids = list(message_ids)
    if not ids:
        return {}
    facts: dict[str, TurnFacts] = {}
    parameters = {"turns": ids_parameter(ids)}
    in_turns = in_ids("turns")
    for turn in _sealed_rows(_TURNS_SQL.format(in_turns=in_turns, finalized_at=iso_sql("m.finalized_at")), parameters):
        answer, count = turn.pop("answer"), turn.pop("seals")
        turn["answer_sha256"] = record.text_sha256(answer)
        facts[turn["message"]] = TurnFacts(
            turn={name: turn[name] for name in record.TURN_FIELDS}, answer=answer, seals=count or 0
        )
    for table, sql in ROWS_SQL.items():
        for row in _sealed_rows(sql.format(in_turns=in_turns, created_at=iso_sql("r.created_at")), parameters):
            turn_of_row = facts.get(row["message"])
            if turn_of_row is not None:  # a row whose message is gone belongs to no turn: the turn is missing
                turn_of_row.rows.append({"table": table, **row})
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


def seal_turn(*, message_id: UUID | str, late: bool = False) -> TurnSeal:
    """Seal the current facts of one finalized turn, as the next seal of its chain (the ``post_finalize``
    receiver's call, in the turn's transaction): as :func:`seal_turns`, its facts read in the same savepoint,
    so that a database error in the read too leaves the caller's transaction usable. Raises ``ValueError`` if
    the message is not a finalized turn."""
    with transaction.atomic(), bounded_waits(settings.LQAI_LEDGER_TIMEOUT):
        facts = turn_facts([message_id]).get(str(UUID(str(message_id))))
        if facts is None:
            raise ValueError(f"message {message_id} is not a finalized turn")
        return _write_seals([facts], late=late)[0]


def seal_turns(turns: Sequence[TurnFacts], *, late: bool = False) -> list[TurnSeal]:
    """Seal each turn's facts (as read by :func:`turn_facts`), in the order given, as the next seals of their
    chains; all or nothing, in a savepoint of the caller's transaction. Each chain's head is locked
    (:func:`lock_heads`), the seals inserted, then each head moved to its chain's last new seal. On
    PostgreSQL the statements may wait and run for ``LQAI_LEDGER_TIMEOUT`` at most
    (:func:`citations.ledger.bounded_waits`). Raises ``ValueError`` if a turn is not finalized."""
    with transaction.atomic(), bounded_waits(settings.LQAI_LEDGER_TIMEOUT):
        return _write_seals(turns, late=late)


def _write_seals(turns: Sequence[TurnFacts], *, late: bool) -> list[TurnSeal]:
    """:func:`seal_turns`' writes, in the caller's savepoint."""
    for facts in turns:
        if facts.turn["finalized_at"] is None:
            raise ValueError(f"message {facts.turn['message']} is not a finalized turn")
    if not turns:
        return []
    heads = lock_heads({facts.chain: facts.turn for facts in turns})
    finalized_before = {UUID(facts.turn["message"]): facts.seals for facts in turns}
    sealed_at = timezone.now()
    last: dict[str, SealChainHead | TurnSeal] = dict(heads)
    created = []
    for facts in turns:
        message = UUID(facts.turn["message"])
        finalized_before[message] += 1
        seal = new_seal(
            facts, after=last[facts.chain], finalize_number=finalized_before[message], sealed_at=sealed_at, late=late
        )
        last[facts.chain] = seal
        created.append(seal)
    TurnSeal.objects.bulk_create(created)
    for chain, end in sorted(last.items()):  # each head moved to its chain's last seal, just inserted
        SealChainHead.objects.filter(chain=chain).update(sequence=end.sequence, seal_sha256=end.seal_sha256)
    return created


def lock_heads(owners: dict[str, dict[str, Any]]) -> dict[str, SealChainHead]:
    """Lock the head row of each chain of ``owners`` (chain: a turn of it, naming its matter or chat), creating
    those missing (at #0), for the rest of the caller's transaction; by chain.

    Lock order: the heads found are locked in chain order (``ORDER BY`` under ``FOR UPDATE`` locks the rows
    as they are sorted), then those just created, in chain order too. A turn's seal locks one head, so two
    turns never wait on each other in a cycle; a batch of ``seal_turns`` locks the heads of its chains at once.
    """
    chains = sorted(owners)
    locked = SealChainHead.objects.select_for_update().filter(chain__in=chains).order_by("chain")
    heads = {head.chain: head for head in locked}
    missing = [chain for chain in chains if chain not in heads]
    if missing:
        SealChainHead.objects.bulk_create(
            [
                SealChainHead(
                    chain=chain,
                    project_id=owners[chain]["project"],
                    chat_id=None if owners[chain]["project"] else owners[chain]["chat"],
                )
                for chain in missing
            ],
            ignore_conflicts=True,  # created meanwhile by another transaction: locked below all the same
        )
        heads.update((head.chain, head) for head in locked.filter(chain__in=missing))
    return heads


def new_seal(
    facts: TurnFacts,
    *,
    after: SealChainHead | TurnSeal,
    finalize_number: int,
    sealed_at: datetime.datetime,
    late: bool,
) -> TurnSeal:
    """The seal of ``facts`` (not yet saved) as the next after ``after`` (its chain's head, or the seal
    before it in the same batch), signed with the ledger key: its payload is ``lqai_verify.record``'s."""
    digests = facts.digests()
    fields: dict[str, Any] = {
        "chain": facts.chain,
        "sequence": after.sequence + 1,
        "previous_sha256": after.seal_sha256,
        "message": facts.turn["message"],
        "finalize_number": finalize_number,
        "finalized_at": facts.turn["finalized_at"],
        "facts_sha256": record.facts_sha256(
            turn_digest=digests["turn"],
            row_digests=digests["rows"],
            verifier_version=VERIFIER_VERSION,
            facts_format=record.sealed_format(digests),
        ),
        "sealed_at": iso(sealed_at),
        "late": late,
        "key_fingerprint": keys.current_fingerprint(),
    }
    payload = record.seal_payload(fields)
    return TurnSeal(
        message_id=UUID(fields["message"]),
        chain=fields["chain"],
        sequence=fields["sequence"],
        previous_sha256=fields["previous_sha256"],
        finalize_number=finalize_number,
        finalized_at=datetime.datetime.fromisoformat(fields["finalized_at"]),
        verifier_version=VERIFIER_VERSION,
        row_digests=digests,
        facts_sha256=fields["facts_sha256"],
        sealed_at=sealed_at,
        late=late,
        key_fingerprint=fields["key_fingerprint"],
        seal_sha256=record.sha256_hex(payload),
        signature=record.sign(keys.signing_key(), payload),
    )


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
