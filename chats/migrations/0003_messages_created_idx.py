"""An index on messages (created_at, id): the ledger backfill's keyset walk in creation order.

On PostgreSQL it is built CONCURRENTLY (the migration is not atomic), so that adding it to a large
``messages`` table does not block writes; elsewhere it is a plain CREATE INDEX.
"""

from django.db import migrations, models

INDEX = models.Index(fields=["created_at", "id"], name="messages_created_idx")


def _concurrently(schema_editor):
    return {"concurrently": True} if schema_editor.connection.vendor == "postgresql" else {}


def create_index(apps, schema_editor):
    schema_editor.add_index(apps.get_model("chats", "Message"), INDEX, **_concurrently(schema_editor))


def drop_index(apps, schema_editor):
    schema_editor.remove_index(apps.get_model("chats", "Message"), INDEX, **_concurrently(schema_editor))


class Migration(migrations.Migration):
    atomic = False

    dependencies = [("chats", "0002_caselaw_opinions_fts_index")]

    operations = [
        migrations.SeparateDatabaseAndState(
            state_operations=[migrations.AddIndex(model_name="message", index=INDEX)],
            database_operations=[migrations.RunPython(create_index, drop_index, elidable=False)],
        ),
    ]
