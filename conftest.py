"""Suite-wide pytest configuration: the ``postgres`` and ``browser`` markers."""

from __future__ import annotations

import shutil

import pytest
from django.conf import settings


def _on_postgres() -> bool:
    return str(settings.DATABASES["default"]["ENGINE"]).endswith("postgresql")


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    # On PostgreSQL nothing marked ``postgres`` is skipped; on SQLite each is skipped with its reason.
    if not _on_postgres():
        skip_pg = pytest.mark.skip(reason="needs PostgreSQL: set DATABASE_URL=postgres://... to run it")
        for item in items:
            if "postgres" in item.keywords:
                item.add_marker(skip_pg)
    if shutil.which("chromium") is None:
        skip_browser = pytest.mark.skip(reason="needs Chromium (/usr/bin/chromium): `apt-get install chromium`")
        for item in items:
            if "browser" in item.keywords:
                item.add_marker(skip_browser)
