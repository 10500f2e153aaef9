"""The address of the client of a request, for the limits that count per address (token requests, failed logins).

``REMOTE_ADDR``, unless ``LQAI_PROXY_COUNT`` proxies stand in front of the server: then the address the
outermost of them saw, the ``LQAI_PROXY_COUNT``-th entry of ``X-Forwarded-For`` from the right (entries further
left were written by the client, who could write anything there).
"""

from __future__ import annotations

from django.conf import settings
from django.http import HttpRequest


def client_address(request: HttpRequest) -> str:
    remote = str(request.META.get("REMOTE_ADDR") or "")
    proxies: int = settings.LQAI_PROXY_COUNT
    forwarded = str(request.META.get("HTTP_X_FORWARDED_FOR") or "")
    if proxies <= 0 or not forwarded:
        return remote
    addresses = [address.strip() for address in forwarded.split(",") if address.strip()]
    return addresses[-min(proxies, len(addresses))] if addresses else remote
