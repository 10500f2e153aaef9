"""docs/api.md's walk-through, run command by command exactly as written, through the test client: token, matter,
member, PDF upload, turns, messages, trace, tokens, revoke. A change of the API that the page does not follow (or
a page that drifts from the API) fails here.

The commands are read from the page's ``sh`` blocks under "Walk-through" and interpreted: ``NAME=value``,
``NAME=$(curl … | jq -r .path)`` and ``curl …``, each with its ``# → <status>`` comment, and an administrator's
``.venv/bin/python manage.py …`` (run with ``call_command``); curl's ``-X``, ``-H``,
``-d``, ``-F`` (``@file`` uploads) and the URL are honoured, ``-s`` and ``-N`` change nothing here.
"""

from __future__ import annotations

import io
import json
import re
import shlex
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest
from django.contrib.auth.models import User
from django.core.cache import caches
from django.core.files.uploadedfile import SimpleUploadedFile
from django.core.management import call_command
from django.http import HttpResponse, StreamingHttpResponse
from django.test import Client

from demo.seed import sse_events
from tests.pdf_fixture import make_pdf

DOC = Path(__file__).resolve().parent.parent / "docs" / "api.md"
MEMO = make_pdf(
    [
        [
            "Memorandum: ballot access.",
            "A political party may not substitute a candidate on the general election ballot",
            "when it nominated no candidate in the primary election.",
        ],
        ["Write-in candidates must be certified by the county board of elections."],
    ]
)
MANAGE = ".venv/bin/python manage.py "
COMMAND = re.compile(r"^(?:(?P<var>[A-Z_]+)=)?(?P<rest>.*?)(?:\s+#\s*→\s*(?P<status>\d{3}))?$")
CAPTURE = re.compile(r"^\$\((?P<curl>curl .*) \| jq -r (?P<path>\.[\w.]+)\)$")


def walkthrough_commands() -> list[str]:
    section = DOC.read_text(encoding="utf-8").split("## Walk-through", 1)[1].split("\n## ", 1)[0]
    blocks = re.findall(r"```sh\n(.*?)```", section, flags=re.DOTALL)
    return [line for block in blocks for line in block.replace("\\\n", " ").splitlines() if line.strip()]


@dataclass
class Curl:
    method: str = "GET"
    url: str = ""
    headers: dict[str, str] = field(default_factory=dict)
    data: str | None = None
    form: dict[str, Any] = field(default_factory=dict)


def parse_curl(command: str) -> Curl:
    args = shlex.split(command)
    assert args[0] == "curl", command
    curl = Curl()
    words = iter(args[1:])
    for word in words:
        if word in {"-s", "-N", "-i"}:
            continue
        if word == "-X":
            curl.method = next(words)
        elif word == "-H":
            name, _, value = next(words).partition(":")
            curl.headers[name.strip()] = value.strip()
        elif word == "-d":
            curl.data = next(words)
        elif word == "-F":
            name, _, value = next(words).partition("=")
            curl.form[name] = value
        elif word.startswith("-"):
            pytest.fail(f"docs/api.md uses a curl option the walk-through test does not know: {word}")
        else:
            curl.url = word
    if curl.method == "GET" and (curl.data is not None or curl.form):
        curl.method = "POST"
    return curl


def send(client: Client, curl: Curl, *, base: str, files: dict[str, bytes]) -> HttpResponse | StreamingHttpResponse:
    assert curl.url.startswith(base), curl.url
    path = curl.url[len(base) :]
    headers = {k: v for k, v in curl.headers.items() if k != "Content-Type"}
    if curl.form:
        form = {
            name: SimpleUploadedFile(value[1:], files[value[1:]]) if value.startswith("@") else value
            for name, value in curl.form.items()
        }
        return client.post(path, form, headers=headers)  # type: ignore[return-value]
    content_type = curl.headers.get("Content-Type", "application/octet-stream")
    return client.generic(curl.method, path, curl.data or "", content_type=content_type, headers=headers)  # type: ignore[return-value]


def body_of(response: HttpResponse | StreamingHttpResponse) -> Any:
    if isinstance(response, StreamingHttpResponse):
        return list(sse_events(iter(response.streaming_content)))  # type: ignore[arg-type]
    return json.loads(response.content) if response.content else None


def jq(value: Any, path: str) -> str:
    for key in path.strip(".").split("."):
        value = value[key]
    return str(value)


@pytest.mark.django_db(transaction=True)
@pytest.mark.usefixtures("axes_on")
def test_the_walkthrough_of_docs_api_md_runs_as_written(tmp_path: Path) -> None:
    # Given the demo login, as after `make demo`
    caches["token_requests"].clear()
    User.objects.create_user("demo", password="demo-password")
    client = Client()
    variables: dict[str, str] = {}
    answers: list[tuple[str, Any]] = []

    commands = walkthrough_commands()
    assert len(commands) >= 10
    for line in commands:
        match = COMMAND.match(line.strip())
        assert match is not None, line
        rest = re.sub(r"\$([A-Z_]+)", lambda m: variables[m.group(1)], match.group("rest"))
        if rest.startswith(MANAGE):  # an administrator's command on the server
            call_command(*shlex.split(rest[len(MANAGE) :]), stdout=io.StringIO())
            continue
        captured = CAPTURE.match(rest)
        if match.group("var") and captured is None and not rest.startswith("curl"):
            variables[match.group("var")] = rest  # a plain assignment: BASE=...
            continue
        curl = parse_curl(captured.group("curl") if captured else rest)
        response = send(client, curl, base=variables["BASE"], files={"memo.pdf": MEMO})
        expected = match.group("status")
        assert expected is not None, f"docs/api.md gives no '# → status' for: {line}"
        assert response.status_code == int(expected), (line, getattr(response, "content", b"")[:500])
        body = body_of(response)
        answers.append((curl.url, body))
        if captured:
            variables[match.group("var")] = jq(body, captured.group("path"))

    # Then the turn quoted the uploaded PDF with its page, the stream sent citations, and the trace shows them
    turn = next(
        body for url, body in answers if url.endswith("/messages/") and isinstance(body, dict) and "message" in body
    )
    pdf_quotes = [c for c in turn["message"]["citations"] if c["document"] == variables["DOCUMENT"]]
    assert pdf_quotes, turn["message"]["citations"]
    assert all(c["pages"] for c in pdf_quotes)
    assert any(c["pages"] == ["1"] and "substitute a candidate" in c["quote"] for c in pdf_quotes)
    stream = next(body for url, body in answers if url.endswith("/stream/"))
    assert next(event for event, _ in stream) == "start"
    assert [event for event, _ in stream][-1] == "done"
    trace = next(body for url, body in answers if url.endswith("/ledger/"))
    entries = trace["results"] if isinstance(trace, dict) else trace
    assert any(e["document"] and e["document"]["id"] == variables["DOCUMENT"] and e["pages"] for e in entries)
    project = next(body for url, body in answers if url.endswith("/members/"))
    assert project["members"] == ["colleague"]
    # whose account the walk-through's own command created
    assert User.objects.get(username="colleague").has_usable_password()


def test_every_route_of_the_schema_is_in_the_endpoints_table(db: None) -> None:
    user = User.objects.create_user("reader", password="a long passphrase of hers")
    client = Client()
    client.force_login(user)
    schema = client.get("/api/schema/", HTTP_ACCEPT="application/json").json()
    table = DOC.read_text(encoding="utf-8").split("## Endpoints", 1)[1].split("\n\n**", 1)[0]

    def shape(path: str) -> str:
        return re.sub(r"\{[^}]*\}", "{}", path)

    listed = {shape(path) for path in re.findall(r"`(?:[A-Z/]+ )?(/api/[^`\s]*)`", table)}
    assert {shape(path) for path in schema["paths"]} - listed == set()
