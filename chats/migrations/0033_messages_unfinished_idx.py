"""A partial index on the unfinished answers (``pending``, ``streaming``), (updated_at, id):
``manage.py end_stopped_turns``' read of the turns whose run is dead, a few rows among every message.

As in 0003 and 0024, it is built CONCURRENTLY on PostgreSQL (the migration is not atomic), so that adding it to
a large ``messages`` table does not block the turns being written; elsewhere it is a plain CREATE INDEX.
"""

import importlib

from django.db import migrations, models
from django.db.models import Q

# 0003's choice of CONCURRENTLY by database.
_concurrently = importlib.import_module("chats.migrations.0003_messages_created_idx")._concurrently

INDEX = models.Index(
    fields=["updated_at", "id"],
    name="messages_unfinished_idx",
    condition=Q(status__in=["pending", "streaming"]),
)


def create_index(apps, schema_editor):
    schema_editor.add_index(apps.get_model("chats", "Message"), INDEX, **_concurrently(schema_editor))


def drop_index(apps, schema_editor):
    schema_editor.remove_index(apps.get_model("chats", "Message"), INDEX, **_concurrently(schema_editor))


class Migration(migrations.Migration):
    atomic = False

    dependencies = [("chats", "0032_turn_rows_added_only_by_their_finalize")]

    operations = [
        migrations.SeparateDatabaseAndState(
            state_operations=[migrations.AddIndex(model_name="message", index=INDEX)],
            database_operations=[migrations.RunPython(create_index, drop_index, elidable=False)],
        ),
    ]
