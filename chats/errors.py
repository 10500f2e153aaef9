"""Every error under ``/api/`` answers JSON, whoever raises it.

- DRF's views: :func:`api_exception_handler` (``REST_FRAMEWORK["EXCEPTION_HANDLER"]``) is DRF's own,
  which answers JSON for its exceptions (400, 401, 403, 404, 405, 415, 429), plus a body too large
  (413) and Django's other ``SuspiciousOperation`` errors (400), which DRF would leave to Django.
- Django itself (no URL matched, an unhandled exception, a refused host): the ``handler400``,
  ``handler403``, ``handler404`` and ``handler500`` views of ``lqai/urls.py`` answer
  ``{"detail": ...}`` for ``/api/`` paths and Django's usual pages elsewhere (the admin).
- A body over ``DATA_UPLOAD_MAX_MEMORY_SIZE``: DRF reads a request's body as a stream, past Django's
  size check, so :class:`ApiBodySizeLimitMiddleware` refuses it up front, from ``Content-Length``.

Every error body has a ``detail`` (validation errors keep DRF's shape: messages keyed by field name).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from django.conf import settings
from django.core.exceptions import RequestDataTooBig, SuspiciousOperation
from django.http import HttpRequest, HttpResponse, JsonResponse
from django.views import defaults
from rest_framework import exceptions, status
from rest_framework.response import Response
from rest_framework.views import exception_handler as drf_exception_handler

API_PREFIX = "/api/"


class PayloadTooLarge(exceptions.APIException):
    status_code = status.HTTP_413_REQUEST_ENTITY_TOO_LARGE
    default_detail = "The request body is too large."
    default_code = "payload_too_large"


def is_api_request(request: HttpRequest) -> bool:
    return request.path.startswith(API_PREFIX)


def _too_large_detail() -> str:
    return f"The request body is too large: at most {settings.DATA_UPLOAD_MAX_MEMORY_SIZE} bytes."


def api_exception_handler(exc: Exception, context: dict[str, Any]) -> Response | None:
    """DRF's handler, plus Django's request errors that DRF does not translate; ``None`` (a 500,
    answered by :func:`server_error`) for anything else."""
    if isinstance(exc, RequestDataTooBig):
        exc = PayloadTooLarge(_too_large_detail())
    elif isinstance(exc, SuspiciousOperation):
        exc = exceptions.ParseError("Bad request.")
    return drf_exception_handler(exc, context)


def _json_error(detail: str, status_code: int) -> JsonResponse:
    return JsonResponse({"detail": detail}, status=status_code)


def bad_request(request: HttpRequest, exception: Exception, template_name: str = "400.html") -> HttpResponse:
    if is_api_request(request):
        return _json_error("Bad request.", status.HTTP_400_BAD_REQUEST)
    return defaults.bad_request(request, exception, template_name)


def permission_denied(request: HttpRequest, exception: Exception, template_name: str = "403.html") -> HttpResponse:
    if is_api_request(request):
        return _json_error("You do not have permission to perform this action.", status.HTTP_403_FORBIDDEN)
    return defaults.permission_denied(request, exception, template_name)


def page_not_found(request: HttpRequest, exception: Exception, template_name: str = "404.html") -> HttpResponse:
    if is_api_request(request):
        return _json_error("Not found.", status.HTTP_404_NOT_FOUND)
    return defaults.page_not_found(request, exception, template_name)


def server_error(request: HttpRequest, template_name: str = "500.html") -> HttpResponse:
    if is_api_request(request):
        return _json_error("A server error occurred.", status.HTTP_500_INTERNAL_SERVER_ERROR)
    return defaults.server_error(request, template_name)


class ApiBodySizeLimitMiddleware:
    """Answer 413 (JSON) to an ``/api/`` request whose declared body exceeds ``DATA_UPLOAD_MAX_MEMORY_SIZE``,
    before any view reads it. ``None`` (Django's "no limit") disables the check."""

    def __init__(self, get_response: Callable[[HttpRequest], HttpResponse]) -> None:
        self.get_response = get_response

    def __call__(self, request: HttpRequest) -> HttpResponse:
        limit = settings.DATA_UPLOAD_MAX_MEMORY_SIZE
        if limit is not None and is_api_request(request):
            try:
                length = int(request.META.get("CONTENT_LENGTH") or 0)
            except ValueError:
                return _json_error("Content-Length is not a number.", status.HTTP_400_BAD_REQUEST)
            if length > limit:
                return _json_error(_too_large_detail(), status.HTTP_413_REQUEST_ENTITY_TOO_LARGE)
        return self.get_response(request)
