"""Checking the sealed record (``manage.py verify_ledger``): every seal recomputed, every chain link
followed, every turn's current facts compared with its seal, and every ledger entry with its sealed row.

Set-based and batched: seals are read in chain order, keyset-paginated on ``(chain, sequence)``, and each
batch's turns, rows and ledger entries are read with one query per table (``seals.turn_facts``), so memory
stays flat however large the record: two batches at most, since the next is read while one is checked in a
second thread (the reads are mostly a wait on the database, the checks pure Python, in chain order).

On PostgreSQL the whole check reads one snapshot (:func:`one_snapshot`): the record as it stood when the check
began, whatever turns commit while it runs.

Signatures: the last seal of each chain is checked (each seal's digest covers its predecessor's, so the
chain's last signature authenticates every seal before it once every digest and link is recomputed);
``all_signatures`` checks every one.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator, Sequence
from concurrent.futures import Future, ThreadPoolExecutor
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any
from uuid import UUID

from django.db import connection, transaction
from django.db.models import Q, QuerySet

from citations import keys, partitions, seals
from citations.models import CitationLedgerEntry, SealChainHead, TurnSeal
from citations.seals import unsealed_turns
from lqai_verify import record

DEFAULT_BATCH_SIZE = 2_000
_SOURCE_TABLES = (
    ("message_citation_id", record.KB),
    ("message_caselaw_citation_id", record.CASELAW),
    ("message_tool_source_id", record.TOOL),
    ("message_case_citation_id", record.CASE),
)


@dataclass(frozen=True, slots=True)
class Problem:
    """One way the record is broken: which turn (message id, when known), where in which chain, and what."""

    what: str
    message: str | None = None
    chain: str | None = None
    sequence: int | None = None

    def __str__(self) -> str:
        where = f"turn {self.message}" if self.message else "the record"
        place = f" ({self.chain} #{self.sequence})" if self.chain and self.sequence else ""
        return f"{where}{place}: {self.what}"


@dataclass(slots=True)
class Integrity:
    """What ``verify_ledger`` found: counts, and the first ``limit`` problems (``problem_count`` in all)."""

    limit: int
    seals: int = 0
    turns: int = 0
    rows: int = 0
    entries: int = 0
    chains: int = 0
    signatures: int = 0
    unsealed: int = 0
    # Sealed rows whose ledger entry went with a dropped month (citations.partitions): not a problem.
    dropped: int = 0
    problem_count: int = 0
    problems: list[Problem] = field(default_factory=list)

    @property
    def intact(self) -> bool:
        return self.problem_count == 0

    def add(self, problem: Problem) -> None:
        self.problem_count += 1
        if len(self.problems) < self.limit:
            self.problems.append(problem)


def _chain_of(matter_id: UUID | None) -> str | None:
    return None if matter_id is None else seals.chain_of(project_id=str(matter_id), chat_id="")


def _chain_filter(matter_id: UUID | None) -> Q:
    return Q() if matter_id is None else Q(chain=_chain_of(matter_id))


def sealed_in_scope(matter_id: UUID | None = None) -> QuerySet[TurnSeal]:
    return TurnSeal.objects.filter(_chain_filter(matter_id))


# A keyset page of seals in chain order, from just after ``(%(chain)s, %(sequence)s)``, in one chain (``%(only)s``)
# or all, each with whether a later finalize of its turn was sealed too. Ids and (on PostgreSQL) timestamps
# are read as text, as ``seals.turn_facts`` reads them. The row-value comparison is an index range scan of
# turn_seals_chain_sequence_uniq from the last seal read, so each batch costs its own rows only.
_SEALS_SQL = f"""
SELECT s.chain, s.sequence, s.previous_sha256, CAST(s.message_id AS text), s.finalize_number,
       {{finalized_at}}, s.verifier_version, s.row_digests, s.facts_sha256, {{sealed_at}}, s.late,
       s.key_fingerprint, s.seal_sha256, s.signature,
       EXISTS (SELECT 1 FROM {TurnSeal._meta.db_table} later
                WHERE later.message_id = s.message_id AND later.finalize_number > s.finalize_number)
  FROM {TurnSeal._meta.db_table} s
 WHERE (s.chain, s.sequence) > (%(chain)s, %(sequence)s) AND (%(only)s IS NULL OR s.chain = %(only)s)
 ORDER BY s.chain, s.sequence
 LIMIT %(limit)s
"""  # noqa: S608 - the table name from the model's _meta, values as parameters
_SEAL_COLUMNS = (
    "chain",
    "sequence",
    "previous_sha256",
    "message",
    "finalize_number",
    "finalized_at",
    "verifier_version",
    "row_digests",
    "facts_sha256",
    "sealed_at",
    "late",
    "key_fingerprint",
    "seal_sha256",
    "signature",
)


def _seal_page(*, after: tuple[str, int], only: str | None, limit: int) -> list[tuple[dict[str, Any], bool]]:
    """One page of :data:`_SEALS_SQL`: each seal as ``lqai_verify.record`` reads it, and whether a later
    finalize of its turn was sealed too."""
    sql = _SEALS_SQL.format(finalized_at=seals.iso_sql("s.finalized_at"), sealed_at=seals.iso_sql("s.sealed_at"))
    with connection.cursor() as cursor:
        cursor.execute(sql, {"chain": after[0], "sequence": after[1], "only": only, "limit": limit})
        rows = cursor.fetchall()
    page = []
    for *values, superseded in rows:
        seal = dict(zip(_SEAL_COLUMNS, values, strict=True))
        seal["message"] = seals.id_text(seal["message"])
        seal["finalized_at"] = seals.timestamp_text(seal["finalized_at"])
        seal["sealed_at"] = seals.timestamp_text(seal["sealed_at"])
        seal["row_digests"] = seals.json_value(seal["row_digests"])
        seal["late"] = bool(seal["late"])
        page.append((seal, bool(superseded)))
    return page


# A batch's ledger entries, ids read as text (see ``seals.turn_facts``), each with its row's key
# (``lqai_verify.record.row_key``) made by the database from the one source column set. The messages are one
# parameter, ``%(messages)s`` (``seals.in_ids``).
_ENTRIES_SQL = f"""
SELECT CAST(id AS text), CAST(message_id AS text), CAST(chat_id AS text), CAST(project_id AS text),
       source_kind, verification_status, confidence, provider,
       COALESCE({", ".join(f"'{table}:' || CAST({column} AS text)" for column, table in _SOURCE_TABLES)})
  FROM {CitationLedgerEntry._meta.db_table}
 WHERE message_id {{in_messages}}
"""  # noqa: S608 - the table and column names from the model's _meta, values as parameters


_ENTRY_FIELDS = (
    "id",
    "message",
    "chat",
    "project",
    "source_kind",
    "verification_status",
    "confidence",
    "provider",
    "source",
)


def entries_by_message(message_ids: Iterable[UUID | str]) -> dict[str, list[dict[str, Any]]]:
    """The ledger entries of the given messages, by message id, as ``lqai_verify.record`` reads them:
    ``{"id", "source": <row key>, <LEDGER_FIELDS>}`` (one query)."""
    ids = list(message_ids)
    return entries_of(seals.ids_parameter(ids)) if ids else {}


def entries_of(messages: str) -> dict[str, list[dict[str, Any]]]:
    """:func:`entries_by_message` of the messages of a ``seals.ids_parameter``."""
    by_message: dict[str, list[dict[str, Any]]] = {}
    with connection.cursor() as cursor:
        cursor.execute(_ENTRIES_SQL.format(in_messages=seals.in_ids("messages")), {"messages": messages})
        rows: Iterable[Sequence[Any]] = cursor.fetchall()
    if connection.vendor != "postgresql":  # PostgreSQL prints ids and row keys as sealed
        rows = ((*map(seals.id_text, values[:4]), *values[4:8], seals.row_key_text(values[8])) for values in rows)
    for values in rows:
        entry = dict(zip(_ENTRY_FIELDS, values, strict=True))
        by_message.setdefault(entry["message"], []).append(entry)
    return by_message


# One batch of seals in chain order, each with whether a later finalize of its turn was sealed too, and their
# turns' facts and ledger entries by message id.
Batch = tuple[list[tuple[dict[str, Any], bool]], dict[str, seals.TurnFacts], dict[str, list[dict[str, Any]]]]


def _batches(*, only: str | None, batch_size: int) -> Iterator[Batch]:
    """The seals of one chain (``only``) or of all, in chain order, in batches read with their facts and
    entries: one keyset page of seals and one query per table a batch."""
    after = ("", 0)
    while batch_seals := _seal_page(after=after, only=only, limit=batch_size):
        turns = seals.ids_parameter(sorted({seal["message"] for seal, _ in batch_seals}))
        yield batch_seals, seals.facts_of(turns), entries_of(turns)
        last = batch_seals[-1][0]
        after = (last["chain"], last["sequence"])


def _checked(checking: Future[None], size: int, *, on_batch: Callable[[int], object] | None) -> None:
    """Wait for a batch's check (raising its error, if any), then count it."""
    checking.result()
    if on_batch is not None:
        on_batch(size)


# PostgreSQL: the snapshot verify_ledger reads, and how it reads it. A batch looks its turns' rows up by their
# message's index; with the default cost of a random page read (4, a spinning disk's) the planner would rather
# scan every source table whole for a batch of 2,000 turns over tables of a million rows (measured: 176 ms a
# batch, 50-110 ms with a cost of 1.1; benchmarks/RESULTS.md, 2026-12-02 19:30). 1.1 is PostgreSQL's own
# suggestion for solid-state storage, and holds for a record read while it is hot; a deployment that has
# set a lower cost keeps it. Both for this transaction only.
_SNAPSHOT_SQL = (
    "SET TRANSACTION ISOLATION LEVEL REPEATABLE READ, READ ONLY",
    "SELECT set_config('random_page_cost', "
    "CAST(LEAST(CAST(current_setting('random_page_cost') AS float8), 1.1) AS text), true)",
)


@contextmanager
def one_snapshot() -> Iterator[None]:
    """On PostgreSQL, outside a transaction: one read-only transaction that sees the record as of its first
    read, so that turns committed meanwhile are neither half-seen nor taken for a broken chain (their seals
    past a chain's end as read, say). ``verify_ledger`` and ``export_matter`` read through it. It holds back
    vacuum's cleanup of rows changed while it lasts, as any long snapshot (``pg_dump``'s) does. Elsewhere, or
    inside the caller's transaction, that transaction (SQLite's read transaction would block every writer for
    the whole read)."""
    if connection.vendor != "postgresql" or connection.in_atomic_block:
        yield
        return
    with transaction.atomic():
        with connection.cursor() as cursor:
            for statement in _SNAPSHOT_SQL:
                cursor.execute(statement)
        yield


@one_snapshot()
def verify_record(
    *,
    matter_id: UUID | None = None,
    batch_size: int = DEFAULT_BATCH_SIZE,
    all_signatures: bool = False,
    limit: int = 20,
    on_batch: Callable[[int], object] | None = None,
) -> Integrity:
    """Check the sealed record of every chain (or of one matter's) as of one instant (:func:`one_snapshot`):
    see the module docstring. Reads only."""
    result = Integrity(limit=limit)
    public_keys = keys.public_keys()
    heads = dict(SealChainHead.objects.filter(_chain_filter(matter_id)).values_list("chain", "sequence"))
    seen_chains: set[str] = set()
    previous: dict[str, Any] | None = None
    dropped = [(seals.iso(start), seals.iso(end)) for start, end in partitions.dropped_ranges()]

    def check_signature(seal: dict[str, Any]) -> None:
        result.signatures += 1
        key = public_keys.get(seal["key_fingerprint"])
        if key is None:
            result.add(
                Problem(
                    f"signed by an unknown key {seal['key_fingerprint'][:16]}... (not the current key, nor in "
                    "LQAI_LEDGER_RETIRED_PUBLIC_KEYS)",
                    seal["message"],
                    seal["chain"],
                    seal["sequence"],
                )
            )
        elif not record.signature_valid(key, seal["signature"], record.seal_payload(seal)):
            result.add(Problem("its signature is not valid", seal["message"], seal["chain"], seal["sequence"]))

    def end_chain(last: dict[str, Any]) -> None:
        if not all_signatures:
            check_signature(last)
        head = heads.get(last["chain"])
        if head is not None and head != last["sequence"]:
            result.add(
                Problem(
                    f"the chain's head says it ends at #{head}, its last seal is #{last['sequence']} "
                    "(seals at its end are missing)",
                    last["message"],
                    last["chain"],
                    last["sequence"],
                )
            )

    def check(batch: Batch) -> None:
        nonlocal previous
        batch_seals, facts, entries = batch
        for seal, superseded in batch_seals:
            where = (seal["message"], seal["chain"], seal["sequence"])
            result.seals += 1
            if previous is not None and previous["chain"] != seal["chain"]:
                end_chain(previous)
                previous = None
            if previous is None:
                result.chains += 1
                seen_chains.add(seal["chain"])
                if seal["sequence"] != 1:
                    result.add(Problem(f"the chain starts at #{seal['sequence']}: seals before it are missing", *where))
            else:
                if seal["sequence"] != previous["sequence"] + 1:
                    result.add(
                        Problem(
                            f"seal #{seal['sequence']} follows #{previous['sequence']}: "
                            f"{seal['sequence'] - previous['sequence'] - 1} seal(s) missing (deleted turns)",
                            *where,
                        )
                    )
                if seal["previous_sha256"] != previous["seal_sha256"]:
                    result.add(Problem("its link to the previous seal is broken", *where))
            for difference in record.seal_differences(seal):
                result.add(Problem(difference, *where))
            if all_signatures:
                check_signature(seal)
            turn_facts = facts.get(seal["message"])
            latest = not superseded and (
                turn_facts is not None and turn_facts.turn["finalized_at"] == seal["finalized_at"]
            )
            if turn_facts is None:
                result.add(Problem("the sealed turn is missing (deleted)", *where))
            else:
                if latest:
                    result.turns += 1
                    result.rows += len(turn_facts.rows)
                for difference in record.facts_differences(
                    seal=seal, turn=turn_facts.turn, rows=turn_facts.rows, latest=latest
                ):
                    result.add(Problem(difference, *where))
                if latest:
                    turn_entries = entries.get(seal["message"], [])
                    result.entries += len(turn_entries)
                    sealed_rows = seal["row_digests"].get("rows", {})
                    if dropped:
                        # A row of a dropped month has no entry on purpose (its tombstone says so).
                        indexed = {entry["source"] for entry in turn_entries}
                        gone = {
                            record.row_key(row)
                            for row in turn_facts.rows
                            if any(start <= row["created_at"] < end for start, end in dropped)
                        } & (sealed_rows.keys() - indexed)
                        result.dropped += len(gone)
                        sealed_rows = {key: digest for key, digest in sealed_rows.items() if key not in gone}
                    for difference in record.ledger_problems(
                        entries=turn_entries,
                        turn=turn_facts.turn,
                        rows=turn_facts.rows,
                        sealed_rows=sealed_rows,
                    ):
                        result.add(Problem(difference, *where))
            previous = seal

    # The batches are read in this thread while the one before is checked in another (the checks are pure
    # Python, the reads mostly a wait on the database), one batch ahead, checked in order.
    with ThreadPoolExecutor(max_workers=1, thread_name_prefix="verify_ledger") as checker:
        checking: tuple[Future[None], int] | None = None
        for batch in _batches(only=_chain_of(matter_id), batch_size=batch_size):
            if checking is not None:
                _checked(*checking, on_batch=on_batch)
            checking = (checker.submit(check, batch), len(batch[0]))
        if checking is not None:
            _checked(*checking, on_batch=on_batch)
    if previous is not None:
        end_chain(previous)
    for chain in sorted(heads.keys() - seen_chains):
        if heads[chain]:
            result.add(Problem(f"the chain's head says it ends at #{heads[chain]}, but it has no seals", None, chain))
    for message_id in unsealed_turns(matter_id).order_by("finalized_at", "id").values_list("id", flat=True)[:limit]:
        result.add(Problem("unsealed: its last finalize has no seal (run `manage.py seal_turns`)", str(message_id)))
    result.unsealed = unsealed_turns(matter_id).count()
    result.problem_count += max(0, result.unsealed - min(result.unsealed, limit))
    return result
