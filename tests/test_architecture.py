"""Layering: ``citations`` is built on top of ``chats``, so ``chats`` never imports ``citations``.

``chats`` reaches the ledger only through the ``post_finalize`` signal; an import the other way would make
the chat domain depend on the layer above it (and invite import cycles).
"""

from __future__ import annotations

import ast
import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
FORBIDDEN = "citations"


def _is_forbidden(module: str) -> bool:
    return module == FORBIDDEN or module.startswith(f"{FORBIDDEN}.")


def _resolve_relative(package: str, level: int, module: str | None) -> str:
    """The absolute name of ``from <level dots><module> import ...`` written in ``package``."""
    parts = package.split(".")
    base = parts[: len(parts) - level + 1] if level <= len(parts) else []
    return ".".join([*base, module] if module else base)


def forbidden_imports(source: str, *, package: str) -> list[str]:
    """The ``citations`` imports in ``source`` (a module of ``package``), as ``"line N: <module>"``.

    Covers ``import``, ``from ... import`` (relative ones resolved against ``package``) and
    ``importlib.import_module("...")`` / ``__import__("...")`` with a literal name."""
    found = []
    for node in ast.walk(ast.parse(source)):
        if not isinstance(node, ast.Import | ast.ImportFrom | ast.Call):
            continue
        modules: list[str] = []
        if isinstance(node, ast.Import):
            modules = [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom):
            module = node.module if node.level == 0 else _resolve_relative(package, node.level, node.module)
            modules = [module or ""]
            if not module:  # `from .. import citations`
                modules = [alias.name for alias in node.names]
        elif isinstance(node, ast.Call) and node.args and isinstance(node.args[0], ast.Constant):
            func = node.func
            name = func.attr if isinstance(func, ast.Attribute) else func.id if isinstance(func, ast.Name) else ""
            if name in {"import_module", "__import__"} and isinstance(node.args[0].value, str):
                modules = [node.args[0].value]
        found += [f"line {node.lineno}: {m}" for m in modules if _is_forbidden(m)]
    return found


def _package_of(path: Path) -> str:
    relative = path.relative_to(ROOT).with_suffix("")
    parts = relative.parts if relative.name == "__init__" else relative.parts[:-1]
    return ".".join(p for p in parts if p != "__init__")


def test_chats_never_imports_citations() -> None:
    modules = sorted((ROOT / "chats").rglob("*.py"))
    assert len(modules) > 5  # the walk found the package

    offending = {
        str(path.relative_to(ROOT)): hits
        for path in modules
        if (hits := forbidden_imports(path.read_text(encoding="utf-8"), package=_package_of(path)))
    }

    assert offending == {}


@pytest.mark.parametrize(
    "source",
    [
        "import citations",
        "import citations.ledger as ledger",
        "import os, citations.models",
        "from citations import ledger",
        "from citations.models import CitationLedgerEntry",
        "def f():\n    from citations.receivers import assemble_ledger_on_finalize",
        "from .. import citations",
        "from ..citations.ledger import assemble",
        "import importlib\nledger = importlib.import_module('citations.ledger')",
        "ledger = __import__('citations')",
    ],
)
def test_the_checker_flags_an_import_of_citations(source: str) -> None:
    assert forbidden_imports(source, package="chats") != []


@pytest.mark.parametrize(
    "source",
    [
        "from chats.models import Message",
        "import citations_helper",
        "from . import citations",  # chats.citations, a module of chats itself
        "from .citations import x",
        "name = 'citations'",
    ],
)
def test_the_checker_accepts_other_imports(source: str) -> None:
    assert forbidden_imports(source, package="chats") == []


def test_no_management_command_or_url_pays_for_the_courtlistener_sdk() -> None:
    # Given a process that loads every app and the whole URLconf (every view, tool and backend module), as
    # any manage.py command or a starting server does
    probe = (
        "import sys, django; django.setup(); import lqai.urls; "
        "from django.core.management import call_command; call_command('check'); "
        "print('courtlistener' in sys.modules)"
    )
    env = {**os.environ, "DJANGO_SETTINGS_MODULE": "lqai.settings_test"}
    env.pop("DATABASE_URL", None)
    result = subprocess.run(  # noqa: S603 - this interpreter, a fixed probe
        [sys.executable, "-c", probe], cwd=ROOT, env=env, capture_output=True, text=True, check=False
    )
    # Then the CourtListener SDK is not imported: only the caselaw tool's first CourtListener search imports it
    assert result.returncode == 0, result.stderr
    assert result.stdout.split()[-1] == "False"
