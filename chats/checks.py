"""Start-up checks of the chat domain (Django's system check framework, run by ``manage.py check``,
``runserver``, ``migrate`` and the production server's start).

:func:`check_stale_turn_window`: a ``pending``/``streaming`` turn without progress for
``LQAI_STALE_TURN_SECONDS`` may be taken over by a resume. A single-shot run records its progress
at each attempt of a request and at its events (at most every quarter of the window), so the longest
it can go without recording any is one request of the backend at its worst (every attempt timing
out, the longest wait between two) plus that quarter. The window must be longer, or a live run could
look stale and be resumed while it still runs.

:func:`check_turn_limits`: the history's budget, the answer's maximum size and the wait for a backend's
thread to stop must leave room (docs/architecture-turns.md, "Configuration").
"""

from __future__ import annotations

from typing import Any

from django.conf import settings
from django.core import checks
from django.core.exceptions import ImproperlyConfigured
from django.utils.module_loading import import_string

STALE_WINDOW_ERROR = "chats.E001"


@checks.register(checks.Tags.compatibility)
def check_stale_turn_window(app_configs: Any = None, **kwargs: Any) -> list[checks.CheckMessage]:
    """An error if the configured backend's worst-case request (``worst_case_wait_seconds()``; a backend
    without one waits on nothing), plus the progress interval (a quarter of the window), is not shorter
    than ``LQAI_STALE_TURN_SECONDS``."""
    try:
        backend = import_string(settings.LQAI_ASSISTANT_BACKEND)
        worst_case = getattr(backend, "worst_case_wait_seconds", None)
        wait = float(worst_case()) if worst_case is not None else 0.0
    except (ImportError, ImproperlyConfigured):
        return []  # refused at start-up by chats.apps.check_assistant_backend, with its own message
    window = settings.LQAI_STALE_TURN_SECONDS
    if wait == 0 or window > wait + window / 4:
        return []
    needed = wait * 4 / 3
    return [
        checks.Error(
            f"LQAI_STALE_TURN_SECONDS={window} is too short for the model backend's worst-case request "
            f"({wait:g} s: LQAI_OPENAI_TIMEOUT x (LQAI_OPENAI_MAX_RETRIES + 1) plus the longest wait between "
            "retries) and the progress interval (a quarter of the window): a run waiting on the model could "
            "look stale and be resumed while it still runs.",
            hint=f"Set LQAI_STALE_TURN_SECONDS above {needed:g}, or lower LQAI_OPENAI_TIMEOUT or "
            "LQAI_OPENAI_MAX_RETRIES.",
            id=STALE_WINDOW_ERROR,
        )
    ]


TURN_LIMIT_ERROR = "chats.E002"


@checks.register(checks.Tags.compatibility)
def check_turn_limits(app_configs: Any = None, **kwargs: Any) -> list[checks.CheckMessage]:
    """An error for each turn limit that would leave no room: the history's budget and the answer's maximum
    size are at least one character, and the wait for a backend's thread to stop is positive."""
    limits = {
        "LQAI_HISTORY_MAX_CHARS": (settings.LQAI_HISTORY_MAX_CHARS, 1, "characters"),
        "LQAI_MAX_ANSWER_CHARS": (settings.LQAI_MAX_ANSWER_CHARS, 1, "characters"),
        "LQAI_BACKEND_STOP_SECONDS": (settings.LQAI_BACKEND_STOP_SECONDS, 0.001, "seconds"),
    }
    return [
        checks.Error(f"{name}={value} must be a positive number of {unit}.", id=TURN_LIMIT_ERROR)
        for name, (value, least, unit) in limits.items()
        if not value >= least
    ]
