"""Settings for the lqai project, twelve-factor style: everything that differs between deployments comes from
the environment (``DATABASE_URL``, ``SECRET_KEY``, ``LQAI_*``, ...; unset ``DATABASE_URL`` means an embedded
SQLite file under ``var/``).

Every value is checked here, when the settings load: a wrong one stops ``manage.py`` and the server at start-up
with ``ImproperlyConfigured`` and a sentence naming the variable, never a worker later. Each variable, its
meaning and its default: docs/configuration.md.
"""

from __future__ import annotations

import base64
import binascii
import datetime as dt
import os
import re
from pathlib import Path

import dj_database_url
from csp.constants import NONCE
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


def env_list(name: str, *, default: str = "") -> list[str]:
    """A comma-separated list; blanks dropped."""
    return [item.strip() for item in os.environ.get(name, default).split(",") if item.strip()]


def proxy_ssl_header_from_env() -> tuple[str, str] | None:
    """``SECURE_PROXY_SSL_HEADER`` from ``Header-Name`` or ``Header-Name: value`` (value ``https`` by default).

    Only for a proxy that sets the header itself and strips it from clients: otherwise a client can
    claim HTTPS over plain HTTP.
    """
    value = os.environ.get("SECURE_PROXY_SSL_HEADER", "").strip()
    if not value:
        return None
    name, _, expected = value.partition(":")
    name, expected = name.strip(), expected.strip() or "https"
    if not name or not all(c.isalnum() or c == "-" for c in name):
        raise ImproperlyConfigured(
            f"SECURE_PROXY_SSL_HEADER={value!r} is not a header name: use e.g. X-Forwarded-Proto or "
            "'X-Forwarded-Proto: https'."
        )
    return "HTTP_" + name.upper().replace("-", "_"), expected


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

ALLOWED_HOSTS = env_list("ALLOWED_HOSTS", default="localhost,127.0.0.1")

# HTTPS only unless DEBUG: `manage.py check --deploy` is clean with just SECRET_KEY and ALLOWED_HOSTS set.
# Each can be relaxed from the environment (e.g. SECURE_SSL_REDIRECT=0 when the proxy redirects itself).
SECURE_SSL_REDIRECT = env_bool("SECURE_SSL_REDIRECT", default=not DEBUG)
# Load balancers probe the health checks (lqai/health.py) over plain HTTP: no redirect for them.
SECURE_REDIRECT_EXEMPT = [r"^healthz$", r"^readyz$"]
SECURE_HSTS_SECONDS = env_int("SECURE_HSTS_SECONDS", default=0 if DEBUG else 31_536_000)
SECURE_HSTS_INCLUDE_SUBDOMAINS = env_bool("SECURE_HSTS_INCLUDE_SUBDOMAINS", default=not DEBUG)
SECURE_HSTS_PRELOAD = env_bool("SECURE_HSTS_PRELOAD", default=not DEBUG)
SESSION_COOKIE_SECURE = env_bool("SESSION_COOKIE_SECURE", default=not DEBUG)
CSRF_COOKIE_SECURE = env_bool("CSRF_COOKIE_SECURE", default=not DEBUG)
SECURE_PROXY_SSL_HEADER = proxy_ssl_header_from_env()
CSRF_TRUSTED_ORIGINS = env_list("CSRF_TRUSTED_ORIGINS")
# A request body above this answers 413 (JSON under /api/); questions are at most LQAI_MAX_MESSAGE_CHARS.
DATA_UPLOAD_MAX_MEMORY_SIZE = env_int("DATA_UPLOAD_MAX_MEMORY_SIZE", default=2_621_440)
# A document uploaded through the API (POST /api/projects/{id}/documents/): its file, and its text once
# extracted, at most these many bytes and characters (else 413). The request body limit for an upload is
# the file's limit plus a little for the form; a PDF is read from a temporary file, not from memory.
LQAI_MAX_UPLOAD_BYTES = env_int("LQAI_MAX_UPLOAD_BYTES", default=20 * 1024 * 1024)
LQAI_MAX_DOCUMENT_CHARS = env_int("LQAI_MAX_DOCUMENT_CHARS", default=2_000_000)
# How long a matter's invitation link (chats.invitations) can be used after the owner made it.
LQAI_INVITATION_DAYS = env_int("LQAI_INVITATION_DAYS", default=7)
# Bounds on the work of reading an upload, not only its bytes (a 4 KB PDF can list 10,000 pages): a PDF's
# pages, counted before any is read, and the seconds its reading may take, in a process of its own (else 413);
# a zip's (a DOCX's) members, their uncompressed bytes and their compression ratio (chats.archives).
LQAI_MAX_PDF_PAGES = env_int("LQAI_MAX_PDF_PAGES", default=2_000)
LQAI_MAX_PDF_SECONDS = env_int("LQAI_MAX_PDF_SECONDS", default=60)
LQAI_MAX_ZIP_MEMBERS = env_int("LQAI_MAX_ZIP_MEMBERS", default=1_000)
LQAI_MAX_ZIP_BYTES = env_int("LQAI_MAX_ZIP_BYTES", default=100 * 1024 * 1024)
LQAI_MAX_ZIP_RATIO = env_int("LQAI_MAX_ZIP_RATIO", default=100)
# A USLM or case-law file an operator uploads in the admin (authorities.loading.load_uploaded_file), loaded in one
# transaction; a larger one is loaded with manage.py load_authorities, batch by batch.
LQAI_MAX_AUTHORITY_UPLOAD_BYTES = env_int("LQAI_MAX_AUTHORITY_UPLOAD_BYTES", default=50 * 1024 * 1024)
FILE_UPLOAD_MAX_MEMORY_SIZE = 2_621_440
for _name in (
    "DATA_UPLOAD_MAX_MEMORY_SIZE",
    "LQAI_MAX_UPLOAD_BYTES",
    "LQAI_MAX_AUTHORITY_UPLOAD_BYTES",
    "LQAI_MAX_DOCUMENT_CHARS",
    "LQAI_INVITATION_DAYS",
    "LQAI_MAX_PDF_PAGES",
    "LQAI_MAX_PDF_SECONDS",
    "LQAI_MAX_ZIP_MEMBERS",
    "LQAI_MAX_ZIP_BYTES",
    "LQAI_MAX_ZIP_RATIO",
):
    if globals()[_name] <= 0:
        raise ImproperlyConfigured(f"{_name} must be a positive number.")

INSTALLED_APPS = [
    "django.contrib.admin",
    "django.contrib.auth",
    "django.contrib.contenttypes",
    "django.contrib.sessions",
    "django.contrib.messages",
    "django.contrib.staticfiles",
    "django.contrib.postgres",
    "rest_framework",
    "knox",
    "drf_spectacular",
    "drf_spectacular_sidecar",
    "axes",
    "csp",
    "authorities.apps.AuthoritiesConfig",
    "chats.apps.ChatsConfig",
    "citations.apps.CitationsConfig",
    "pages.apps.PagesConfig",
    "drafts.apps.DraftsConfig",
    "demo.apps.DemoConfig",
]

MIDDLEWARE = [
    "django.middleware.security.SecurityMiddleware",
    "csp.middleware.CSPMiddleware",
    "chats.errors.ApiResponseMiddleware",
    "chats.errors.ApiBodySizeLimitMiddleware",
    "django.contrib.sessions.middleware.SessionMiddleware",
    "django.middleware.common.CommonMiddleware",
    "django.middleware.csrf.CsrfViewMiddleware",
    "django.contrib.auth.middleware.AuthenticationMiddleware",
    "django.contrib.messages.middleware.MessageMiddleware",
    "django.middleware.clickjacking.XFrameOptionsMiddleware",
    # Last, as django-axes requires: it turns a locked-out login into its lockout response (429).
    "axes.middleware.AxesMiddleware",
]

# django-axes first: it refuses a login attempt for a locked-out username and address before any password
# is checked. Every authenticate() call must then pass the request (the token endpoint and the login views do).
AUTHENTICATION_BACKENDS = [
    "axes.backends.AxesStandaloneBackend",
    "django.contrib.auth.backends.ModelBackend",
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

# Items per page of every API list, and the most a client may ask for with ?page_size= (chats/pagination.py).
LQAI_PAGE_SIZE = env_int("LQAI_PAGE_SIZE", default=50)
LQAI_MAX_PAGE_SIZE = env_int("LQAI_MAX_PAGE_SIZE", default=200)
if not 1 <= LQAI_PAGE_SIZE <= LQAI_MAX_PAGE_SIZE:
    raise ImproperlyConfigured("LQAI_PAGE_SIZE must be at least 1 and at most LQAI_MAX_PAGE_SIZE.")

REST_FRAMEWORK = {
    # Bearer tokens first (chats/api_tokens.py: django-rest-knox, stored hashed, expiring): an unauthenticated
    # API request gets 401 with a `WWW-Authenticate: Bearer` challenge. Sessions serve the pages and the docs.
    "DEFAULT_AUTHENTICATION_CLASSES": [
        "chats.authentication.BearerTokenAuthentication",
        "rest_framework.authentication.SessionAuthentication",
    ],
    "DEFAULT_PERMISSION_CLASSES": ["rest_framework.permissions.IsAuthenticated"],
    # JSON nested too deep for Python's parser answers 400, not 500 (chats/parsers.py).
    "DEFAULT_PARSER_CLASSES": [
        "chats.parsers.JSONParser",
        "rest_framework.parsers.FormParser",
        "rest_framework.parsers.MultiPartParser",
    ],
    # One style for every list (chats/pagination.py): count, page_size, and signed cursors in next/previous.
    "DEFAULT_PAGINATION_CLASS": "chats.pagination.ApiPagination",
    "PAGE_SIZE": LQAI_PAGE_SIZE,
    "DEFAULT_SCHEMA_CLASS": "drf_spectacular.openapi.AutoSchema",
    # Every error under /api/ is JSON (chats/errors.py; Django's own errors: the handlers in lqai/urls.py).
    "EXCEPTION_HANDLER": "chats.errors.api_exception_handler",
}

# API tokens (django-rest-knox): only a SHA-512 digest is stored; a token expires LQAI_TOKEN_TTL_HOURS after
# it was issued; a user holds at most LQAI_TOKENS_PER_USER live tokens at once.
_token_ttl = dt.timedelta(hours=env_int("LQAI_TOKEN_TTL_HOURS", default=24 * 7))
if _token_ttl <= dt.timedelta(0):
    raise ImproperlyConfigured("LQAI_TOKEN_TTL_HOURS must be a positive number of hours.")
REST_KNOX = {
    "TOKEN_TTL": _token_ttl,
    "TOKEN_LIMIT_PER_USER": env_int("LQAI_TOKENS_PER_USER", default=20) or None,
    "AUTH_HEADER_PREFIX": "Bearer",
}
# Token requests (POST /api/auth/token/) per client address, per DRF rate: then 429 with Retry-After. Failed
# passwords are also counted by django-axes (below), per username and address, for the API and the admin alike.
LQAI_THROTTLE_TOKEN_REQUESTS = os.environ.get("LQAI_THROTTLE_TOKEN_REQUESTS", "10/min").strip().lower()
if not re.fullmatch(r"[1-9][0-9]*/(s|sec|second|m|min|minute|h|hour|d|day)", LQAI_THROTTLE_TOKEN_REQUESTS):
    raise ImproperlyConfigured(
        f"LQAI_THROTTLE_TOKEN_REQUESTS={LQAI_THROTTLE_TOKEN_REQUESTS!r} is not a rate: use e.g. 10/min."
    )

# Failed logins (the admin, the pages and the token endpoint): after AXES_FAILURE_LIMIT failures for one
# username from one address, that pair is refused (429) for AXES_COOLOFF_TIME; a success resets the count.
AXES_FAILURE_LIMIT = env_int("AXES_FAILURE_LIMIT", default=5)
AXES_COOLOFF_TIME = dt.timedelta(minutes=env_int("AXES_COOLOFF_MINUTES", default=15))
AXES_LOCKOUT_PARAMETERS = [["username", "ip_address"]]
AXES_RESET_ON_SUCCESS = True
AXES_LOCKOUT_CALLABLE = "chats.errors.login_locked_out"
# Limits per client address (token requests, failed logins) read it with chats.client_address: REMOTE_ADDR, or
# behind LQAI_PROXY_COUNT proxies that each append to X-Forwarded-For, the address the outermost one saw.
LQAI_PROXY_COUNT = env_int("LQAI_PROXY_COUNT", default=0)
AXES_CLIENT_IP_CALLABLE = "chats.client_address.client_address"
if AXES_FAILURE_LIMIT < 1:
    raise ImproperlyConfigured("AXES_FAILURE_LIMIT must be at least 1.")

# Content-Security-Policy (django-csp): everything from this origin only; no inline script, except one that a
# template marks with the request's nonce (`<script nonce="{{ request.csp_nonce }}">`: the nonce is added to the
# header only for a response that used it). The interactive API docs (/api/docs/) serve Swagger UI's files from
# here (drf-spectacular-sidecar) and load its start-up script as a file, so they need nothing more; Swagger UI
# sets inline styles, hence style-src (no nonce there: a nonce would switch 'unsafe-inline' off).
CONTENT_SECURITY_POLICY = {
    "DIRECTIVES": {
        "default-src": ["'self'"],
        "script-src": ["'self'", NONCE],
        "style-src": ["'self'", "'unsafe-inline'"],
        "img-src": ["'self'", "data:"],
        "font-src": ["'self'", "data:"],
        "connect-src": ["'self'"],
        "object-src": ["'none'"],
        "base-uri": ["'self'"],
        "form-action": ["'self'"],
        "frame-ancestors": ["'none'"],
    },
}

SPECTACULAR_SETTINGS = {
    "TITLE": "lqai API",
    "DESCRIPTION": (
        "Legal-AI chat with a citation-provenance ledger. Authenticate with a token: "
        '`POST /api/auth/token/` with `{"username", "password"}`, then send `Authorization: Bearer <token>`. '
        "A walk-through from token to trace: docs/api.md."
    ),
    "VERSION": "0.1.0",
    "SERVE_INCLUDE_SCHEMA": False,
    # The schema and the docs are the API's: served to a token or a signed-in session only (lqai/urls.py).
    "SERVE_PERMISSIONS": ["rest_framework.permissions.IsAuthenticated"],
    # Swagger UI's files from this server (no CDN), so the docs work offline and under the CSP.
    "SWAGGER_UI_DIST": "SIDECAR",
    "SWAGGER_UI_FAVICON_HREF": "SIDECAR",
    "REDOC_DIST": "SIDECAR",
    "SWAGGER_UI_SETTINGS": {"persistAuthorization": False},
    # Two models have a "status" with choices: a message's lifecycle and a case citation's check.
    "ENUM_NAME_OVERRIDES": {
        "MessageStatusEnum": "chats.models.Message.Status",
        "CaseCitationStatusEnum": "chats.models.CaseCitation.Status",
        # A person's role in a matter (owner, reviewer, member), and the roles a membership takes.
        "RoleEnum": "chats.models.Role",
        "MembershipRoleEnum": "chats.api_projects.MEMBERSHIP_ROLES",
        "CaseCitationKindEnum": "chats.models.CaseCitationKind",
        "DraftFindingKindEnum": "drafts.serializers.FINDING_KINDS",
        "DraftAuthorityKindEnum": "drafts.serializers.AUTHORITY_KINDS",
        "DraftFindingStatusEnum": "drafts.checking.STATUSES",
        "StatuteCitationKindEnum": "chats.models.StatuteCitation.Kind",
        "StatuteCitationStatusEnum": "chats.models.StatuteCitation.Status",
    },
}

# The assistant that answers chat turns; the default is offline and deterministic.
LQAI_ASSISTANT_BACKEND = os.environ.get("LQAI_ASSISTANT_BACKEND", "chats.assistant.ExtractiveBackend")
LQAI_MAX_MESSAGE_CHARS = env_int("LQAI_MAX_MESSAGE_CHARS", default=8000)
COURTLISTENER_API_TOKEN = os.environ.get("COURTLISTENER_API_TOKEN", "")
# What `manage.py load_authorities` calls for case-law JSON (CourtListener, CAP): the opinions are chats' rows, and
# the authority library, below chats, imports none of it, so its command finds the loader by this name.
LQAI_CASELAW_LOADER = "chats.caselaw_loading.load_caselaw_file"

# The OpenAI-compatible backend (any chat-completions server: a hosted API, vLLM, Ollama, ...). When
# LQAI_ASSISTANT_BACKEND selects it, chats' AppConfig.ready() refuses to start on a bad value.
LQAI_OPENAI_BASE_URL = os.environ.get("LQAI_OPENAI_BASE_URL", "").strip()
LQAI_OPENAI_API_KEY = os.environ.get("LQAI_OPENAI_API_KEY", "").strip()
LQAI_OPENAI_MODEL = os.environ.get("LQAI_OPENAI_MODEL", "").strip()
LQAI_OPENAI_TIMEOUT = env_float("LQAI_OPENAI_TIMEOUT", default=60.0)
LQAI_OPENAI_MAX_TOKENS = env_int("LQAI_OPENAI_MAX_TOKENS", default=1024)
LQAI_OPENAI_TEMPERATURE = env_float("LQAI_OPENAI_TEMPERATURE", default=0.0)
LQAI_OPENAI_MAX_TOOL_ROUNDS = env_int("LQAI_OPENAI_MAX_TOOL_ROUNDS", default=6)
# The most tool calls a turn runs (cite excepted): each search may reach CourtListener and records its sources.
LQAI_OPENAI_MAX_TOOL_CALLS = env_int("LQAI_OPENAI_MAX_TOOL_CALLS", default=24)
LQAI_OPENAI_MAX_RETRIES = env_int("LQAI_OPENAI_MAX_RETRIES", default=2)
# False for a server that answers each request with one JSON completion instead of an event stream.
LQAI_OPENAI_STREAM = env_bool("LQAI_OPENAI_STREAM", default=True)
# The most bytes one model response may send (an event stream, or a whole completion): past it the turn fails.
LQAI_OPENAI_MAX_RESPONSE_BYTES = env_int("LQAI_OPENAI_MAX_RESPONSE_BYTES", default=64 * 1024 * 1024)
# The chat history a model backend is sent, at most this many characters: the turn's question and the
# newest earlier messages that fit (older ones are left out whole).
LQAI_HISTORY_MAX_CHARS = env_int("LQAI_HISTORY_MAX_CHARS", default=60_000)
# The longest answer stored: a turn reaching it ends `interrupted` with a note, its text cut there.
LQAI_MAX_ANSWER_CHARS = env_int("LQAI_MAX_ANSWER_CHARS", default=200_000)
# How long a streamed run waits for its backend's thread to stop, once told to (disconnect, timeout, error).
LQAI_BACKEND_STOP_SECONDS = env_float("LQAI_BACKEND_STOP_SECONDS", default=5.0)

# --- Bounded use of the turn endpoints (0 or "off" turns a limit off) ---
# Turns (single-shot, streamed, resumed) one user may start, per DRF rate ("30/min"): then 429 with Retry-After.
_turn_rate = os.environ.get("LQAI_THROTTLE_TURNS", "30/min").strip().lower()
if _turn_rate not in {"", "0", "off", "none"} and not re.fullmatch(
    r"[1-9][0-9]*/(s|sec|second|m|min|minute|h|hour|d|day)", _turn_rate
):
    raise ImproperlyConfigured(f"LQAI_THROTTLE_TURNS={_turn_rate!r} is not a rate: use e.g. 30/min, 500/hour or off.")
LQAI_THROTTLE_TURNS: str | None = None if _turn_rate in {"", "0", "off", "none"} else _turn_rate
# The rate counts live in a table of the database (chats.throttles), so that every server process and host
# counts a user's turns together.
CACHES = {
    "default": {"BACKEND": "django.core.cache.backends.locmem.LocMemCache"},
    # Token requests per client address (chats.api_tokens.TokenRequestThrottle), shared by every server process:
    # a table of the database (created by chats' migration 0022). DRF's counting there is not atomic, so a burst
    # may pass a few requests over the rate; passwords are guarded by django-axes' lockouts, which are exact.
    "token_requests": {
        "BACKEND": "django.core.cache.backends.db.DatabaseCache",
        "LOCATION": "lqai_token_request_counts",
        "OPTIONS": {"MAX_ENTRIES": 100_000},
    },
}
# Streams (streamed and resumed turns) one user may have open at once, counted in the database: then 429.
LQAI_MAX_CONCURRENT_STREAMS = env_int("LQAI_MAX_CONCURRENT_STREAMS", default=3)
# Exports (GET /api/projects/{id}/export/) the server prepares at once, across its processes, each user one at a
# time (citations.export.export_slot, PostgreSQL advisory locks): then 429. 0: no server-wide bound.
LQAI_MAX_CONCURRENT_EXPORTS = env_int("LQAI_MAX_CONCURRENT_EXPORTS", default=2)
# A turn (streamed or single-shot) still running after this many seconds ends `interrupted` (resumable).
LQAI_MAX_STREAM_SECONDS = env_int("LQAI_MAX_STREAM_SECONDS", default=300)
# While the assistant is silent a stream sends an SSE comment this often, so that proxies and clients
# keep the connection; on, the assistant runs in a thread of the request (see chats/assistant/runner.py), and a
# single-shot turn's run wakes as often, to stop at LQAI_MAX_STREAM_SECONDS.
LQAI_SSE_HEARTBEAT_SECONDS: float = env_int("LQAI_SSE_HEARTBEAT_SECONDS", default=15)
# A `pending` or `streaming` turn without progress for this long (its worker died) may be resumed.
# Checked at start-up (chats/checks.py) against the backend's worst-case request (timeouts, retries, waits).
LQAI_STALE_TURN_SECONDS = env_int("LQAI_STALE_TURN_SECONDS", default=600)
if LQAI_SSE_HEARTBEAT_SECONDS > 0 and LQAI_STALE_TURN_SECONDS < 2 * LQAI_SSE_HEARTBEAT_SECONDS:
    raise ImproperlyConfigured(
        "LQAI_STALE_TURN_SECONDS must be at least twice LQAI_SSE_HEARTBEAT_SECONDS: a live stream "
        "records its progress at each heartbeat, and must not look stuck between two."
    )

# How long (seconds) a turn's ledger write may wait on locks and run, inside the turn's transaction,
# before it is given up as a ledger failure (logged; the turn commits; backfill_ledger repairs it).
LQAI_LEDGER_TIMEOUT = env_float("LQAI_LEDGER_TIMEOUT", default=2.0)
# Bounds of the checks of one turn (docs/verification.md), so that no answer holds a turn for long: the claimed
# quotes verified (the rest are recorded as one failed claim saying how many were dropped), and the characters of
# the answer searched for case citations (citations beyond are not seen; the check says so).
LQAI_MAX_CLAIMS_PER_TURN = env_int("LQAI_MAX_CLAIMS_PER_TURN", default=300)
LQAI_CASE_CITATION_MAX_CHARS = env_int("LQAI_CASE_CITATION_MAX_CHARS", default=100_000)
if LQAI_LEDGER_TIMEOUT <= 0:
    raise ImproperlyConfigured(f"LQAI_LEDGER_TIMEOUT={LQAI_LEDGER_TIMEOUT} must be a positive number of seconds.")

# Any case (`warning`, `WARNING`); anything else is refused here, at start-up, before a server worker boots.
LOG_LEVEL = os.environ.get("LOG_LEVEL", "").strip().upper() or "INFO"
if LOG_LEVEL not in {"DEBUG", "INFO", "WARNING", "ERROR", "CRITICAL"}:
    raise ImproperlyConfigured(
        f"LOG_LEVEL={os.environ['LOG_LEVEL']!r} is not a log level: use DEBUG, INFO, WARNING, ERROR or CRITICAL."
    )

# The key of the sealed record (citations.keys): outside the database, so that whoever can write the
# database cannot re-seal what they changed. Checked here, so that a server without it refuses to start.
LQAI_LEDGER_KEY = os.environ.get("LQAI_LEDGER_KEY", "").strip()
if LQAI_LEDGER_KEY:
    try:
        _ledger_key_bytes = base64.b64decode(LQAI_LEDGER_KEY, validate=True)
    except binascii.Error:
        _ledger_key_bytes = b""
    if len(_ledger_key_bytes) != 32:
        raise ImproperlyConfigured(
            "LQAI_LEDGER_KEY must be the base64 of a 32-byte Ed25519 private key: run `manage.py ledger_key` for one."
        )
elif not DEBUG:
    raise ImproperlyConfigured(
        "LQAI_LEDGER_KEY is not set: it signs the sealed record and the matter exports. Run `manage.py ledger_key` "
        "(with DEBUG=1) for a new key, keep it in your secret store, and set LQAI_LEDGER_KEY in the environment."
    )
LQAI_LEDGER_RETIRED_PUBLIC_KEYS = env_list("LQAI_LEDGER_RETIRED_PUBLIC_KEYS")

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
    "root": {"handlers": ["stderr"], "level": LOG_LEVEL},
    "loggers": {
        "django.db.backends": {"level": "WARNING"},
        # django-axes logs every failed login at INFO (they are in its tables too) and lockouts at WARNING.
        "axes": {"level": "WARNING"},
    },
}
