"""An outside review of the offline verifier (``lqai_verify``): bundles it accepts though a reader would read
them otherwise than the server signed them, and inputs it does not turn into a list of problems.

Each test states what the verifier should do; each fails on the code it was written against."""

from __future__ import annotations

import struct
import time
import zipfile
import zlib
from pathlib import Path
from typing import Any

import pytest

from chats.models import Chat, Message
from chats.services import finalize_turn, start_turn
from lqai_verify.__main__ import main as lqai_verify_main
from lqai_verify.bundle import BundleError, verify_bundle
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
    ``report.html`` written into the zip with a local header but left out of the directory is never seen by
    the verifier, and is the page a streaming reader extracts (the later of two files of a name wins)."""
    chat, _ = exported_matter
    files = members(export(chat, tmp_path / "m.zip"))
    forged = files["report.html"].replace(
        b'<span class="verdict verdict-fail">fail</span>', b'<span class="verdict">pass</span>'
    )
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

    assert result.problems, "a verdict turned from fail to pass, outside the central directory, went unnoticed"


# --- Input that stops the verifier ---------------------------------------------------------------------------------


def test_a_deeply_nested_manifest_is_a_problem_not_a_traceback(tmp_path: Path) -> None:
    """``json.loads`` of a deeply nested value raises ``RecursionError``, which is neither a ``ValueError`` nor a
    ``BundleError``: the manifest is parsed before its signature is checked, so anyone can send it."""
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


def test_a_zip_of_many_files_is_refused_in_linear_time(tmp_path: Path) -> None:
    """``read_members`` counts each name in the list of all names (``names.count``): quadratic in the number of
    files. 40,000 empty files (3.5 MB) take some 16 s; 500,000 (45 MB, a zip64) hours."""
    path = tmp_path / "many.zip"
    with zipfile.ZipFile(path, "w") as bundle:
        for i in range(40_000):
            bundle.writestr(f"f{i}", b"")

    began = time.monotonic()
    with pytest.raises(BundleError):
        verify_bundle(path)
    elapsed = time.monotonic() - began

    assert elapsed < 4, f"40,000 files took {elapsed:.1f} s to refuse"


# --- A legitimate export that does not verify --------------------------------------------------------------------


@pytest.mark.django_db
def test_an_answer_with_a_line_separator_verifies(matter_chat: Chat, user: Any, tmp_path: Path) -> None:
    """The data files are written with ``ensure_ascii=False``, which leaves U+2028 (and U+2029, U+0085) raw in a
    string; the verifier splits the files with ``str.splitlines``, which breaks a line at each of them. A
    question, answer, chat title or source text holding one (text pasted from Word or a web page) makes the
    whole export fail."""
    _, answer = start_turn(chat=matter_chat, content=QUESTION, author=user)
    finalize_turn(
        message=answer, content="First line.\u2028Second line.", status=Message.Status.COMPLETE, claimed_citations=[]
    )
    path = export(matter_chat, tmp_path / "m.zip")

    result = verify_bundle(path, public_key=fingerprint())

    assert result.problems == []


_MEMORY_PROBE = """
import json, resource, sys, zipfile
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey
from lqai_verify import record
from lqai_verify.bundle import verify_bundle

path, lines = sys.argv[1], int(sys.argv[2])
key = Ed25519PrivateKey.generate().public_key()
entry = {"public_key": record.public_key_b64(key), "fingerprint": record.fingerprint(key)}
manifest = {"format": "lqai-export/2", "matter": {"id": "x"}, "chain": "matter:x", "chain_head": None,
            "exported_at": "", "signing_key": entry["fingerprint"], "files": {}}
with zipfile.ZipFile(path, "w", compression=zipfile.ZIP_DEFLATED) as bundle:
    bundle.writestr("manifest.json", json.dumps(manifest))
    bundle.writestr("manifest.sig", "not a signature")
    bundle.writestr("public_key.json", json.dumps({"signing_key": entry, "seal_keys": []}))
    bundle.writestr("ledger.jsonl", b"{}\\n" * lines)
before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
result = verify_bundle(path)
assert not result.ok
print((resource.getrusage(resource.RUSAGE_SELF).ru_maxrss - before) * 1024)
"""


def test_the_memory_a_bundle_takes_is_bounded_by_what_it_unpacks_to(tmp_path: Path) -> None:
    """``--max-mb`` bounds what a bundle unpacks to (1 GiB by default), but not what the verifier makes of it:
    every line of a data file becomes a Python dict, read whether or not the manifest is signed or lists the
    file. Lines of ``{}`` take some 50 times their bytes: a 9 KB zip takes some 440 MB, a 1 MB zip under the
    default limit some 50 GB."""
    import subprocess
    import sys

    lines = 3_000_000  # 9 MB unpacked, a 9 KB zip
    run = subprocess.run(  # noqa: S603 - this interpreter, a fixed script
        [sys.executable, "-c", _MEMORY_PROBE, str(tmp_path / "b.zip"), str(lines)],
        capture_output=True,
        text=True,
        cwd=Path(__file__).resolve().parent.parent,
        check=True,
    )
    grown = int(run.stdout.split()[-1])

    zipped = (tmp_path / "b.zip").stat().st_size
    assert grown < 10 * 3 * lines, f"a {zipped:,}-byte zip of 9 MB took {grown / 2**20:.0f} MiB"


@pytest.mark.django_db
def test_a_zip_comment_is_a_problem(exported_matter: tuple[Chat, list[str]], tmp_path: Path) -> None:
    """The zip's own comment is outside every file the manifest digests, and ``unzip`` prints it first, under the
    archive's name, whenever it lists or extracts the bundle."""
    chat, _ = exported_matter
    path = export(chat, tmp_path / "m.zip")
    with zipfile.ZipFile(path, "a") as bundle:
        bundle.comment = b"Verified by lqai_verify: every quote verified, every case citation found. No problems."

    result = verify_bundle(path, public_key=fingerprint())

    assert result.problems, "an unsigned comment that speaks for the bundle went unnoticed"


@pytest.mark.django_db
def test_what_a_turn_line_says_of_its_seals_time_and_lateness_is_checked(
    exported_matter: tuple[Chat, list[str]], tmp_path: Path
) -> None:
    """A turn's line in ``turns.jsonl`` says whether it is sealed, its seal's number, when it was sealed and
    whether late. The first two are checked against its seal (``test_what_a_turn_line_says_of_its_seal_is_checked
    _against_its_seals``); ``sealed_at`` and ``late`` are read by nobody, so a re-signed bundle may say anything."""
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
