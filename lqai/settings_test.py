"""Settings for the test suite: the real settings plus a throwaway secret and a fast hasher."""

import os

os.environ.setdefault("SECRET_KEY", "test-only-secret-key-not-for-production")

from lqai.settings import *  # noqa: F403

PASSWORD_HASHERS = ["django.contrib.auth.hashers.MD5PasswordHasher"]

# The suite checks a turn's ledger entries right after the turn, inside test transactions that the
# deferred writer's own connection cannot see; the writer itself is tested in tests/test_ledger_writer.py
# (real commits, real thread), and the demo test runs the shipped default end to end.
LQAI_LEDGER_WRITE = "inline"

# The test client speaks plain HTTP: with DEBUG off (as in production) the HTTPS redirect would answer
# every request with a 301. The production defaults themselves are checked in a subprocess
# (tests/test_production.py runs `check --deploy` and the shipped server with lqai.settings).
SECURE_SSL_REDIRECT = False
