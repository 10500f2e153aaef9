"""Checking the sealed record (``manage.py verify_ledger``): every seal recomputed, every chain link
followed, every turn's current facts compared with its seal, and every ledger entry with its sealed row.

Batched passes over the chains' links, then over the seals with their turns, rows and ledger entries, then one
query for entries filed under the wrong turn; ``held`` (``--extends``) also checks the last seals of earlier
exports. Memory stays flat however large the record; the first ``limit`` problems are listed in chain order.
The last signature of each chain is checked (``all_signatures``: every one). The passes, their order and
why: docs/export.md.
"""

from __future__ import annotations

import datetime
from collections.abc import Callable, Iterable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any, TypeVar
from uuid import UUID

from django.db import connection, transaction
from django.db.models import OuterRef, Q, QuerySet, Subquery

from citations import certificates, keys, partitions, reviews, seals
from citations.models import Certificate, CitationLedgerEntry, ReviewChainHead, ReviewDecision, SealChainHead, TurnSeal
from citations.seals import (
    id_text,
    ids_parameter,
    in_ids,
    iso_sql,
    json_value,
    row_key_text,
    timestamp_text,
    unsealed_turns,
)
from lqai_verify import certificates as certificate_format
from lqai_verify import decisions, record

DEFAULT_BATCH_SIZE = 2_000
_SOURCE_TABLES = (
    ("message_citation_id", record.KB),
    ("message_caselaw_citation_id", record.CASELAW),
    ("message_tool_source_id", record.TOOL),
    ("message_case_citation_id", record.CASE),
    ("message_statute_citation_id", record.STATUTE),
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


def _chain_order(problem: Problem) -> tuple[bool, str, int]:
    """Where a problem sorts: in chain order, each chain by sequence; problems of no chain (unsealed turns)
    last."""
    return (problem.chain is None, problem.chain or "", problem.sequence or 0)


@dataclass(slots=True)
class Integrity:
    """What ``verify_ledger`` found: counts, and the first ``limit`` problems in chain order
    (``problem_count`` in all; of one seal, in the order found)."""

    limit: int
    seals: int = 0
    turns: int = 0
    rows: int = 0
    entries: int = 0
    chains: int = 0
    signatures: int = 0
    unsealed: int = 0
    # Turns whose latest seal is of lqai-turn-facts/1, made before a quote's place and flags and a pin cite were
    # sealed (a turn resumed since has a later seal, of /2, over all of its facts).
    first_format: int = 0
    # Sealed rows whose ledger entry went with a dropped month (citations.partitions): not a problem.
    dropped: int = 0
    # Review decisions checked (citations.reviews): each recomputed, linked and signed.
    decisions: int = 0
    # Certificates of verification checked (citations.certificates): each recomputed, rendered, linked, signed.
    certificates: int = 0
    problem_count: int = 0
    problems: list[Problem] = field(default_factory=list)

    @property
    def intact(self) -> bool:
        return self.problem_count == 0

    def add(self, problem: Problem) -> None:
        self.problem_count += 1
        self.problems.append(problem)
        if len(self.problems) >= 2 * self.limit:
            self.keep_first()

    def keep_first(self) -> None:
        """Keep the first ``limit`` problems in chain order (a stable sort: those of one seal stay in the
        order found)."""
        self.problems.sort(key=_chain_order)
        del self.problems[self.limit :]


def _chain_of(matter_id: UUID | None) -> str | None:
    return None if matter_id is None else seals.chain_of(project_id=str(matter_id), chat_id="")


def _chain_filter(matter_id: UUID | None) -> Q:
    return Q() if matter_id is None else Q(chain=_chain_of(matter_id))


def sealed_in_scope(matter_id: UUID | None = None) -> QuerySet[TurnSeal]:
    return TurnSeal.objects.filter(_chain_filter(matter_id))


# Keyset pages of seals. Either order is an index range scan (turn_seals_chain_sequence_uniq, or the primary
# key) from the last seal read, so each page costs its own rows only. Ids and (on PostgreSQL) timestamps are read
# as text, as ``seals.turn_facts`` reads them.
#
# In chain order, from just after ``(%(chain)s, %(sequence)s)``, in one chain (``%(only)s``) or all.
_CHAIN_ORDER = {
    "after": "(s.chain, s.sequence) > (%(chain)s, %(sequence)s) AND (%(only)s IS NULL OR s.chain = %(only)s)",
    "order": "s.chain, s.sequence",
}
# In the order they were written, from just after id ``%(id)s``.
_WRITTEN_ORDER = {"after": "s.id > %(id)s", "order": "s.id"}
# The links of a chain: what the chain pass reads of each seal.
_LINKS_SQL = f"""
SELECT s.id, s.chain, s.sequence, s.previous_sha256, s.seal_sha256, CAST(s.message_id AS text)
  FROM {TurnSeal._meta.db_table} s
 WHERE {_CHAIN_ORDER["after"]}
 ORDER BY {_CHAIN_ORDER["order"]}
 LIMIT %(limit)s
"""  # noqa: S608 - the table name from the model's _meta, values as parameters
_LINK_COLUMNS = ("id", "chain", "sequence", "previous_sha256", "seal_sha256", "message")
# Whole seals, each with whether a later finalize of its turn was sealed too.
_SEALS_SQL = f"""
SELECT s.id, s.chain, s.sequence, s.previous_sha256, CAST(s.message_id AS text), s.finalize_number,
       {{finalized_at}}, s.verifier_version, s.row_digests, s.facts_sha256, {{sealed_at}}, s.late,
       s.key_fingerprint, s.seal_sha256, s.signature,
       EXISTS (SELECT 1 FROM {TurnSeal._meta.db_table} later
                WHERE later.message_id = s.message_id AND later.finalize_number > s.finalize_number)
  FROM {TurnSeal._meta.db_table} s
 WHERE {{after}}
 ORDER BY {{order}}
 LIMIT %(limit)s
"""  # noqa: S608 - the table name from the model's _meta, values as parameters
_SEAL_COLUMNS = (
    "id",
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
# Where a page starts: after ``(chain, sequence)`` in chain order, after an id in written order.
After = tuple[str, int] | int
Page = list[tuple[dict[str, Any], bool]]


def _fetch(sql: str, after: After, *, only: str | None, limit: int) -> list[tuple[Any, ...]]:
    if isinstance(after, int):
        parameters: dict[str, Any] = {"id": after, "limit": limit}
    else:
        parameters = {"chain": after[0], "sequence": after[1], "only": only, "limit": limit}
    with connection.cursor() as cursor:
        cursor.execute(sql, parameters)
        return cursor.fetchall()


def _link_page(*, after: tuple[str, int], only: str | None, limit: int) -> list[dict[str, Any]]:
    """One page of :data:`_LINKS_SQL`."""
    return [
        {**dict(zip(_LINK_COLUMNS, values, strict=True)), "message": id_text(values[-1])}
        for values in _fetch(_LINKS_SQL, after, only=only, limit=limit)
    ]


def _seal_page(*, after: After, only: str | None, limit: int) -> Page:
    """One page of :data:`_SEALS_SQL` (in chain order after a ``(chain, sequence)``, in written order after an
    id): each seal as ``lqai_verify.record`` reads it (and its ``id``), and whether a later finalize of its turn
    was sealed too."""
    order = _WRITTEN_ORDER if isinstance(after, int) else _CHAIN_ORDER
    sql = _SEALS_SQL.format(finalized_at=iso_sql("s.finalized_at"), sealed_at=iso_sql("s.sealed_at"), **order)
    page = []
    for *values, superseded in _fetch(sql, after, only=only, limit=limit):
        seal = dict(zip(_SEAL_COLUMNS, values, strict=True))
        seal["message"] = id_text(seal["message"])
        seal["finalized_at"] = timestamp_text(seal["finalized_at"])
        seal["sealed_at"] = timestamp_text(seal["sealed_at"])
        seal["row_digests"] = json_value(seal["row_digests"])
        seal["late"] = bool(seal["late"])
        page.append((seal, bool(superseded)))
    return page


def _link_pages(*, only: str | None, batch_size: int) -> Iterator[list[dict[str, Any]]]:
    """The links of one chain (``only``) or of all, page by page, in chain order."""
    after = ("", 0)
    while page := _link_page(after=after, only=only, limit=batch_size):
        yield page
        after = (page[-1]["chain"], page[-1]["sequence"])


def _seal_pages(*, only: str | None, batch_size: int) -> Iterator[Page]:
    """The seals of one chain (``only``) or of all, page by page, in the order they were written (one chain's,
    read in chain order: the order its seals were written)."""
    after: After = ("", 0) if only is not None else 0
    while page := _seal_page(after=after, only=only, limit=batch_size):
        yield page
        last = page[-1][0]
        after = (last["chain"], last["sequence"]) if isinstance(after, tuple) else last["id"]


# A batch's ledger entries, ids read as text (see ``seals.turn_facts``), each with its row's key
# (``lqai_verify.record.row_key``) made by the database from the one source column set. The messages are one
# parameter, ``%(messages)s`` (``in_ids``); ``{filed}`` an optional bound on when the entries were filed.
_ENTRIES_SQL = f"""
SELECT CAST(id AS text), CAST(message_id AS text), CAST(chat_id AS text), CAST(project_id AS text),
       source_kind, verification_status, confidence, provider,
       COALESCE({", ".join(f"'{table}:' || CAST({column} AS text)" for column, table in _SOURCE_TABLES)})
  FROM {CitationLedgerEntry._meta.db_table}
 WHERE message_id {{in_messages}}{{filed}}
"""  # noqa: S608 - the table and column names from the model's _meta, values as parameters
_FILED_BETWEEN = " AND created_at >= %(since)s AND created_at <= %(until)s"


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
    return entries_of(ids_parameter(ids)) if ids else {}


def entries_of(messages: str, *, filed: tuple[str, str] | None = None) -> dict[str, list[dict[str, Any]]]:
    """:func:`entries_by_message` of the messages of a ``ids_parameter``; with ``filed``, only the
    entries filed (``created_at``) from its first to its last time (sealed text, both included): on PostgreSQL
    the ledger's months outside it are not read."""
    by_message: dict[str, list[dict[str, Any]]] = {}
    parameters: dict[str, Any] = {"messages": messages}
    if filed is not None:
        since, until = (datetime.datetime.fromisoformat(time) for time in filed)
        parameters.update(
            since=connection.ops.adapt_datetimefield_value(since),
            until=connection.ops.adapt_datetimefield_value(until),
        )
    sql = _ENTRIES_SQL.format(in_messages=in_ids("messages"), filed=_FILED_BETWEEN if filed else "")
    with connection.cursor() as cursor:
        cursor.execute(sql, parameters)
        rows: Iterable[Sequence[Any]] = cursor.fetchall()
    if connection.vendor != "postgresql":  # PostgreSQL prints ids and row keys as sealed
        rows = ((*map(id_text, values[:4]), *values[4:8], row_key_text(values[8])) for values in rows)
    for values in rows:
        entry = dict(zip(_ENTRY_FIELDS, values, strict=True))
        by_message.setdefault(entry["message"], []).append(entry)
    return by_message


# Every ledger entry (of one matter, ``{scope}``) not filed with its row: its row gone, or its message or its
# time (``created_at``) not its row's. Over the whole record, the turns pass reads a batch's entries filed
# within its rows' times only: an entry found here is the only kind that could be outside them. One hash join
# a source table.
_MISFILED_SQL = " UNION ALL ".join(
    f"""
SELECT CAST(e.id AS text), CAST(e.message_id AS text), '{table}:' || CAST(e.{column} AS text), r.id IS NULL
  FROM {CitationLedgerEntry._meta.db_table} e
  LEFT JOIN {table} r ON r.id = e.{column}
 WHERE e.{column} IS NOT NULL{{scope}}
   AND (r.id IS NULL OR r.message_id <> e.message_id OR r.created_at <> e.created_at)"""  # noqa: S608 - names from code
    for column, table in _SOURCE_TABLES
)


def _check_filing(result: Integrity, *, matter_id: UUID | None) -> None:
    """Every ledger entry (of one matter's, or of all) filed with its row (:data:`_MISFILED_SQL`), named by
    its message."""
    with connection.chunked_cursor() as cursor:
        if matter_id is None:
            cursor.execute(_MISFILED_SQL.format(scope=""))
        else:
            matter = CitationLedgerEntry._meta.get_field("project").get_db_prep_value(matter_id, connection)
            cursor.execute(_MISFILED_SQL.format(scope=" AND e.project_id = %(matter)s"), {"matter": matter})
        for batch in iter(lambda: cursor.fetchmany(DEFAULT_BATCH_SIZE), []):
            for entry_id, message_id, source, row_gone in batch:
                what = "whose row is gone" if row_gone else "not filed with its row (another turn or another time)"
                result.add(
                    Problem(
                        f"ledger entry {id_text(entry_id)} points at {row_key_text(source)}, {what}",
                        id_text(message_id),
                    )
                )


# One page of seals in written order (see :func:`_seal_pages`), each with whether a later finalize of its turn
# was sealed too, and their turns' facts and ledger entries by message id.
Batch = tuple[Page, dict[str, seals.TurnFacts], dict[str, list[dict[str, Any]]]]


def _batches(*, only: str | None, batch_size: int) -> Iterator[Batch]:
    """The seals of one chain (``only``) or of all, in the order they were written, in batches read with their
    facts and entries: one keyset page of seals and one query per table a batch. Over the whole record, a
    batch's entries filed within its rows' times only (:data:`_MISFILED_SQL` finds any other)."""
    for page in _seal_pages(only=only, batch_size=batch_size):
        message_ids = sorted({seal["message"] for seal, _ in page})
        facts = seals.turn_facts(message_ids)
        turns = ids_parameter(message_ids)
        if only is not None:
            yield page, facts, entries_of(turns)
            continue
        times = [row["created_at"] for turn_facts in facts.values() for row in turn_facts.rows]
        yield page, facts, entries_of(turns, filed=(min(times), max(times))) if times else {}


# verify_record's two passes, by the name its progress callback is given.
CHAINS, TURNS = "chains", "turns"
Progress = Callable[[str, int], object]


B = TypeVar("B")


def _walk(
    batches: Iterator[B], check: Callable[[B], None], *, size: Callable[[B], int], stage: str, on_batch: Progress | None
) -> None:
    """Check each batch in order as it is read: one batch in memory at a time. A check's error is raised
    here, and no later batch is read. ``on_batch(stage, size)`` after each batch checked."""
    for batch in batches:
        check(batch)
        if on_batch is not None:
            on_batch(stage, size(batch))


# PostgreSQL: the snapshot verify_ledger reads, for this transaction only.
_SNAPSHOT_SQL = "SET TRANSACTION ISOLATION LEVEL REPEATABLE READ, READ ONLY"


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
            cursor.execute(_SNAPSHOT_SQL)
        yield


@dataclass(frozen=True, slots=True)
class HeldSeal:
    """A chain's last seal as a copy kept outside the database holds it (an earlier export): the record must
    still hold it, with the same digest. ``source`` names the copy in the problem's text."""

    chain: str
    sequence: int
    seal_sha256: str
    source: str


def _check_held(result: Integrity, held: Sequence[HeldSeal]) -> None:
    """Each ``held`` seal against the record's seal of that chain and number (one query). Each seal's digest
    covers the one before it, so that one comparison vouches for the whole chain up to it."""
    if not held:
        return
    wanted = Q()
    for seal in held:
        wanted |= Q(chain=seal.chain, sequence=seal.sequence)
    found = {
        (chain, sequence): digest
        for chain, sequence, digest in TurnSeal.objects.filter(wanted).values_list("chain", "sequence", "seal_sha256")
    }
    for seal in held:
        digest = found.get((seal.chain, seal.sequence))
        if digest == seal.seal_sha256:
            continue
        what = (
            "which the record no longer holds: the chain was cut back since"
            if digest is None
            else "which the record holds with another digest: the chain was rewritten since"
        )
        result.add(Problem(f"{seal.source} ends at this seal, {what}", chain=seal.chain, sequence=seal.sequence))


@one_snapshot()
def verify_record(
    *,
    matter_id: UUID | None = None,
    batch_size: int = DEFAULT_BATCH_SIZE,
    all_signatures: bool = False,
    limit: int = 20,
    on_batch: Progress | None = None,
    held: Sequence[HeldSeal] = (),
) -> Integrity:
    """Check the sealed record of every chain (or of one matter's) as of one instant (:func:`one_snapshot`):
    see the module docstring. Reads only. ``on_batch(stage, seals)`` after each batch checked, ``stage``
    :data:`CHAINS` then :data:`TURNS` (each pass goes over every seal in scope once). ``held``: seals the
    record must still hold (whatever the scope), from copies kept outside it."""
    result = Integrity(limit=limit)
    only = _chain_of(matter_id)
    heads = {
        chain: (sequence, digest)
        for chain, sequence, digest in SealChainHead.objects.filter(_chain_filter(matter_id)).values_list(
            "chain", "sequence", "seal_sha256"
        )
    }
    ends = _check_chains(result, only=only, heads=heads, batch_size=batch_size, on_batch=on_batch)
    _check_turns(
        result,
        only=only,
        signed=None if all_signatures else ends,
        batch_size=batch_size,
        on_batch=on_batch,
    )
    _check_filing(result, matter_id=matter_id)
    _check_decisions(result, only=only, batch_size=batch_size)
    _check_certificates(result, only=only, batch_size=batch_size)
    _check_review_heads(result, only=only)
    _check_held(result, held)
    for message_id in unsealed_turns(matter_id).order_by("finalized_at", "id").values_list("id", flat=True)[:limit]:
        result.add(Problem("unsealed: its last finalize has no seal (run `manage.py seal_turns`)", str(message_id)))
    result.unsealed = unsealed_turns(matter_id).count()
    result.problem_count += max(0, result.unsealed - min(result.unsealed, limit))
    result.keep_first()
    return result


def _check_decisions(result: Integrity, *, only: str | None, batch_size: int) -> None:
    """The review decisions (of the matter's decisions chain, or of all): each named by its id when its digest,
    its link or its signature does not hold (``citations.reviews.decision_problems``)."""
    for decision, what in reviews.decision_problems(turn_chain=only, batch_size=batch_size):
        result.add(
            Problem(
                f"review decision {decision['id']} ({decision['decision']} of {decision['claim']}): {what}",
                decision["message"],
                decision["chain"],
                decision["sequence"],
            )
        )
    result.decisions = reviews.decisions_count(only)


def _check_certificates(result: Integrity, *, only: str | None, batch_size: int) -> None:
    """The certificates of verification (of the matter's chain, or of all): each named by its id when its digest,
    text, link or signature does not hold, or a decision it names is not as sealed
    (``citations.certificates.certificate_problems``)."""
    for certificate, what in certificates.certificate_problems(turn_chain=only, batch_size=batch_size):
        result.add(
            Problem(
                f"certificate {certificate['id']}: {what}",
                certificate["message"],
                certificate["chain"],
                certificate["sequence"],
            )
        )
    result.certificates = certificates.certificates_count(only)


def _check_review_heads(result: Integrity, *, only: str | None) -> None:
    """Each decisions and certificates chain (of the matter, or all) against its head (``ReviewChainHead``): a head
    past its chain's last link (links removed below the application), a head at it with another digest, or a chain
    with links and no head, is named. Three queries."""
    chains = [decisions.decisions_chain(only), certificate_format.certificates_chain(only)] if only else None
    lasts: dict[str, tuple[int, str]] = {}
    for model in (ReviewDecision, Certificate):
        links = model.objects.all() if chains is None else model.objects.filter(chain__in=chains)
        newest = model.objects.filter(chain=OuterRef("chain")).order_by("-sequence")
        ends = (
            links.values("chain")
            .distinct()
            .annotate(last=Subquery(newest.values("sequence")[:1]), digest=Subquery(newest.values("seal_sha256")[:1]))
        )
        lasts.update((end["chain"], (end["last"], end["digest"])) for end in ends)
    heads = ReviewChainHead.objects.all() if chains is None else ReviewChainHead.objects.filter(chain__in=chains)
    for chain, sequence, digest in heads.values_list("chain", "sequence", "seal_sha256"):
        last, last_digest = lasts.pop(chain, (0, ""))
        if sequence > last:
            what = (
                f"the chain {chain} ends at #{last}, but its head says #{sequence}: "
                f"{sequence - last} link(s) were removed below the application"
            )
            result.add(Problem(what, None, chain, sequence))
        elif sequence < last or digest != last_digest:
            what = f"the chain {chain} ends at #{last}, but its head is at #{sequence} with another digest"
            result.add(Problem(what, None, chain, last))
    for chain, (last, _) in sorted(lasts.items()):
        result.add(
            Problem(f"the chain {chain} has links up to #{last} but no head (review_chain_heads)", None, chain, last)
        )


def _where(seal: dict[str, Any]) -> tuple[str, str, int]:
    return seal["message"], seal["chain"], seal["sequence"]


def _check_chains(
    result: Integrity,
    *,
    only: str | None,
    heads: dict[str, tuple[int, str]],
    batch_size: int,
    on_batch: Progress | None,
) -> set[int]:
    """Pass 1: the seals' links, in chain order: each chain starts at #1, has no gap, links each seal to the
    digest of the one before, and has a head (``heads``: its number and digest, by chain) at its last seal, with
    that seal's digest. A head moved back, or a seal inserted past its head, is named (the triggers of
    ``citations.0020`` refuse both, unless disabled). Returns the id of each chain's last seal (whose signature,
    once every digest and link is recomputed, authenticates every seal before it)."""
    ends: set[int] = set()
    seen_chains: set[str] = set()
    previous: dict[str, Any] | None = None

    def end_chain(last: dict[str, Any]) -> None:
        ends.add(last["id"])
        problem = _chain_end_problem(last, heads.get(last["chain"], (None, ""))[0])
        if problem is not None:
            result.add(problem)

    def check(page: list[dict[str, Any]]) -> None:
        nonlocal previous
        for seal in page:
            where = _where(seal)
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
                    result.add(Problem(_gap(seal, previous, heads.get(seal["chain"], (None, ""))[0]), *where))
                if seal["previous_sha256"] != previous["seal_sha256"]:
                    result.add(Problem("its link to the previous seal is broken", *where))
            head, head_digest = heads.get(seal["chain"], (None, ""))
            if seal["sequence"] == head and seal["seal_sha256"] != head_digest:
                result.add(
                    Problem(
                        f"the chain's head is at #{head} with another digest than this seal's: the head was moved",
                        *where,
                    )
                )
            previous = seal

    _walk(_link_pages(only=only, batch_size=batch_size), check, size=len, stage=CHAINS, on_batch=on_batch)
    if previous is not None:
        end_chain(previous)
    for chain in sorted(heads.keys() - seen_chains):
        if heads[chain][0]:
            result.add(
                Problem(f"the chain's head says it ends at #{heads[chain][0]}, but it has no seals", None, chain)
            )
    return ends


def _chain_end_problem(last: dict[str, Any], head: int | None) -> Problem | None:
    """What is wrong with where a chain ends, its last seal ``last`` against its head's number ``head`` (None: no
    head row), or None."""
    if head is None:
        # Deleted: the chain's next seal would restart at #1, collide with its first, and fail.
        return Problem(
            f"the chain {last['chain']} has seals up to #{last['sequence']} but no head "
            "(seal_chain_heads): its head was deleted, and its next seal cannot be written",
            *_where(last),
        )
    if head < last["sequence"]:
        return Problem(
            f"the chain's head says it ends at #{head}, before its last seal #{last['sequence']}: the head was "
            "moved back, or seals were inserted past it; its next seal cannot be written",
            *_where(last),
        )
    if head != last["sequence"]:
        return Problem(
            f"the chain's head says it ends at #{head}, its last seal is #{last['sequence']} "
            "(seals at its end are missing)",
            *_where(last),
        )
    return None


def _gap(seal: dict[str, Any], previous: dict[str, Any], head: int | None) -> str:
    """What a gap in a chain before ``seal`` says: seals deleted with their turns, or, past the chain's head
    (``head``), a seal inserted without sealing (sealing numbers each seal after the one before)."""
    missing = seal["sequence"] - previous["sequence"] - 1
    if head is not None and seal["sequence"] > head:
        return (
            f"seal #{seal['sequence']} follows #{previous['sequence']}, past its chain's head #{head}: "
            "it was inserted without sealing (a forged seal)"
        )
    return f"seal #{seal['sequence']} follows #{previous['sequence']}: {missing} seal(s) missing (deleted turns)"


def _check_turns(
    result: Integrity, *, only: str | None, signed: set[int] | None, batch_size: int, on_batch: Progress | None
) -> None:
    """Pass 2: the seals in the order they were written, with their turns: each seal's own digests, its
    signature if its id is in ``signed`` (every seal's if ``signed`` is None), its turn's facts against it (the
    latest seal of a turn: exactly; an earlier one: the rows it sealed), and each ledger entry of its turn
    against its sealed row (a row of a dropped month has no entry on purpose: its tombstone says so)."""
    public_keys = keys.public_keys()
    dropped = [(seals.iso(start), seals.iso(end)) for start, end in partitions.dropped_ranges()]

    def check_signature(seal: dict[str, Any]) -> None:
        result.signatures += 1
        key = public_keys.get(seal["key_fingerprint"])
        if key is None:
            result.add(
                Problem(
                    f"signed by an unknown key {seal['key_fingerprint'][:16]}... (not the current key, nor in "
                    "LQAI_LEDGER_RETIRED_PUBLIC_KEYS)",
                    *_where(seal),
                )
            )
        elif not record.signature_valid(key, seal["signature"], record.seal_payload(seal)):
            result.add(Problem("its signature is not valid", *_where(seal)))

    def check(batch: Batch) -> None:
        page, facts, entries = batch
        for seal, superseded in page:
            where = _where(seal)
            for difference in record.seal_differences(seal):
                result.add(Problem(difference, *where))
            if signed is None or seal["id"] in signed:
                check_signature(seal)
            turn_facts = facts.get(seal["message"])
            if turn_facts is None:
                result.add(Problem("the sealed turn is missing (deleted)", *where))
                continue
            latest = not superseded and turn_facts.turn["finalized_at"] == seal["finalized_at"]
            for difference in record.facts_differences(
                seal=seal, turn=turn_facts.turn, rows=turn_facts.rows, latest=latest
            ):
                result.add(Problem(difference, *where))
            if not latest:
                continue
            result.turns += 1
            result.rows += len(turn_facts.rows)
            result.first_format += record.sealed_format(seal["row_digests"]) == record.FACTS_FORMAT_1
            turn_entries = entries.get(seal["message"], [])
            result.entries += len(turn_entries)
            sealed_rows = seal["row_digests"].get("rows", {})
            if dropped:
                indexed = {entry["source"] for entry in turn_entries}
                gone = {
                    record.row_key(row)
                    for row in turn_facts.rows
                    if any(start <= row["created_at"] < end for start, end in dropped)
                } & (sealed_rows.keys() - indexed)
                result.dropped += len(gone)
                sealed_rows = {key: digest for key, digest in sealed_rows.items() if key not in gone}
            for difference in record.ledger_problems(
                entries=turn_entries, turn=turn_facts.turn, rows=turn_facts.rows, sealed_rows=sealed_rows
            ):
                result.add(Problem(difference, *where))

    _walk(
        _batches(only=only, batch_size=batch_size),
        check,
        size=lambda batch: len(batch[0]),
        stage=TURNS,
        on_batch=on_batch,
    )
