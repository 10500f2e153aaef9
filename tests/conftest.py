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
