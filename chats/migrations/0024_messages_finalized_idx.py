"""A partial index on the finalized answers, (finalized_at, id): ``manage.py seal_turns``' keyset walk in
finalize order.

As in 0003, it is built CONCURRENTLY on PostgreSQL (the migration is not atomic), so that adding it to a large
``messages`` table does not block the turns being written; elsewhere it is a plain CREATE INDEX.
"""

import importlib

from django.db import migrations, models
from django.db.models import Q

# 0003's choice of CONCURRENTLY by database.
_concurrently = importlib.import_module("chats.migrations.0003_messages_created_idx")._concurrently

INDEX = models.Index(
    fields=["finalized_at", "id"],
    name="messages_finalized_idx",
    condition=Q(role="assistant", finalized_at__isnull=False),
)


def create_index(apps, schema_editor):
    schema_editor.add_index(apps.get_model("chats", "Message"), INDEX, **_concurrently(schema_editor))


def drop_index(apps, schema_editor):
    schema_editor.remove_index(apps.get_model("chats", "Message"), INDEX, **_concurrently(schema_editor))


class Migration(migrations.Migration):
    atomic = False

    dependencies = [("chats", "0023_rename_quote_and_case_citation_models")]

    operations = [
        migrations.SeparateDatabaseAndState(
            state_operations=[migrations.AddIndex(model_name="message", index=INDEX)],
            database_operations=[migrations.RunPython(create_index, drop_index, elidable=False)],
        ),
    ]
