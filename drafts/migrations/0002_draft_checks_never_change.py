"""A draft check is written once, with its turn, and never changes (both databases).

Its findings are what the turn's page and the API show of the check; the turn itself is sealed. A ``BEFORE UPDATE``
trigger refuses any change (rule ``lqai_append_only``, so ``IntegrityError``). Deleting goes with its turn: the
messages' own triggers allow that only to a matter's purge.
"""

import importlib

from django.db import migrations
from django.db.backends.base.schema import BaseDatabaseSchemaEditor
from django.db.migrations.state import StateApps

PostgresOnlyRunSQL = importlib.import_module("chats.migrations.0007_cited_text_immutable").PostgresOnlyRunSQL

SQLITE = """
CREATE TRIGGER draft_checks_never_change BEFORE UPDATE ON draft_checks
BEGIN
    SELECT RAISE(ABORT, 'lqai_append_only: a draft check cannot change');
END
"""
SQLITE_REVERSE = "DROP TRIGGER IF EXISTS draft_checks_never_change"
POSTGRES = [
    """
CREATE FUNCTION lqai_draft_checks_never_change() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    RAISE EXCEPTION 'lqai_append_only: draft check % cannot change', OLD.id USING ERRCODE = 'restrict_violation';
END
$$
""",
    """
CREATE TRIGGER draft_checks_never_change BEFORE UPDATE ON draft_checks
    FOR EACH ROW EXECUTE FUNCTION lqai_draft_checks_never_change()
""",
]
POSTGRES_REVERSE = [
    "DROP TRIGGER IF EXISTS draft_checks_never_change ON draft_checks",
    "DROP FUNCTION IF EXISTS lqai_draft_checks_never_change()",
]


def forwards(apps: StateApps, schema_editor: BaseDatabaseSchemaEditor) -> None:
    if schema_editor.connection.vendor == "sqlite":
        schema_editor.execute(SQLITE, params=None)


def backwards(apps: StateApps, schema_editor: BaseDatabaseSchemaEditor) -> None:
    if schema_editor.connection.vendor == "sqlite":
        schema_editor.execute(SQLITE_REVERSE, params=None)


class Migration(migrations.Migration):
    dependencies = [("drafts", "0001_initial")]

    operations = [
        migrations.RunPython(forwards, backwards, elidable=False),
        PostgresOnlyRunSQL(sql=POSTGRES, reverse_sql=POSTGRES_REVERSE),
    ]
