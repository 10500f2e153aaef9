"""Every error under ``/api/`` answers JSON with a ``detail``, whoever raises it.

:func:`api_exception_handler` (DRF's handler, plus 413 and Django's ``SuspiciousOperation``), the
``handler400``/``403``/``404``/``500`` views of ``lqai/urls.py``, :class:`ApiResponseMiddleware` (a non-JSON
``/api/`` error in ``DEBUG`` answered as JSON; every ``/api/`` response ``Cache-Control: no-store``),
:class:`ApiBodySizeLimitMiddleware` (a body over the limit refused up front, from ``Content-Length``) and
:func:`login_locked_out` (429 with ``Retry-After``). Validation errors keep DRF's shape, keyed by field name.
Which layer answers what: docs/api.md.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from django.conf import settings
from django.core.exceptions import RequestDataTooBig, SuspiciousOperation
from django.http import HttpRequest, HttpResponse, HttpResponseBase, JsonResponse
from django.utils.cache import patch_cache_control
from django.views import defaults
from rest_framework import exceptions, status
from rest_framework.response import Response
from rest_framework.views import exception_handler as drf_exception_handler

API_PREFIX = "/api/"
# Room for a multipart upload's form fields and boundaries beside its file.
MULTIPART_OVERHEAD_BYTES = 64 * 1024


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
        if limit is not None and request.content_type == "multipart/form-data":
            # Django itself bounds a multipart body's fields by DATA_UPLOAD_MAX_MEMORY_SIZE, not its files.
            limit = max(limit, settings.LQAI_MAX_UPLOAD_BYTES + MULTIPART_OVERHEAD_BYTES)
        if limit is not None and is_api_request(request):
            try:
                length = int(request.META.get("CONTENT_LENGTH") or 0)
            except ValueError:
                return _json_error("Content-Length is not a number.", status.HTTP_400_BAD_REQUEST)
            if length > limit:
                return _json_error(
                    f"The request body is too large: at most {limit} bytes.", status.HTTP_413_REQUEST_ENTITY_TOO_LARGE
                )
        return self.get_response(request)


class ApiResponseMiddleware:
    """Under ``/api/``: every response ``Cache-Control: no-store``, and every error JSON.

    An error response that is not JSON can only come from Django itself (its ``DEBUG`` pages, a view outside
    DRF); it is replaced by ``{"detail": <the status's reason>}`` with the same status. Errors are already
    logged where they happen (``django.request``), so nothing is lost by dropping the HTML page.
    """

    def __init__(self, get_response: Callable[[HttpRequest], HttpResponseBase]) -> None:
        self.get_response = get_response

    def __call__(self, request: HttpRequest) -> HttpResponseBase:
        response = self.get_response(request)
        if not is_api_request(request):
            return response
        if response.status_code >= 400 and not _is_json(response):
            replacement = _json_error(_reason(response), response.status_code)
            for header in ("Retry-After", "WWW-Authenticate", "Allow"):
                if header in response:
                    replacement[header] = response[header]
            response = replacement
        patch_cache_control(response, no_store=True)
        return response


def _is_json(response: HttpResponseBase) -> bool:
    content_type = response.get("Content-Type", "")
    return content_type.startswith("application/json") or content_type.startswith("text/event-stream")


def _reason(response: HttpResponseBase) -> str:
    if response.status_code == status.HTTP_404_NOT_FOUND:
        return "Not found."
    if response.status_code >= status.HTTP_500_INTERNAL_SERVER_ERROR:
        return "A server error occurred."
    return f"{response.reason_phrase}."


def login_locked_out(
    request: HttpRequest, original_response: HttpResponse | None, credentials: dict[str, Any] | None
) -> HttpResponse:
    """django-axes' lockout answer (``AXES_LOCKOUT_CALLABLE``): 429 with ``Retry-After``, JSON under ``/api/``."""
    minutes = int(settings.AXES_COOLOFF_TIME.total_seconds() // 60)
    detail = f"Too many failed logins for this username from this address: try again in {minutes} minutes."
    response: HttpResponse
    if is_api_request(request):
        response = JsonResponse({"detail": detail, "code": "locked_out"}, status=status.HTTP_429_TOO_MANY_REQUESTS)
    else:
        response = HttpResponse(detail, status=status.HTTP_429_TOO_MANY_REQUESTS, content_type="text/plain")
    response["Retry-After"] = str(int(settings.AXES_COOLOFF_TIME.total_seconds()))
    return response
