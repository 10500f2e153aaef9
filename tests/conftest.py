"""Fixtures shared by the suite."""

from __future__ import annotations

import functools
import importlib
import uuid
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any
from urllib.parse import quote

import pytest
from django.conf import LazySettings
from django.contrib.auth.models import User
from django.db import connection, transaction
from rest_framework.test import APIClient

from chats.assistant import Script, ScriptedBackend
from chats.assistant.openai_compatible import _client
from chats.models import CaselawOpinion, Chat
from chats.record import purging
from lqai_verify.verification import NormalizedSource
from tests import factories
from tests.fake_openai import MODEL, FakeOpenAIServer


@contextmanager
def triggers_off(cursor: Any) -> Iterator[None]:
    """Statements made below the application, as a database superuser could make them (inside a transaction):
    on PostgreSQL with the tables' triggers off (``session_replication_role = replica``); on SQLite without the
    messages rewrite trigger (chats.0034: dropped, then made again)."""
    if connection.vendor == "postgresql":
        cursor.execute("SET LOCAL session_replication_role = replica")
        yield
        cursor.execute("SET LOCAL session_replication_role = origin")
        return
    migration = importlib.import_module("chats.migrations.0036_messages_permanent_on_sqlite")
    cursor.execute(migration.SQLITE_REVERSE)
    yield
    cursor.execute(migration.SQLITE)


@pytest.fixture(autouse=True)
def _review_rows_go_before_the_flush(request: pytest.FixtureRequest) -> Iterator[None]:
    """After a transactional test on SQLite, its review decisions, certificates and their chains' heads go as in a
    matter's purge:
    their triggers refuse any other DELETE, and Django empties a transactional test's SQLite database with DELETE
    (PostgreSQL's TRUNCATE is allowed on test databases: lqai.settings_test). Set up after pytest-django's
    database fixture (plugins' autouse fixtures come first), so this runs before its flush."""
    yield
    marker = request.node.get_closest_marker("django_db")
    if marker is None or not marker.kwargs.get("transaction") or connection.vendor != "sqlite":
        return
    with transaction.atomic(), purging(uuid.UUID(int=0)), connection.cursor() as cursor:
        cursor.execute("DELETE FROM review_chain_heads")
        cursor.execute("DELETE FROM review_certificates")
        cursor.execute("DELETE FROM review_decisions")


@pytest.fixture(autouse=True)
def _ledger_months_read_afresh() -> Iterator[None]:
    """The ledger's months, which the admin's walks keep for a minute (``citations.partitions.months``), are
    read afresh in each test: a test's partitions are rolled back with it."""
    from citations import partitions

    partitions.forget_months()
    yield
    partitions.forget_months()


@pytest.fixture
def user(db: None) -> User:
    return factories.UserFactory.create(username="alice")


@pytest.fixture
def other_user(db: None) -> User:
    return factories.UserFactory.create(username="mallory")


@pytest.fixture
def axes_on(settings: LazySettings) -> None:
    """Failed-login lockouts (django-axes) on, as in production (the test settings turn them off so that
    ``Client.login()``, which passes no request, works elsewhere)."""
    settings.AXES_ENABLED = True


@pytest.fixture
def api_client(user: User) -> APIClient:
    """An API client authenticated as ``user``."""
    client = APIClient()
    client.force_authenticate(user=user)
    return client


# --- Chat API, assistant backends and tools ---------------------------------------


# --- The corpus: the real public-domain opinions and statutes the project ships (chats/data), read once --------

DATA = Path(__file__).resolve().parent.parent / "chats" / "data"
CORPUS = DATA / "opinions"
# Names of corpus texts, relative to DATA.
FISHER = "opinions/fisher-v-university-of-texas-2013-slip.txt"
DEMOCRACY = "opinions/democracy-nc-v-nc-board-of-elections-mdnc-2022.txt"
HOGARTH = "opinions/hogarth-v-bell-edn-c-2025.txt"
STATUTE = "statutes/42-usc-1981-1988.txt"


@functools.cache
def corpus_text(name: str) -> str:
    """The corpus text ``name`` (relative to ``DATA``)."""
    return (DATA / name).read_text(encoding="utf-8")


@functools.cache
def corpus() -> dict[str, str]:
    """Every opinion of the corpus, by name."""
    return {f"opinions/{path.name}": corpus_text(f"opinions/{path.name}") for path in sorted(CORPUS.glob("*.txt"))}


@functools.cache
def normalized(name: str) -> NormalizedSource:
    """The corpus text ``name``, normalized once for verification."""
    return NormalizedSource.build(corpus_text(name))


@pytest.fixture
def scripted_backend(settings: LazySettings) -> Iterator[Callable[..., Script]]:
    """Answer turns with :class:`ScriptedBackend`; call the fixture's value with the events (or exceptions)
    to replay, e.g. ``scripted_backend(TextDelta("hi"), FinalAnswer(...))``; it returns the :class:`Script`."""
    settings.LQAI_ASSISTANT_BACKEND = "chats.assistant.ScriptedBackend"
    with ScriptedBackend.scripted():
        yield ScriptedBackend.set_script


@pytest.fixture
def fake_openai(settings: LazySettings) -> Iterator[FakeOpenAIServer]:
    """A fake server, and settings selecting the backend against it (fast retries, a short timeout)."""
    server = FakeOpenAIServer().start()
    settings.LQAI_ASSISTANT_BACKEND = "chats.assistant.OpenAICompatibleBackend"
    settings.LQAI_OPENAI_BASE_URL = server.base_url
    settings.LQAI_OPENAI_API_KEY = ""
    settings.LQAI_OPENAI_MODEL = MODEL
    settings.LQAI_OPENAI_TIMEOUT = 2.0
    settings.LQAI_OPENAI_MAX_RETRIES = 2
    settings.LQAI_OPENAI_MAX_TOOL_ROUNDS = 6
    try:
        yield server
    finally:
        server.stop()
        _client.cache_clear()


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
        text=corpus_text(FISHER),
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


QUOTE_CHECKS = {
    "message_citations": ("message_citations_method_known", "message_citations_confidence_range"),
    "message_caselaw_citations": (
        "message_caselaw_citations_method_known",
        "message_caselaw_citations_confidence_range",
    ),
}


@pytest.fixture
def quote_checks_off(db: None) -> Iterator[None]:
    """Quote rows as they could be written before the quote tables' checks (an unknown method, a confidence
    outside 0..1). PostgreSQL: the checks are dropped inside the test's transaction, whose rollback restores
    them; SQLite: check constraints are ignored for the connection until the test ends."""
    with connection.cursor() as cursor:
        if connection.vendor == "postgresql":
            for table, constraints in QUOTE_CHECKS.items():
                for constraint in constraints:
                    cursor.execute(f"ALTER TABLE {table} DROP CONSTRAINT {constraint}")
        else:
            cursor.execute("PRAGMA ignore_check_constraints = ON")
    try:
        yield
    finally:
        if connection.vendor != "postgresql":
            with connection.cursor() as cursor:
                cursor.execute("PRAGMA ignore_check_constraints = OFF")


@pytest.fixture
def committed_matter_chat(db: None) -> tuple[APIClient, Chat]:
    """For ``transaction=True`` tests: alice's client and a chat of her matter, which has a KB document."""
    user = factories.UserFactory.create(username="alice")
    project = factories.ProjectFactory.create(owner=user)
    factories.DocumentFactory.create(project=project, title="Strict scrutiny memo")
    client = APIClient()
    client.force_authenticate(user=user)
    return client, factories.ChatFactory.create(project=project, owner=user)


def this_test_database_url() -> str:
    """A ``DATABASE_URL`` for the test database (PostgreSQL), for a subprocess to use."""
    settings = connection.settings_dict
    credentials = quote(settings["USER"] or "") + (f":{quote(settings['PASSWORD'])}" if settings["PASSWORD"] else "")
    return f"postgres://{credentials}@{settings['HOST'] or '127.0.0.1'}:{settings['PORT'] or 5432}/{settings['NAME']}"
