"""The recipient's verifier installs on its own: ``pip install ./lqai_verify`` into a fresh venv holding nothing
else verifies the demo's export and refuses it with one byte changed, and docs/export.md's recipient steps,
run exactly as written, verify it too.

Each test builds a venv, and ``pip`` must reach a package index for ``setuptools`` (to build the package) and
``cryptography``. Where no index answers, the tests are skipped, and say why; under CI (``CI`` set, as
``.ci/run`` sets it) they fail instead, so that CI never passes without having run them.
"""

from __future__ import annotations

import io
import os
import re
import shutil
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest
from django.conf import LazySettings
from django.core.management import call_command

from citations import keys

REPOSITORY = Path(__file__).resolve().parent.parent
# Building a venv and installing into it reaches a package index: minutes on a slow line, never a hang.
INSTALL_TIMEOUT = 600
# What a venv holds once the verifier is installed: pip, setuptools (a venv's own), the verifier and what it
# declares (cryptography, with its own dependencies).
ALLOWED_PACKAGES = {"pip", "setuptools", "lqai-verify", "cryptography", "cffi", "pycparser"}


def unavailable(reason: str) -> None:
    """Skip, saying ``reason``; under CI, fail with it: CI must run these tests, never pass over them."""
    if os.environ.get("CI"):
        pytest.fail(f"CI cannot run the verifier's install test: {reason}")
    pytest.skip(reason)


def _run(args: list[str | Path], *, cwd: Path, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run(  # noqa: S603 - the test's own commands, arguments from here
        [str(arg) for arg in args],
        cwd=cwd,
        env=env or _clean_env(),
        capture_output=True,
        text=True,
        timeout=INSTALL_TIMEOUT,
        check=False,
    )


def _clean_env() -> dict[str, str]:
    """This process's environment without what would let a child reach this project's packages or settings."""
    drop = {"PYTHONPATH", "VIRTUAL_ENV", "DJANGO_SETTINGS_MODULE", "PYTHONHOME"}
    return {name: value for name, value in os.environ.items() if name not in drop}


@pytest.fixture
def package_index(tmp_path: Path) -> None:
    """``pip`` reaches a package index (it builds the verifier with setuptools from there)."""
    probe = _run(
        [
            sys.executable,
            "-m",
            "pip",
            "download",
            "--quiet",
            "--no-deps",
            "--dest",
            tmp_path / "probe",
            "setuptools>=68",
        ],
        cwd=tmp_path,
    )
    if probe.returncode != 0:
        unavailable(f"pip reaches no package index to fetch setuptools: {probe.stderr.strip()[-300:]}")


@pytest.fixture
def demo_export(settings: LazySettings, tmp_path: Path) -> Path:
    """The demo's export (``manage.py demo`` writes it in ``VAR_DIR``), made by this test."""
    settings.DEBUG = True
    settings.VAR_DIR = tmp_path / "var"
    call_command("demo", stdout=io.StringIO())
    export = tmp_path / "var" / "demo-matter.zip"
    assert export.is_file()
    return export


def _fresh_venv(path: Path) -> Path:
    """A new venv at ``path`` (of this Python, without its packages); its interpreter."""
    created = _run([sys.executable, "-m", "venv", path], cwd=path.parent)
    assert created.returncode == 0, created.stderr
    return path / "bin" / "python"


def _packages(python: Path) -> set[str]:
    listed = _run([python, "-m", "pip", "list", "--format=freeze"], cwd=python.parent)
    assert listed.returncode == 0, listed.stderr
    return {line.split("==")[0].lower() for line in listed.stdout.splitlines() if line}


def _with_one_byte_changed(path: Path, name: str, out: Path) -> Path:
    """The zip at ``path`` again, with one byte of its file ``name`` changed (a valid zip otherwise)."""
    with zipfile.ZipFile(path) as bundle:
        files = {info.filename: bundle.read(info) for info in bundle.infolist()}
    data = bytearray(files[name])
    data[len(data) // 2] ^= 0x01
    files[name] = bytes(data)
    with zipfile.ZipFile(out, "w", compression=zipfile.ZIP_DEFLATED) as bundle:
        for member, content in files.items():
            bundle.writestr(member, content)
    return out


# transaction=True: the demo's turns commit for real, as in production.
@pytest.mark.timeout(INSTALL_TIMEOUT * 3)
@pytest.mark.django_db(transaction=True)
def test_the_verifier_installed_alone_in_a_fresh_venv_verifies_the_demo_export_and_a_changed_byte_fails(
    package_index: None, demo_export: Path, tmp_path: Path
) -> None:
    # Given the verifier's folder alone (a copy: building it writes beside its sources) and a venv of nothing
    source = tmp_path / "lqai_verify"
    shutil.copytree(
        REPOSITORY / "lqai_verify", source, ignore=shutil.ignore_patterns("build", "*.egg-info", "__pycache__")
    )
    python = _fresh_venv(tmp_path / "venv")
    assert _packages(python) <= {"pip", "setuptools"}

    # When it is installed there, as docs/export.md says
    installed = _run([python, "-m", "pip", "install", "--quiet", source], cwd=tmp_path)

    # Then the venv holds the verifier and what it declares, nothing of the server
    assert installed.returncode == 0, installed.stderr
    assert _packages(python) <= ALLOWED_PACKAGES
    assert "lqai-verify" in _packages(python)
    work = tmp_path / "recipient"  # not the repository: the installed package is the one run
    work.mkdir()
    no_django = _run([python, "-c", "import django"], cwd=work)
    assert no_django.returncode == 1
    assert "No module named 'django'" in no_django.stderr
    # ... it verifies the demo's export against the key's fingerprint
    fingerprint = keys.current_fingerprint()
    verified = _run([python, "-m", "lqai_verify", demo_export, "--public-key", fingerprint], cwd=work)
    assert verified.returncode == 0, verified.stderr
    assert verified.stdout.startswith("lqai_verify: OK: matter ")
    assert "ModuleNotFoundError" not in verified.stderr
    # ... and the same export with one byte of its data changed fails, naming the file
    changed = _with_one_byte_changed(demo_export, "turns.jsonl", tmp_path / "changed.zip")
    refused = _run([python, "-m", "lqai_verify", changed, "--public-key", fingerprint], cwd=work)
    assert refused.returncode == 1, refused.stdout + refused.stderr
    assert "turns.jsonl: its SHA-256 differs from the manifest's (the file was changed)" in refused.stderr
    assert "lqai_verify: OK" not in refused.stdout
    # ... and so does the export with one byte of the zip itself flipped, wherever it falls
    flipped = bytearray(demo_export.read_bytes())
    flipped[len(flipped) // 2] ^= 0x01
    (tmp_path / "flipped.zip").write_bytes(flipped)
    damaged = _run([python, "-m", "lqai_verify", tmp_path / "flipped.zip", "--public-key", fingerprint], cwd=work)
    assert damaged.returncode in (1, 2), damaged.stdout + damaged.stderr
    assert "lqai_verify: OK" not in damaged.stdout


def _recipient_steps() -> str:
    """The shell block of docs/export.md's "Verifying an export (for the recipient)", as written."""
    text = (REPOSITORY / "docs" / "export.md").read_text(encoding="utf-8")
    section = text.split("## Verifying an export (for the recipient)", 1)[1]
    found = re.search(r"```sh\n(.*?)```", section, flags=re.DOTALL)
    assert found is not None, "docs/export.md's recipient section has no shell block"
    return found.group(1)


@pytest.mark.timeout(INSTALL_TIMEOUT * 3)
@pytest.mark.django_db(transaction=True)
def test_the_recipient_steps_of_docs_export_run_as_written_verify_the_demo_export(
    package_index: None, demo_export: Path, tmp_path: Path
) -> None:
    steps = _recipient_steps()
    assert "lqai_verify matter.zip" in steps
    if shutil.which("git") is None:
        unavailable("git is not installed, and the recipient steps clone the repository")
    if _run(["git", "-C", REPOSITORY, "rev-parse", "--git-dir"], cwd=REPOSITORY).returncode != 0:
        unavailable(f"{REPOSITORY} is not a git repository, which the recipient steps clone")
    # Given a recipient's folder holding the export they were sent
    recipient = tmp_path / "recipient"
    recipient.mkdir()
    shutil.copy(demo_export, recipient / "matter.zip")
    env = {**_clean_env(), "REPOSITORY": str(REPOSITORY), "FINGERPRINT": keys.current_fingerprint()}

    # When they run the documented steps (the repository's committed source: what a clone gets)
    ran = _run(["bash", "-e", "-u", "-o", "pipefail", "-c", steps], cwd=recipient, env=env)

    # Then the export verifies, with the verifier the steps installed
    assert ran.returncode == 0, ran.stdout + ran.stderr
    assert "lqai_verify: OK: matter " in ran.stdout
    assert (recipient / "verify-env" / "bin" / "python").is_file()
