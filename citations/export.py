"""The signed export of a matter (``manage.py export_matter``, ``GET /api/projects/{id}/export/``), or of a chat
outside any matter, whose turns chain on their own (``export_matter --chat``, ``GET /api/chats/{id}/export/``).

One zip (format ``lqai-export/5``, read by ``lqai_verify``): the turns, their rows, ledger entries and seals,
the passages of the verified quotes (with their pin cites), ``report.html``, the public keys, and
``manifest.json`` with the SHA-256 of every other file, signed (``manifest.sig``). Each file is written to a
temporary file batch by batch of turns (one query per table per batch), so memory stays flat. Each file's
contents: docs/export.md.
"""

from __future__ import annotations

import datetime
import hashlib
import json
import logging
import tempfile
import zipfile
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import IO, Any
from uuid import UUID

from django.conf import settings
from django.db import DatabaseError, connection
from django.db.models import QuerySet
from django.utils import timezone

from chats.models import CaselawOpinion, Chat, Document, Message, Project, StatuteCitation
from chats.pages import pages_of_span, span_pin_cite
from citations import certificates, keys, reviews, seals
from citations.integrity import entries_by_message, one_snapshot
from citations.models import Certificate, ReviewChainHead, ReviewDecision, SealChainHead, TurnSeal
from lqai_verify import certificates as certificate_format
from lqai_verify import decisions as decision_format
from lqai_verify import record, report
from lqai_verify.verification import RULES, VERIFIER_VERSION

logger = logging.getLogger(__name__)

BATCH = 500
# Source text kept on each side of a quoted passage.
CONTEXT_CHARS = 1_000
DATA_FILES = (
    "turns.jsonl",
    "rows.jsonl",
    "ledger.jsonl",
    "seals.jsonl",
    "passages.jsonl",
    "decisions.jsonl",
    "certificates.jsonl",
    "report.html",
)


@dataclass(slots=True)
class ExportSummary:
    turns: int = 0
    rows: int = 0
    entries: int = 0
    seals: int = 0
    passages: int = 0
    decisions: int = 0
    certificates: int = 0
    unsealed: int = 0
    late: int = 0
    development_key: bool = False
    fingerprint: str = ""
    files: dict[str, str] = field(default_factory=dict)


class _Digesting:
    """A temporary file that digests what is written to it."""

    def __init__(self) -> None:
        self.file: IO[bytes] = tempfile.TemporaryFile()  # noqa: SIM115 - closed by _export
        self.sha256 = hashlib.sha256()
        self.size = 0

    def write(self, data: bytes) -> None:
        self.file.write(data)
        self.sha256.update(data)
        self.size += len(data)

    def line(self, value: Any) -> None:
        self.write(record.canonical_json(value) + b"\n")


# An export takes from under a second to about a minute: a client refused one asks again after this many seconds.
RETRY_AFTER_SECONDS = 10


class ExportBusy(Exception):
    """An export cannot be prepared now (:func:`export_slot`): ``code`` says why, for the API's 429."""

    def __init__(self, detail: str, *, code: str) -> None:
        super().__init__(detail)
        self.code = code


# The first key of PostgreSQL's two-key advisory locks, one key space each: a user's export (second key: the
# user's id), and the server's export slots (second key: the slot's number).
_USER_EXPORT_LOCKS = 0x4C510E01
_EXPORT_SLOT_LOCKS = 0x4C510E02


@contextmanager
def export_slot(*, user_id: int) -> Iterator[None]:
    """Hold, while an export is prepared for ``user_id``, that user's one export and one of the server's
    ``LQAI_MAX_CONCURRENT_EXPORTS`` slots (0: no server-wide bound), or raise :class:`ExportBusy` at once if
    either is taken. An export holds a thread, a connection and a snapshot for as long as it takes (seconds for
    a large matter), so that repeated clicks, or every member at once, cannot take every thread of the server.

    PostgreSQL session advisory locks, taken with ``pg_try_advisory_lock`` (no wait), so the bound holds across
    server processes and hosts; they are given back on the way out, and by PostgreSQL if the worker's
    connection closes first. Taken outside any transaction (the export's snapshot opens its own). Elsewhere
    (SQLite, for development) there is no bound."""
    if connection.vendor != "postgresql":
        yield
        return
    held: list[tuple[int, int]] = []
    try:
        with connection.cursor() as cursor:
            user_lock = (_USER_EXPORT_LOCKS, user_id % 2**31)
            cursor.execute("SELECT pg_try_advisory_lock(%s, %s)", user_lock)
            if not cursor.fetchone()[0]:
                raise ExportBusy(
                    "An export of yours is already being prepared; wait for it to finish, then ask again.",
                    code="export_in_progress",
                )
            held.append(user_lock)
            for slot in range(max(0, settings.LQAI_MAX_CONCURRENT_EXPORTS)):
                cursor.execute("SELECT pg_try_advisory_lock(%s, %s)", (_EXPORT_SLOT_LOCKS, slot))
                if cursor.fetchone()[0]:
                    held.append((_EXPORT_SLOT_LOCKS, slot))
                    break
            else:
                if settings.LQAI_MAX_CONCURRENT_EXPORTS > 0:
                    raise ExportBusy(
                        "The server is preparing as many exports as it may at once; ask again in a moment.",
                        code="exports_busy",
                    )
        yield
    finally:
        _release(held)


def _release(held: list[tuple[int, int]]) -> None:
    """Give back the advisory locks :func:`export_slot` took. If that fails (the connection is broken, or in a
    failed transaction), the connection is closed: its session's locks go with it, rather than staying held
    by a connection kept for the next request (``CONN_MAX_AGE``)."""
    try:
        with connection.cursor() as cursor:
            for lock in reversed(held):
                cursor.execute("SELECT pg_advisory_unlock(%s, %s)", lock)
    except DatabaseError:
        logger.warning("export: could not release the export's advisory locks; closing its connection", exc_info=True)
        connection.close()


def export_file(*, of: Project | Chat, user_id: int) -> IO[bytes]:
    """The signed export of ``of`` (:func:`export_record`) in a temporary file, rewound for reading, prepared in
    ``user_id``'s export slot and one of the server's (:func:`export_slot`; :class:`ExportBusy` at once if either
    is taken). A temporary file, not memory: an export can be large. The caller closes it (``FileResponse``
    does)."""
    bundle = tempfile.TemporaryFile()  # noqa: SIM115 - returned open, for the caller to close
    try:
        with export_slot(user_id=user_id):
            export_record(of=of, out=bundle)
    except BaseException:
        bundle.close()
        raise
    bundle.seek(0)
    return bundle


def excerpt_for(row: dict[str, Any], text: str, *, sealed_rules: str = VERIFIER_VERSION) -> tuple[int, str]:
    """The text a recipient needs to re-verify a quote row: its passage with :data:`CONTEXT_CHARS` on each
    side, or the whole text if the quote does not verify the same way against that excerpt alone as against
    the whole text (a quote verified under earlier rules, which today's rules judge otherwise, differs from
    its row the same way against either: the excerpt is enough). ``sealed_rules``: the rules version its turn
    was sealed under; the recipient re-runs those too where this verifier still has them, so the excerpt must
    be enough under both."""
    start = max(0, row["offset_start"] - CONTEXT_CHARS)
    excerpt = text[start : row["offset_end"] + CONTEXT_CHARS]
    versions: list[int | None] = [None]  # today's rules
    if sealed_rules != VERIFIER_VERSION and sealed_rules in _KNOWN_RULES:
        versions.append(int(sealed_rules))
    for rules in versions:
        differences = record.quote_differences(row, excerpt, start, rules=rules)
        if differences and differences != record.quote_differences(row, text, 0, rules=rules):
            return 0, text
    return start, excerpt


_KNOWN_RULES = {str(version) for version in RULES}


class ChatOfAMatter(ValueError):
    """A chat of a matter is exported with its matter: their turns are one chain."""

    def __init__(self, chat: Chat) -> None:
        super().__init__(
            f"The chat {chat.pk} is part of the matter {chat.project_id}: its turns are sealed in the matter's "
            "chain, so its record is exported with the matter's."
        )


@dataclass(frozen=True, slots=True)
class _Subject:
    """What one export is of: a matter's chain, or a matter-less chat's (which chains on its own)."""

    kind: str  # "matter" or "chat"
    id: UUID
    name: str
    chain: str
    # Read in the export's snapshot (querysets are lazy): its finalized turns, and its chats (for their titles).
    turns: QuerySet[Message]
    chats: QuerySet[Chat]

    @classmethod
    def of(cls, of: Project | Chat) -> _Subject:
        return cls.of_matter(of) if isinstance(of, Project) else cls.of_chat(of)

    @classmethod
    def of_matter(cls, project: Project) -> _Subject:
        return cls(
            kind="matter",
            id=project.pk,
            name=project.name,
            chain=seals.chain_of(project_id=str(project.pk), chat_id=""),
            turns=seals.finalized_turns(project.pk),
            chats=project.chats.all(),
        )

    @classmethod
    def of_chat(cls, chat: Chat) -> _Subject:
        if chat.project_id is not None:
            raise ChatOfAMatter(chat)
        return cls(
            kind="chat",
            id=chat.pk,
            name=chat.title,
            chain=seals.chain_of(project_id=None, chat_id=str(chat.pk)),
            turns=seals.finalized_turns().filter(chat=chat),
            chats=Chat.objects.filter(pk=chat.pk),
        )

    def manifest(self) -> dict[str, Any]:
        """The manifest's ``matter`` (its id and name) or ``chat`` (its id and title); the other is null."""
        if self.kind == "matter":
            return {"matter": {"id": str(self.id), "name": self.name}, "chat": None}
        return {"matter": None, "chat": {"id": str(self.id), "title": self.name}}


def _sealed_order(subject: _Subject) -> Iterator[list[UUID]]:
    """The subject's finalized turns in batches: in the order of their last seal in the chain, then the
    unsealed ones in finalize order."""
    seen: set[UUID] = set()
    ordered: list[UUID] = []
    for message_id in (
        TurnSeal.objects.filter(chain=subject.chain)
        .order_by("-sequence")
        .values_list("message_id", flat=True)
        .iterator()
    ):
        if message_id not in seen:
            seen.add(message_id)
            ordered.append(message_id)
    ordered.reverse()
    for index in range(0, len(ordered), BATCH):
        yield ordered[index : index + BATCH]
    unsealed = seals.unsealed_turns_of(subject.turns).exclude(pk__in=seen).order_by("finalized_at", "id")
    batch: list[UUID] = []
    for message_id in unsealed.values_list("pk", flat=True).iterator():
        batch.append(message_id)
        if len(batch) == BATCH:
            yield batch
            batch = []
    if batch:
        yield batch


def export_record(
    *, of: Project | Chat, out: IO[bytes], on_batch: Callable[[int], object] | None = None
) -> ExportSummary:
    """Write the signed export of ``of``, a matter or a chat outside any matter (whose turns chain on their own:
    the manifest names the chat instead of a matter), to ``out`` (a binary, seekable file): as it stood when the
    export began (:func:`citations.integrity.one_snapshot`), whatever turns commit while it runs. Reads only.
    ``on_batch`` is called with the number of turns of each batch written (for a progress bar). Raises
    :class:`ChatOfAMatter` for a chat of a matter."""
    return _export(_Subject.of(of), out=out, on_batch=on_batch)


def finalized_turns_of(of: Project | Chat) -> QuerySet[Message]:
    """The finalized turns :func:`export_record` of ``of`` writes (for a progress bar's total)."""
    return _Subject.of(of).turns


@one_snapshot()
def _export(subject: _Subject, *, out: IO[bytes], on_batch: Callable[[int], object] | None) -> ExportSummary:
    summary = ExportSummary(development_key=keys.is_development_key(), fingerprint=keys.current_fingerprint())
    files = {name: _Digesting() for name in DATA_FILES}
    chain = subject.chain
    exported_at = timezone.now()
    try:
        fingerprints: set[str] = set()
        for seal in TurnSeal.objects.filter(chain=chain).order_by("sequence").iterator():
            files["seals.jsonl"].line(seals.seal_fields(seal))
            fingerprints.add(seal.key_fingerprint)
            summary.seals += 1
        for decision in reviews.decision_lines(chain):  # the people's decisions, chained beside the seals
            files["decisions.jsonl"].line(decision)
            fingerprints.add(decision["key_fingerprint"])
            summary.decisions += 1
        if not summary.decisions:  # a record nobody reviewed: its bundle is as before review decisions existed
            files.pop("decisions.jsonl").file.close()
        for certificate in certificates.certificate_lines(chain):  # chained beside the decisions they name
            files["certificates.jsonl"].line(certificate)
            fingerprints.add(certificate["key_fingerprint"])
            summary.certificates += 1
        if not summary.certificates:
            files.pop("certificates.jsonl").file.close()
        head = SealChainHead.objects.filter(chain=chain).values_list("sequence", "seal_sha256").first()
        # Where the matter's decisions and certificates chains end, for the verifier to check the files end there.
        review_heads = {
            review_chain: {"sequence": sequence, "seal_sha256": digest}
            for review_chain, sequence, digest in ReviewChainHead.objects.filter(
                chain__in=[decision_format.decisions_chain(chain), certificate_format.certificates_chain(chain)]
            ).values_list("chain", "sequence", "seal_sha256")
        }
        manifest: dict[str, Any] = {
            "format": record.EXPORT_FORMAT,
            **subject.manifest(),
            "exported_at": seals.iso(exported_at),
            "chain": chain,
            "chain_head": None if head is None else {"sequence": head[0], "seal_sha256": head[1]},
            **({"review_heads": review_heads} if review_heads else {}),
            "verifier_version": VERIFIER_VERSION,
            "signing_key": summary.fingerprint,
            "development_key": summary.development_key,
        }
        files["report.html"].write(report.start(manifest).encode())
        titles = dict(subject.chats.values_list("id", "title"))
        for batch in _sealed_order(subject):
            _export_batch(batch, chain=chain, files=files, titles=titles, summary=summary)
            if on_batch is not None:
                on_batch(len(batch))
        files["report.html"].write(
            report.end(turns=summary.turns, rows=summary.rows, late=summary.late, unsealed=summary.unsealed).encode()
        )
        public_keys = keys.public_keys()
        key_file = record.canonical_json(
            {
                "signing_key": _key_entry(keys.signing_key().public_key()),
                "seal_keys": [_key_entry(public_keys[f]) for f in sorted(fingerprints) if f in public_keys],
            }
        )
        files_listed: dict[str, dict[str, Any]] = {
            **{name: {"sha256": f.sha256.hexdigest(), "bytes": f.size} for name, f in files.items()},
            "public_key.json": {"sha256": record.sha256_hex(key_file), "bytes": len(key_file)},
        }
        manifest["counts"] = {
            "turns": summary.turns,
            "rows": summary.rows,
            "seals": summary.seals,
            "decisions": summary.decisions,
            "certificates": summary.certificates,
        }
        manifest["files"] = files_listed
        manifest_bytes = json.dumps(manifest, indent=2, sort_keys=True, ensure_ascii=False).encode() + b"\n"
        with zipfile.ZipFile(out, "w", compression=zipfile.ZIP_DEFLATED) as bundle:
            bundle.writestr("manifest.json", manifest_bytes)
            bundle.writestr("manifest.sig", record.sign(keys.signing_key(), manifest_bytes) + "\n")
            bundle.writestr("public_key.json", key_file)
            for name, digesting in files.items():
                digesting.file.seek(0)
                with bundle.open(name, "w") as member:
                    while chunk := digesting.file.read(1 << 20):
                        member.write(chunk)
        summary.files = {name: entry["sha256"] for name, entry in files_listed.items()}
    finally:
        for digesting in files.values():
            digesting.file.close()
    return summary


def _key_entry(public_key: Any) -> dict[str, str]:
    return {"public_key": record.public_key_b64(public_key), "fingerprint": record.fingerprint(public_key)}


def _export_batch(
    batch: list[UUID],
    *,
    chain: str,
    files: dict[str, _Digesting],
    titles: dict[UUID, str],
    summary: ExportSummary,
) -> None:
    facts = seals.turn_facts(batch)
    # Each turn's latest seal in the chain, read with its batch: the chain's seals are not held, whatever its length.
    latest_seals = {
        fields["message"]: fields
        for fields in map(
            seals.seal_fields, TurnSeal.objects.filter(chain=chain, message_id__in=batch).order_by("sequence")
        )
    }
    entries = entries_by_message([str(i) for i in batch])
    # The batch's decisions and certificates, for its turns' part of the report (in chain order, as exported).
    decisions: dict[UUID, list[dict[str, Any]]] = {}
    for decision in ReviewDecision.objects.filter(message_id__in=batch).order_by("sequence"):
        decisions.setdefault(decision.message_id, []).append(reviews.decision_line(decision))
    certificates_of: dict[UUID, list[dict[str, Any]]] = {}
    for issued in Certificate.objects.filter(message_id__in=batch).order_by("sequence"):
        certificates_of.setdefault(issued.message_id, []).append(certificates.certificate_line(issued))
    rows = [row for turn in facts.values() for row in turn.rows]
    document_ids = {row["document"] for row in rows if row["table"] == record.KB and row["offset_start"] is not None}
    opinion_ids = {row["opinion"] for row in rows if row["table"] == record.CASELAW and row["offset_start"] is not None}
    documents = {str(d.pk): d for d in Document.objects.filter(pk__in=document_ids)}
    opinions = {str(o.pk): o for o in CaselawOpinion.objects.filter(pk__in=opinion_ids)}
    statute_sections = _statute_sections(rows)
    for message_id in batch:
        turn_facts = facts[str(message_id)]
        turn = turn_facts.turn
        seal = latest_seals.get(turn["message"])
        sealed = seal is not None and seal["finalized_at"] == turn["finalized_at"]
        summary.turns += 1
        summary.unsealed += not sealed
        summary.late += bool(sealed and seal and seal["late"])
        line = {
            "turn": turn,
            "answer": turn_facts.answer,
            "chat_title": titles.get(UUID(turn["chat"]), ""),
            "sealed": sealed,
            "sequence": seal["sequence"] if sealed and seal else None,
            "sealed_at": seal["sealed_at"] if sealed and seal else None,
            "late": bool(sealed and seal and seal["late"]),
        }
        files["turns.jsonl"].line(line)
        passages: dict[str, dict[str, Any]] = {}
        for row in turn_facts.rows:
            files["rows.jsonl"].line(row)
            summary.rows += 1
            if row["table"] == record.STATUTE and row["id"] in statute_sections:
                passage = _statute_passage(row, statute_sections[row["id"]])
                files["passages.jsonl"].line(passage)
                passages[passage["row"]] = passage
                summary.passages += 1
                continue
            if row["table"] not in record.QUOTE_TABLES or row["offset_start"] is None:
                continue
            source = documents.get(row["document"]) if row["table"] == record.KB else opinions.get(row["opinion"])
            if source is None:
                continue
            # A turn sealed on time under earlier rules is re-verified under them too (lqai_verify.bundle).
            on_time = sealed and seal is not None and not seal["late"]
            rules = seal["verifier_version"] if on_time and seal else VERIFIER_VERSION
            passage = _passage(row, source, sealed_rules=rules)
            key = passage["row"]
            files["passages.jsonl"].line(passage)
            passages[key] = passage
            summary.passages += 1
        for entry in entries.get(turn["message"], []):
            files["ledger.jsonl"].line(entry)
            summary.entries += 1
        files["report.html"].write(
            report.turn(
                line,
                seal=seal if sealed else None,
                rows=turn_facts.rows,
                passages=passages,
                decisions=decisions.get(message_id, ()),
                certificates=certificates_of.get(message_id, ()),
            ).encode()
        )


def _passage(row: dict[str, Any], source: Document | CaselawOpinion, *, sealed_rules: str) -> dict[str, Any]:
    """The line of ``passages.jsonl`` for a verified quote ``row`` of ``source``: the text around its passage
    (enough to re-verify it under ``sealed_rules``), the pages it spans and its pin cite."""
    text = source.content if isinstance(source, Document) else source.text
    excerpt_start, excerpt = excerpt_for(row, text, sealed_rules=sealed_rules)
    citation = None if isinstance(source, Document) else source.citation
    return {
        "row": record.row_key(row),
        "source_table": source._meta.db_table,
        "source_id": str(source.pk),
        "source_title": _title(source),
        # The pages the passage spans (chats.pages, as the API and the trace pages give them), and its
        # pin cite: an opinion's Bluebook pin cite ("590 F. Supp. 3d at 870"), a document's "p. 4".
        "pages": pages_of_span(source.pages, row["offset_start"], row["offset_end"]),
        "pin_cite": span_pin_cite(source.pages, row["offset_start"], row["offset_end"], citation=citation),
        # The citation whose reporter an opinion's pin cite names (the verifier reads it as its pages say).
        **({} if citation is None else {"citation": citation}),
        "excerpt_start": excerpt_start,
        "excerpt": excerpt,
    }


def _statute_sections(rows: list[dict[str, Any]]) -> dict[str, Any]:
    """The section (with its release) of each statute quote row among ``rows`` found in a section's text, by the
    row's id (one query; the sections are the authority library's ``StatuteSection`` rows, read through the
    row's foreign key)."""
    ids = [row["id"] for row in rows if row["table"] == record.STATUTE and row["offset_start"] is not None]
    if not ids:
        return {}
    found = StatuteCitation.objects.filter(pk__in=ids).select_related("section__release")
    return {str(row.pk): row.section for row in found if row.section is not None}


def _statute_passage(row: dict[str, Any], section: Any) -> dict[str, Any]:
    """The line of ``passages.jsonl`` for a statute quote ``row`` found in a section's text: the text it was
    verified against (the pinned subdivision holding the passage, else the whole section, as
    ``authorities.resolver`` checks it), so that the recipient re-runs the same check, and the section and the
    release it is of (``9 U.S.C. § 2 (Online@117-80)``)."""
    text = section.text
    start, end = 0, len(text)
    if row["pin"] and row["status"] != "found_elsewhere":
        holding = [
            (s["start"], s["end"])
            for s in section.subdivisions
            if s["path"] == row["pin"] and s["start"] <= row["offset_start"] and row["offset_end"] <= s["end"]
        ]
        if holding:
            start, end = holding[0]
    return {
        "row": record.row_key(row),
        "source_table": section._meta.db_table,
        "source_id": str(section.pk),
        "source_title": " ".join(part for part in (section.identifier, section.heading) if part),
        # The release the section is of, as the library holds it (the row names the one it was checked against).
        "release": {
            "code": section.release.code,
            "title": section.release.title,
            "release_point": section.release.release_point,
            "label": section.release.label,
            "official": section.release.official,
        },
        "section": section.identifier,
        "excerpt_start": start,
        "excerpt": text[start:end],
    }


def _title(source: Document | CaselawOpinion) -> str:
    if isinstance(source, Document):
        return source.title
    return ", ".join(part for part in (source.case_name, source.citation) if part)


def default_filename(of: Project | Chat, *, now: datetime.datetime | None = None) -> str:
    """``lqai-matter-<id>-<UTC time>.zip``, or ``lqai-chat-...`` for a matter-less chat's export."""
    stamp = (now or timezone.now()).strftime("%Y%m%d-%H%M%S")
    return f"lqai-{'matter' if isinstance(of, Project) else 'chat'}-{of.pk}-{stamp}.zip"
