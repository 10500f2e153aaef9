"""Bad configuration fails at start-up with a clear message."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent


def _check(env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    base = {k: v for k, v in os.environ.items() if k not in {"DATABASE_URL", "SECRET_KEY", "DEBUG"}}
    base["DJANGO_SETTINGS_MODULE"] = "lqai.settings"
    return subprocess.run(
        [sys.executable, "manage.py", "check"], cwd=ROOT, env={**base, **env}, capture_output=True, text=True
    )


def test_missing_secret_key_without_debug_is_refused() -> None:
    result = _check({})
    assert result.returncode != 0
    assert "SECRET_KEY is not set" in result.stderr


def test_debug_allows_missing_secret_key() -> None:
    result = _check({"DEBUG": "1"})
    assert result.returncode == 0, result.stderr


@pytest.mark.parametrize(
    ("url", "expected"),
    [
        ("nosuchdb://user@host/db", "DATABASE_URL"),
        ("postgres://user@host:notaport/db", "DATABASE_URL could not be parsed"),
    ],
)
def test_unparsable_database_url_is_refused(url: str, expected: str) -> None:
    result = _check({"SECRET_KEY": "x" * 50, "DATABASE_URL": url})
    assert result.returncode != 0
    assert expected in result.stderr


def test_bad_boolean_is_refused() -> None:
    result = _check({"DEBUG": "maybe"})
    assert result.returncode != 0
    assert "DEBUG='maybe' is not a boolean" in result.stderr


def _ledger_timeout(env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    base = {k: v for k, v in os.environ.items() if k not in {"DATABASE_URL", "LQAI_LEDGER_TIMEOUT"}}
    return subprocess.run(
        [
            sys.executable,
            "manage.py",
            "shell",
            "-c",
            "from django.conf import settings; print(settings.LQAI_LEDGER_TIMEOUT)",
        ],
        cwd=ROOT,
        env={**base, "DJANGO_SETTINGS_MODULE": "lqai.settings", "DEBUG": "1", **env},
        capture_output=True,
        text=True,
        check=False,
    )


@pytest.mark.parametrize(("env", "expected"), [({}, "2.0"), ({"LQAI_LEDGER_TIMEOUT": "0.5"}, "0.5")])
def test_the_ledger_timeout_comes_from_the_environment(env: dict[str, str], expected: str) -> None:
    result = _ledger_timeout(env)
    assert result.returncode == 0, result.stderr
    assert result.stdout.split()[-1] == expected


@pytest.mark.parametrize(
    ("value", "expected"),
    [("soon", "LQAI_LEDGER_TIMEOUT='soon' is not a number"), ("0", "must be a positive number of seconds")],
)
def test_a_bad_ledger_timeout_is_refused(value: str, expected: str) -> None:
    result = _ledger_timeout({"LQAI_LEDGER_TIMEOUT": value})
    assert result.returncode != 0
    assert expected in result.stderr


@pytest.mark.parametrize(
    "env",
    [{"LQAI_PAGE_SIZE": "0"}, {"LQAI_PAGE_SIZE": "300"}, {"LQAI_PAGE_SIZE": "10", "LQAI_MAX_PAGE_SIZE": "5"}],
)
def test_a_page_size_outside_its_bounds_is_refused(env: dict[str, str]) -> None:
    result = _check({"DEBUG": "1", **env})
    assert result.returncode != 0
    assert "LQAI_PAGE_SIZE must be at least 1 and at most LQAI_MAX_PAGE_SIZE" in result.stderr
