"""Layering: ``citations`` is built on top of ``chats``, so ``chats`` never imports ``citations``; the authority
library ``authorities`` sits below ``chats``, so it imports none of the apps above it, and ``chats`` uses it
through ``authorities.selectors`` only. ``drafts`` (reading a brief) sits on top of ``chats``: it imports
``chats`` and ``authorities.selectors``, and nothing but the project (``lqai``) imports it.

``chats`` reaches the ledger only through the ``post_finalize`` signal; an import the other way would make
the chat domain depend on the layer above it (and invite import cycles).
"""

from __future__ import annotations

import ast
import os
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
FORBIDDEN = "citations"
# The apps above the authority library, which it must never import.
ABOVE_AUTHORITIES = ("chats", "citations", "pages", "demo")
# The one module of the authority library the chat domain may import.
AUTHORITIES_ENTRY = "authorities.selectors"


def _is_within(module: str, package: str) -> bool:
    return module == package or module.startswith(f"{package}.")


def _is_forbidden(module: str) -> bool:
    return _is_within(module, FORBIDDEN)


def _resolve_relative(package: str, level: int, module: str | None) -> str:
    """The absolute name of ``from <level dots><module> import ...`` written in ``package``."""
    parts = package.split(".")
    base = parts[: len(parts) - level + 1] if level <= len(parts) else []
    return ".".join([*base, module] if module else base)


def forbidden_imports(source: str, *, package: str) -> list[str]:
    """The ``citations`` imports in ``source`` (a module of ``package``), as ``"line N: <module>"``."""
    return [
        f"line {line}: {module}" for line, module in imported_modules(source, package=package) if _is_forbidden(module)
    ]


def imported_modules(source: str, *, package: str) -> list[tuple[int, str]]:
    """Every module ``source`` (a module of ``package``) imports, as ``(line, module)``.

    Covers ``import``, ``from ... import`` (relative ones resolved against ``package``; ``from x import y``
    also as ``x.y``, which may be a module) and ``importlib.import_module("...")`` / ``__import__("...")``
    with a literal name."""
    found: list[tuple[int, str]] = []
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
            else:
                modules += [f"{module}.{alias.name}" for alias in node.names]
        elif isinstance(node, ast.Call) and node.args and isinstance(node.args[0], ast.Constant):
            func = node.func
            name = func.attr if isinstance(func, ast.Attribute) else func.id if isinstance(func, ast.Name) else ""
            if name in {"import_module", "__import__"} and isinstance(node.args[0].value, str):
                modules = [node.args[0].value]
        found += [(node.lineno, m) for m in modules]
    return found


def _package_of(path: Path) -> str:
    relative = path.relative_to(ROOT).with_suffix("")
    parts = relative.parts if relative.name == "__init__" else relative.parts[:-1]
    return ".".join(p for p in parts if p != "__init__")


def _imports_in(package: str, wrong: Callable[[str], bool]) -> dict[str, list[str]]:
    modules = sorted((ROOT / package).rglob("*.py"))
    assert len(modules) > 5  # the walk found the package
    return {
        str(path.relative_to(ROOT)): hits
        for path in modules
        if (
            hits := [
                f"line {line}: {module}"
                for line, module in imported_modules(path.read_text(encoding="utf-8"), package=_package_of(path))
                if wrong(module)
            ]
        )
    }


def test_authorities_imports_no_app_above_it() -> None:
    offending = _imports_in("authorities", lambda m: any(_is_within(m, above) for above in ABOVE_AUTHORITIES))

    assert offending == {}


def _reaches_past_the_selector(module: str) -> bool:
    if not _is_within(module, "authorities") or _is_within(module, AUTHORITIES_ENTRY):
        return False
    # `from authorities import selectors` names the package, then the selector module
    return module != "authorities"


def test_chats_uses_the_authority_library_through_its_selector_only() -> None:
    assert _imports_in("chats", _reaches_past_the_selector) == {}


@pytest.mark.parametrize(
    ("source", "reaches_past"),
    [
        ("from authorities.selectors import check_statutes", False),
        ("from authorities import selectors", False),
        ("from authorities.models import StatuteSection", True),
        ("from authorities import resolver", True),
        ("import authorities.loading", True),
        ("import importlib\nm = importlib.import_module('authorities.finder')", True),
        ("from authorities_extra import x", False),
    ],
)
def test_the_checker_flags_a_reach_into_the_authority_library(source: str, reaches_past: bool) -> None:
    hits = [m for _, m in imported_modules(source, package="chats") if _reaches_past_the_selector(m)]

    assert (hits != []) is reaches_past


# The apps the drafts app is built beside or below, which it never imports: the record of a checked draft is
# made by chats' finalize service and the post_finalize receivers, like any turn's.
NOT_FROM_DRAFTS = ("citations", "pages", "demo")
# What may import the drafts app: the project's settings and URLs, and the benchmarks, which measure every app.
ABOVE_DRAFTS = ("lqai", "benchmarks")


def test_drafts_imports_chats_and_the_authority_library_only_through_its_selector() -> None:
    assert _imports_in("drafts", _reaches_past_the_selector) == {}
    assert _imports_in("drafts", lambda m: any(_is_within(m, app) for app in NOT_FROM_DRAFTS)) == {}


def test_nothing_but_the_project_imports_drafts() -> None:
    # Given every package of the project but drafts itself, the project's settings and URLs, and the tests
    packages = sorted(
        path
        for path in ROOT.iterdir()
        if (path / "__init__.py").is_file() and path.name not in ("drafts", "tests", *ABOVE_DRAFTS)
    )
    assert {"chats", "citations", "authorities", "pages", "demo", "lqai_verify"} <= {p.name for p in packages}

    offending = {
        str(path.relative_to(ROOT)): hits
        for package in packages
        for path in sorted(package.rglob("*.py"))
        if (
            hits := [
                module
                for _, module in imported_modules(path.read_text(encoding="utf-8"), package=_package_of(path))
                if _is_within(module, "drafts")
            ]
        )
    }

    assert offending == {}


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
