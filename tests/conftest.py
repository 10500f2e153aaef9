"""Fixtures shared by the suite."""

from __future__ import annotations

import pytest
from django.contrib.auth.models import User
from rest_framework.test import APIClient

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


# --- Chat API, assistant backends and tools (appended; this file is shared) ---------------------------------------
from collections.abc import Callable, Iterator  # noqa: E402
from pathlib import Path  # noqa: E402

from django.conf import LazySettings  # noqa: E402

from chats.assistant import Script, ScriptedBackend  # noqa: E402
from chats.models import CaselawOpinion, Chat  # noqa: E402

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
