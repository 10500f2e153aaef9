"""A bundle is input from whoever sent it: the offline verifier (``lqai_verify``) reads the zip as a container
that holds exactly its listed files and nothing else a reader would show (no file outside the central
directory, no comment), turns input Python cannot read (nesting too deep, an integer too long) into problems
naming the file and line, never a traceback, and reads JSON Lines as they are written (lines end at ``\\n``
only)."""

from __future__ import annotations

import hashlib
import io
import os
import struct
import tracemalloc
import zipfile
import zlib
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from chats.models import Chat, Message
from chats.services import ClaimedCitation, finalize_turn, start_turn
from lqai_verify.__main__ import main as lqai_verify_main
from lqai_verify.bundle import BundleError, layout_problems, read_members, verify_bundle
from tests.test_export import export, fingerprint, members
from tests.test_export import exported_matter as exported_matter
from tests.test_seals import QUESTION


def _streamed(path: Path) -> dict[str, bytes]:
    """What a streaming zip reader (Java's ZipInputStream, libarchive reading a pipe, many upload handlers)
    extracts: every local file header in file order, a later file of a name replacing an earlier one. It never
    reads the central directory, which is all ``zipfile`` (and so the verifier) reads."""
    data = path.read_bytes()
    found: dict[str, bytes] = {}
    offset = 0
    while data[offset : offset + 4] == b"PK\x03\x04":
        (_, _, _, method, _, _, _, size, _, name_length, extra_length) = struct.unpack(
            "<4sHHHHHIIIHH", data[offset : offset + 30]
        )
        name = data[offset + 30 : offset + 30 + name_length].decode()
        start = offset + 30 + name_length + extra_length
        raw = data[start : start + size]
        found[name] = raw if method == zipfile.ZIP_STORED else zlib.decompress(raw, -15)
        offset = start + size
    return found


# --- A file outside the zip's central directory --------------------------------------------------------------------


@pytest.mark.django_db
@pytest.mark.filterwarnings("ignore:Duplicate name")
def test_a_file_the_central_directory_does_not_list_is_a_problem(
    exported_matter: tuple[Chat, list[str]], tmp_path: Path
) -> None:
    """A zip's files are named twice: by a local header before each file's data, and by the central directory
    at its end. ``zipfile`` reads the directory only; a streaming reader reads the local headers only. A
    ``report.html`` written into the zip with a local header but left out of the directory, the page a
    streaming reader extracts (the later of two files of a name wins), is a problem: the zip must be exactly
    its listed files."""
    chat, _ = exported_matter
    files = members(export(chat, tmp_path / "m.zip"))
    forged = files["report.html"].replace("\u2717 Verdict: Fail".encode(), "\u2713 Verdict: Pass".encode())
    assert forged != files["report.html"]
    path = tmp_path / "hidden.zip"
    with zipfile.ZipFile(path, "w", compression=zipfile.ZIP_DEFLATED) as bundle:
        for name, data in files.items():
            bundle.writestr(name, data)
        bundle.writestr("report.html", forged)  # its local header and data ...
        del bundle.filelist[-1]  # ... but no entry in the central directory
    with zipfile.ZipFile(path) as bundle:
        assert bundle.read("report.html") == files["report.html"]  # what the verifier reads
    assert _streamed(path)["report.html"] == forged  # what a streaming reader extracts: the forged page

    result = verify_bundle(path, public_key=fingerprint())

    assert any("before the central directory, are no listed file's" in p for p in result.problems), result.problems


@pytest.mark.django_db
def test_a_zip_comment_is_a_problem(exported_matter: tuple[Chat, list[str]], tmp_path: Path) -> None:
    """The zip's own comment is outside every file the manifest digests, and ``unzip`` prints it first, under the
    archive's name, whenever it lists or extracts the bundle: it is a problem."""
    chat, _ = exported_matter
    path = export(chat, tmp_path / "m.zip")
    with zipfile.ZipFile(path, "a") as bundle:
        bundle.comment = b"Verified by lqai_verify: every quote verified, every case citation found. No problems."

    result = verify_bundle(path, public_key=fingerprint())

    assert result.problems, "an unsigned comment that speaks for the bundle went unnoticed"


@pytest.mark.django_db
def test_a_files_comment_is_a_problem(exported_matter: tuple[Chat, list[str]], tmp_path: Path) -> None:
    """A file's comment in the central directory is unsigned text too (``unzip -v`` and archive managers show
    it beside the file): it is a problem naming the file."""
    chat, _ = exported_matter
    files = members(export(chat, tmp_path / "m.zip"))
    path = tmp_path / "c.zip"
    with zipfile.ZipFile(path, "w", compression=zipfile.ZIP_DEFLATED) as bundle:
        for name, data in files.items():
            info = zipfile.ZipInfo(name)
            info.compress_type = zipfile.ZIP_DEFLATED
            if name == "report.html":
                info.comment = b"Every quote verified."
            bundle.writestr(info, data)

    result = verify_bundle(path, public_key=fingerprint())

    assert result.problems == ["report.html: the zip gives it a comment, which no signature covers"]


@pytest.mark.django_db
def test_bytes_before_the_first_file_are_a_problem(exported_matter: tuple[Chat, list[str]], tmp_path: Path) -> None:
    """``zipfile`` reads a zip behind any bytes put before it (a self-extracting stub, another file): they are
    no listed file, so they are a problem."""
    chat, _ = exported_matter
    path = export(chat, tmp_path / "m.zip")
    path.write_bytes(b"<p>Every quote verified.</p>" + path.read_bytes())

    result = verify_bundle(path, public_key=fingerprint())

    assert result.problems == [
        "the zip's central directory is not where its end record says (bytes before the zip, after the directory, "
        "or a zip64 or spanned archive)"
    ]


class _Unseekable:
    """A stream ``zipfile`` can only write forward: it writes each file's sizes in a data descriptor after it."""

    def __init__(self, path: Path) -> None:
        self.file = path.open("wb")

    def write(self, data: bytes) -> int:
        return self.file.write(data)

    def flush(self) -> None:
        self.file.flush()

    def close(self) -> None:
        self.file.close()


@pytest.mark.django_db
def test_a_zip_written_with_data_descriptors_verifies(exported_matter: tuple[Chat, list[str]], tmp_path: Path) -> None:
    """A zip written to a stream (flag bit 3: each file's sizes in a data descriptor after its data) is still
    exactly its files: it verifies."""
    chat, _ = exported_matter
    files = members(export(chat, tmp_path / "m.zip"))
    path = tmp_path / "streamed.zip"
    stream = _Unseekable(path)
    with zipfile.ZipFile(stream, "w", compression=zipfile.ZIP_DEFLATED) as bundle:
        for name, data in files.items():
            with bundle.open(name, "w") as member:
                member.write(data)
    stream.close()
    with zipfile.ZipFile(path) as bundle:
        assert all(info.flag_bits & 0x08 for info in bundle.infolist())

    result = verify_bundle(path, public_key=fingerprint())

    assert result.problems == []


@pytest.mark.django_db
def test_a_zip64_bundle_is_a_problem_not_a_traceback(exported_matter: tuple[Chat, list[str]], tmp_path: Path) -> None:
    """``citations.export`` writes no zip64 records; a bundle with them is one the layout check cannot account
    for, so it is a problem (never a crash)."""
    chat, _ = exported_matter
    files = members(export(chat, tmp_path / "m.zip"))
    path = tmp_path / "z64.zip"
    with zipfile.ZipFile(path, "w", compression=zipfile.ZIP_DEFLATED) as bundle:
        for name, data in files.items():
            with bundle.open(name, "w", force_zip64=True) as member:
                member.write(data)

    result = verify_bundle(path, public_key=fingerprint())

    assert result.problems


# --- Bytes inside a file's compressed data, past its end ---------------------------------------------------------


def _with_data(path: Path, name: str, change: Callable[[bytes], bytes], out: Path) -> Path:
    """The zip at ``path`` with the compressed data of its file ``name`` replaced by ``change`` of it, its local
    header, its central directory entry and every offset after it saying so: the zip is still its listed files
    end to end, each header agrees with its directory entry, and ``name`` keeps its size and CRC."""
    data = bytearray(path.read_bytes())
    with zipfile.ZipFile(path) as bundle:
        info = bundle.getinfo(name)
        assert not bundle.comment, "the end record ends the zip"
    assert not info.flag_bits & 0x08, "the file's sizes are in its local header, with no data descriptor"
    name_length, extra_length = struct.unpack_from("<HH", data, info.header_offset + 26)
    start = info.header_offset + 30 + name_length + extra_length
    raw = change(bytes(data[start : start + info.compress_size]))
    shift = len(raw) - info.compress_size
    data[start : start + info.compress_size] = raw
    struct.pack_into("<I", data, info.header_offset + 18, len(raw))
    directory = struct.unpack_from("<I", data, len(data) - 6)[0] + shift
    struct.pack_into("<I", data, len(data) - 6, directory)
    entry = directory
    while data[entry : entry + 4] == b"PK\x01\x02":
        (offset,) = struct.unpack_from("<I", data, entry + 42)
        if offset == info.header_offset:
            struct.pack_into("<I", data, entry + 20, len(raw))
        elif offset > info.header_offset:
            struct.pack_into("<I", data, entry + 42, offset + shift)
        entry += 46 + sum(struct.unpack_from("<HHH", data, entry + 28))
    out.write_bytes(data)
    return out


def _local_entry(name: str, data: bytes) -> bytes:
    """A file's local header and deflated data, as ``zipfile`` writes them: what a reader that scans for local
    header signatures takes for a file."""
    one = io.BytesIO()
    with zipfile.ZipFile(one, "w", compression=zipfile.ZIP_DEFLATED) as bundle:
        bundle.writestr(name, data)
        size = 30 + len(name.encode()) + bundle.getinfo(name).compress_size
    return one.getvalue()[:size]


@pytest.mark.django_db
def test_each_file_of_an_export_is_deflated_to_exactly_its_compressed_size(
    exported_matter: tuple[Chat, list[str]], tmp_path: Path
) -> None:
    """``citations.export`` deflates every file with ``zipfile``: each deflate stream ends exactly at its file's
    compressed size, so the export verifies."""
    chat, _ = exported_matter
    path = export(chat, tmp_path / "m.zip")
    with zipfile.ZipFile(path) as bundle:
        assert {info.compress_type for info in bundle.infolist()} == {zipfile.ZIP_DEFLATED}

    assert verify_bundle(path, public_key=fingerprint()).problems == []


@pytest.mark.django_db
@pytest.mark.parametrize(
    "hidden",
    [
        pytest.param(lambda files: b"Every quote verified. " * 8, id="bytes"),
        pytest.param(
            lambda files: _local_entry(
                "report.html",
                files["report.html"].replace(
                    b'<span class="verdict verdict-fail">fail</span>', b'<span class="verdict">pass</span>'
                ),
            ),
            id="a forged report's local header",
        ),
    ],
)
def test_bytes_after_a_files_deflate_stream_within_its_compressed_size_are_a_problem(
    exported_matter: tuple[Chat, list[str]], tmp_path: Path, hidden: Callable[[dict[str, bytes]], bytes]
) -> None:
    """A file's deflate stream says where it ends; ``zipfile`` (and so the verifier) stops reading there, and
    its CRC covers what the stream unpacks to, not the bytes after it. Bytes put after the stream's end but
    within the file's compressed size (its headers and every offset after it made to agree) are part of no
    file: a reader that scans for local headers may find a file there. They are a problem naming the file."""
    chat, _ = exported_matter
    path = export(chat, tmp_path / "m.zip")
    files = members(path)
    extra = hidden(files)

    grown = _with_data(path, "turns.jsonl", lambda raw: raw + extra, tmp_path / "grown.zip")

    assert members(grown) == files  # what the verifier reads: the signed files, each with its CRC
    assert grown.read_bytes().count(extra) == 1
    result = verify_bundle(grown, public_key=fingerprint())
    assert result.problems == [
        f"turns.jsonl: {len(extra):,} bytes after the end of its deflate stream, within its compressed size, "
        "are part of no file (a reader that scans for headers may take them for one)"
    ]


@pytest.mark.django_db
def test_bytes_after_a_stored_files_data_within_its_compressed_size_are_a_problem(
    exported_matter: tuple[Chat, list[str]], tmp_path: Path
) -> None:
    """A file stored uncompressed ends at its size, where ``zipfile`` stops reading: bytes after that but within
    its compressed size are part of no file, a problem naming it."""
    from tests.test_export import rewrite

    chat, _ = exported_matter
    files = members(export(chat, tmp_path / "m.zip"))
    stored = rewrite(tmp_path / "stored.zip", files)
    extra = _local_entry("report.html", b"<p>Every quote verified.</p>")
    assert verify_bundle(stored, public_key=fingerprint()).problems == []

    grown = _with_data(stored, "turns.jsonl", lambda raw: raw + extra, tmp_path / "grown.zip")

    assert members(grown) == files
    assert verify_bundle(grown, public_key=fingerprint()).problems == [
        f"turns.jsonl: {len(extra):,} bytes after the end of its data, within its compressed size, "
        "are part of no file (a reader that scans for headers may take them for one)"
    ]


@pytest.mark.django_db
def test_a_deflate_stream_that_unpacks_past_its_files_size_is_a_problem_read_no_further(
    exported_matter: tuple[Chat, list[str]], tmp_path: Path
) -> None:
    """``zipfile`` stops a file at its stated size, and its CRC covers only that much: a deflate stream that
    goes on past it (here the signed file, then 64 MiB of zeros, in some 64 KB) holds bytes that are no part
    of the file. It is a problem naming the file, found without unpacking the rest."""
    chat, _ = exported_matter
    path = export(chat, tmp_path / "m.zip")
    files = members(path)
    deflate = zlib.compressobj(9, zlib.DEFLATED, -15)
    raw = deflate.compress(files["turns.jsonl"]) + deflate.compress(bytes(64 * 2**20)) + deflate.flush()

    longer = _with_data(path, "turns.jsonl", lambda _: raw, tmp_path / "longer.zip")

    assert members(longer) == files
    result, peak = _peak_bytes_of(longer)
    assert result.problems == [
        f"turns.jsonl: its deflate stream unpacks to more than the {len(files['turns.jsonl']):,} bytes its headers "
        "give it: the rest is part of no file"
    ]
    assert peak < 8 * 2**20, f"{peak:,} bytes held"


def test_a_file_compressed_otherwise_than_stored_or_deflated_is_a_problem(tmp_path: Path) -> None:
    """``citations.export`` deflates every file; where a file compressed another way ends, the verifier does not
    check: such a file is a problem naming it."""
    path = _bundle_with(tmp_path / "plain.zip", "turns.jsonl", "")
    with zipfile.ZipFile(path, "a", compression=zipfile.ZIP_LZMA) as bundle:
        bundle.writestr("notes.txt", "Every quote verified.")

    _, problems = read_members(path)

    assert problems == [
        "notes.txt: compressed with method 14, which the verifier cannot check to its end (citations.export "
        "deflates every file)"
    ]


def _with_stream(path: Path, name: str, raw: bytes, unpacks_to: bytes, out: Path) -> Path:
    """The zip at ``path`` with the compressed data of its file ``name`` replaced by ``raw``, and its CRC (in its
    local header and its directory entry) made that of ``unpacks_to``, what ``raw`` unpacks to: ``zipfile`` reads
    the file without an error, whatever its size says."""
    _with_data(path, name, lambda _: raw, out)
    data = bytearray(out.read_bytes())
    with zipfile.ZipFile(out) as bundle:
        offset = bundle.getinfo(name).header_offset
    crc = zlib.crc32(unpacks_to)
    struct.pack_into("<I", data, offset + 14, crc)
    entry = struct.unpack_from("<I", data, len(data) - 6)[0]
    while struct.unpack_from("<I", data, entry + 42)[0] != offset:
        entry += 46 + sum(struct.unpack_from("<HHH", data, entry + 28))
    struct.pack_into("<I", data, entry + 16, crc)
    out.write_bytes(data)
    return out


_TURNS = b'{"turn": {}}\n' * 40


def _deflated(data: bytes, *, end: bool = True) -> bytes:
    deflate = zlib.compressobj(9, zlib.DEFLATED, -15)
    return deflate.compress(data) + deflate.flush(zlib.Z_FINISH if end else zlib.Z_SYNC_FLUSH)


@pytest.mark.parametrize(
    ("compression", "raw", "unpacks_to", "problem"),
    [
        pytest.param(
            zipfile.ZIP_STORED,
            _TURNS[:-13],
            _TURNS[:-13],
            f"turns.jsonl: stored in {len(_TURNS) - 13:,} bytes, not the {len(_TURNS):,} its headers give it",
            id="stored short",
        ),
        pytest.param(
            zipfile.ZIP_DEFLATED,
            _deflated(_TURNS[:-13]),
            _TURNS[:-13],
            f"turns.jsonl: its deflate stream unpacks to {len(_TURNS) - 13:,} bytes, not the {len(_TURNS):,} its "
            "headers give it",
            id="deflated short",
        ),
        pytest.param(
            zipfile.ZIP_DEFLATED,
            _deflated(_TURNS, end=False),
            _TURNS,
            "turns.jsonl: its deflate stream does not end within its compressed size",
            id="deflate stream without its last block",
        ),
    ],
)
def test_a_files_data_that_is_not_exactly_its_size_is_a_problem_naming_it(
    tmp_path: Path, compression: int, raw: bytes, unpacks_to: bytes, problem: str
) -> None:
    """A file's data must be exactly the file its headers describe: stored, exactly its size; deflated, a stream
    that ends within its compressed size and unpacks to exactly its size. With its CRC made to match what it
    holds, ``zipfile`` reads such a file without an error (a stream without its last block, a file shorter than
    its size), so the layout check is what finds it, and names the file."""
    path = tmp_path / "plain.zip"
    with zipfile.ZipFile(path, "w", compression=compression) as bundle:
        for member, data in {"manifest.json": b"{}", "manifest.sig": b"x", "public_key.json": b"{}"}.items():
            bundle.writestr(member, data)
        bundle.writestr("turns.jsonl", _TURNS)
        bundle.writestr("seals.jsonl", b"")

    crafted = _with_stream(path, "turns.jsonl", raw, unpacks_to, tmp_path / "crafted.zip")

    with zipfile.ZipFile(crafted) as bundle:
        assert bundle.read("turns.jsonl") == unpacks_to  # zipfile reads it without an error
    _, problems = read_members(crafted)
    assert problems == [problem]


def test_a_file_deflate_makes_larger_than_it_is_is_exactly_its_file(tmp_path: Path) -> None:
    """Bytes that do not compress (a signature, an embedded image) deflate to a little more than their size: the
    layout check reads the whole stream, finds its end where the compressed size says, and has nothing to say."""
    path = tmp_path / "random.zip"
    with zipfile.ZipFile(path, "w", compression=zipfile.ZIP_DEFLATED) as bundle:
        bundle.writestr("manifest.json", b"{}")
        bundle.writestr("noise.bin", os.urandom(3 * 2**20))
    with zipfile.ZipFile(path) as bundle:
        info = bundle.getinfo("noise.bin")
    assert info.compress_size > info.file_size

    _, problems = read_members(path)

    assert problems == []


def test_a_deflate_stream_longer_than_deflate_writes_for_its_size_is_a_problem_read_no_further(tmp_path: Path) -> None:
    """A deflate stream may be padded with empty blocks, which unpack to nothing: ``zipfile`` reads the file as
    its size says. The layout check reads no further than deflate could need for that size, and says so."""
    path = _bundle_with(tmp_path / "plain.zip", "turns.jsonl", _TURNS.decode())
    empty_blocks = b"\x00\x00\x00\xff\xff" * 20_000  # non-final stored blocks of no bytes, 100 KB
    padded = _with_stream(path, "turns.jsonl", empty_blocks + _deflated(_TURNS), _TURNS, tmp_path / "padded.zip")
    with zipfile.ZipFile(padded) as bundle:
        assert bundle.read("turns.jsonl") == _TURNS  # zipfile reads it without an error

    _, problems = read_members(padded)

    limit = len(_TURNS) + 2**16
    assert problems == [
        f"turns.jsonl: its deflate stream runs past {limit:,} bytes, more than deflate writes for its size"
    ]


def test_a_file_whose_data_is_not_a_deflate_stream_is_refused_naming_it(tmp_path: Path) -> None:
    """A deflated file whose data is no deflate stream cannot be read at all: the bundle is refused (exit 2),
    with the file named, and the layout check, which reads the data first, says so of that file."""
    path = _bundle_with(tmp_path / "plain.zip", "turns.jsonl", _TURNS.decode())
    crafted = _with_stream(path, "turns.jsonl", b"\xff" * 16, b"", tmp_path / "crafted.zip")

    with pytest.raises(BundleError, match=r"turns\.jsonl") as refused:
        read_members(crafted)
    with zipfile.ZipFile(crafted) as bundle, crafted.open("rb") as file:
        problems = layout_problems(file, bundle.infolist())

    assert "a file of the bundle is damaged" in str(refused.value)
    assert problems == [
        "turns.jsonl: its compressed data is not a deflate stream (Error -3 while decompressing data: invalid block "
        "type)"
    ]


# --- Input that stops the verifier ---------------------------------------------------------------------------------


def test_a_deeply_nested_manifest_is_a_problem_not_a_traceback(tmp_path: Path) -> None:
    """The manifest is read before its signature is checked, so anyone can send it: one too deeply nested for
    ``json.loads`` (a ``RecursionError``) is a problem, and the command exits 1 or 2, never with a traceback."""
    path = tmp_path / "deep.zip"
    with zipfile.ZipFile(path, "w", compression=zipfile.ZIP_DEFLATED) as bundle:
        bundle.writestr("manifest.json", "[" * 100_000)
        bundle.writestr("manifest.sig", "x")
        bundle.writestr("public_key.json", "{}")

    try:
        code = lqai_verify_main([str(path)])
    except RecursionError as exc:
        pytest.fail(f"python -m lqai_verify stops with a traceback: {exc!r}")
    assert code in (1, 2)


def _bundle_with(path: Path, name: str, data: str) -> Path:
    """A bundle whose ``name`` is ``data``, beside an empty manifest, signature and key file."""
    files = {"manifest.json": "{}", "manifest.sig": "x", "public_key.json": "{}", name: data}
    with zipfile.ZipFile(path, "w", compression=zipfile.ZIP_DEFLATED) as bundle:
        for member, text in files.items():
            bundle.writestr(member, text)
    return path


@pytest.mark.parametrize("name", ["manifest.json", "public_key.json"])
def test_an_integer_too_long_to_read_in_a_json_file_is_a_problem(tmp_path: Path, name: str) -> None:
    """Python converts no integer of more than 4,300 digits (a ``ValueError``): such a value is a problem naming
    its file."""
    path = _bundle_with(tmp_path / "long.zip", name, '{"format": ' + "9" * 5_000 + "}")

    result = verify_bundle(path)

    assert any(p.startswith(f"{name}: not readable JSON (Exceeds the limit") for p in result.problems), result.problems


@pytest.mark.django_db
@pytest.mark.parametrize(
    ("value", "problem"),
    [
        ("[" * 100_000, "turns.jsonl line 2: not readable: nested too deeply"),
        ('{"turn": ' + "9" * 5_000 + "}", "turns.jsonl line 2: not readable JSON (Exceeds the limit"),
    ],
)
def test_a_data_line_python_cannot_read_is_a_problem_naming_its_line(
    exported_matter: tuple[Chat, list[str]], tmp_path: Path, value: str, problem: str
) -> None:
    """A line of a data file nested too deeply, or holding an integer of more than 4,300 digits, is a problem
    naming its file and line, even in a bundle re-signed by the key's holder."""
    from citations import keys
    from tests.test_export import rewrite

    chat, _ = exported_matter
    files = members(export(chat, tmp_path / "m.zip"))
    first, rest = files["turns.jsonl"].split(b"\n", 1)
    files["turns.jsonl"] = first + b"\n" + value.encode() + b"\n" + rest

    result = verify_bundle(rewrite(tmp_path / "s.zip", files, resign=keys.signing_key()), public_key=fingerprint())

    assert any(p.startswith(problem) for p in result.problems), result.problems


@pytest.mark.django_db
@pytest.mark.parametrize("depth", [500, 900, 950, 980, 995])
def test_a_turn_nested_about_as_deep_as_json_reads_is_a_problem_not_a_traceback(
    exported_matter: tuple[Chat, list[str]], tmp_path: Path, depth: int
) -> None:
    """A value nested shallow enough to be read may still be too deep to digest or render: at any depth, the
    turn is a problem, never a traceback."""
    from citations import keys
    from tests.test_export import jsonl, lines, rewrite

    chat, _ = exported_matter
    files = members(export(chat, tmp_path / "m.zip"))
    claimed = lines(files["turns.jsonl"])
    claimed[0]["turn"]["question"] = "NESTED"
    files["turns.jsonl"] = jsonl(claimed).replace(b'"NESTED"', b"[" * depth + b"]" * depth, 1)

    result = verify_bundle(rewrite(tmp_path / "s.zip", files, resign=keys.signing_key()), public_key=fingerprint())

    assert any(p.startswith("turns.jsonl line 1") for p in result.problems), result.problems


@pytest.mark.timeout(60)  # a count of each name per name took 13 s here for 40,000 names: this bounds a regression
@pytest.mark.filterwarnings("ignore:Duplicate name")
def test_each_name_a_zip_of_many_files_holds_twice_is_named_once(tmp_path: Path) -> None:
    """Reading a zip's names (to find a name held twice, to walk its layout) counts each name once, whatever
    the number of its files: in a zip of 40,000 files, each name held twice is one problem."""
    path = tmp_path / "many.zip"
    with zipfile.ZipFile(path, "w") as bundle:
        for i in range(40_000):
            bundle.writestr(f"f{i}", b"")
        bundle.writestr("f7", b"")
        bundle.writestr("f39999", b"")

    _, problems = read_members(path)

    held_twice = [p for p in problems if "more than one file of this name" in p]
    assert held_twice == [
        "f39999: the zip holds more than one file of this name",
        "f7: the zip holds more than one file of this name",
    ]


# --- What the verifier reads: bounded by what was signed --------------------------------------------------------


def _peak_bytes_of(path: Path) -> tuple[Any, int]:
    """The result of verifying ``path``, and the most memory Python held meanwhile (``tracemalloc``)."""
    tracemalloc.start()
    try:
        result = verify_bundle(path, public_key=fingerprint())
        return result, tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()


@pytest.mark.django_db
def test_a_data_file_much_larger_than_signed_is_not_read(
    exported_matter: tuple[Chat, list[str]], tmp_path: Path
) -> None:
    """A data file many times the size the signed manifest gives it (here 9 MB of tiny JSON objects, each of
    which Python holds in some 50 times its bytes) is a problem, not read: what the verifier holds stays
    bounded by what the key holder signed, not by what a sender made of the file."""
    from tests.test_export import rewrite

    chat, _ = exported_matter
    files = members(export(chat, tmp_path / "m.zip"))
    files["rows.jsonl"] = b'{"a":[[],[],[],[],[],[],[],[],[],[],[],[]]}\n' * 200_000
    unpacked = sum(map(len, files.values()))

    result, peak = _peak_bytes_of(rewrite(tmp_path / "big.zip", files))

    assert any(p.startswith("rows.jsonl: not read: ") for p in result.problems), result.problems
    assert any(p.startswith("rows.jsonl: its SHA-256 differs") for p in result.problems), result.problems
    assert peak < 4 * unpacked, f"{peak:,} bytes held for a bundle of {unpacked:,} unpacked"


@pytest.mark.django_db
def test_no_data_file_is_read_without_a_valid_signature_of_the_manifest(
    exported_matter: tuple[Chat, list[str]], tmp_path: Path
) -> None:
    """With a manifest that its signature does not vouch for (here one listing a 9 MB file as signed), the
    data files are not read at all: nothing says they are what the key holder exported."""
    import json

    from tests.test_export import rewrite

    chat, _ = exported_matter
    files = members(export(chat, tmp_path / "m.zip"))
    files["rows.jsonl"] = b'{"a":[[],[],[],[],[],[],[],[],[],[],[],[]]}\n' * 200_000
    manifest = json.loads(files["manifest.json"])
    rows = files["rows.jsonl"]
    manifest["files"]["rows.jsonl"] = {"sha256": hashlib.sha256(rows).hexdigest(), "bytes": len(rows)}
    files["manifest.json"] = json.dumps(manifest).encode()
    unpacked = sum(map(len, files.values()))

    result, peak = _peak_bytes_of(rewrite(tmp_path / "unsigned.zip", files))

    assert any(p.startswith("manifest.sig: the signature of manifest.json is not valid") for p in result.problems)
    assert any(p.startswith("the data files are not read") for p in result.problems), result.problems
    assert peak < 4 * unpacked, f"{peak:,} bytes held for a bundle of {unpacked:,} unpacked"


# --- JSON Lines as they are written ------------------------------------------------------------------------------


@pytest.mark.django_db
@pytest.mark.parametrize("separator", ["\u2028", "\u2029", "\u0085"])
def test_an_answer_with_a_line_separator_verifies(matter_chat: Chat, user: Any, tmp_path: Path, separator: str) -> None:
    """The data files are written with ``ensure_ascii=False``, which leaves U+2028, U+2029 and U+0085 raw in a
    string (text pasted from Word or a web page): lines end at ``\\n`` only, so an answer holding one
    verifies."""
    _, answer = start_turn(chat=matter_chat, content=QUESTION, author=user)
    finalize_turn(
        message=answer,
        content=f"First line.{separator}Second line.",
        status=Message.Status.COMPLETE,
        claimed_citations=[],
    )
    path = export(matter_chat, tmp_path / "m.zip")

    result = verify_bundle(path, public_key=fingerprint())

    assert result.problems == []


@pytest.mark.django_db
def test_what_a_turn_line_says_of_its_seals_time_and_lateness_is_checked(
    exported_matter: tuple[Chat, list[str]], tmp_path: Path
) -> None:
    """A turn's line in ``turns.jsonl`` says whether it is sealed, its seal's number, when it was sealed and
    whether late: each is checked against its seal, so a bundle re-signed by the key's holder cannot say
    otherwise."""
    from citations import keys
    from tests.test_export import jsonl, lines, rewrite

    chat, turns = exported_matter
    files = members(export(chat, tmp_path / "m.zip"))
    claimed = lines(files["turns.jsonl"])
    claimed[0]["sealed_at"] = "2020-01-01T00:00:00.000000+00:00"
    claimed[0]["late"] = True
    files["turns.jsonl"] = jsonl(claimed)

    result = verify_bundle(rewrite(tmp_path / "s.zip", files, resign=keys.signing_key()), public_key=fingerprint())

    assert result.problems, f"turn {turns[0]} said sealed late in 2020, and nothing noticed"


# --- JSON that reads two ways ------------------------------------------------------------------------------------


@pytest.mark.django_db
def test_a_data_line_with_a_key_twice_is_a_problem_naming_its_line(
    exported_matter: tuple[Chat, list[str]], tmp_path: Path
) -> None:
    """An object that names a key twice reads two ways: Python keeps the last value, other readers (and a person
    reading the file) may take the first. A row whose quote is written twice, a forged one first and the sealed
    one last, re-signed by the key's holder, is a problem naming its file and line, never read as the last."""
    from citations import keys
    from tests.test_export import rewrite

    chat, _ = exported_matter
    files = members(export(chat, tmp_path / "m.zip"))
    rows = files["rows.jsonl"].decode().split("\n")
    index = next(i for i, line in enumerate(rows) if '"table":"message_citations"' in line)
    rows[index] = rows[index].replace('"quote":', '"quote":"The court need never be satisfied.","quote":', 1)
    files["rows.jsonl"] = "\n".join(rows).encode()

    result = verify_bundle(rewrite(tmp_path / "s.zip", files, resign=keys.signing_key()), public_key=fingerprint())

    assert (
        f"rows.jsonl line {index + 1}: not readable JSON (the key 'quote' appears twice in one object)"
        in result.problems
    ), result.problems


@pytest.mark.django_db
def test_a_signed_manifest_that_lists_a_file_twice_is_a_problem(
    exported_matter: tuple[Chat, list[str]], tmp_path: Path
) -> None:
    """The manifest is the signed list of the files and their digests: one that lists a file twice (two keys of
    one name in ``files``, the first with another digest) reads two ways, so it is a problem even when signed."""
    from citations import keys
    from lqai_verify import record
    from tests.test_export import rewrite

    chat, _ = exported_matter
    files = members(export(chat, tmp_path / "m.zip"))
    manifest = files["manifest.json"].replace(
        b'"files": {', b'"files": {\n    "report.html": {"bytes": 12, "sha256": "' + b"0" * 64 + b'"},', 1
    )
    files = {**files, "manifest.json": manifest, "manifest.sig": record.sign(keys.signing_key(), manifest).encode()}

    result = verify_bundle(rewrite(tmp_path / "s.zip", files), public_key=fingerprint())

    assert result.problems == ["manifest.json: not readable JSON (the key 'report.html' appears twice in one object)"]


@pytest.mark.django_db
def test_a_data_line_that_is_not_utf8_is_a_problem_naming_its_line(
    matter_chat: Chat, user: Any, tmp_path: Path
) -> None:
    """The data files are UTF-8. Bytes that are not (here ``\\xff`` where an answer from a scanned page holds
    U+FFFD, which a lenient reading of ``\\xff`` also gives) are a problem naming the file and line, not read as
    the replacement character: the bytes a recipient's tools show are then not the text that was sealed."""
    from citations import keys
    from tests.test_export import rewrite

    _, answer = start_turn(chat=matter_chat, content=QUESTION, author=user)
    finalize_turn(
        message=answer,
        content="The scan reads: \ufffd illegible.",
        status=Message.Status.COMPLETE,
        claimed_citations=[],
    )
    files = members(export(matter_chat, tmp_path / "m.zip"))
    assert files["turns.jsonl"].count("\ufffd".encode()) == 1
    files["turns.jsonl"] = files["turns.jsonl"].replace("\ufffd".encode(), b"\xff")

    result = verify_bundle(rewrite(tmp_path / "s.zip", files, resign=keys.signing_key()), public_key=fingerprint())

    assert any(p.startswith("turns.jsonl line 1: not UTF-8") for p in result.problems), result.problems


# --- A line written twice ----------------------------------------------------------------------------------------


@pytest.mark.django_db
@pytest.mark.parametrize(
    ("name", "problem"),
    [
        ("turns.jsonl", "turns.jsonl line {again} (turn {message}): the turn again (first at line 1)"),
        ("rows.jsonl", "rows.jsonl line {again}: the row {key} again (first at line 1)"),
        ("passages.jsonl", "passages.jsonl line {again}: a passage of the quote {row} again (first at line 1)"),
        (
            "ledger.jsonl",
            "ledger.jsonl (turn {message}): ledger entry {id} points at {source}, which another entry indexes already",
        ),
    ],
)
def test_a_line_written_twice_is_a_problem(
    exported_matter: tuple[Chat, list[str]], tmp_path: Path, name: str, problem: str
) -> None:
    """Each turn, row, passage and ledger entry is written once. One written again (re-signed by the key's
    holder, with a report rendered from it) would count twice and show twice in the report, a quote cited twice
    or a turn asked twice: it is a problem naming the file and both lines."""
    from citations import keys
    from lqai_verify import record
    from tests.test_export import lines, rewrite

    chat, _ = exported_matter
    files = members(export(chat, tmp_path / "m.zip"))
    first = lines(files[name])[0]
    files[name] += files[name].split(b"\n", 1)[0] + b"\n"
    again = len(lines(files[name]))

    result = verify_bundle(rewrite(tmp_path / "s.zip", files, resign=keys.signing_key()), public_key=fingerprint())

    message = first.get("message") or first.get("turn", {}).get("message")
    key = record.row_key(first) if name == "rows.jsonl" else None
    expected = problem.format(again=again, key=key, **{**first, "message": message})
    assert expected in result.problems, result.problems


@pytest.mark.django_db
@pytest.mark.parametrize(
    ("name", "problem"),
    [
        ("ledger.jsonl", "ledger.jsonl: entries of turn {message}, which is not in turns.jsonl"),
        ("passages.jsonl", "passages.jsonl line {number}: a passage of {row}, which is no verified quote of a turn"),
    ],
)
def test_a_line_of_no_turn_is_a_problem(
    exported_matter: tuple[Chat, list[str]], tmp_path: Path, name: str, problem: str
) -> None:
    """A ledger entry or a passage belongs to a row of a turn of the bundle: one of none (its turn or quote
    left out, re-signed by the key's holder) is a problem, as a row of no turn is."""
    import json
    import uuid

    from citations import keys
    from tests.test_export import lines, rewrite

    chat, _ = exported_matter
    files = members(export(chat, tmp_path / "m.zip"))
    stray = {**lines(files[name])[0], "message": str(uuid.uuid4()), "row": f"message_citations:{uuid.uuid4()}"}
    files[name] += json.dumps(stray).encode() + b"\n"

    result = verify_bundle(rewrite(tmp_path / "s.zip", files, resign=keys.signing_key()), public_key=fingerprint())

    assert problem.format(number=len(lines(files[name])), **stray) in result.problems, result.problems


# --- Work bounded by the bundle -----------------------------------------------------------------------------------


@pytest.mark.django_db
def test_an_earlier_seal_of_a_turn_digests_only_the_rows_it_sealed(
    matter_chat: Chat, user: Any, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A turn finalized again has a seal per finalize; an earlier one is checked against the rows it sealed only.
    Digesting every row of the turn for each of its seals made the work seals times rows: a signed bundle of a
    few MB (ten thousand seals of one turn of ten thousand rows) kept the verifier busy for a long time."""
    from lqai_verify import record
    from tests.test_export import lines

    # Given a turn interrupted before it quoted anything, then resumed with three quotes
    _, answer = start_turn(chat=matter_chat, content=QUESTION, author=user)
    finalize_turn(message=answer, content="Partial", status=Message.Status.INTERRUPTED, claimed_citations=[])
    answer.refresh_from_db()
    document = matter_chat.project.documents.get()  # type: ignore[union-attr]
    finalize_turn(
        message=answer,
        content="Partial, then whole",
        status=Message.Status.COMPLETE,
        claimed_citations=[ClaimedCitation(q, document_id=document.pk) for q in ("must", "ultimately", "satisfied")],
    )
    path = export(matter_chat, tmp_path / "m.zip")
    rows = lines(members(path)["rows.jsonl"])
    assert len(rows) == 3
    assert len(lines(members(path)["seals.jsonl"])) == 2
    digested: list[str] = []
    row_sha256 = record.row_sha256

    def noting(row: Any, **kwargs: Any) -> str:
        digested.append(record.row_key(row))
        return row_sha256(row, **kwargs)

    monkeypatch.setattr(record, "row_sha256", noting)

    result = verify_bundle(path, public_key=fingerprint())

    # Then each row is digested once, for the seal that sealed it
    assert result.problems == []
    assert sorted(digested) == sorted(record.row_key(row) for row in rows)


# --- Paths outside the folder it is unzipped into -------------------------------------------------------------------


@pytest.mark.django_db
@pytest.mark.parametrize("name", ["../../.profile", "/etc/cron.d/job", "..\\..\\start.bat", "C:/start.bat"])
def test_a_file_whose_path_leaves_the_folder_is_a_problem_even_when_signed(
    exported_matter: tuple[Chat, list[str]], tmp_path: Path, name: str
) -> None:
    """A recipient may unzip the bundle: a file whose path climbs out of the folder it is unzipped into, or
    starts at a root, is written elsewhere by some unzippers. ``citations.export`` writes none; one listed and
    signed by the key's holder is still a problem naming it."""
    import json

    from citations import keys
    from tests.test_export import rewrite

    chat, _ = exported_matter
    files = members(export(chat, tmp_path / "m.zip"))
    manifest = json.loads(files["manifest.json"])
    manifest["files"][name] = {}
    files = {**files, "manifest.json": json.dumps(manifest).encode(), name: b"echo unzipped\n"}

    result = verify_bundle(rewrite(tmp_path / "s.zip", files, resign=keys.signing_key()), public_key=fingerprint())

    assert result.problems == [f"{name}: its path leaves the folder the bundle is unzipped into"]
