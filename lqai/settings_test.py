"""Settings for the test suite: the real settings plus a throwaway secret and a fast hasher."""

import os

os.environ.setdefault("SECRET_KEY", "test-only-secret-key-not-for-production")

from lqai.settings import *  # noqa: F403

PASSWORD_HASHERS = ["django.contrib.auth.hashers.MD5PasswordHasher"]
