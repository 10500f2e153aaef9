"""Production defaults: with ``DEBUG`` off the project requires HTTPS (``check --deploy`` is clean with only
``SECRET_KEY`` and ``ALLOWED_HOSTS`` set), each setting can be relaxed from the environment, and
``make serve``'s ``DEBUG=1`` keeps plain HTTP working. Each case runs ``manage.py`` in a subprocess with
``lqai.settings`` (not the test settings) and a clean environment.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
# Long and varied enough for Django's own check of SECRET_KEY strength.
STRONG_SECRET = "k3Vq9-pX2rLm8ZcT4wYb7NfH1sJd6GaE0uRiOoWxQyPzMnBvCl"
SECURITY_SETTINGS = (
    "SECURE_SSL_REDIRECT",
    "SECURE_HSTS_SECONDS",
    "SECURE_HSTS_INCLUDE_SUBDOMAINS",
    "SECURE_HSTS_PRELOAD",
    "SESSION_COOKIE_SECURE",
    "CSRF_COOKIE_SECURE",
    "SECURE_PROXY_SSL_HEADER",
    "CSRF_TRUSTED_ORIGINS",
)


def _manage(*args: str, env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    base = {
        k: v
        for k, v in os.environ.items()
        if k not in {"DATABASE_URL", "SECRET_KEY", "DEBUG", "ALLOWED_HOSTS", "LQAI_LEDGER_KEY", *SECURITY_SETTINGS}
    }
    base["DJANGO_SETTINGS_MODULE"] = "lqai.settings"
    return subprocess.run(  # noqa: S603 - this project's manage.py with the test's own arguments
        [sys.executable, "manage.py", *args],
        cwd=ROOT,
        env={**base, **env},
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )


def _settings(env: dict[str, str]) -> dict[str, object]:
    code = (
        "import json; from django.conf import settings; "
        f"print(json.dumps({{name: getattr(settings, name) for name in {list(SECURITY_SETTINGS)!r}}}))"
    )
    result = _manage("shell", "-c", code, env=env)
    assert result.returncode == 0, result.stderr
    settings: dict[str, object] = json.loads(result.stdout.strip().splitlines()[-1])
    return settings


# A ledger key made for these tests (`manage.py ledger_key`); a deployment's comes from its secret store.
LEDGER_KEY = "hfQ5Yk0Gm2c4oJ3w9rL1xV8sT6uN7eB0aZqPdRiKjMc="
PRODUCTION = {
    "DEBUG": "0",
    "SECRET_KEY": STRONG_SECRET,
    "ALLOWED_HOSTS": "lqai.example.com",
    "LQAI_LEDGER_KEY": LEDGER_KEY,
}


def test_check_deploy_is_clean_with_only_secret_key_and_allowed_hosts() -> None:
    result = _manage("check", "--deploy", "--fail-level", "WARNING", env=PRODUCTION)

    assert result.returncode == 0, result.stderr
    assert "no issues (0 silenced)" in result.stdout


def test_check_deploy_warns_when_the_defaults_are_relaxed() -> None:
    """The check above can fail: relaxing the defaults brings Django's warnings back."""
    relaxed = {**PRODUCTION, "SECURE_SSL_REDIRECT": "0", "SECURE_HSTS_SECONDS": "0", "SESSION_COOKIE_SECURE": "off"}

    result = _manage("check", "--deploy", "--fail-level", "WARNING", env=relaxed)

    assert result.returncode != 0
    for warning in ("security.W004", "security.W008", "security.W012"):
        assert warning in result.stderr


def test_https_is_required_by_default_without_debug() -> None:
    assert _settings(PRODUCTION) == {
        "SECURE_SSL_REDIRECT": True,
        "SECURE_HSTS_SECONDS": 31_536_000,
        "SECURE_HSTS_INCLUDE_SUBDOMAINS": True,
        "SECURE_HSTS_PRELOAD": True,
        "SESSION_COOKIE_SECURE": True,
        "CSRF_COOKIE_SECURE": True,
        "SECURE_PROXY_SSL_HEADER": None,
        "CSRF_TRUSTED_ORIGINS": [],
    }


def test_debug_keeps_plain_http_for_make_serve() -> None:
    settings = _settings({"DEBUG": "1"})

    assert settings["SECURE_SSL_REDIRECT"] is False
    assert settings["SECURE_HSTS_SECONDS"] == 0
    assert settings["SESSION_COOKIE_SECURE"] is False
    assert settings["CSRF_COOKIE_SECURE"] is False


def test_each_default_is_relaxable_from_the_environment() -> None:
    settings = _settings(
        {
            **PRODUCTION,
            "SECURE_SSL_REDIRECT": "0",
            "SECURE_HSTS_SECONDS": "3600",
            "SECURE_HSTS_INCLUDE_SUBDOMAINS": "false",
            "SECURE_HSTS_PRELOAD": "no",
            "SESSION_COOKIE_SECURE": "0",
            "CSRF_COOKIE_SECURE": "0",
            "SECURE_PROXY_SSL_HEADER": "X-Forwarded-Proto",
            "CSRF_TRUSTED_ORIGINS": "https://lqai.example.com, https://admin.example.com",
        }
    )

    assert settings == {
        "SECURE_SSL_REDIRECT": False,
        "SECURE_HSTS_SECONDS": 3600,
        "SECURE_HSTS_INCLUDE_SUBDOMAINS": False,
        "SECURE_HSTS_PRELOAD": False,
        "SESSION_COOKIE_SECURE": False,
        "CSRF_COOKIE_SECURE": False,
        "SECURE_PROXY_SSL_HEADER": ["HTTP_X_FORWARDED_PROTO", "https"],
        "CSRF_TRUSTED_ORIGINS": ["https://lqai.example.com", "https://admin.example.com"],
    }


def test_the_proxy_header_may_name_its_value() -> None:
    settings = _settings({**PRODUCTION, "SECURE_PROXY_SSL_HEADER": "X-Forwarded-Ssl: on"})

    assert settings["SECURE_PROXY_SSL_HEADER"] == ["HTTP_X_FORWARDED_SSL", "on"]


def test_a_malformed_proxy_header_is_refused() -> None:
    result = _manage("check", env={**PRODUCTION, "SECURE_PROXY_SSL_HEADER": "X_Forwarded Proto"})

    assert result.returncode != 0
    assert "SECURE_PROXY_SSL_HEADER='X_Forwarded Proto' is not a header name" in result.stderr


@pytest.mark.parametrize(
    ("env", "expected"),
    [
        ({"LQAI_THROTTLE_TURNS": "lots"}, "LQAI_THROTTLE_TURNS='lots' is not a rate"),
        (
            {"LQAI_SSE_HEARTBEAT_SECONDS": "30", "LQAI_STALE_TURN_SECONDS": "45"},
            "LQAI_STALE_TURN_SECONDS must be at least twice LQAI_SSE_HEARTBEAT_SECONDS",
        ),
    ],
)
def test_bad_limits_are_refused(env: dict[str, str], expected: str) -> None:
    result = _manage("check", env={**PRODUCTION, **env})

    assert result.returncode != 0
    assert expected in result.stderr


def test_the_turn_rate_can_be_turned_off_from_the_environment() -> None:
    code = "from django.conf import settings; print(settings.LQAI_THROTTLE_TURNS)"
    result = _manage("shell", "-c", code, env={**PRODUCTION, "LQAI_THROTTLE_TURNS": "off"})

    assert result.returncode == 0, result.stderr
    assert result.stdout.split()[-1] == "None"


def test_the_server_refuses_to_start_without_a_ledger_key() -> None:
    without = {k: v for k, v in PRODUCTION.items() if k != "LQAI_LEDGER_KEY"}

    result = _manage("check", env=without)

    assert result.returncode != 0
    assert "LQAI_LEDGER_KEY is not set" in result.stderr


@pytest.mark.parametrize("key", ["not base64!", "c2hvcnQ="])
def test_a_malformed_ledger_key_is_refused(key: str) -> None:
    result = _manage("check", env={**PRODUCTION, "LQAI_LEDGER_KEY": key})

    assert result.returncode != 0
    assert "LQAI_LEDGER_KEY must be the base64 of a 32-byte Ed25519 private key" in result.stderr


def test_debug_without_a_ledger_key_uses_a_development_key_and_says_so() -> None:
    code = "from citations import keys; print(keys.is_development_key(), keys.current_fingerprint())"
    debug = {"DEBUG": "1", "SECRET_KEY": STRONG_SECRET}

    result = _manage("shell", "-c", code, env=debug)
    again = _manage("shell", "-c", code, env=debug)

    assert result.returncode == 0, result.stderr
    development, fingerprint = result.stdout.split()[-2:]
    assert development == "True"
    assert again.stdout.split()[-1] == fingerprint  # derived from SECRET_KEY: stable across processes


def test_ledger_key_prints_a_usable_key_and_its_fingerprint() -> None:
    made = _manage("ledger_key", env={"DEBUG": "1"})
    assert made.returncode == 0, made.stderr
    printed = dict(line.split("=", 1) if "=" in line else line.split(": ", 1) for line in made.stdout.splitlines())

    code = "from citations import keys; print(keys.is_development_key(), keys.current_fingerprint())"
    used = _manage("shell", "-c", code, env={**PRODUCTION, "LQAI_LEDGER_KEY": printed["LQAI_LEDGER_KEY"]})

    assert used.returncode == 0, used.stderr
    assert used.stdout.split()[-2:] == ["False", printed["fingerprint"]]
    assert len(printed["fingerprint"]) == 64
