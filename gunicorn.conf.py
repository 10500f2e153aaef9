"""The production server: gunicorn, configured from the environment (``make prod-serve``; gunicorn also reads
this file by itself when started from the project's root).

The worker class is ``gthread``: each worker process serves ``GUNICORN_THREADS`` requests at once, so a
long server-sent-event stream holds one thread, not a whole worker, and other requests go on being served.
A paced turn (``LQAI_SSE_HEARTBEAT_SECONDS``), streamed or not, also runs its assistant in a thread of its
own, with its own database connection: plan PostgreSQL's ``max_connections`` for up to workers x threads x 2.
The worker ``timeout`` is how long a worker process may stop answering gunicorn's arbiter, not a request
limit (turns are bounded by ``LQAI_MAX_STREAM_SECONDS``).

Environment: ``GUNICORN_BIND`` (default ``127.0.0.1:8000``: behind a TLS-terminating proxy),
``GUNICORN_WORKERS`` (2), ``GUNICORN_THREADS`` (8), ``GUNICORN_TIMEOUT`` (30),
``GUNICORN_GRACEFUL_TIMEOUT`` (30: how long a restart waits for open streams), ``LOG_LEVEL``.
"""

import os
import sys

LOG_LEVELS = ("debug", "info", "warning", "error", "critical")


def _int(name: str, default: int) -> int:
    """A positive integer from the environment; anything else stops the server before any worker starts."""
    value = os.environ.get(name, "").strip() or str(default)
    if not value.isdigit() or int(value) < 1:
        sys.exit(f"{name}={value!r} is not a positive integer.")
    return int(value)


def _log_level() -> str:
    """``LOG_LEVEL`` in any case; anything else stops the server here, not in every worker at boot."""
    value = os.environ.get("LOG_LEVEL", "").strip().lower() or "info"
    if value not in LOG_LEVELS:
        sys.exit(f"LOG_LEVEL={os.environ['LOG_LEVEL']!r} is not a log level: use {', '.join(LOG_LEVELS)}.")
    return value


wsgi_app = "lqai.wsgi:application"
bind = [os.environ.get("GUNICORN_BIND", "127.0.0.1:8000")]
worker_class = "gthread"
workers = _int("GUNICORN_WORKERS", 2)
threads = _int("GUNICORN_THREADS", 8)
timeout = _int("GUNICORN_TIMEOUT", 30)
graceful_timeout = _int("GUNICORN_GRACEFUL_TIMEOUT", 30)
keepalive = 5
# The application (and so its settings) is loaded once, in the arbiter, before any worker is forked: a wrong
# setting stops the server at start-up with its message, instead of failing every worker as it boots.
preload_app = True
accesslog = "-"
errorlog = "-"
loglevel = _log_level()
