"""The sealed record's byte formats, shared by the server (``citations.seals``) and the offline verifier.

:func:`canonical_json` (sorted keys, no whitespace, UTF-8, no NaN); a turn's facts are one turn object
(:data:`TURN_FIELDS`) and one object per row (:data:`ROW_FIELDS`), each digested on its own
(:func:`row_sha256`) so that a mismatch names the row; :func:`facts_sha256` digests them together under the
seal's facts format; :func:`seal_payload` binds that digest to its place in a chain, and the seal's digest
and Ed25519 signature cover the payload. Pure: no Django, no database. The formats byte by byte:
docs/export.md.
"""

from __future__ import annotations

import base64
import binascii
import hashlib
import json
from collections.abc import Iterable, Mapping
from typing import Any

from cryptography.exceptions import InvalidSignature
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey, Ed25519PublicKey
from cryptography.hazmat.primitives.serialization import Encoding, PublicFormat

from lqai_verify.verdict import statute_claim_status
from lqai_verify.verification import CURRENT_RULES, NormalizedSource, alterations_record, context_flags_record

# The facts format new seals are made in; /1 (before it) sealed fewer fields of a row (:data:`UNSEALED_FIELDS`).
FACTS_FORMAT = "lqai-turn-facts/2"
FACTS_FORMAT_1 = "lqai-turn-facts/1"
SEAL_FORMAT = "lqai-seal/1"
# An export's format: /3 carries every field of :data:`ROW_FIELDS` in its rows (and seals of either facts
# format); /2 rendered report.html from the data files (lqai_verify.report), which the verifier checks, with the
# rows of facts format /1; /1 (before that) is still read, its report unchecked.
# /4: the data of /3, with report.html laid out as the trace pages read (each quote's passage in context, verdicts
# and statuses in words).
# /5: the data of /4 (with review decisions and certificates of verification), with report.html showing each
# turn's decisions and certificates.
EXPORT_FORMAT = "lqai-export/5"
EXPORT_FORMATS = ("lqai-export/1", "lqai-export/2", "lqai-export/3", "lqai-export/4", EXPORT_FORMAT)
# The formats whose report.html this version of lqai_verify.report renders, and so checks (/2 to /4 were
# rendered by its earlier layouts).
RENDERED_REPORT_FORMATS = (EXPORT_FORMAT,)

KB = "message_citations"
CASELAW = "message_caselaw_citations"
TOOL = "message_tool_sources"
CASE = "message_case_citations"
# A statute or regulation citation of the answer, or a quote attributed to one, checked against a release of the
# official text (``chats.StatuteCitation``). Turns finalized before it existed have none: their seals are unchanged.
STATUTE = "message_statute_citations"
QUOTE_TABLES = (KB, CASELAW)
ROW_TABLES = (KB, CASELAW, TOOL, CASE, STATUTE)

TURN_FIELDS = (
    "message",
    "chat",
    "project",
    "question_message",
    "question",
    "answer_sha256",
    "status",
    "verdict",
    "finalized_at",
    "model_name",
)
_QUOTE_FIELDS = (
    "position",
    "quote",
    "offset_start",
    "offset_end",
    "method",
    "confidence",
    "unverified_reason",
    "passage_sha256",
    "alterations",
)
# A quote's place in the answer (null offsets and a reason when it could not be placed) and the limiting context
# next to an altered quote's passage: sealed from facts format /2 on.
_QUOTE_FIELDS_2 = ("answer_offset_start", "answer_offset_end", "answer_unplaced_reason", "context_flags")
ROW_FIELDS: dict[str, tuple[str, ...]] = {
    KB: ("table", "id", "message", "created_at", "document", *_QUOTE_FIELDS, *_QUOTE_FIELDS_2),
    CASELAW: ("table", "id", "message", "created_at", "opinion", "opinion_provider", *_QUOTE_FIELDS, *_QUOTE_FIELDS_2),
    TOOL: (
        "table",
        "id",
        "message",
        "created_at",
        "position",
        "source_kind",
        "tool",
        "provider",
        "label",
        "subtitle",
        "url",
        "external_ref",
    ),
    CASE: (
        "table",
        "id",
        "message",
        "created_at",
        "answer_offset_start",
        "answer_offset_end",
        "kind",
        "citation",
        "case_name",
        "status",
        "detail",
        "opinion",
        "provider",
        "pin",
        "pin_status",
    ),
    # The quote's fields carry the quote rows' names (quote, offset_start, method, ...), so that the offline
    # verifier re-checks a statute quote as it does any quote; ``section`` is the section's id in the library.
    STATUTE: (
        "table",
        "id",
        "message",
        "created_at",
        "position",
        "kind",
        "citation",
        "answer_offset_start",
        "answer_offset_end",
        "cited",
        "identifier",
        "pin",
        "section",
        "code",
        "title",
        "release_point",
        "release_label",
        "release_official",
        "status",
        "reason",
        "quote",
        "method",
        "confidence",
        "offset_start",
        "offset_end",
        "passage_sha256",
        "alterations",
        "context_flags",
        "found_in",
    ),
}
# The fields of :data:`ROW_FIELDS` each facts format does not seal, which :func:`row_sha256` leaves out: none
# for /2; for /1 those /2 added, a quote's place in the answer and its context flags and a case citation's pin
# cite (a case citation's own answer offsets were sealed from /1 on).
UNSEALED_FIELDS: dict[str, dict[str, frozenset[str]]] = {
    FACTS_FORMAT: {table: frozenset() for table in ROW_TABLES},
    FACTS_FORMAT_1: {
        KB: frozenset(_QUOTE_FIELDS_2),
        CASELAW: frozenset(_QUOTE_FIELDS_2),
        TOOL: frozenset(),
        CASE: frozenset(("pin", "pin_status")),
        STATUTE: frozenset(),
    },
}
# The ledger columns an entry copies from its row (``citations.ledger``): checked against the sealed row.
LEDGER_FIELDS = ("message", "chat", "project", "source_kind", "verification_status", "confidence", "provider")


# One encoder for every call (``json.dumps`` with these options builds a new one each time).
_CANONICAL = json.JSONEncoder(sort_keys=True, separators=(",", ":"), ensure_ascii=False, allow_nan=False)


def canonical_json(value: Any) -> bytes:
    """The canonical bytes of a JSON value: sorted keys, no whitespace, UTF-8, NaN refused."""
    return _CANONICAL.encode(value).encode()


def sha256_hex(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def text_sha256(text: str) -> str:
    """Hex SHA-256 of a text's UTF-8 bytes (the answer's digest; a passage's, as its quote row stores it)."""
    return sha256_hex(text.encode("utf-8"))


def row_key(row: Mapping[str, Any]) -> str:
    """A row's name in a seal's digests: ``<table>:<id>``."""
    return f"{row['table']}:{row['id']}"


def turn_sha256(turn: Mapping[str, Any]) -> str:
    return sha256_hex(canonical_json(turn))


def row_sha256(row: Mapping[str, Any], *, facts_format: str = FACTS_FORMAT) -> str:
    """A row's digest in a seal of ``facts_format``: of the row less the fields of :data:`ROW_FIELDS` that format
    does not seal (:data:`UNSEALED_FIELDS`; none for the current format). Every other field counts, so a row
    lacking a sealed field, or holding one no format has, digests otherwise than the row sealed."""
    unsealed = UNSEALED_FIELDS[facts_format][row["table"]]
    if not unsealed:
        return sha256_hex(canonical_json(row))
    return sha256_hex(canonical_json({name: value for name, value in row.items() if name not in unsealed}))


def sealed_format(row_digests: Mapping[str, Any]) -> str:
    """The facts format of a seal's ``row_digests`` (a seal of /1 does not name it)."""
    return str(row_digests.get("format", FACTS_FORMAT_1))


def facts_sha256(
    *, turn_digest: str, row_digests: Mapping[str, str], verifier_version: str, facts_format: str = FACTS_FORMAT
) -> str:
    """The digest a seal of ``facts_format`` signs for a turn: over its turn digest and every row's digest
    (sorted by row key)."""
    return sha256_hex(
        canonical_json(
            {
                "format": facts_format,
                "verifier_version": verifier_version,
                "turn": turn_digest,
                "rows": sorted([key, digest] for key, digest in row_digests.items()),
            }
        )
    )


def seal_payload(seal: Mapping[str, Any]) -> bytes:
    """The bytes a seal signs, from its fields (:data:`SEAL_FIELDS`)."""
    return canonical_json({"format": SEAL_FORMAT, **{name: seal[name] for name in SEAL_FIELDS}})


SEAL_FIELDS = (
    "chain",
    "sequence",
    "previous_sha256",
    "message",
    "finalize_number",
    "finalized_at",
    "facts_sha256",
    "sealed_at",
    "late",
    "key_fingerprint",
)


# --- Keys ------------------------------------------------------------------------------------------------------


def raw_public_key(public_key: Ed25519PublicKey) -> bytes:
    return public_key.public_bytes(Encoding.Raw, PublicFormat.Raw)


def fingerprint(public_key: Ed25519PublicKey) -> str:
    """A public key's fingerprint: hex SHA-256 of its 32 raw bytes."""
    return sha256_hex(raw_public_key(public_key))


def public_key_b64(public_key: Ed25519PublicKey) -> str:
    return base64.b64encode(raw_public_key(public_key)).decode("ascii")


def decode_32_bytes(value: str, *, what: str) -> bytes:
    """The 32 bytes a base64 key stands for; ``ValueError`` naming ``what`` otherwise."""
    try:
        raw = base64.b64decode(value.strip(), validate=True)
    except (binascii.Error, ValueError):
        raise ValueError(f"{what} is not base64") from None
    if len(raw) != 32:
        raise ValueError(f"{what} must be the base64 of 32 bytes, not of {len(raw)}")
    return raw


def private_key_from_b64(value: str) -> Ed25519PrivateKey:
    return Ed25519PrivateKey.from_private_bytes(decode_32_bytes(value, what="LQAI_LEDGER_KEY"))


def public_key_from_b64(value: str) -> Ed25519PublicKey:
    return Ed25519PublicKey.from_public_bytes(decode_32_bytes(value, what="the public key"))


def signature_valid(public_key: Ed25519PublicKey, signature_b64: str, payload: bytes) -> bool:
    try:
        public_key.verify(base64.b64decode(signature_b64, validate=True), payload)
    except (InvalidSignature, binascii.Error, ValueError):
        return False
    return True


def sign(private_key: Ed25519PrivateKey, payload: bytes) -> str:
    return base64.b64encode(private_key.sign(payload)).decode("ascii")


# --- Checks shared by verify_ledger and the offline verifier ----------------------------------------------------


def seal_differences(seal: Mapping[str, Any]) -> list[str]:
    """What is wrong with one seal on its own: its facts digest against its row digests, and its own digest."""
    problems = []
    digests = seal["row_digests"]
    facts_format = sealed_format(digests)
    if facts_format not in UNSEALED_FIELDS:
        return [f"its facts format {facts_format!r} is none of {', '.join(sorted(UNSEALED_FIELDS))}"]
    expected_facts = facts_sha256(
        turn_digest=digests.get("turn", ""),
        row_digests=digests.get("rows", {}),
        verifier_version=seal["verifier_version"],
        facts_format=facts_format,
    )
    if expected_facts != seal["facts_sha256"]:
        problems.append("its row digests do not add up to its facts digest")
    if sha256_hex(seal_payload(seal)) != seal["seal_sha256"]:
        problems.append("its seal digest does not match its fields")
    return problems


def facts_differences(
    *, seal: Mapping[str, Any], turn: Mapping[str, Any] | None, rows: Iterable[Mapping[str, Any]], latest: bool
) -> list[str]:
    """How a turn's current facts differ from its seal. The latest seal of a turn must match the turn and
    its rows exactly; an earlier one (a turn finalized again after an interruption) only the rows it sealed.
    Nothing for a seal of an unknown facts format, whose facts cannot be digested: that is a problem of the seal
    itself, which :func:`seal_differences` reports."""
    problems = []
    sealed_rows: Mapping[str, str] = seal["row_digests"].get("rows", {})
    facts_format = sealed_format(seal["row_digests"])
    if facts_format not in UNSEALED_FIELDS:
        return []
    current = {row_key(row): row_sha256(row, facts_format=facts_format) for row in rows}
    if latest:
        if turn is None:
            return ["the turn is missing"]
        if turn_sha256(turn) != seal["row_digests"].get("turn"):
            problems.append("the turn (question, answer, status or verdict) differs from its seal")
        problems += [f"row {key} is not in its seal (inserted)" for key in sorted(current.keys() - sealed_rows.keys())]
    for key in sorted(sealed_rows):
        if key not in current:
            problems.append(f"sealed row {key} is missing (deleted)")
        elif current[key] != sealed_rows[key]:
            problems.append(f"row {key} differs from its seal (edited)")
    return problems


def expected_ledger_entry(row: Mapping[str, Any], turn: Mapping[str, Any]) -> dict[str, Any]:
    """The ledger columns an entry for ``row`` must hold (the ledger's mapping, read from the sealed row)."""
    table = row["table"]
    if table == KB:
        kind, status, confidence, provider = "kb_document", row["method"], row["confidence"], None
    elif table == CASELAW:
        kind, status, confidence, provider = "caselaw", row["method"], row["confidence"], row["opinion_provider"]
    elif table == TOOL:
        kind, status, confidence, provider = row["source_kind"], "provenance", None, row["provider"]
    elif table == STATUTE:
        kind, confidence, provider = "statute", row["confidence"], None
        status = statute_claim_status(row["kind"], row["status"])
    else:
        kind, status, confidence, provider = "caselaw", row["status"], None, row["provider"] or None
    return {
        "message": turn["message"],
        "chat": turn["chat"],
        "project": turn["project"],
        "source_kind": kind,
        "verification_status": status,
        "confidence": confidence,
        "provider": provider,
    }


def ledger_differences(entry: Mapping[str, Any], row: Mapping[str, Any], turn: Mapping[str, Any]) -> list[str]:
    """Each ledger column of ``entry`` that says something else than its sealed ``row``."""
    expected = expected_ledger_entry(row, turn)
    return [
        f"its {name} is {entry.get(name)!r}, its sealed row says {expected[name]!r}"
        for name in LEDGER_FIELDS
        if entry.get(name) != expected[name]
    ]


def ledger_problems(
    *,
    entries: Iterable[Mapping[str, Any]],
    turn: Mapping[str, Any],
    rows: Iterable[Mapping[str, Any]],
    sealed_rows: Mapping[str, str],
) -> list[str]:
    """Each way a turn's ledger entries (``{"id", "source": <row key>, <LEDGER_FIELDS>}``) disagree with its
    sealed rows: an entry whose row is not sealed, a column that says something else, a sealed row without
    its entry, or with more than one."""
    by_key = {row_key(row): row for row in rows}
    problems = []
    indexed = set()
    for entry in sorted(entries, key=lambda e: e["source"] or ""):
        key = entry["source"]
        if key in indexed:
            problems.append(f"ledger entry {entry['id']} points at {key}, which another entry indexes already")
            continue
        indexed.add(key)
        if key not in sealed_rows or key not in by_key:
            problems.append(f"ledger entry {entry['id']} points at {key}, which is not a sealed row")
            continue
        problems += [
            f"ledger entry {entry['id']} ({key}): {difference}"
            for difference in ledger_differences(entry, by_key[key], turn)
        ]
    problems += [
        f"sealed row {key} has no ledger entry (run `manage.py backfill_ledger`)"
        for key in sorted(sealed_rows.keys() - indexed)
        if key in by_key
    ]
    return problems


def passage_unrecorded(row: Mapping[str, Any]) -> bool:
    """Whether a verified quote row has no passage digest: it was stored before digests were recorded at
    finalize. Its quote still re-verifies against the bundled passage, but nothing from the time it was
    verified says that passage is the one it was verified against."""
    return not row["passage_sha256"]


def passage_differences(row: Mapping[str, Any], excerpt: str, excerpt_start: int) -> list[str]:
    """Whether ``excerpt`` (the source text from ``excerpt_start``) holds a verified quote ``row``'s passage
    as recorded: the span inside it, and the passage's digest the one recorded at finalize (a quote stored
    before digests were recorded has none to compare: see :func:`passage_unrecorded`)."""
    start, end = row["offset_start"] - excerpt_start, row["offset_end"] - excerpt_start
    if not (0 <= start <= end <= len(excerpt)):
        return ["its passage is not inside the bundled excerpt"]
    if not passage_unrecorded(row) and text_sha256(excerpt[start:end]) != row["passage_sha256"]:
        return ["the bundled passage's digest differs from the sealed passage digest"]
    return []


def reverification_differences(
    row: Mapping[str, Any],
    excerpt: str,
    excerpt_start: int,
    *,
    facts_format: str | None = FACTS_FORMAT,
    rules: int | None = None,
) -> list[str]:
    """Re-run the quote verification of a verified quote ``row`` against ``excerpt`` with the server's own
    code (``lqai_verify.verification``): the match's method, span, confidence and alterations, and its context flags
    where the row records them (every row of an ``lqai-export/3`` or later bundle, sealed or, in a turn sealed in facts
    format /1, not), must be what the row records, that is what the rules that verified it said (this version's,
    for a turn sealed on time). ``facts_format``: that of the turn's seal (``None``: the turn is not sealed), so
    that a difference calls the row's value sealed only where it is. ``rules``: the version of the rules to
    re-run (one this verifier has, ``lqai_verify.verification.RULES``; ``None``: today's)."""
    match, why = NormalizedSource.build(excerpt).verify_detailed(
        row["quote"], rules=CURRENT_RULES if rules is None else rules
    )
    if match is None:
        return [f"the quote no longer verifies against its passage ({why or 'not found'})"]
    found = {
        "method": match.method,
        "offset_start": match.start + excerpt_start,
        "offset_end": match.end + excerpt_start,
        "confidence": match.confidence,
        "alterations": alterations_record(match, offset=excerpt_start),
    }
    if "context_flags" in row:
        found["context_flags"] = context_flags_record(match, offset=excerpt_start)
    unsealed = UNSEALED_FIELDS.get(facts_format or "", {}).get(row.get("table", ""), frozenset())

    def says(name: str) -> str:
        if facts_format is None:
            return "its row (its turn is not sealed) says"
        return f"its row ({facts_format} does not seal it) says" if name in unsealed else "the sealed row says"

    return [
        f"re-verified, its {name} is {found[name]!r}, {says(name)} {row[name]!r}"
        for name in found
        if found[name] != row[name]
    ]


def quote_differences(
    row: Mapping[str, Any], excerpt: str, excerpt_start: int, *, rules: int | None = None
) -> list[str]:
    """:func:`passage_differences`, then (if the passage is there) :func:`reverification_differences` (under
    ``rules``, today's if ``None``)."""
    return passage_differences(row, excerpt, excerpt_start) or reverification_differences(
        row, excerpt, excerpt_start, rules=rules
    )
