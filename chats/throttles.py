"""Per-user throttling of the turn endpoints (DRF throttling, rate ``settings.LQAI_THROTTLE_TURNS``)."""

from __future__ import annotations

from django.conf import settings
from django.core.cache import BaseCache, caches
from rest_framework.request import Request
from rest_framework.throttling import UserRateThrottle
from rest_framework.views import APIView


class TurnRateThrottle(UserRateThrottle):
    """Turns a user may start (single-shot, streamed, resumed), one bucket for the three; reads are not
    counted. Over the rate: 429 with ``Retry-After``. The counts live in the ``throttle`` cache, a table of
    the database (``settings.CACHES``), so that all server processes count a user's turns together."""

    scope = "turns"

    @property
    def cache(self) -> BaseCache:  # type: ignore[override]
        return caches["throttle"]

    def get_rate(self) -> str | None:
        # Read at each request (not DRF's import-time copy of its settings): `off` (None) lets all through.
        rate: str | None = settings.LQAI_THROTTLE_TURNS
        return rate

    def allow_request(self, request: Request, view: APIView) -> bool:
        if request.method != "POST":
            return True
        self.rate = self.get_rate()
        self.num_requests, self.duration = self.parse_rate(self.rate)
        return super().allow_request(request, view)
