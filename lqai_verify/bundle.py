"""Checking a matter export (``lqai-export/5``, or ``/4`` to ``/1`` before it, written by ``citations.export``), or a
matter-less chat's, with nothing but the bundle (docs/export.md, "Verifying an export"):

1. the zip: exactly its listed files end to end, no comment, no name twice, no path out of its folder;
2. the manifest's signature, by the expected key, and every file against its digest in the manifest;
3. the chain the manifest names: each seal's digest, link, number and signature, ending at the chain head;
4. every turn and row against its seal, every ledger entry against its sealed row;
5. every verified quote re-verified against its bundled passage (``lqai_verify.verification``), its pin cite
   read as its pages say;
6. once all of that holds, ``report.html`` against the report rendered again from the checked data.

A bundle is input from whoever sent it: whatever is malformed is a problem naming its file, line and turn, never
a crash; a zip that would unpack to more than ``max_bytes`` is refused unread, and checks 3 to 6 read the data
files only under a valid signature, each within :data:`CHANGED_FILE_SLACK` times its signed size.
"""

from __future__ import annotations

import hashlib
import hmac
import json
import os
import struct
import zipfile
import zlib
from collections import Counter
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from operator import attrgetter
from pathlib import Path
from typing import IO, Any

from lqai_verify import certificates, decisions, record, report
from lqai_verify.verification import RULES, VERIFIER_VERSION, page_cites

REQUIRED = ("manifest.json", "manifest.sig", "public_key.json")
JSONL = (
    "turns.jsonl",
    "rows.jsonl",
    "ledger.jsonl",
    "seals.jsonl",
    "passages.jsonl",
    "decisions.jsonl",
    "certificates.jsonl",
)
# The most a bundle may unpack to (``--max-mb``): a matter's export is about 12 KB a turn, so this holds some
# 80,000 turns, and a hostile zip (a few KB that unpack to gigabytes) is refused before it is read.
DEFAULT_MAX_BYTES = 1024 * 1024 * 1024
# A data file that differs from its signed digest is read if no larger than this many times its signed size (plus
# a MiB): enough to name what changed in it, not enough to make the verifier's memory a sender's choice.
CHANGED_FILE_SLACK = 2

# The shapes of what the checks read (a type, a tuple of types, a dict of required fields, or ``[shape]``:
# a list of that shape). A bundle is input from whoever sent it: what does not have its shape is reported
# as a problem with its field, never read as if it had.
_KEY = {"fingerprint": str, "public_key": str}
_KEYS_SHAPE = {"signing_key": _KEY, "seal_keys": [_KEY]}
_MANIFEST_SHAPE = {
    "format": str,
    "matter": (dict, type(None)),  # null in the export of a chat outside any matter, which names its "chat"
    "chain": str,
    "chain_head": (dict, type(None)),
    "exported_at": str,
    "signing_key": str,
    "files": dict,
}
_HEAD_SHAPE = {"sequence": int, "seal_sha256": str}
_SEAL_SHAPE = {
    "chain": str,
    "sequence": int,
    "previous_sha256": str,
    "message": str,
    "finalize_number": int,
    "finalized_at": str,
    "facts_sha256": str,
    "sealed_at": str,
    "late": bool,
    "key_fingerprint": str,
    "verifier_version": str,
    "row_digests": {"turn": str, "rows": dict},
    "seal_sha256": str,
    "signature": str,
}
_PASSAGE_SHAPE = {"row": str, "excerpt": str, "excerpt_start": int}
_NAMES = {
    dict: "an object",
    list: "a list",
    str: "a string",
    int: "an integer",
    bool: "true or false",
    float: "a number",
    type(None): "null",
}


def _kind(value: Any) -> str:
    return next((name for kind, name in _NAMES.items() if type(value) is kind), type(value).__name__)


def shape_problems(value: Any, shape: Any, where: str) -> list[str]:
    """How ``value`` is not of ``shape`` (see ``_MANIFEST_SHAPE``), each naming the field (``where.field``).
    ``int`` means an integer, not ``true``/``false`` (which Python would count as integers)."""
    if isinstance(shape, dict):
        if type(value) is not dict:
            return [f"{where} is {_kind(value)}, not an object"]
        return [
            problem
            for name, field_shape in shape.items()
            for problem in (
                shape_problems(value[name], field_shape, f"{where}.{name}")
                if name in value
                else [f"{where}.{name} is missing"]
            )
        ]
    if isinstance(shape, list):
        if type(value) is not list:
            return [f"{where} is {_kind(value)}, not a list"]
        return [problem for i, item in enumerate(value) for problem in shape_problems(item, shape[0], f"{where}[{i}]")]
    kinds = shape if isinstance(shape, tuple) else (shape,)
    if type(value) in kinds:
        return []
    return [f"{where} is {_kind(value)}, not {' or '.join(_NAMES[kind] for kind in kinds)}"]


class BundleError(Exception):
    """The file is not a bundle at all (not a zip, no manifest): nothing can be checked."""


@dataclass(slots=True)
class Verification:
    problems: list[str] = field(default_factory=list)
    warnings: list[str] = field(default_factory=list)
    matter: str = ""
    chat: str = ""  # the export of a chat outside any matter: its id (and ``matter`` is empty)
    fingerprint: str = ""
    turns: int = 0
    rows: int = 0
    seals: int = 0
    entries: int = 0
    quotes: int = 0
    case_citations: int = 0
    statutes: int = 0  # statute and regulation rows (citations and quotes; their quotes count in ``quotes``)
    late: int = 0
    decisions: int = 0  # review decisions whose digest, link, signature and claim held
    certificates: int = 0  # certificates whose digest, text, link, signature and named decisions held
    exported_at: str = ""
    chain: str = ""
    # Each valid seal's digest by its number, for :func:`extension_problems`; and the manifest's chain head.
    signature_valid: bool = False  # manifest.sig is a valid signature of manifest.json by the bundle's key
    development_key: bool = False  # signed with a key derived from a server's SECRET_KEY
    key_expected: bool = False  # the signing key was checked against the one --public-key named
    seal_digests: dict[int, str] = field(default_factory=dict)
    head: tuple[int, str] | None = None

    @property
    def ok(self) -> bool:
        return not self.problems

    def summary(self) -> str:
        subject = f"matter {self.matter}" if self.matter else f"chat {self.chat}"
        return (
            f"{subject}: {self.turns} turns ({self.late} sealed late), {self.rows} rows, "
            f"{self.quotes} quotes re-verified, {self.case_citations} case citations, "
            f"{self.statutes} statute citations and quotes, {self.entries} ledger entries, "
            f"a chain of {self.seals} seals; "
            + (f"{self.decisions} review decisions; " if self.decisions else "")
            + (f"{self.certificates} certificates of verification; " if self.certificates else "")
            + self._signed()
        )

    def _signed(self) -> str:
        """Who signed, in words a non-specialist reads right: only a key the sender published names them."""
        if not self.signature_valid:
            return f"signature NOT valid (the bundle's key {self.fingerprint})"
        if self.development_key:
            return (
                f"signature valid, made with a development key ({self.fingerprint}): it does not show who made "
                "this bundle"
            )
        if self.key_expected:
            return f"signature valid, made with the key expected ({self.fingerprint})"
        return (
            f"signature valid, made with the key the bundle carries ({self.fingerprint}): it shows who made this "
            "bundle only once that fingerprint is compared with the one its sender published"
        )


def expected_fingerprint(value: str) -> str:
    """``--public-key``: a fingerprint (64 hex digits) as it is, or a base64 public key's fingerprint."""
    candidate = value.strip().lower()
    if len(candidate) == 64 and all(c in "0123456789abcdef" for c in candidate):
        return candidate
    return record.fingerprint(record.public_key_from_b64(value))


def _lines(data: bytes, name: str, result: Verification) -> Iterator[tuple[int, dict[str, Any]]]:
    """Each line of the JSON Lines file ``data`` with its number, as an object; what is not one is a problem.
    Lines end at ``\\n`` only: U+2028, U+2029 or U+0085 may stand raw inside a string (the files are written
    with ``ensure_ascii=False``), where ``str.splitlines`` would break a line. The files are UTF-8: a line that
    is not is a problem, never read with its bad bytes replaced (the text checked would not be the bytes sent)."""
    for number, raw in enumerate(data.removesuffix(b"\n").split(b"\n") if data else [], start=1):
        try:
            line = raw.decode("utf-8")
        except UnicodeDecodeError as exc:
            result.problems.append(f"{name} line {number}: not UTF-8 ({exc.reason} at byte {exc.start:,} of the line)")
            continue
        value = _json_value(line, f"{name} line {number}", result)
        if value is _UNREADABLE:
            continue
        if not isinstance(value, dict):
            result.problems.append(f"{name} line {number}: not a JSON object")
            continue
        yield number, value


# What :func:`_json_value` returns for text it cannot read (``None`` is JSON's ``null``).
_UNREADABLE = object()


def _object(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    """A JSON object whose keys are all different: one that names a key twice reads two ways (Python keeps the
    last value, other readers the first), so it is not read (``ValueError``)."""
    value = dict(pairs)
    if len(value) != len(pairs):
        twice = next(key for key in value if sum(name == key for name, _ in pairs) > 1)
        raise ValueError(f"the key {twice!r} appears twice in one object")
    return value


def _json_value(text: str | bytes, where: str, result: Verification) -> Any:
    """The JSON value of ``text``; :data:`_UNREADABLE`, with a problem naming ``where``, if it is not valid JSON
    or not JSON Python reads the one way: nested too deeply (``RecursionError``), an integer of more digits than
    ``int`` converts, or an object naming a key twice (``ValueError``)."""
    try:
        return json.loads(text, object_pairs_hook=_object)
    except json.JSONDecodeError as exc:
        result.problems.append(f"{where}: not valid JSON ({exc.msg})")
    except RecursionError:
        result.problems.append(f"{where}: not readable: nested too deeply")
    except ValueError as exc:  # UnicodeDecodeError, an integer of too many digits, a key twice
        result.problems.append(f"{where}: not readable JSON ({exc})")
    return _UNREADABLE


def _pin_cite_problems(row: dict[str, Any], passage: dict[str, Any], *, where: str) -> list[str]:
    """A passage's pin cite, which the report shows, must read as its pages say: an opinion's in the reporter of
    its citation (``page_cites.pin_cite``), a document's ``p. N``. A bundle written before pin cites has none."""
    if "pin_cite" not in passage:
        return []
    pages = passage.get("pages")
    if row["table"] == record.CASELAW:
        expected = page_cites.pin_cite(pages, citation=str(passage.get("citation") or ""))
    else:
        expected = page_cites.page_cite(pages) or None
    if passage["pin_cite"] == expected:
        return []
    return [f"{where}: its pin cite {passage['pin_cite']!r} does not read as its pages {pages!r} say ({expected!r})"]


def _check_quote(
    result: Verification,
    row: dict[str, Any],
    excerpt: str,
    excerpt_start: int,
    *,
    where: str,
    seal: dict[str, Any] | None,
) -> None:
    """A verified quote against its bundled passage. The passage must be the one recorded. The quote is then
    re-verified: a difference is a problem in a turn sealed on time under this verifier's rules, or under earlier
    rules it still has (re-run under those rules; where today's read it otherwise, a warning naming both). It is
    a warning in a turn sealed late (verified before its seal, perhaps under earlier rules: the seal proves
    nothing of before) and in one sealed under rules this verifier does not have (their verifier checks it
    strictly), so that a matter sealed across an upgrade of the rules still verifies, and says where today's
    rules differ. ``seal``: the turn's latest seal (``None``: the turn is not sealed)."""
    problems = record.passage_differences(row, excerpt, excerpt_start)
    result.problems += [f"{where}: {p}" for p in problems]
    if problems:
        return
    if record.passage_unrecorded(row):
        result.warnings.append(
            f"{where}: no passage digest was recorded when it was verified (stored before digests were): it "
            "re-verifies against the bundled passage, but nothing from that time says it is the passage it was "
            "verified against"
        )
    facts_format = None if seal is None else record.sealed_format(seal["row_digests"])
    sealed_rules = _earlier_rules(seal)
    if sealed_rules is not None:
        # Sealed on time under earlier rules this verifier still has: checked strictly under them, and where
        # today's rules read the quote otherwise, that is a warning (not a change of the record).
        strict = record.reverification_differences(
            row, excerpt, excerpt_start, facts_format=facts_format, rules=sealed_rules
        )
        result.problems += [f"{where}: under the rules it was sealed by ({sealed_rules}): {d}" for d in strict]
        if not strict:
            today = record.reverification_differences(row, excerpt, excerpt_start, facts_format=facts_format)
            result.warnings += [
                f"{where}: under today's rules ({VERIFIER_VERSION}), not those it was sealed by ({sealed_rules}), {d}"
                for d in today
            ]
        return
    differences = record.reverification_differences(row, excerpt, excerpt_start, facts_format=facts_format)
    # Why a difference is not this verifier's to judge, if it is not: then it is a warning, else a problem.
    not_judged = ""
    if seal is not None and seal["late"]:
        not_judged = (
            f"its turn was sealed late, after it was verified, perhaps under earlier rules than {VERIFIER_VERSION!r}: "
            "this shows what today's rules say, not a change of the record"
        )
    elif seal is not None and seal["verifier_version"] != VERIFIER_VERSION:
        not_judged = (
            f"its turn was sealed under verification rules {seal['verifier_version']!r}, not this verifier's "
            f"{VERIFIER_VERSION!r}: its row records what those rules said, and the verifier of those rules checks "
            "it strictly"
        )
    if not_judged:
        result.warnings += [f"{where}: {d} ({not_judged})" for d in differences]
    else:
        result.problems += [f"{where}: {d}" for d in differences]


def _earlier_rules(seal: dict[str, Any] | None) -> int | None:
    """The version of the rules a turn sealed on time under earlier rules than today's was sealed by, if this
    verifier still has it (``lqai_verify.verification.RULES``); else None."""
    if seal is None or seal["late"] or seal["verifier_version"] == VERIFIER_VERSION:
        return None
    version = seal["verifier_version"]
    return int(version) if version.isdigit() and int(version) in RULES else None


def read_members(path: Path, *, max_bytes: int = DEFAULT_MAX_BYTES) -> tuple[dict[str, bytes], list[str]]:
    """The files of the zip at ``path`` by name, and what is wrong with the zip around them, each a problem: a
    name it holds more than once (a reader would show one copy, the checks read the last), a comment (the
    archive's or a file's: unsigned text that ``unzip`` prints), a path that leaves the folder it is unzipped
    into, bytes that are not its listed files (:func:`layout_problems`). ``BundleError`` if it is not a readable
    zip, a file of it is damaged, or its files would unpack to more than ``max_bytes`` (checked before anything
    is unpacked: each file is unpacked no further than its declared size, :func:`_read_member`)."""
    try:
        with zipfile.ZipFile(path) as bundle:
            infos = bundle.infolist()
            unpacked = sum(info.file_size for info in infos)
            if unpacked > max_bytes:
                raise BundleError(
                    f"{path}: its files would unpack to {unpacked:,} bytes, more than the {max_bytes:,} allowed "
                    "(--max-mb; a matter's export is about 12 KB a turn)"
                )
            problems = [
                f"{name}: the zip holds more than one file of this name"
                for name, count in sorted(Counter(info.filename for info in infos).items())
                if count > 1
            ]
            if bundle.comment:
                problems.append("the zip has a comment, which no signature covers (unzip prints it)")
            problems += [
                f"{info.filename}: the zip gives it a comment, which no signature covers"
                for info in infos
                if info.comment
            ]
            problems += [
                f"{info.filename}: its path leaves the folder the bundle is unzipped into"
                for info in infos
                if _leaves_its_folder(info.filename)
            ]
            with path.open("rb") as file:
                problems += layout_problems(file, infos)
            members = {info.filename: _read_member(path, bundle, info) for info in infos}
    except (OSError, zipfile.BadZipFile) as exc:
        raise BundleError(f"{path}: not a readable zip ({exc})") from None
    except BundleError:
        raise
    except Exception as exc:  # zipfile's own errors for a zip it cannot follow
        raise BundleError(f"{path}: not a readable zip ({exc})") from None
    return members, problems


def _leaves_its_folder(name: str) -> bool:
    """Whether an unzipper may write the file ``name`` outside the folder it unzips into: a path from a root
    (``/``, ``\\``, a drive) or one that climbs (a ``..`` part, with either separator)."""
    parts = name.replace("\\", "/").split("/")
    return name.startswith(("/", "\\")) or (len(name) > 1 and name[1] == ":") or ".." in parts


def _read_member(path: Path, bundle: zipfile.ZipFile, info: zipfile.ZipInfo) -> bytes:
    """The file ``info`` of ``bundle``, unpacked no further than its declared size: ``ZipFile.read`` inflates a
    file's whole deflate stream in one call, whatever size its headers give it, so a file that says 10 bytes
    could make it hold a thousand times the zip. Reading one byte past the size reaches the file's end, where
    ``zipfile`` checks its CRC. ``BundleError`` naming the file if it is damaged (its CRC, its deflate stream)."""
    try:
        with bundle.open(info) as member:
            return member.read(info.file_size + 1)
    except Exception as exc:  # zipfile's errors for a damaged file are of many kinds (BadZipFile, zlib.error, ...)
        raise BundleError(f"{path}: a file of the bundle is damaged: {info.filename} ({exc})") from None


# A zip's fixed records (APPNOTE.TXT 4.3): the end of central directory record (signature, entries on this disk,
# entries, directory size, directory offset, comment length) and a local file header before its name (signature,
# flags, method, CRC, compressed size, size, name length, extra field length).
_END = struct.Struct("<4s4xHHIIH")
_LOCAL_HEADER = struct.Struct("<4s2xHH4xIIIHH")
_DESCRIPTOR = struct.Struct("<III")  # after a file's data when flag bit 3 is set: CRC, compressed size, size
_DESCRIPTOR_SIGNATURE = b"PK\x07\x08"  # optional, before a data descriptor
# How far past its size a file's compressed data is read: deflate adds at most some 0.03 % and a few bytes.
_DEFLATE_SLACK = 1 << 16

# Each check below catches what the manifest's digests cannot, since they cover the files as zipfile reads them:
# - bytes outside the listed files: a file with a local header but no directory entry is what a streaming reader
#   extracts (a second report.html), and bytes before or after the zip are what other readers may take for one;
# - a local header or data descriptor that disagrees with the directory: a streaming reader follows the local
#   header, so it would read other bytes as the file than the verifier did;
# - bytes in a file's compressed data past its end (after its deflate stream or its size): zipfile stops there,
#   the CRC covers nothing after it, and a reader that scans for headers may find a file in them;
# - data that is not exactly the file its headers give (shorter, or no end to its stream): zipfile reads such a
#   file without an error, where another reader fails or reads otherwise.


def layout_problems(file: IO[bytes], infos: list[zipfile.ZipInfo]) -> list[str]:
    """How the zip in ``file`` is not exactly its listed files (``infos``, its central directory) end to end:
    each file's local header, data and data descriptor followed at once by the next file's from byte 0, the
    last by the central directory, then the end record, which ends the file (see the list above for why). A
    zip64 or spanned archive, which ``citations.export`` never writes, is one it cannot account for."""
    size = file.seek(0, os.SEEK_END)
    file.seek(max(0, size - _END.size))
    end = file.read(_END.size)
    if len(end) != _END.size or end[:4] != b"PK\x05\x06" or _END.unpack(end)[-1]:
        return ["the zip does not end with its end-of-central-directory record (a comment or bytes after it)"]
    _, disk_entries, entries, directory_size, directory_start, _ = _END.unpack(end)
    if (disk_entries, entries) != (len(infos), len(infos)) or directory_start + directory_size != size - _END.size:
        return [
            "the zip's central directory is not where its end record says (bytes before the zip, after the "
            "directory, or a zip64 or spanned archive)"
        ]
    problems: list[str] = []
    position = 0
    for info in sorted(infos, key=attrgetter("header_offset")):
        if info.header_offset != position:
            return [
                *problems,
                f"{info.filename}: bytes {position:,} to {info.header_offset:,} before it are no listed file's",
            ]
        bounds = _member_bounds(file, info)
        if bounds is None:
            return [
                *problems,
                f"{info.filename}: its local header or data descriptor disagrees with the central directory",
            ]
        data_start, position = bounds
        problems += [f"{info.filename}: {problem}" for problem in _data_problems(file, info, data_start)]
    if position != directory_start:
        return [
            *problems,
            f"bytes {position:,} to {directory_start:,}, before the central directory, are no listed file's",
        ]
    return problems


def _member_bounds(file: IO[bytes], info: zipfile.ZipInfo) -> tuple[int, int] | None:
    """Where the data of the file ``info`` begins in ``file``, and where the file (header, data, data descriptor)
    ends; ``None`` if its local header or data descriptor does not say what its directory entry says."""
    file.seek(info.header_offset)
    header = file.read(_LOCAL_HEADER.size)
    if len(header) != _LOCAL_HEADER.size:
        return None
    signature, flags, method, *sizes, name_length, extra_length = _LOCAL_HEADER.unpack(header)
    data_start = info.header_offset + _LOCAL_HEADER.size + name_length + extra_length
    end = data_start + info.compress_size
    expected = [info.CRC, info.compress_size, info.file_size]
    if signature != b"PK\x03\x04" or (flags, method) != (info.flag_bits, info.compress_type):
        return None
    if not flags & 0x08:  # flag bit 3 clear: the sizes are in the local header, and no descriptor follows
        return (data_start, end) if sizes == expected else None
    file.seek(end)
    descriptor = file.read(len(_DESCRIPTOR_SIGNATURE) + _DESCRIPTOR.size)
    if descriptor.startswith(_DESCRIPTOR_SIGNATURE):
        descriptor, end = descriptor[len(_DESCRIPTOR_SIGNATURE) :], end + len(_DESCRIPTOR_SIGNATURE)
    if len(descriptor) < _DESCRIPTOR.size or list(_DESCRIPTOR.unpack_from(descriptor)) != expected:
        return None
    return data_start, end + _DESCRIPTOR.size


def _data_problems(file: IO[bytes], info: zipfile.ZipInfo, data_start: int) -> list[str]:
    """How the compressed data of the file ``info`` (at ``data_start`` in ``file``) is not exactly the file its
    headers give: stored, exactly its size; deflated, one stream that ends exactly at its compressed size and
    unpacks to exactly its size. Reads its compressed data no further than deflate could need for its size, and
    unpacks no further than its size."""
    hidden = "are part of no file (a reader that scans for headers may take them for one)"
    if info.compress_type == zipfile.ZIP_STORED:
        if info.compress_size < info.file_size:
            return [f"stored in {info.compress_size:,} bytes, not the {info.file_size:,} its headers give it"]
        stray = info.compress_size - info.file_size
        return [f"{stray:,} bytes after the end of its data, within its compressed size, {hidden}"] if stray else []
    if info.compress_type != zipfile.ZIP_DEFLATED:
        return [
            f"compressed with method {info.compress_type}, which the verifier cannot check to its end "
            "(citations.export deflates every file)"
        ]
    file.seek(data_start)
    limit = info.file_size + info.file_size // 1000 + _DEFLATE_SLACK  # more than deflate writes for the file
    raw = file.read(min(info.compress_size, limit))
    inflater = zlib.decompressobj(-15)
    try:
        unpacked = len(inflater.decompress(raw, info.file_size + 1))
    except zlib.error as exc:
        return [f"its compressed data is not a deflate stream ({exc})"]
    if unpacked > info.file_size:
        return [
            f"its deflate stream unpacks to more than the {info.file_size:,} bytes its headers give it: the rest "
            "is part of no file"
        ]
    if not inflater.eof and info.compress_size > limit:
        return [f"its deflate stream runs past {limit:,} bytes, more than deflate writes for its size"]
    if not inflater.eof:
        return ["its deflate stream does not end within its compressed size"]
    if unpacked != info.file_size:
        return [f"its deflate stream unpacks to {unpacked:,} bytes, not the {info.file_size:,} its headers give it"]
    stray = info.compress_size - (len(raw) - len(inflater.unused_data))
    return (
        [f"{stray:,} bytes after the end of its deflate stream, within its compressed size, {hidden}"] if stray else []
    )


def _json_file(members: dict[str, bytes], name: str, shape: Any, result: Verification) -> Any:
    """``name``'s JSON if it has ``shape``; else ``None``, with each way it does not in ``result.problems``."""
    value = _json_value(members[name], name, result)
    if value is _UNREADABLE:
        return None
    problems = shape_problems(value, shape, name)
    result.problems += problems
    return None if problems else value


def _public_key(value: str, where: str, result: Verification) -> Any:
    """The Ed25519 public key of base64 ``value``; ``None``, with a problem naming ``where``, if it is not one."""
    try:
        return record.public_key_from_b64(value)
    except ValueError as exc:
        result.problems.append(f"{where}: {exc}")
        return None


def _subject(manifest: dict[str, Any], result: Verification) -> str | None:
    """The export's subject, as the chain it must be of: its matter's (``matter:<id>``), or, for a chat outside
    any matter, the chat's (``chat:<id>``); ``None``, with the problem, if the manifest names neither or both, or
    another chain. Sets ``result.matter`` or ``result.chat``."""
    matter, chat = manifest["matter"], manifest.get("chat")
    if (matter is None) == (chat is None):
        result.problems.append("manifest.json: it must name either a matter or a chat (with a null matter)")
        return None
    kind = "matter" if matter is not None else "chat"
    named: Any = matter if matter is not None else chat
    malformed = shape_problems(named, {"id": str}, f"manifest.json.{kind}")
    if malformed:
        result.problems += malformed
        return None
    setattr(result, kind, named["id"])
    chain = f"{kind}:{named['id']}"
    if manifest["chain"] != chain:
        result.problems.append(f"manifest.json: the chain {manifest['chain']} is not the {kind}'s ({chain})")
    return chain


def verify_bundle(path: Path, *, public_key: str | None = None, max_bytes: int = DEFAULT_MAX_BYTES) -> Verification:
    """Check the bundle at ``path`` (see the module docstring); ``public_key``: the signing key expected;
    ``max_bytes``: the most its files may unpack to. ``BundleError`` if it is no bundle at all; everything else
    wrong with it, however malformed, is a problem of the result."""
    members, container_problems = read_members(path, max_bytes=max_bytes)
    missing = [name for name in REQUIRED if name not in members]
    if missing:
        raise BundleError(f"{path}: not an lqai export: {', '.join(missing)} missing")
    result = Verification()
    result.problems += container_problems
    manifest = _json_file(members, "manifest.json", _MANIFEST_SHAPE, result)
    keys = _json_file(members, "public_key.json", _KEYS_SHAPE, result)
    if manifest is None or keys is None:
        return result
    signing_key = _public_key(keys["signing_key"]["public_key"], "public_key.json: signing_key", result)
    if signing_key is None or _subject(manifest, result) is None:
        return result
    result.chain = manifest["chain"]
    result.exported_at = manifest["exported_at"]
    result.fingerprint = record.fingerprint(signing_key)
    result.development_key = bool(manifest.get("development_key"))
    _check_signing_key(manifest, public_key, result)
    signature = members["manifest.sig"].decode("ascii", errors="replace").strip()
    signed = record.signature_valid(signing_key, signature, members["manifest.json"])
    result.signature_valid = signed
    if not signed:
        result.problems.append(
            "manifest.sig: the signature of manifest.json is not valid (manifest or signature changed)"
        )
    _check_manifest(manifest, members, result)
    seal_keys = _seal_keys(keys["seal_keys"], result)
    if not signed:
        result.problems.append(
            "the data files are not read: nothing vouches for them without a valid signature of the manifest"
        )
        return result
    _check_record(_signed_sizes(members, manifest["files"], result), manifest, seal_keys, result)
    return result


def _check_signing_key(manifest: dict[str, Any], public_key: str | None, result: Verification) -> None:
    """The bundle's signing key (``result.fingerprint``) is the one expected (``public_key``; with none, a
    warning says to compare it with the published one) and the one its manifest names."""
    if public_key is not None:
        expected = expected_fingerprint(public_key)
        result.key_expected = hmac.compare_digest(expected, result.fingerprint)
        if not result.key_expected:
            result.problems.append(
                f"public_key.json: the bundle is signed by the key {result.fingerprint}, not by the expected {expected}"
            )
    else:
        result.warnings.append(
            f"no --public-key given: the signature is checked against the bundle's own key {result.fingerprint}; "
            "compare it with the fingerprint the sender published"
        )
    if manifest["signing_key"] != result.fingerprint:
        result.problems.append("manifest.json: its signing_key is not the fingerprint of public_key.json's key")
    if manifest.get("development_key"):
        result.warnings.append(
            "signed with a DEVELOPMENT key derived from the server's SECRET_KEY: the files are as signed, but the "
            "signature does not show who made this bundle"
        )


def _check_manifest(manifest: dict[str, Any], members: dict[str, bytes], result: Verification) -> None:
    """The manifest's format is one this verifier reads, and the bundle holds exactly the files it lists, each
    with its digest."""
    if manifest["format"] not in record.EXPORT_FORMATS:
        result.problems.append(
            f"manifest.json: format {manifest['format']!r}, expected one of {', '.join(record.EXPORT_FORMATS)}"
        )
    elif manifest["format"] not in record.RENDERED_REPORT_FORMATS:
        result.warnings.append(
            f"report.html is not checked: an {manifest['format']} bundle's report was not rendered from its data "
            "files by this verifier's layout; read what this verifier checked (its summary and problems) rather "
            "than the page"
        )
    listed: dict[str, Any] = manifest["files"]
    for name in sorted(members.keys() - {"manifest.json", "manifest.sig"} - listed.keys()):
        result.problems.append(f"{name}: a file the manifest does not list")
    for name, entry in sorted(listed.items()):
        if name not in members:
            result.problems.append(f"{name}: listed in the manifest, missing from the bundle")
        elif type(entry) is not dict or hashlib.sha256(members[name]).hexdigest() != entry.get("sha256"):
            result.problems.append(f"{name}: its SHA-256 differs from the manifest's (the file was changed)")


def _seal_keys(listed: list[dict[str, str]], result: Verification) -> dict[str, Any]:
    """The keys of ``public_key.json``'s ``seal_keys`` by fingerprint; one whose fingerprint is not its own, or
    that is not a key, is a problem."""
    seal_keys = {}
    for i, entry in enumerate(listed):
        key = _public_key(entry["public_key"], f"public_key.json: seal_keys[{i}]", result)
        if key is None:
            continue
        if record.fingerprint(key) != entry["fingerprint"]:
            result.problems.append(
                f"public_key.json: the seal key listed as {entry['fingerprint'][:16]}... has another fingerprint"
            )
        seal_keys[entry["fingerprint"]] = key
    return seal_keys


def _signed_sizes(members: dict[str, bytes], listed: dict[str, Any], result: Verification) -> dict[str, bytes]:
    """``members``, less each data file larger than :data:`CHANGED_FILE_SLACK` times the size the (signed)
    manifest gives it, plus a MiB, with a problem for each: a file changed since it was signed is still read, to
    say what changed in it, but what the verifier reads (some 50 times its size in memory) stays bounded by
    what the key holder signed, not by what a sender made of it."""
    kept = dict(members)
    for name in JSONL:
        entry = listed.get(name)
        signed_bytes = entry.get("bytes") if type(entry) is dict else None
        if name not in members or type(signed_bytes) is not int:
            continue
        if len(members[name]) > CHANGED_FILE_SLACK * signed_bytes + 2**20:
            kept[name] = b""
            result.problems.append(
                f"{name}: not read: {len(members[name]):,} bytes, where the manifest signed {signed_bytes:,}"
            )
    return kept


def extension_problems(later: Verification, earlier: Verification, *, earlier_name: str) -> list[str]:
    """How the export ``later`` does not extend ``earlier``, an export of the same matter (or chat) its recipient kept
    (each verified on its own first): ``earlier`` must itself verify (against its own key: whose key that is,
    its recipient checked when it came, and the key may have been rotated since), be of the same chain, and
    end at a seal ``later`` holds with the same digest. Each seal's digest covers the one before it, so that
    one comparison shows every earlier seal unchanged, and with them every turn they seal: nothing the
    earlier export held was cut from the end of the chain, rewritten or re-sealed since."""
    problems = [f"{earlier_name} (the earlier export): {problem}" for problem in earlier.problems]
    if earlier.chain != later.chain:
        problems.append(f"{earlier_name} (the earlier export) is of the chain {earlier.chain}, not {later.chain}")
    elif earlier.head is not None:
        sequence, digest = earlier.head
        held = later.seal_digests.get(sequence)
        if held != digest:
            problems.append(
                f"seals.jsonl: the earlier export's chain ends at seal #{sequence}, which this export "
                f"{'does not hold' if held is None else 'holds with another digest'}: the record was "
                f"{'cut back' if held is None else 'rewritten'} since {earlier.exported_at}"
            )
    return problems


class _ReportParts:
    """The report of the bundle's data (:mod:`lqai_verify.report`), part by part as the turns are checked, to
    compare with its ``report.html``. Data that cannot be rendered is a problem of its own, never a crash."""

    def __init__(self, manifest: dict[str, Any]) -> None:
        self.parts: list[tuple[str, str]] = []
        self.broken = False
        self._add("its opening (what it is the record of, its key, its chain)", report.start, manifest)

    def _add(self, what: str, render: Any, *args: Any, **kwargs: Any) -> None:
        if self.broken:
            return
        try:
            self.parts.append((what, render(*args, **kwargs)))
        except (KeyError, TypeError, ValueError, AttributeError, IndexError, RecursionError):
            self.broken = True

    def turn(self, line: dict[str, Any], **kwargs: Any) -> None:
        self._add(f"turn {line['turn']['message']}", report.turn, line, **kwargs)

    def end(self, **counts: int) -> None:
        self._add("its closing counts", report.end, **counts)

    def problems(self, page: bytes) -> list[str]:
        if self.broken:
            return ["report.html: not checked: the data files are malformed, so no report can be rendered from them"]
        return report.differences(page, self.parts)


def _check_record(
    members: dict[str, bytes], manifest: dict[str, Any], seal_keys: dict[str, Any], result: Verification
) -> None:
    """Checks 3 to 6 of the module docstring, on the data files of a bundle whose manifest's signature holds: the
    chain, then each turn in chain order with its rows, ledger entries and passages, then what belongs to no turn,
    and last the report."""
    data = {name: members.get(name, b"") for name in JSONL}
    seals = _chain(data["seals.jsonl"], manifest["chain"], seal_keys, result)
    _check_chain_head(manifest["chain_head"], seals, result)
    held: dict[str, Any] = {}
    decision_lines = list(_lines(data["decisions.jsonl"], "decisions.jsonl", result))
    certificate_lines = list(_lines(data["certificates.jsonl"], "certificates.jsonl", result))
    if manifest["format"] == record.EXPORT_FORMAT:
        _check_review_heads(manifest, manifest["chain"], decision_lines, certificate_lines, result)
    result.decisions, decision_problems = decisions.bundle_problems(
        decision_lines,
        turn_chain=manifest["chain"],
        seal_keys=seal_keys,
        sealed_rows={
            seal["message"]: set(seal["row_digests"]["rows"]) for seal in seals if isinstance(seal.get("message"), str)
        },
        held=held,
    )
    result.problems += decision_problems
    certified: dict[str, Any] = {}
    sealed_turns: dict[str, set[str]] = {}
    for seal in seals:
        if isinstance(seal.get("message"), str):
            sealed_turns.setdefault(seal["message"], set()).add(seal["seal_sha256"])
    result.certificates, certificate_problems = certificates.bundle_problems(
        certificate_lines,
        turn_chain=manifest["chain"],
        seal_keys=seal_keys,
        sealed_turns=sealed_turns,
        decisions=held,
        held=certified,
    )
    result.problems += certificate_problems
    walk = _TurnWalk(
        seals_of=_by_turn(seals),
        rows_of=_rows_by_turn(data["rows.jsonl"], result),
        passages=_passages_by_quote(data["passages.jsonl"], result),
        entries_of=_by_turn(entry for _, entry in _lines(data["ledger.jsonl"], "ledger.jsonl", result)),
        report=_ReportParts(manifest),
        decisions_of=_by_turn(held.values()),
        certificates_of=_by_turn(certified.values()),
    )
    for number, line in _lines(data["turns.jsonl"], "turns.jsonl", result):
        _check_turn(number, line, walk, result)
    _check_leftovers(walk, result)
    # The page is compared once the data verifies: a report of data found wrong could only differ from it more.
    if manifest["format"] in record.RENDERED_REPORT_FORMATS and not result.problems:
        walk.report.end(turns=result.turns, rows=result.rows, late=result.late, unsealed=walk.unsealed)
        result.problems += walk.report.problems(members.get("report.html", b""))


_MALFORMED = (KeyError, TypeError, ValueError, AttributeError, RecursionError)  # what malformed data raises


def _chain(data: bytes, chain: str, seal_keys: dict[str, Any], result: Verification) -> list[dict[str, Any]]:
    """The well-formed seals of ``seals.jsonl`` (``data``) in file order, each checked against the one before
    (:func:`_seal_problems`); sets ``result.seals`` and ``result.seal_digests``."""
    seals: list[dict[str, Any]] = []
    previous: dict[str, Any] | None = None
    for number, seal in _lines(data, "seals.jsonl", result):
        where = f"seals.jsonl line {number} (turn {seal.get('message')})"
        malformed = shape_problems(seal, _SEAL_SHAPE, "seal")
        if malformed:
            result.problems += [f"{where}: malformed: {problem}" for problem in malformed]
            continue
        try:
            for problem in _seal_problems(seal, previous, chain=chain, seal_keys=seal_keys):
                result.problems.append(f"{where}: {problem}")
            if seal["verifier_version"] != VERIFIER_VERSION and _earlier_rules(seal) is None:
                result.warnings.append(
                    f"{where}: sealed under verification rules {seal['verifier_version']!r}, this verifier has "
                    f"{VERIFIER_VERSION!r}: use the verifier of that version if a quote does not re-verify"
                )
        except _MALFORMED as exc:
            result.problems.append(f"{where}: malformed seal ({exc!r})")
            continue
        seals.append(seal)
        result.seal_digests.setdefault(seal["sequence"], seal["seal_sha256"])
        previous = seal
    result.seals = len(seals)
    return seals


def _seal_problems(
    seal: dict[str, Any], previous: dict[str, Any] | None, *, chain: str, seal_keys: dict[str, Any]
) -> Iterator[str]:
    """How ``seal`` is not the next seal of ``chain`` after ``previous`` (``None``: it is the first): its chain,
    number and link, its own digests, and its signature by a key of ``seal_keys``."""
    expected_sequence = 1 if previous is None else previous["sequence"] + 1
    if seal["chain"] != chain:
        yield f"a seal of another chain ({seal['chain']})"
    if seal["sequence"] != expected_sequence:
        yield f"seal #{seal['sequence']} where #{expected_sequence} was expected (a seal removed, added or moved)"
    if seal["previous_sha256"] != ("" if previous is None else previous["seal_sha256"]):
        yield "its link to the previous seal is broken"
    yield from record.seal_differences(seal)
    key = seal_keys.get(seal["key_fingerprint"])
    if key is None or not record.signature_valid(key, seal["signature"], record.seal_payload(seal)):
        yield "its signature is not valid"


def _check_review_heads(
    manifest: dict[str, Any],
    turn_chain: str,
    decision_lines: list[tuple[int, dict[str, Any]]],
    certificate_lines: list[tuple[int, dict[str, Any]]],
    result: Verification,
) -> None:
    """``decisions.jsonl`` and ``certificates.jsonl`` end where the manifest's ``review_heads`` say their chains
    end (an ``lqai-export/5`` bundle names the head of each chain that has a link): a last decision or certificate
    removed from the record, or one past its head, is a problem."""
    heads = manifest.get("review_heads", {})
    if type(heads) is not dict:
        result.problems.append("manifest.json.review_heads is not an object")
        return
    for name, chain, lines in (
        ("decisions.jsonl", decisions.decisions_chain(turn_chain), decision_lines),
        ("certificates.jsonl", certificates.certificates_chain(turn_chain), certificate_lines),
    ):
        head = heads.get(chain)
        malformed = [] if head is None else shape_problems(head, _HEAD_SHAPE, f"manifest.json.review_heads[{chain}]")
        result.problems += malformed
        if malformed:
            continue
        last_line = lines[-1][1] if lines else None
        last = None if last_line is None else (last_line.get("sequence"), last_line.get("seal_sha256"))
        expected = None if head is None else (head["sequence"], head["seal_sha256"])
        if last == expected:
            continue
        if expected is None:
            result.problems.append(f"{name}: it holds links of {chain}, but the manifest names no head for it")
        elif last is None or not isinstance(last[0], int) or last[0] < expected[0]:
            result.problems.append(
                f"{name}: it ends at #{0 if last is None else last[0]}, but its chain's head is at #{expected[0]}: "
                "links were removed from the record"
            )
        else:
            result.problems.append(
                f"{name}: it ends at #{last[0]}, not at its chain's head (#{expected[0]}, its digest)"
            )


def _check_chain_head(head: dict[str, Any] | None, seals: list[dict[str, Any]], result: Verification) -> None:
    """The chain ends at the manifest's chain head ``head``; sets ``result.head``."""
    malformed_head = [] if head is None else shape_problems(head, _HEAD_SHAPE, "manifest.json.chain_head")
    result.problems += malformed_head
    result.head = None if head is None or malformed_head else (head["sequence"], head["seal_sha256"])
    last = (seals[-1]["sequence"], seals[-1]["seal_sha256"]) if seals else None
    if not malformed_head and result.head != last:
        result.problems.append(
            f"seals.jsonl: the chain ends at {last and '#' + str(last[0])}, the manifest's chain head is "
            f"{result.head and '#' + str(result.head[0])} (seals removed or added at its end)"
        )


def _by_turn(items: Iterable[dict[str, Any]]) -> dict[str, list[dict[str, Any]]]:
    """``items`` (seals, ledger entries) by the turn they name (``message``), each turn's in file order."""
    grouped: dict[str, list[dict[str, Any]]] = {}
    for item in items:
        grouped.setdefault(str(item.get("message")), []).append(item)
    return grouped


# Each row, passage and turn is written once: one written again would count, and show in the report, twice.


def _rows_by_turn(data: bytes, result: Verification) -> dict[str, list[dict[str, Any]]]:
    """The rows of ``rows.jsonl`` (``data``) by turn; a line that is no row of a turn, or a row again, is a problem."""
    rows_of: dict[str, list[dict[str, Any]]] = {}
    row_lines: dict[str, int] = {}
    for number, row in _lines(data, "rows.jsonl", result):
        if not isinstance(row.get("message"), str) or row.get("table") not in record.ROW_TABLES:
            result.problems.append(f"rows.jsonl line {number}: not a row of a turn")
            continue
        key = f"{row['table']}:{row.get('id')}"
        if key in row_lines:
            result.problems.append(f"rows.jsonl line {number}: the row {key} again (first at line {row_lines[key]})")
            continue
        row_lines[key] = number
        rows_of.setdefault(row["message"], []).append(row)
    return rows_of


def _passages_by_quote(data: bytes, result: Verification) -> dict[str, tuple[int, dict[str, Any]]]:
    """The passages of ``passages.jsonl`` (``data``) with their lines, by their quote's row key; a malformed
    passage, or one of a quote again, is a problem."""
    passages: dict[str, tuple[int, dict[str, Any]]] = {}
    for number, passage in _lines(data, "passages.jsonl", result):
        malformed = shape_problems(passage, _PASSAGE_SHAPE, "passage")
        result.problems += [f"passages.jsonl line {number}: malformed: {problem}" for problem in malformed]
        if malformed:
            continue
        if passage["row"] in passages:
            result.problems.append(
                f"passages.jsonl line {number}: a passage of the quote {passage['row']} again (first at line "
                f"{passages[passage['row']][0]})"
            )
            continue
        passages[passage["row"]] = (number, passage)
    return passages


@dataclass(slots=True)
class _TurnWalk:
    """The walk of ``turns.jsonl`` in chain order: what it checks each turn against (the other files, by turn),
    the report it renders from them, and what it has found so far."""

    seals_of: dict[str, list[dict[str, Any]]]
    rows_of: dict[str, list[dict[str, Any]]]
    passages: dict[str, tuple[int, dict[str, Any]]]
    entries_of: dict[str, list[dict[str, Any]]]
    report: _ReportParts
    # The decisions and certificates that held, by turn, in chain order (the report shows them with their turn).
    decisions_of: dict[str, list[dict[str, Any]]] = field(default_factory=dict)
    certificates_of: dict[str, list[dict[str, Any]]] = field(default_factory=dict)
    seen: dict[str, int] = field(default_factory=dict)  # each turn's line
    last_sequence: int = 0
    unsealed: int = 0
    # The latest seals of turns sealed in the first facts format (a turn resumed since has a later one, of /2).
    first_format: list[int] = field(default_factory=list)
    quoted: set[str] = field(default_factory=set)  # the quotes whose passages were checked


def _check_turn(number: int, line: dict[str, Any], walk: _TurnWalk, result: Verification) -> None:
    """The turn of ``turns.jsonl`` line ``number``: its answer, what it says of its seals, its facts against each
    seal, its ledger entries and its quotes; then its part of the report. Malformed data is a problem, and no
    report is compared."""
    found_turn = line.get("turn")
    turn: dict[str, Any] = found_turn if isinstance(found_turn, dict) else {}
    message = str(turn.get("message"))
    where = f"turns.jsonl line {number} (turn {message})"
    if message in walk.seen:
        result.problems.append(f"{where}: the turn again (first at line {walk.seen[message]})")
        return
    walk.seen[message] = number
    try:
        result.turns += 1
        if record.text_sha256(str(line.get("answer", ""))) != turn.get("answer_sha256"):
            result.problems.append(f"{where}: its answer differs from the answer's sealed digest")
        turn_seals = walk.seals_of.get(message, [])
        latest = turn_seals[-1] if turn_seals and turn_seals[-1]["finalized_at"] == turn.get("finalized_at") else None
        rows = walk.rows_of.get(message, [])
        result.rows += len(rows)
        _check_sealing(line, latest, where=where, walk=walk, result=result)
        _check_facts(turn, rows, turn_seals, latest, where=where, result=result)
        if latest is not None:
            entries = walk.entries_of.get(message, [])
            result.entries += len(entries)
            sealed_rows = latest["row_digests"].get("rows", {})
            result.problems += [
                f"ledger.jsonl (turn {message}): {p}"
                for p in record.ledger_problems(entries=entries, turn=turn, rows=rows, sealed_rows=sealed_rows)
            ]
        passages = _check_quotes(message, rows, latest, walk=walk, result=result)
        passages.update(_check_statute_quotes(message, rows, latest, walk=walk, result=result))
        walk.report.turn(
            line,
            seal=latest,
            rows=rows,
            passages=passages,
            decisions=walk.decisions_of.get(message, []),
            certificates=walk.certificates_of.get(message, []),
        )
    except _MALFORMED as exc:
        result.problems.append(f"{where}: malformed turn, rows or passages ({exc!r})")
        walk.report.broken = True


def _check_sealing(
    line: dict[str, Any], latest: dict[str, Any] | None, *, where: str, walk: _TurnWalk, result: Verification
) -> None:
    """What the turn's line says of its sealing (sealed, its number, time and lateness) against its ``latest``
    seal (``None``: it is not sealed, a problem), and that it comes in chain order."""
    if line.get("sealed") != (latest is not None) or line.get("sequence") != (latest or {}).get("sequence"):
        result.problems.append(
            f"{where}: it says {'sealed #' + str(line.get('sequence')) if line.get('sealed') else 'not sealed'}"
            f", its seals say {'#' + str(latest['sequence']) if latest else 'not sealed'}"
        )
    sealed_at, late = (latest["sealed_at"], latest["late"]) if latest else (None, False)
    if line.get("sealed_at") != sealed_at or line.get("late") is not late:
        result.problems.append(
            f"{where}: it says sealed at {line.get('sealed_at')} (late: {line.get('late')}), its seals say "
            f"{f'sealed at {sealed_at} (late: {late})' if latest else 'not sealed'}"
        )
    if latest is None:
        walk.unsealed += 1
        result.problems.append(f"{where}: the turn is not sealed (its facts are not authenticated)")
        return
    result.late += bool(latest["late"])
    if record.sealed_format(latest["row_digests"]) == record.FACTS_FORMAT_1:
        walk.first_format.append(latest["sequence"])
    if latest["sequence"] < walk.last_sequence:
        result.problems.append(
            f"{where}: out of chain order (its seal #{latest['sequence']} comes after #{walk.last_sequence}: "
            "turns swapped or moved)"
        )
    walk.last_sequence = max(walk.last_sequence, latest["sequence"])


def _check_facts(
    turn: dict[str, Any],
    rows: list[dict[str, Any]],
    turn_seals: list[dict[str, Any]],
    latest: dict[str, Any] | None,
    *,
    where: str,
    result: Verification,
) -> None:
    """The turn and its rows against each of its seals: the ``latest`` against all of them, an earlier one against
    the rows it sealed only (the rest are the latest's). Each seal costs its own rows, never all of its turn's,
    which a bundle of many seals of one turn would make quadratic."""
    rows_by_key = {record.row_key(row): row for row in rows}
    for seal in turn_seals:
        is_latest = seal is latest
        sealed = rows if is_latest else [rows_by_key[k] for k in seal["row_digests"]["rows"] if k in rows_by_key]
        result.problems += [
            f"{where}: {p} (seal #{seal['sequence']})"
            for p in record.facts_differences(seal=seal, turn=turn, rows=sealed, latest=is_latest)
        ]


def _check_quotes(
    message: str, rows: list[dict[str, Any]], latest: dict[str, Any] | None, *, walk: _TurnWalk, result: Verification
) -> dict[str, dict[str, Any]]:
    """Each verified quote of the turn ``message`` against its passage (:func:`_check_quote`); counts its case
    citations. Returns the turn's passages by quote, for its report."""
    passages_of_turn: dict[str, dict[str, Any]] = {}
    for row in rows:
        if row["table"] == record.CASE:
            result.case_citations += 1
        if row["table"] not in record.QUOTE_TABLES or row.get("offset_start") is None:
            continue
        key = record.row_key(row)
        found = walk.passages.get(key)
        if found is None:
            result.problems.append(f"passages.jsonl (turn {message}): no passage for the quote {key}")
            continue
        passage_line, passage = found
        passages_of_turn[key] = passage
        walk.quoted.add(key)
        result.quotes += 1
        _check_quote(
            result,
            row,
            passage["excerpt"],
            passage["excerpt_start"],
            where=f"passages.jsonl line {passage_line} (turn {message}, quote {key})",
            seal=latest,
        )
        result.problems += _pin_cite_problems(
            row, passage, where=f"passages.jsonl line {passage_line} (turn {message}, quote {key})"
        )
    return passages_of_turn


def _check_statute_quotes(
    message: str, rows: list[dict[str, Any]], latest: dict[str, Any] | None, *, walk: _TurnWalk, result: Verification
) -> dict[str, dict[str, Any]]:
    """Each statute quote of the turn ``message`` found in a section's text, against the section's text in its
    passage (:func:`_check_quote`: the passage's digest, then the quote re-verified), which must be of the release
    the row names; counts the turn's statute rows. Returns the turn's statute passages by quote."""
    passages_of_turn: dict[str, dict[str, Any]] = {}
    for row in rows:
        if row["table"] != record.STATUTE:
            continue
        result.statutes += 1
        if row["kind"] != "quote" or row.get("offset_start") is None:
            continue
        key = record.row_key(row)
        found = walk.passages.get(key)
        if found is None:
            result.problems.append(f"passages.jsonl (turn {message}): no section text for the statute quote {key}")
            continue
        passage_line, passage = found
        where = f"passages.jsonl line {passage_line} (turn {message}, statute quote {key})"
        passages_of_turn[key] = passage
        walk.quoted.add(key)
        result.quotes += 1
        release = passage.get("release") or {}
        named = (row["code"], row["title"], row["release_point"])
        if (release.get("code"), release.get("title"), release.get("release_point")) != named:
            result.problems.append(
                f"{where}: the section text is of release {release.get('release_point')!r}, the row was checked "
                f"against {row['release_point']!r}"
            )
        if passage.get("section") != row["identifier"]:
            result.problems.append(
                f"{where}: the text is of section {passage.get('section')!r}, the row names {row['identifier']!r}"
            )
        _check_quote(result, row, passage["excerpt"], passage["excerpt_start"], where=where, seal=latest)
    return passages_of_turn


def _check_leftovers(walk: _TurnWalk, result: Verification) -> None:
    """After the walk: the turns sealed in the first facts format, said once, and what belongs to no turn of
    ``turns.jsonl`` (a seal, rows, ledger entries, a passage of no verified quote)."""
    if walk.first_format:
        result.warnings.append(
            f"turns.jsonl: {len(walk.first_format)} of {result.turns} turns are sealed in {record.FACTS_FORMAT_1} "
            f"(their seals #{min(walk.first_format)} to #{max(walk.first_format)}), which did not seal a quote's "
            "place in the answer and context flags or a case citation's pin cite: in those turns, those fields are "
            "vouched for by the export's signature only"
        )
    for message in sorted(walk.seals_of.keys() - walk.seen):
        result.problems.append(
            f"seals.jsonl (seal #{walk.seals_of[message][-1]['sequence']}): its turn {message} is not in turns.jsonl "
            "(removed)"
        )
    for message in sorted(walk.rows_of.keys() - walk.seen):
        result.problems.append(f"rows.jsonl: rows of turn {message}, which is not in turns.jsonl")
    for message in sorted(walk.entries_of.keys() - walk.seen):
        result.problems.append(f"ledger.jsonl: entries of turn {message}, which is not in turns.jsonl")
    result.problems += [
        f"passages.jsonl line {number}: a passage of {key}, which is no verified quote of a turn"
        for key, (number, _) in walk.passages.items()
        if key not in walk.quoted
    ]
