"""A matter's word counts are kept once per batch of documents, not once per document.

``documents.terms_counted`` says whether a document's passages are in its matter's word counts
(``matter_terms``); ``chats.passages.count_terms`` counts the words of every document added since it last ran
in one statement, so that documents added in one transaction no longer update the same count rows one after
another. Every document whose passages are made was counted by the code before this migration, so it starts
counted. The partial index of the documents retrieval must still prepare now holds those not counted too.
SQLite rebuilds ``documents`` to add the column, dropping its trigger: ``0030``'s is made again.
"""

import importlib

from django.db import migrations, models
from django.db.backends.base.schema import BaseDatabaseSchemaEditor
from django.db.migrations.state import StateApps

MARK_COUNTED = "UPDATE documents SET terms_counted = true WHERE passages_sha256 <> ''"
# 0030's triggers, by database.
_STALE_TRIGGERS = importlib.import_module("chats.migrations.0030_document_passages_follow_their_matter").FORWARDS


def restore_sqlite_trigger(apps: StateApps, schema_editor: BaseDatabaseSchemaEditor) -> None:
    if schema_editor.connection.vendor == "sqlite":
        for statement in _STALE_TRIGGERS["sqlite"]:
            schema_editor.execute(statement, params=None)


class Migration(migrations.Migration):
    dependencies = [("chats", "0036_messages_permanent_on_sqlite")]

    operations = [
        # Backwards, after the column is dropped (another rebuild).
        migrations.RunPython(migrations.RunPython.noop, restore_sqlite_trigger, elidable=False),
        migrations.AddField(
            model_name="document",
            name="terms_counted",
            field=models.BooleanField(db_default=False, default=False, editable=False),
        ),
        migrations.RunPython(restore_sqlite_trigger, migrations.RunPython.noop, elidable=False),
        migrations.RunSQL(MARK_COUNTED, migrations.RunSQL.noop, elidable=False),
        migrations.RemoveIndex(model_name="document", name="documents_passages_missing_idx"),
        migrations.AddIndex(
            model_name="document",
            index=models.Index(
                condition=models.Q(("passages_sha256", ""), ("terms_counted", False), _connector="OR"),
                fields=["project"],
                name="documents_passages_pending_idx",
            ),
        ),
    ]
