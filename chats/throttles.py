"""Per-user throttling of the turn endpoints (DRF throttling, rate ``settings.LQAI_THROTTLE_TURNS``).

The count is kept in the database (:class:`chats.models.TurnRateCount`), one row per user and window of
the rate's period, incremented by one ``INSERT ... ON CONFLICT DO UPDATE ... RETURNING``: the database
serializes concurrent increments of a row, so every request of every server process sees its own count
and exactly the rate's number of turns get through a window. Windows are fixed (a user may start the
rate's number of turns at the end of one window and again at the start of the next).
"""

from __future__ import annotations

import time

from django.conf import settings
from django.db import connection
from rest_framework.request import Request
from rest_framework.throttling import SimpleRateThrottle
from rest_framework.views import APIView

from chats.models import TurnRateCount

_TABLE = TurnRateCount._meta.db_table

COUNT_TURN = f"""
INSERT INTO {_TABLE} (user_id, window_start, turns)
VALUES (%(user_id)s, %(window_start)s, 1)
ON CONFLICT (user_id, window_start) DO UPDATE SET turns = {_TABLE}.turns + 1
RETURNING turns
"""  # noqa: S608 - the table name comes from the model, the values are parameters

# The user's counts of earlier windows go as the next window opens (the unique index finds them).
PRUNE_OLD_WINDOWS = f"""
DELETE FROM {_TABLE} WHERE user_id = %(user_id)s AND window_start < %(window_start)s
"""  # noqa: S608 - the table name comes from the model, the values are parameters


def count_turn(*, user_id: int, window_start: int) -> int:
    """Count one more turn of ``user_id`` in the window starting at ``window_start``; returns the window's
    count, this turn included."""
    with connection.cursor() as cursor:
        cursor.execute(COUNT_TURN, {"user_id": user_id, "window_start": window_start})
        (turns,) = cursor.fetchone()
        if turns == 1:
            cursor.execute(PRUNE_OLD_WINDOWS, {"user_id": user_id, "window_start": window_start})
    return int(turns)


class TurnRateThrottle(SimpleRateThrottle):
    """Turns a user may start (single-shot, streamed, resumed), one bucket for the three; reads are not
    counted. Over the rate: 429 with ``Retry-After`` (the seconds until the window ends)."""

    scope = "turns"

    def __init__(self) -> None:
        # The rate is read at each request (not DRF's import-time copy of its settings): see allow_request.
        self.remaining = 0.0

    def get_rate(self) -> str | None:
        rate: str | None = settings.LQAI_THROTTLE_TURNS  # `off` (None) lets all through
        return rate

    def allow_request(self, request: Request, view: APIView) -> bool:
        if request.method != "POST" or not request.user or not request.user.is_authenticated:
            return True
        rate = self.get_rate()
        if rate is None:
            return True
        limit, period = self.parse_rate(rate)
        if limit is None or period is None:  # parse_rate of a rate is never None
            return True
        now = time.time()
        window_start = int(now // period) * period
        turns = count_turn(user_id=request.user.pk, window_start=window_start)
        self.remaining = window_start + period - now
        return turns <= limit

    def wait(self) -> float:
        return self.remaining
