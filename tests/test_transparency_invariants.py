"""Transparency invariant: metadata-only models never hold content.

The ledger says *which* sources a turn used, and how they were verified; the quotes, messages and tool
payloads stay in their own tables, under their own access rules. A column that could hold content (a
text/JSON/binary type, or a name that says it is content) in one of :data:`METADATA_ONLY_MODELS` fails
this module: both in the models and in the tables PostgreSQL or SQLite actually hold.
"""

from __future__ import annotations

import pytest
from django.db import connection, models
from django.test.utils import isolate_apps

from citations.models import CitationLedgerEntry

# Models that must hold ids, labels, numbers and timestamps only. Add every new metadata-only model here.
METADATA_ONLY_MODELS: tuple[type[models.Model], ...] = (CitationLedgerEntry,)

CONTENT_WORDS = (
    "content",
    "text",
    "body",
    "payload",
    "raw",
    "quote",
    "prompt",
    "completion",
    "response",
    "result",
    "args",
    "arguments",
    "message",
    "snippet",
    "excerpt",
)
CONTENT_FIELD_TYPES: tuple[type[models.Field], ...] = (models.TextField, models.JSONField, models.BinaryField)
# The same types as database introspection names them.
CONTENT_FIELD_TYPE_NAMES = frozenset(t.__name__ for t in CONTENT_FIELD_TYPES)


def has_content_name(column: str) -> bool:
    """Whether a column's name is, or ends with, a content word: ``snippet`` and ``raw_payload`` are;
    ``message_id`` is not (it ends with ``_id``). Judged on the database column name, not the field name."""
    name = column.lower()
    return any(name.endswith(word) for word in CONTENT_WORDS)


def content_columns(model: type[models.Model]) -> list[str]:
    """The columns of ``model`` that could hold content, as ``"<column>: <why>"``; empty if none."""
    offending = []
    for field in model._meta.concrete_fields:
        if isinstance(field, CONTENT_FIELD_TYPES):
            offending.append(f"{field.column}: {type(field).__name__}")
        elif has_content_name(field.column):
            offending.append(f"{field.column}: content name")
    return offending


def content_columns_in_table(table: str) -> list[str]:
    """The same judgement on the table the database actually holds (catching a column added by raw SQL)."""
    offending = []
    with connection.cursor() as cursor:
        for column in connection.introspection.get_table_description(cursor, table):
            field_type = connection.introspection.get_field_type(column.type_code, column)
            if field_type in CONTENT_FIELD_TYPE_NAMES:
                offending.append(f"{column.name}: {field_type}")
            elif has_content_name(column.name):
                offending.append(f"{column.name}: content name")
    return offending


@pytest.mark.parametrize("model", METADATA_ONLY_MODELS, ids=lambda m: m.__name__)
def test_metadata_only_models_have_no_content_column(model: type[models.Model]) -> None:
    assert content_columns(model) == []


@pytest.mark.django_db
@pytest.mark.parametrize("model", METADATA_ONLY_MODELS, ids=lambda m: m.__name__)
def test_metadata_only_tables_have_no_content_column(model: type[models.Model]) -> None:
    assert content_columns_in_table(model._meta.db_table) == []


# --- The scanner can fail --------------------------------------------------------------------------------------
# Throwaway models, defined inside each test in an isolated app registry (so they never reach the real one,
# migrations or other tests) and unmanaged.


class Throwaway(models.Model):
    """Base of the throwaway models (abstract: never registered itself)."""

    class Meta:
        abstract = True
        app_label = "citations"
        managed = False

    def __str__(self) -> str:
        return f"{type(self).__name__} {self.pk}"


@isolate_apps("citations")
def test_the_scanner_flags_content_columns() -> None:
    class WithText(Throwaway):
        note = models.TextField()

    class WithJson(Throwaway):
        extra = models.JSONField()

    class WithSnippet(Throwaway):
        snippet = models.CharField(max_length=200)

    class WithRawPayloadColumn(Throwaway):
        # The field name looks harmless; the column it is stored in does not.
        details = models.CharField(max_length=200, db_column="raw_payload")

    class WithBinarySubclass(Throwaway):
        class Blob(models.BinaryField):
            pass

        blob = Blob()

    class WithMessage(Throwaway):
        last_message = models.CharField(max_length=200)

    assert (WithText._meta.app_label, WithText._meta.managed) == ("citations", False)
    assert content_columns(WithText) == ["note: TextField"]
    assert content_columns(WithJson) == ["extra: JSONField"]
    assert content_columns(WithSnippet) == ["snippet: content name"]
    assert content_columns(WithRawPayloadColumn) == ["raw_payload: content name"]
    assert content_columns(WithBinarySubclass) == ["blob: Blob"]
    assert content_columns(WithMessage) == ["last_message: content name"]


@isolate_apps("citations")
def test_the_scanner_passes_a_metadata_only_model() -> None:
    class Metadata(Throwaway):
        message_id = models.UUIDField()  # ends with _id: a reference, not content
        label = models.CharField(max_length=200)
        score = models.FloatField(null=True)
        seen_at = models.DateTimeField()

    assert content_columns(Metadata) == []


@pytest.mark.django_db
def test_the_table_scanner_flags_a_content_column_added_behind_the_orms_back() -> None:
    # DDL is transactional on PostgreSQL and SQLite: the test's rollback removes the column.
    with connection.cursor() as cursor:
        cursor.execute("ALTER TABLE citation_ledger_entry ADD COLUMN notes_body varchar(10)")
        cursor.execute("ALTER TABLE citation_ledger_entry ADD COLUMN annotations text")

    assert sorted(content_columns_in_table("citation_ledger_entry")) == [
        "annotations: TextField",
        "notes_body: content name",
    ]


@pytest.mark.parametrize(
    ("column", "is_content"),
    [
        ("content", True),
        ("raw_payload", True),
        ("tool_args", True),
        ("fulltext", True),
        ("message_id", False),
        ("message_citation_id", False),
        ("verification_status", False),
        ("provider", False),
        ("treatment_id", False),
    ],
)
def test_content_names(column: str, is_content: bool) -> None:
    assert has_content_name(column) is is_content
