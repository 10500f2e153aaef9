"""A finalized message's rewrite is refused below the application on SQLite too.

PostgreSQL's ``messages_permanent_record`` trigger (``0014``) refuses rewriting a finalized message; on SQLite
only the model layer did, by reading the row again before every ``Message.save()``. A ``BEFORE UPDATE``
trigger now holds the same rule there: it asks ``lqai_message_refusal(old, new)`` (registered on each
connection by ``chats.record.register_sqlite_record_functions``, the rule ``chats.record.message_change_refusal``
states) about a finalized row only (a turn's run updates its message freely until it is finalized), and raises
its constant text (SQLite's ``RAISE``); the model layer names the message and the reason.
As with ``0032``'s triggers, a later migration that makes SQLite rebuild ``messages`` must create it again.
"""

from django.db import migrations
from django.db.backends.base.schema import BaseDatabaseSchemaEditor
from django.db.migrations.state import StateApps

# The columns the rule reads (chats.record.FINAL_FIELDS, and the id it names).
COLUMNS = (
    "id",
    "chat_id",
    "role",
    "content",
    "status",
    "verdict",
    "author_id",
    "reply_to_id",
    "finalized_at",
    "attempt",
    "model_name",
    "prompt_tokens",
    "completion_tokens",
    "latency_ms",
)


def _row(prefix: str) -> str:
    return "json_object(" + ", ".join(f"'{column}', {prefix}.{column}" for column in COLUMNS) + ")"


SQLITE = f"""
CREATE TRIGGER messages_permanent_record BEFORE UPDATE ON messages
    FOR EACH ROW WHEN (OLD.finalized_at IS NOT NULL OR OLD.status IN ('complete', 'failed'))
        AND lqai_message_refusal({_row("OLD")}, {_row("NEW")}) IS NOT NULL
BEGIN
    SELECT RAISE(ABORT, 'lqai_append_only: a finalized message cannot be rewritten');
END
"""
SQLITE_REVERSE = "DROP TRIGGER IF EXISTS messages_permanent_record"


def forwards(apps: StateApps, schema_editor: BaseDatabaseSchemaEditor) -> None:
    if schema_editor.connection.vendor == "sqlite":
        schema_editor.execute(SQLITE, params=None)


def backwards(apps: StateApps, schema_editor: BaseDatabaseSchemaEditor) -> None:
    if schema_editor.connection.vendor == "sqlite":
        schema_editor.execute(SQLITE_REVERSE, params=None)


class Migration(migrations.Migration):
    dependencies = [("chats", "0035_opinion_pages_reread")]

    operations = [migrations.RunPython(forwards, backwards, elidable=False)]
