"""The token and matters endpoints, fuzzed from their own OpenAPI schema (schemathesis): whatever a client sends
that the schema allows (and much that it does not), the server never answers 500, and every error is JSON.

Bounded: a few dozen examples per operation, so the file runs in seconds; the matter of every path is one the
requesting user owns, so the handlers themselves are reached, not only the 404 of an unknown id.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest
import schemathesis
from django.contrib.auth.models import User
from django.core.cache import caches
from django.core.signals import request_finished, request_started
from django.db import close_old_connections
from hypothesis import HealthCheck, given, settings
from schemathesis.core.result import Ok

from chats.models import Project
from lqai.wsgi import application
from tests import factories


@pytest.fixture
def keep_the_test_connection() -> Iterator[None]:
    """Requests go through the real WSGI application, which closes the database connection at the end of each
    request; the test's transaction lives on that connection, so (as Django's test client does) not here."""
    request_started.disconnect(close_old_connections)
    request_finished.disconnect(close_old_connections)
    try:
        yield
    finally:
        request_started.connect(close_old_connections)
        request_finished.connect(close_old_connections)


@pytest.fixture
def owner_and_matter(db: None) -> tuple[User, Project]:
    owner = factories.UserFactory.create(username="owner")
    project = factories.ProjectFactory.create(owner=owner, name="Fuzzed matter")
    project.members.add(factories.UserFactory.create(username="member"))
    return owner, project


NEW_ENDPOINTS = r"^/api/(auth|projects)/"
EXAMPLES = 25
FUZZ = settings(
    max_examples=EXAMPLES,
    deadline=None,
    database=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow, HealthCheck.filter_too_much],
)


@pytest.mark.usefixtures("keep_the_test_connection", "axes_on")
def test_no_input_makes_the_new_endpoints_answer_500(owner_and_matter: tuple[User, Project]) -> None:
    owner, project = owner_and_matter
    # The schema, like the API, answers a token only (lqai/urls.py)
    schema = schemathesis.openapi.from_wsgi(
        "/api/schema/?format=json", application, headers={"Authorization": f"Bearer {factories.api_token(owner)}"}
    ).include(path_regex=NEW_ENDPOINTS)
    operations = [result.ok() for result in schema.get_all_operations() if isinstance(result, Ok)]
    assert len(operations) >= 10  # every new operation is in the schema, and fuzzed below
    calls: list[str] = []

    for operation in operations:

        @FUZZ
        @given(case=operation.as_strategy())
        def fuzz(case: Any) -> None:
            caches[
                "token_requests"
            ].clear()  # token requests are throttled: fuzzing must reach the handler, not the 429
            if "project_id" in (case.path_parameters or {}):
                case.path_parameters["project_id"] = str(project.pk)

            response = case.call(headers={"Authorization": f"Bearer {factories.api_token(owner)}"})

            calls.append(case.operation.label)
            assert response.status_code < 500, (case.as_curl_command(), response.text[:500])
            if response.status_code >= 400:
                [content_type] = response.headers.get("content-type", [""])  # lower-case names, list values
                assert content_type.startswith("application/json"), (case.as_curl_command(), response.status_code)

        fuzz()

    assert set(calls) == {operation.label for operation in operations}
