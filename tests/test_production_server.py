"""The shipped production server: gunicorn with ``gunicorn.conf.py`` and ``lqai.settings`` (``DEBUG`` off,
behind a TLS-terminating proxy as ``SECURE_PROXY_SSL_HEADER`` says), started on a free 127.0.0.1 port.

A streamed turn whose assistant stays silent keeps its connection with keep-alive comments, while a
second request (the chat's messages) is answered; then the turn completes. The server runs one worker
process, so the second request is served only if a stream does not hold the whole worker (``gthread``).
"""

from __future__ import annotations

import http.client
import json
import os
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from django.db import connection

from tests.conftest import this_test_database_url

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.timeout(120)]

ROOT = Path(__file__).resolve().parent.parent
SECRET = "k3Vq9-pX2rLm8ZcT4wYb7NfH1sJd6GaE0uRiOoWxQyPzMnBvCl"
PROXY = {"X-Forwarded-Proto": "https"}  # what the TLS-terminating proxy adds
READY_SECONDS = 30
SEED = """
import json
from django.contrib.auth.models import User
from knox.models import AuthToken
from chats.models import Chat, Project
user = User.objects.create_user("counsel", password="unused-password")
project = Project.objects.create(name="Server matter", owner=user)
chat = Chat.objects.create(owner=user, project=project, title="Served")
print(json.dumps({"token": AuthToken.objects.create(user=user)[1], "chat": str(chat.pk)}))
"""


def _free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port: int = probe.getsockname()[1]
        return port


def _manage(env: dict[str, str], *args: str) -> str:
    result = subprocess.run(  # noqa: S603 - this project's manage.py
        [sys.executable, "manage.py", *args], cwd=ROOT, env=env, capture_output=True, text=True, timeout=120
    )
    assert result.returncode == 0, result.stderr
    return result.stdout


@pytest.fixture
def server_env(tmp_path: Path) -> dict[str, str]:
    """Production settings over this test's database: PostgreSQL's test database, or on SQLite (whose test
    database lives in this process's memory) a fresh file migrated for the server."""
    if connection.vendor == "postgresql":
        database_url = this_test_database_url()
    else:
        database_url = f"sqlite:///{tmp_path / 'server.sqlite3'}"
    base = {k: v for k, v in os.environ.items() if not k.startswith(("SECURE_", "LQAI_", "GUNICORN_"))}
    env = {
        **base,
        "DJANGO_SETTINGS_MODULE": "lqai.settings",
        "DEBUG": "0",
        "SECRET_KEY": SECRET,
        "LQAI_LEDGER_KEY": "hfQ5Yk0Gm2c4oJ3w9rL1xV8sT6uN7eB0aZqPdRiKjMc=",
        "ALLOWED_HOSTS": "127.0.0.1",
        "DATABASE_URL": database_url,
        "SECURE_PROXY_SSL_HEADER": "X-Forwarded-Proto",
        "LQAI_ASSISTANT_BACKEND": "tests.server_backends.FileGatedBackend",
        "LQAI_TEST_GATE": str(tmp_path / "gate"),
        "LQAI_SSE_HEARTBEAT_SECONDS": "1",
        "LOG_LEVEL": "WARNING",
    }
    if connection.vendor != "postgresql":
        _manage(env, "migrate", "--no-input", "--verbosity", "0")
    return env


@pytest.fixture
def server(server_env: dict[str, str], tmp_path: Path) -> Iterator[int]:
    """gunicorn as `make prod-serve` starts it, one worker; yields its port once it answers. Always stopped."""
    port = _free_port()
    env = {**server_env, "GUNICORN_BIND": f"127.0.0.1:{port}", "GUNICORN_WORKERS": "1", "GUNICORN_THREADS": "4"}
    log = (tmp_path / "gunicorn.log").open("w")
    process = subprocess.Popen(  # noqa: S603 - the venv's gunicorn with the shipped config
        [str(Path(sys.executable).with_name("gunicorn")), "--config", "gunicorn.conf.py"],
        cwd=ROOT,
        env=env,
        stdout=log,
        stderr=subprocess.STDOUT,
    )
    try:
        deadline = time.monotonic() + READY_SECONDS
        while True:
            assert process.poll() is None, (tmp_path / "gunicorn.log").read_text()
            assert time.monotonic() < deadline, "gunicorn did not answer in time"
            try:
                _get(port, "/api/chats/", token=None)
                break
            except OSError:
                time.sleep(0.2)
        yield port
    finally:
        process.terminate()
        try:
            process.wait(timeout=15)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait(timeout=15)
        log.close()


def _connection(port: int) -> http.client.HTTPConnection:
    return http.client.HTTPConnection("127.0.0.1", port, timeout=15)


def _get(port: int, path: str, *, token: str | None) -> tuple[int, dict[str, str], bytes]:
    conn = _connection(port)
    try:
        headers = {**PROXY, **({"Authorization": f"Bearer {token}"} if token else {})}
        conn.request("GET", path, headers=headers)
        response = conn.getresponse()
        return response.status, dict(response.getheaders()), response.read()
    finally:
        conn.close()


def _frames(response: http.client.HTTPResponse) -> Iterator[str]:
    """SSE frames as they arrive (comments included)."""
    lines: list[str] = []
    while line := response.readline():
        text = line.decode("utf-8").rstrip("\n")
        if text:
            lines.append(text)
        elif lines:
            yield "\n".join(lines)
            lines = []


def test_a_streamed_turn_and_a_concurrent_request_both_complete(
    server: int, server_env: dict[str, str], tmp_path: Path
) -> None:
    seeded = json.loads(_manage(server_env, "shell", "-c", SEED).strip().splitlines()[-1])
    token, chat = seeded["token"], seeded["chat"]
    status, headers, _ = _get(server, "/api/chats/", token=None)
    assert status == 401
    assert headers["Strict-Transport-Security"] == "max-age=31536000; includeSubDomains; preload"
    plain = _connection(server)
    plain.request("GET", "/api/chats/")  # no proxy header: plain HTTP is redirected to HTTPS
    assert plain.getresponse().status == 301
    plain.close()

    stream = _connection(server)
    stream.request(
        "POST",
        f"/api/chats/{chat}/messages/stream/",
        body=json.dumps({"content": "Is a keep-alive sent?"}),
        headers={**PROXY, "Authorization": f"Bearer {token}", "Content-Type": "application/json"},
    )
    response = stream.getresponse()
    assert response.status == 200
    assert response.getheader("Content-Type") == "text/event-stream"
    frames = _frames(response)
    assert next(frames).startswith("event: start")
    assert next(frames).startswith("event: delta")
    assert next(frames) == ": keepalive"  # the assistant waits at its gate

    status, _, body = _get(server, f"/api/chats/{chat}/messages/", token=token)  # while the stream is open
    (tmp_path / "gate").touch()
    rest = list(frames)
    stream.close()

    assert status == 200
    messages = json.loads(body)["results"]
    assert [(m["role"], m["status"]) for m in messages] == [("user", "complete"), ("assistant", "streaming")]
    events = [frame for frame in rest if not frame.startswith(":")]
    assert events[0] == 'event: delta\ndata: {"text": "Asked: Is a keep-alive sent?"}'
    done = json.loads(events[-1].split("data: ", 1)[1])
    assert events[-1].startswith("event: done")
    assert done["status"] == "complete"
