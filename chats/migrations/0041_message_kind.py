"""A turn's kind: ``answer`` (every turn before it) or ``draft`` (a lawyer's draft checked, ``drafts``).

The CHECK holds the two kinds; a trigger on both databases refuses changing a message's kind once written (a
checked draft must never be shown as an assistant's answer, nor the reverse). SQLite rebuilds ``messages`` to add
the column and its CHECK: the triggers of ``0032`` and ``0036`` that name it are dropped first and written again
after, as ``0034`` does.
"""

import importlib

from django.conf import settings
from django.db import migrations, models
from django.db.backends.base.schema import BaseDatabaseSchemaEditor
from django.db.migrations.state import StateApps

PostgresOnlyRunSQL = importlib.import_module("chats.migrations.0007_cited_text_immutable").PostgresOnlyRunSQL
TURN_ROWS_GUARD = importlib.import_module("chats.migrations.0032_turn_rows_added_only_by_their_finalize")
MESSAGES_PERMANENT = importlib.import_module("chats.migrations.0036_messages_permanent_on_sqlite")

SQLITE_KIND_FIXED = """
CREATE TRIGGER messages_kind_fixed BEFORE UPDATE OF kind ON messages
    FOR EACH ROW WHEN NEW.kind IS NOT OLD.kind
BEGIN
    SELECT RAISE(ABORT, 'lqai_append_only: a message''s kind cannot change');
END
"""
POSTGRES_KIND_FIXED = [
    """
CREATE FUNCTION lqai_messages_kind_fixed() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    RAISE EXCEPTION 'lqai_append_only: message %: its kind (%) cannot change', OLD.id, OLD.kind
        USING ERRCODE = 'restrict_violation';
END
$$
""",
    """
CREATE TRIGGER messages_kind_fixed BEFORE UPDATE OF kind ON messages
    FOR EACH ROW WHEN (NEW.kind IS DISTINCT FROM OLD.kind) EXECUTE FUNCTION lqai_messages_kind_fixed()
""",
]
POSTGRES_KIND_FIXED_REVERSE = [
    "DROP TRIGGER IF EXISTS messages_kind_fixed ON messages",
    "DROP FUNCTION IF EXISTS lqai_messages_kind_fixed()",
]


def _sqlite(statements: list[str]):  # type: ignore[no-untyped-def]
    def run(apps: StateApps, schema_editor: BaseDatabaseSchemaEditor) -> None:
        if schema_editor.connection.vendor == "sqlite":
            for statement in statements:
                schema_editor.execute(statement, params=None)

    return run


_OFF = [*TURN_ROWS_GUARD.SQLITE_REVERSE, MESSAGES_PERMANENT.SQLITE_REVERSE]
_ON = [*TURN_ROWS_GUARD.SQLITE, MESSAGES_PERMANENT.SQLITE]


class Migration(migrations.Migration):

    dependencies = [
        ('chats', '0040_project_member_roles'),
        migrations.swappable_dependency(settings.AUTH_USER_MODEL),
    ]

    operations = [
        migrations.RunPython(_sqlite(_OFF), _sqlite(_ON), elidable=False),
        migrations.AddField(
            model_name='message',
            name='kind',
            field=models.CharField(choices=[('answer', 'Answer'), ('draft', 'Draft')], db_default='answer', default='answer', max_length=16),
        ),
        migrations.AddConstraint(
            model_name='message',
            constraint=models.CheckConstraint(condition=models.Q(('kind__in', ['answer', 'draft'])), name='messages_kind_valid', violation_error_message="Kind must be 'answer' or 'draft'."),
        ),
        migrations.RunPython(_sqlite([*_ON, SQLITE_KIND_FIXED]), _sqlite(["DROP TRIGGER IF EXISTS messages_kind_fixed", *_OFF]), elidable=False),
        PostgresOnlyRunSQL(sql=POSTGRES_KIND_FIXED, reverse_sql=POSTGRES_KIND_FIXED_REVERSE),
    ]
