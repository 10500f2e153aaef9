"""Pagination of the API's lists."""

from __future__ import annotations

import datetime
from typing import Any

from django.core.exceptions import ValidationError as DjangoValidationError
from django.db.models import Field, Model, QuerySet
from django.utils import timezone
from rest_framework.exceptions import NotFound, ParseError
from rest_framework.pagination import Cursor, CursorPagination
from rest_framework.request import Request
from rest_framework.views import APIView


class StrictCursorPagination(CursorPagination):
    """DRF's cursor pagination, where a cursor that was not made by it answers 400 (``{"detail": "Invalid
    cursor."}``) instead of a 404, or a 500 when its position is not a value of the first ordering field."""

    invalid_cursor_message = "Invalid cursor."
    _model: type[Model] | None = None

    def paginate_queryset(
        self, queryset: QuerySet[Any], request: Request, view: APIView | None = None
    ) -> list[Any] | None:
        self._model = queryset.model
        return super().paginate_queryset(queryset, request, view)

    def decode_cursor(self, request: Request) -> Cursor | None:
        try:
            cursor = super().decode_cursor(request)
        except NotFound:
            raise ParseError(self.invalid_cursor_message) from None
        if cursor is None or cursor.position is None or self._model is None:
            return cursor
        ordering = self.ordering if isinstance(self.ordering, str) else self.ordering[0]
        field = self._model._meta.get_field(ordering.lstrip("-"))
        if isinstance(field, Field):  # the ordering names a column of the model
            try:
                value = field.to_python(cursor.position)
            except (DjangoValidationError, ValueError, TypeError, OverflowError):
                raise ParseError(self.invalid_cursor_message) from None
            # DRF writes an aware timestamp; a naive one (or none) was not made by it.
            if value is None or (isinstance(value, datetime.datetime) and timezone.is_naive(value)):
                raise ParseError(self.invalid_cursor_message)
        return cursor
