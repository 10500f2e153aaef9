"""The README and the docs say what is true today: the README stays short, names the default assistant for what it
is and shows how to point it at a model server with settings that exist; docs/trace-pages.md describes no page
as still to come and names only files that exist."""

from __future__ import annotations

import re
from pathlib import Path

from django.utils.module_loading import import_string

ROOT = Path(__file__).resolve().parent.parent
README = (ROOT / "README.md").read_text(encoding="utf-8")
CONFIGURATION = (ROOT / "docs" / "configuration.md").read_text(encoding="utf-8")
TRACE_PAGES = (ROOT / "docs" / "trace-pages.md").read_text(encoding="utf-8")


def test_the_readme_stays_short() -> None:
    assert len(README.splitlines()) <= 150


def test_the_readme_names_the_default_assistant_and_shows_a_model_server_in_three_lines() -> None:
    assert "The default assistant is not a model." in README
    assert "offline and deterministic" in README
    block = next(b for b in re.findall(r"```sh\n(.*?)```", README, flags=re.DOTALL) if "LQAI_OPENAI" in b)
    exports = dict(re.findall(r"^export (\w+)=(\S+)", block, flags=re.MULTILINE))
    assert len(block.splitlines()) == 3
    # Each variable is a documented setting, and the backend named is one the server can load
    assert all(f"`{name}`" in CONFIGURATION for name in exports)
    assert import_string(exports["LQAI_ASSISTANT_BACKEND"]).__name__ == "OpenAICompatibleBackend"
    assert exports["LQAI_OPENAI_BASE_URL"].endswith("/v1")
    assert {"Ollama", "vLLM", "OpenAI-compatible"} <= set(re.findall(r"Ollama|vLLM|OpenAI-compatible", README))


def test_the_trace_pages_doc_describes_nothing_as_still_to_come() -> None:
    assert not re.search(r"\b(coming|none yet|not yet)\b", TRACE_PAGES, flags=re.IGNORECASE)


def test_the_trace_pages_doc_names_only_files_that_exist() -> None:
    paths = set(re.findall(r"`((?:pages|chats|citations|lqai_verify|tests)/[\w/.-]+\.(?:py|html|css))`", TRACE_PAGES))
    assert paths
    assert [path for path in paths if not (ROOT / path).exists()] == []
