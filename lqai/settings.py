"""Settings for the lqai project, twelve-factor style: everything that differs
between deployments comes from the environment.

Environment variables:

- ``DEBUG``: ``1``/``true`` turns debug mode on (off by default).
- ``SECRET_KEY``: required unless ``DEBUG`` is on.
- ``ALLOWED_HOSTS``: comma-separated host names (default: localhost only).
- ``DATABASE_URL``: e.g. ``postgres://user@127.0.0.1:5432/lqai``; unset means an
  embedded SQLite file under ``var/``.
- ``LQAI_ASSISTANT_BACKEND``: dotted path of the assistant backend class.
- ``LQAI_MAX_MESSAGE_CHARS``: the longest user message accepted.
- ``LQAI_OPENAI_*``: the OpenAI-compatible model backend
  (``chats.assistant.OpenAICompatibleBackend``): ``BASE_URL``, ``API_KEY``, ``MODEL``,
  ``TIMEOUT`` (seconds), ``MAX_TOKENS``, ``TEMPERATURE``, ``MAX_TOOL_ROUNDS``,
  ``MAX_RETRIES`` and ``RETRY_BACKOFF`` (seconds); checked at start-up when that backend is selected.
- ``LQAI_LEDGER_WRITE``: ``deferred`` (the default on PostgreSQL): a turn's ledger
  entries are written just after it, off the request, by the ledger writer
  (``citations/writer.py``); ``inline`` (the default, and the only choice, on SQLite,
  which has one writer at a time): written before the response.
- ``COURTLISTENER_API_TOKEN``: enables the CourtListener caselaw provider.
- ``LOG_LEVEL``: the root log level (default ``INFO``).
"""

from __future__ import annotations

import os
from pathlib import Path

import dj_database_url
from django.core.exceptions import ImproperlyConfigured

BASE_DIR = Path(__file__).resolve().parent.parent
VAR_DIR = BASE_DIR / "var"


def env_bool(name: str, *, default: bool = False) -> bool:
    value = os.environ.get(name)
    if value is None or value.strip() == "":
        return default
    normalized = value.strip().lower()
    if normalized in {"1", "true", "yes", "on"}:
        return True
    if normalized in {"0", "false", "no", "off"}:
        return False
    raise ImproperlyConfigured(f"{name}={value!r} is not a boolean: use 1/0, true/false, yes/no or on/off.")


def env_int(name: str, *, default: int) -> int:
    value = os.environ.get(name)
    if value is None or value.strip() == "":
        return default
    try:
        return int(value)
    except ValueError:
        raise ImproperlyConfigured(f"{name}={value!r} is not an integer.") from None


def env_float(name: str, *, default: float) -> float:
    value = os.environ.get(name)
    if value is None or value.strip() == "":
        return default
    try:
        return float(value)
    except ValueError:
        raise ImproperlyConfigured(f"{name}={value!r} is not a number.") from None


def database_from_env() -> dict[str, object]:
    """The default database: ``DATABASE_URL`` if set, else an embedded SQLite file."""
    url = os.environ.get("DATABASE_URL", "").strip()
    if not url:
        VAR_DIR.mkdir(exist_ok=True)
        return {"ENGINE": "django.db.backends.sqlite3", "NAME": str(VAR_DIR / "lqai.sqlite3")}
    try:
        config = dict(dj_database_url.parse(url, conn_max_age=60, conn_health_checks=True))
    except Exception as exc:  # dj-database-url raises several types for bad URLs
        raise ImproperlyConfigured(
            f"DATABASE_URL could not be parsed ({exc}). Expected e.g. "
            "postgres://user:password@host:5432/dbname or sqlite:////absolute/path.sqlite3"
        ) from None
    if not config.get("ENGINE"):
        raise ImproperlyConfigured(f"DATABASE_URL names no known database engine: {url.split(':', 1)[0]!r}.")
    return config


DEBUG = env_bool("DEBUG")

SECRET_KEY = os.environ.get("SECRET_KEY", "")
if not SECRET_KEY:
    if not DEBUG:
        raise ImproperlyConfigured(
            "SECRET_KEY is not set. Set SECRET_KEY in the environment, or set DEBUG=1 for local development."
        )
    SECRET_KEY = "insecure-development-key-only-used-with-DEBUG"  # noqa: S105 - debug-only fallback

ALLOWED_HOSTS = [h.strip() for h in os.environ.get("ALLOWED_HOSTS", "localhost,127.0.0.1").split(",") if h.strip()]

INSTALLED_APPS = [
    "django.contrib.admin",
    "django.contrib.auth",
    "django.contrib.contenttypes",
    "django.contrib.sessions",
    "django.contrib.messages",
    "django.contrib.staticfiles",
    "django.contrib.postgres",
    "rest_framework",
    "rest_framework.authtoken",
    "drf_spectacular",
    "chats.apps.ChatsConfig",
    "citations.apps.CitationsConfig",
]

MIDDLEWARE = [
    "django.middleware.security.SecurityMiddleware",
    "django.contrib.sessions.middleware.SessionMiddleware",
    "django.middleware.common.CommonMiddleware",
    "django.middleware.csrf.CsrfViewMiddleware",
    "django.contrib.auth.middleware.AuthenticationMiddleware",
    "django.contrib.messages.middleware.MessageMiddleware",
    "django.middleware.clickjacking.XFrameOptionsMiddleware",
]

ROOT_URLCONF = "lqai.urls"

TEMPLATES = [
    {
        "BACKEND": "django.template.backends.django.DjangoTemplates",
        "DIRS": [],
        "APP_DIRS": True,
        "OPTIONS": {
            "context_processors": [
                "django.template.context_processors.request",
                "django.contrib.auth.context_processors.auth",
                "django.contrib.messages.context_processors.messages",
            ],
        },
    },
]

WSGI_APPLICATION = "lqai.wsgi.application"

DATABASES = {"default": database_from_env()}

DEFAULT_AUTO_FIELD = "django.db.models.BigAutoField"

AUTH_PASSWORD_VALIDATORS = [
    {"NAME": "django.contrib.auth.password_validation.UserAttributeSimilarityValidator"},
    {"NAME": "django.contrib.auth.password_validation.MinimumLengthValidator"},
    {"NAME": "django.contrib.auth.password_validation.CommonPasswordValidator"},
    {"NAME": "django.contrib.auth.password_validation.NumericPasswordValidator"},
]

LANGUAGE_CODE = "en-us"
TIME_ZONE = "UTC"
USE_I18N = True
USE_TZ = True

STATIC_URL = "static/"
STATIC_ROOT = VAR_DIR / "static"

REST_FRAMEWORK = {
    # Token first: an unauthenticated API request gets 401 with a `WWW-Authenticate: Token` challenge.
    "DEFAULT_AUTHENTICATION_CLASSES": [
        "rest_framework.authentication.TokenAuthentication",
        "rest_framework.authentication.SessionAuthentication",
    ],
    "DEFAULT_PERMISSION_CLASSES": ["rest_framework.permissions.IsAuthenticated"],
    "DEFAULT_PAGINATION_CLASS": "rest_framework.pagination.PageNumberPagination",
    "PAGE_SIZE": 50,
    "DEFAULT_SCHEMA_CLASS": "drf_spectacular.openapi.AutoSchema",
}

SPECTACULAR_SETTINGS = {
    "TITLE": "lqai API",
    "DESCRIPTION": "Legal-AI chat with a citation-provenance ledger.",
    "VERSION": "0.1.0",
    "SERVE_INCLUDE_SCHEMA": False,
}

# The assistant that answers chat turns; the default is offline and deterministic.
LQAI_ASSISTANT_BACKEND = os.environ.get("LQAI_ASSISTANT_BACKEND", "chats.assistant.ExtractiveBackend")
LQAI_MAX_MESSAGE_CHARS = env_int("LQAI_MAX_MESSAGE_CHARS", default=8000)
COURTLISTENER_API_TOKEN = os.environ.get("COURTLISTENER_API_TOKEN", "")

# The OpenAI-compatible backend (any chat-completions server: a hosted API, vLLM, Ollama, ...). When
# LQAI_ASSISTANT_BACKEND selects it, chats' AppConfig.ready() refuses to start on a bad value.
LQAI_OPENAI_BASE_URL = os.environ.get("LQAI_OPENAI_BASE_URL", "").strip()
LQAI_OPENAI_API_KEY = os.environ.get("LQAI_OPENAI_API_KEY", "").strip()
LQAI_OPENAI_MODEL = os.environ.get("LQAI_OPENAI_MODEL", "").strip()
LQAI_OPENAI_TIMEOUT = env_float("LQAI_OPENAI_TIMEOUT", default=60.0)
LQAI_OPENAI_MAX_TOKENS = env_int("LQAI_OPENAI_MAX_TOKENS", default=1024)
LQAI_OPENAI_TEMPERATURE = env_float("LQAI_OPENAI_TEMPERATURE", default=0.0)
LQAI_OPENAI_MAX_TOOL_ROUNDS = env_int("LQAI_OPENAI_MAX_TOOL_ROUNDS", default=6)
LQAI_OPENAI_MAX_RETRIES = env_int("LQAI_OPENAI_MAX_RETRIES", default=2)
LQAI_OPENAI_RETRY_BACKOFF = env_float("LQAI_OPENAI_RETRY_BACKOFF", default=1.0)

# When a finalized turn's ledger entries are written (see citations/writer.py for why deferred). SQLite
# takes one writer at a time: a writer thread there would only wait behind the requests' own writes.
LEDGER_WRITE_MODES = ("deferred", "inline")
_ON_POSTGRESQL = str(DATABASES["default"]["ENGINE"]).endswith("postgresql")
LQAI_LEDGER_WRITE = os.environ.get("LQAI_LEDGER_WRITE", "").strip().lower() or (
    "deferred" if _ON_POSTGRESQL else "inline"
)
if LQAI_LEDGER_WRITE not in LEDGER_WRITE_MODES:
    raise ImproperlyConfigured(
        f"LQAI_LEDGER_WRITE={os.environ['LQAI_LEDGER_WRITE']!r} is not one of: {', '.join(LEDGER_WRITE_MODES)}."
    )
if LQAI_LEDGER_WRITE == "deferred" and not _ON_POSTGRESQL:
    raise ImproperlyConfigured("LQAI_LEDGER_WRITE=deferred needs PostgreSQL; on SQLite the ledger is written inline.")

LOGGING = {
    "version": 1,
    "disable_existing_loggers": False,
    "formatters": {
        "structured": {
            "format": "ts=%(asctime)s level=%(levelname)s logger=%(name)s msg=%(message)s",
        },
    },
    "handlers": {
        "stderr": {"class": "logging.StreamHandler", "stream": "ext://sys.stderr", "formatter": "structured"},
    },
    "root": {"handlers": ["stderr"], "level": os.environ.get("LOG_LEVEL", "INFO")},
    "loggers": {
        "django.db.backends": {"level": "WARNING"},
    },
}
