"""Checking the sealed record (``manage.py verify_ledger``): every seal recomputed, every chain link
followed, every turn's current facts compared with its seal, and every ledger entry with its sealed row.

Set-based and batched: seals are read in chain order, keyset-paginated on ``(chain, sequence)``, and each
batch's turns, rows and ledger entries are read with one query per table (``seals.turn_facts``), so memory
stays flat however large the record. Signatures: the last seal of each chain is checked (each seal's digest
covers its predecessor's, so the chain's last signature authenticates every seal before it once every
digest and link is recomputed); ``all_signatures`` checks every one.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from typing import Any
from uuid import UUID

from django.db import connection
from django.db.models import BooleanField, Exists, OuterRef, Q, QuerySet
from django.db.models.expressions import RawSQL

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


def _chain_filter(matter_id: UUID | None) -> Q:
    return Q() if matter_id is None else Q(chain=seals.chain_of(project_id=str(matter_id), chat_id=""))


def sealed_in_scope(matter_id: UUID | None = None) -> QuerySet[TurnSeal]:
    return TurnSeal.objects.filter(_chain_filter(matter_id))


_SEAL_COLUMNS = (
    "chain",
    "sequence",
    "previous_sha256",
    "message_id",
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


def _seal_dict(values: tuple[Any, ...]) -> dict[str, Any]:
    seal = dict(zip(_SEAL_COLUMNS, values, strict=True))
    seal["message"] = str(seal.pop("message_id"))
    seal["finalized_at"] = seals.iso(seal["finalized_at"])
    seal["sealed_at"] = seals.iso(seal["sealed_at"])
    return seal


# A batch's ledger entries, ids read as text (see ``seals.turn_facts``). One message id per placeholder.
_ENTRIES_SQL = f"""
SELECT CAST(id AS text), CAST(message_id AS text), CAST(chat_id AS text), CAST(project_id AS text),
       source_kind, verification_status, confidence, provider,
       CAST(message_citation_id AS text), CAST(message_caselaw_citation_id AS text),
       CAST(message_tool_source_id AS text), CAST(message_case_citation_id AS text)
  FROM {CitationLedgerEntry._meta.db_table}
 WHERE message_id IN ({{messages}})
"""  # noqa: S608 - the table name from the model's _meta, values as parameters


def entries_by_message(message_ids: Iterable[UUID | str]) -> dict[str, list[dict[str, Any]]]:
    """The ledger entries of the given messages, by message id, as ``lqai_verify.record`` reads them:
    ``{"id", "source": <row key>, <LEDGER_FIELDS>}`` (one query)."""
    by_message: dict[str, list[dict[str, Any]]] = {}
    pk = CitationLedgerEntry._meta.get_field("message")
    ids = [pk.get_db_prep_value(UUID(str(i)), connection) for i in dict.fromkeys(str(i) for i in message_ids)]
    if not ids:
        return by_message
    tables = [table for _, table in _SOURCE_TABLES]
    with connection.cursor() as cursor:
        cursor.execute(_ENTRIES_SQL.format(messages=", ".join(["%s"] * len(ids))), ids)
        rows = cursor.fetchall()
    for entry_id, message_id, chat_id, project_id, kind, status, confidence, provider, *sources in rows:
        source = next(
            (f"{table}:{seals.id_text(row)}" for table, row in zip(tables, sources, strict=True) if row is not None),
            None,
        )
        message = seals.id_text(message_id)
        by_message.setdefault(message, []).append(  # type: ignore[arg-type]
            {
                "id": seals.id_text(entry_id),
                "source": source,
                "message": message,
                "chat": seals.id_text(chat_id),
                "project": seals.id_text(project_id),
                "source_kind": kind,
                "verification_status": status,
                "confidence": confidence,
                "provider": provider,
            }
        )
    return by_message


def verify_record(
    *,
    matter_id: UUID | None = None,
    batch_size: int = DEFAULT_BATCH_SIZE,
    all_signatures: bool = False,
    limit: int = 20,
    on_batch: Callable[[int], object] | None = None,
) -> Integrity:
    """Check the sealed record of every chain (or of one matter's): see the module docstring. Reads only."""
    result = Integrity(limit=limit)
    public_keys = keys.public_keys()
    later = TurnSeal.objects.filter(message_id=OuterRef("message_id"), finalize_number__gt=OuterRef("finalize_number"))
    scope = sealed_in_scope(matter_id).annotate(superseded=Exists(later)).order_by("chain", "sequence")
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

    cursor_position: tuple[str, int] | None = None
    while True:
        batch_query = scope
        if cursor_position is not None:
            chain, sequence = cursor_position
            # A row-value comparison (the ORM has no public way to say it): an index range scan of
            # turn_seals_chain_sequence_uniq from the last seal read, so each batch costs its own rows only.
            after = RawSQL("(chain, sequence) > (%s, %s)", (chain, sequence), output_field=BooleanField())
            batch_query = batch_query.alias(after=after).filter(after=True)
        batch = list(batch_query.values_list(*_SEAL_COLUMNS, "superseded")[:batch_size])
        if not batch:
            break
        batch_seals = [(_seal_dict(values[:-1]), bool(values[-1])) for values in batch]
        message_ids = sorted({seal["message"] for seal, _ in batch_seals})
        facts = seals.turn_facts(message_ids)
        entries = entries_by_message(message_ids)
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
        last = batch_seals[-1][0]
        cursor_position = (last["chain"], last["sequence"])
        if on_batch is not None:
            on_batch(len(batch))
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
