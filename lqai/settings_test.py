"""Settings for the test suite: the real settings plus a throwaway secret and a fast hasher."""

import os
from typing import Any

os.environ.setdefault("SECRET_KEY", "test-only-secret-key-not-for-production")
# A fixed ledger key for the suite (the real one comes from the deployment's secret store).
os.environ.setdefault("LQAI_LEDGER_KEY", "RLucxDahH5HjFGDPRkzTcgEnqFlSyfh9dxH2GQDUNSc=")

from lqai.settings import *  # noqa: F403

PASSWORD_HASHERS = ["django.contrib.auth.hashers.MD5PasswordHasher"]

# The test client speaks plain HTTP: with DEBUG off (as in production) the HTTPS redirect would answer
# every request with a 301. The production defaults themselves are checked in a subprocess
# (tests/test_production.py runs `check --deploy` and the shipped server with lqai.settings).
SECURE_SSL_REDIRECT = False

# Bounded use is tested where it is the subject (tests/test_bounded_use.py sets these per test); elsewhere
# tests drive many turns of one user back to back and concurrently, which the production limits would refuse.
LQAI_THROTTLE_TURNS = None
LQAI_MAX_CONCURRENT_STREAMS = 0
# Heartbeats run the assistant in a thread with its own database connection, which cannot see the data of
# a test's transaction: only the tests that commit (transaction=True) turn them on.
LQAI_SSE_HEARTBEAT_SECONDS = 0

# Django's test Client.login() authenticates without a request, which django-axes refuses: off here, on in the
# tests of logins and tokens (the `axes_on` fixture of tests/conftest.py), as in production.
AXES_ENABLED = False

# Django empties the database between transactional tests (and the benchmarks reset theirs) with TRUNCATE,
# which the permanent record refuses below the application (chats.0025, citations.0016) unless the session
# allows it: these throwaway databases do; a deployment's settings never set it.
_database: dict[str, Any] = DATABASES["default"]  # noqa: F405
if _database["ENGINE"] == "django.db.backends.postgresql":
    _database.setdefault("OPTIONS", {})["options"] = "-c lqai.allow_truncate=on"
