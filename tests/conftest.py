"""Fixtures shared by the suite."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from pathlib import Path
from urllib.parse import quote

import pytest
from django.conf import LazySettings
from django.contrib.auth.models import User
from django.db import connection
from rest_framework.test import APIClient

from chats.assistant import Script, ScriptedBackend
from chats.models import CaselawOpinion, Chat
from citations.writer import writer
from tests import factories


@pytest.fixture
def user(db: None) -> User:
    return factories.UserFactory.create(username="alice")


@pytest.fixture
def other_user(db: None) -> User:
    return factories.UserFactory.create(username="mallory")


@pytest.fixture
def api_client(user: User) -> APIClient:
    """An API client authenticated as ``user``."""
    client = APIClient()
    client.force_authenticate(user=user)
    return client


# --- Chat API, assistant backends and tools ---------------------------------------


CORPUS = Path(__file__).resolve().parent.parent / "chats" / "data" / "opinions"


@pytest.fixture
def scripted_backend(settings: LazySettings) -> Iterator[Callable[..., Script]]:
    """Answer turns with :class:`ScriptedBackend`; call the fixture's value with the events (or exceptions)
    to replay, e.g. ``scripted_backend(TextDelta("hi"), FinalAnswer(...))``; it returns the :class:`Script`."""
    settings.LQAI_ASSISTANT_BACKEND = "chats.assistant.ScriptedBackend"
    with ScriptedBackend.scripted():
        yield ScriptedBackend.set_script


@pytest.fixture
def matter_chat(user: User) -> Chat:
    """A chat of ``user`` in a matter of theirs holding one KB document (``factories.TEXT``)."""
    project = factories.ProjectFactory.create(owner=user, name="Admissions matter")
    factories.DocumentFactory.create(project=project, title="Strict scrutiny memo")
    return factories.ChatFactory.create(project=project, owner=user, title="Admissions")


@pytest.fixture
def local_opinion(db: None) -> CaselawOpinion:
    """A seeded (provider ``local``) opinion: the real Fisher v. University of Texas slip opinion."""
    return factories.CaselawOpinionFactory.create(
        provider="local",
        opinion_id="fisher-2013",
        cluster_id="fisher-2013",
        case_name="Fisher v. University of Texas at Austin",
        citation="570 U.S. 297",
        court="Supreme Court of the United States",
        absolute_url="https://www.supremecourt.gov/opinions/12pdf/11-345_l5gm.pdf",
        text=(CORPUS / "fisher-v-university-of-texas-2013-slip.txt").read_text(encoding="utf-8"),
    )


@pytest.fixture
def ledger_refuses_every_row() -> Iterator[None]:
    """A check constraint that rejects any new ledger row (NOT VALID: existing rows are not checked), so the
    ledger insert fails for real inside PostgreSQL; dropped again afterwards."""
    with connection.cursor() as cursor:
        cursor.execute("ALTER TABLE citation_ledger_entry ADD CONSTRAINT test_refuse_all CHECK (false) NOT VALID")
    try:
        yield
    finally:
        with connection.cursor() as cursor:
            cursor.execute("ALTER TABLE citation_ledger_entry DROP CONSTRAINT IF EXISTS test_refuse_all")


@pytest.fixture
def committed_matter_chat(db: None) -> tuple[APIClient, Chat]:
    """For ``transaction=True`` tests: alice's client and a chat of her matter, which has a KB document."""
    user = factories.UserFactory.create(username="alice")
    project = factories.ProjectFactory.create(owner=user)
    factories.DocumentFactory.create(project=project, title="Strict scrutiny memo")
    client = APIClient()
    client.force_authenticate(user=user)
    return client, factories.ChatFactory.create(project=project, owner=user)


@pytest.fixture
def ledger_write_as_shipped(settings: LazySettings) -> Iterator[None]:
    """The ledger written as shipped for the backend: on PostgreSQL by the ledger writer's thread, on its own
    connection (so the test must commit for real: ``transaction=True``), on SQLite inline. Afterwards the
    writer is stopped, its connection closed, and nothing may be left unwritten."""
    settings.LQAI_LEDGER_WRITE = "deferred" if connection.vendor == "postgresql" else "inline"
    try:
        yield
    finally:
        assert writer.stop(timeout=30), "the ledger writer did not stop"
        assert writer.pending == 0


def this_test_database_url() -> str:
    """A ``DATABASE_URL`` for the test database (PostgreSQL), for a subprocess to use."""
    settings = connection.settings_dict
    credentials = quote(settings["USER"] or "") + (f":{quote(settings['PASSWORD'])}" if settings["PASSWORD"] else "")
    return f"postgres://{credentials}@{settings['HOST'] or '127.0.0.1'}:{settings['PORT'] or 5432}/{settings['NAME']}"
