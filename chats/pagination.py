"""Pagination of the API's lists: one style for every list.

Every list answers ``{"count", "page_size", "next", "previous", "results"}``: ``count`` is the length of the
whole list, ``page_size`` the size of this page's request (``?page_size=``, from 1 to ``LQAI_MAX_PAGE_SIZE``;
more is taken as that maximum; ``LQAI_PAGE_SIZE`` by default), ``next`` and ``previous`` the links to the
neighbouring pages (null at either end). A link carries an opaque ``cursor``, signed with the server's key for
that list: a cursor the server did not make, or made for another list (or before ``SECRET_KEY`` changed), is a
400 (``{"detail": "Invalid cursor."}``). Pages are keyed by the list's order (:class:`ApiPagination`), so that
rows added meanwhile neither repeat nor skip a row; a list whose order is not a column (the trace) is paged by
position (:class:`PositionPagination`): a new turn's rows come after every earlier turn's, so its pages stay put
while turns are added (only a backfill of an earlier turn's entries, a repair, shifts them).
"""

from __future__ import annotations

import re
from collections import OrderedDict
from typing import Any

from django.conf import settings
from django.core import signing
from django.db.models import QuerySet
from rest_framework.exceptions import ParseError, ValidationError
from rest_framework.pagination import Cursor, CursorPagination
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.utils.urls import remove_query_param, replace_query_param
from rest_framework.views import APIView

INVALID_CURSOR = "Invalid cursor."
# What a list's 400 means, for its OpenAPI description.
LIST_BAD_INPUT = "A cursor the server did not make, or a `page_size` that is not a whole number from 1."
CURSOR_SALT = "lqai.pagination.cursor"


def page_size_of(request: Request) -> int:
    """The page size a request asks for with ``?page_size=`` (``LQAI_PAGE_SIZE`` without one), at most
    ``LQAI_MAX_PAGE_SIZE``; anything but a positive integer is a 400 naming ``page_size``."""
    raw = request.query_params.get("page_size", "")
    if raw == "":
        return int(settings.LQAI_PAGE_SIZE)
    maximum = int(settings.LQAI_MAX_PAGE_SIZE)
    # ASCII digits only (str.isdigit() takes "²", which int() refuses); a long number is over the maximum anyway.
    digits = raw.lstrip("0")
    if not re.fullmatch(r"[0-9]+", digits):
        raise ValidationError({"page_size": [f"A whole number from 1 to {maximum}."]})
    return maximum if len(digits) > 9 else min(int(digits), maximum)


class ApiPagination(CursorPagination):
    """DRF's cursor pagination with signed cursors, ``count`` and ``page_size``. Subclasses name the list's
    ``ordering`` (its first field keys the pages; the others break ties)."""

    ordering: Any = ("-created_at", "-id")
    page_size_query_param = "page_size"

    def paginate_queryset(
        self, queryset: QuerySet[Any], request: Request, view: APIView | None = None
    ) -> list[Any] | None:
        self.list_path = request.path
        self.count = queryset.count()
        return super().paginate_queryset(queryset, request, view)

    def get_page_size(self, request: Request) -> int:
        return page_size_of(request)

    def _salt(self) -> str:
        # Bound to the list's path: a cursor of one list is not a cursor of another.
        return f"{CURSOR_SALT}:{self.list_path}"

    def encode_cursor(self, cursor: Cursor) -> str:
        tokens = {"o": cursor.offset, "r": bool(cursor.reverse), "p": cursor.position}
        signed = signing.dumps(tokens, salt=self._salt())
        return str(replace_query_param(str(self.base_url), self.cursor_query_param, signed))

    def decode_cursor(self, request: Request) -> Cursor | None:
        encoded = request.query_params.get(self.cursor_query_param)
        if encoded is None:
            return None
        try:
            tokens = signing.loads(encoded, salt=self._salt())
        except signing.BadSignature:
            raise ParseError(INVALID_CURSOR) from None
        return Cursor(offset=int(tokens["o"]), reverse=bool(tokens["r"]), position=tokens["p"])

    def get_paginated_response(self, data: Any) -> Response:
        return Response(
            OrderedDict(
                [
                    ("count", self.count),
                    ("page_size", self.page_size),
                    ("next", self.get_next_link()),
                    ("previous", self.get_previous_link()),
                    ("results", data),
                ]
            )
        )

    def get_paginated_response_schema(self, schema: dict[str, Any]) -> dict[str, Any]:
        paginated: dict[str, Any] = super().get_paginated_response_schema(schema)
        paginated["required"] = ["count", "page_size", "next", "previous", "results"]
        paginated["properties"] = {
            "count": {"type": "integer", "description": "How many items the whole list holds."},
            "page_size": {"type": "integer", "description": "The most items a page of this request holds."},
            **paginated["properties"],
        }
        return paginated

    def get_schema_operation_parameters(self, view: APIView) -> list[dict[str, Any]]:
        return [
            {
                "name": self.cursor_query_param,
                "required": False,
                "in": "query",
                "description": "Where the page begins: take it from `next` or `previous`; the server signs it, and "
                "any other value is a 400.",
                "schema": {"type": "string"},
            },
            {
                "name": self.page_size_query_param,
                "required": False,
                "in": "query",
                "description": "Items per page, from 1 to LQAI_MAX_PAGE_SIZE (more is taken as that); "
                "LQAI_PAGE_SIZE by default.",
                "schema": {"type": "integer", "minimum": 1},
            },
        ]


class PositionPagination(ApiPagination):
    """The same style for a list whose order is not a column: the cursor holds a position in the list."""

    def paginate_queryset(
        self, queryset: QuerySet[Any], request: Request, view: APIView | None = None
    ) -> list[Any] | None:
        self.list_path = request.path
        self.base_url = request.build_absolute_uri()
        self.page_size = self.size = self.get_page_size(request)
        cursor = self.decode_cursor(request)
        self.offset = 0 if cursor is None else max(cursor.offset, 0)
        self.count = queryset.count()
        return list(queryset[self.offset : self.offset + self.size])

    def _link(self, offset: int) -> str:
        if offset == 0:
            return str(remove_query_param(str(self.base_url), self.cursor_query_param))
        return self.encode_cursor(Cursor(offset=offset, reverse=False, position=None))

    def get_next_link(self) -> str | None:
        following = self.offset + self.size
        return self._link(following) if following < self.count else None

    def get_previous_link(self) -> str | None:
        return self._link(max(self.offset - self.size, 0)) if self.offset > 0 else None
