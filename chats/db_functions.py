"""Database functions the chat models' constraints use, portable between PostgreSQL and SQLite."""

from __future__ import annotations

from typing import Any

from django.db.backends.base.base import BaseDatabaseWrapper
from django.db.models import CharField, Func
from django.db.models.sql.compiler import SQLCompiler


class JSONTypeOf(Func):
    """The JSON type of a JSON column's value (``'array'``, ``'object'``, ...): ``jsonb_typeof`` on PostgreSQL,
    ``json_type`` on SQLite. NULL for a NULL value."""

    function = "JSONB_TYPEOF"
    arity = 1
    output_field = CharField()

    def as_sqlite(self, compiler: SQLCompiler, connection: BaseDatabaseWrapper, **extra_context: Any) -> Any:
        return self.as_sql(compiler, connection, function="JSON_TYPE", **extra_context)
