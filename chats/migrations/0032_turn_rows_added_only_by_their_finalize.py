"""A turn's rows are added only by the transaction that finalizes it, below the application (both databases).

A ``BEFORE INSERT`` trigger on each per-turn table refuses a row for a message whose ``finalized_at`` was
written by another, earlier transaction (rule ``lqai_append_only``, so ``IntegrityError``; the model layer
re-raises it as ``chats.record.AppendOnlyError`` naming the message). Still allowed: a row of a message not
finalized yet, the rows of a finalize (it writes ``finalized_at``, then its rows, in one transaction), those
of a resumed turn's next finalize, and what a test or the demo builds in one transaction.

How the finalizing transaction is known: on PostgreSQL a trigger stamps ``messages.finalized_xact`` with
``pg_current_xact_id()`` whenever ``finalized_at`` is written; on SQLite, which has no transaction id in SQL,
functions registered on each connection (``chats.record.register_sqlite_record_functions``) keep the pairs
(message, ``finalized_at``) the open transaction wrote. SQLite rebuilds a table to alter it, dropping its
triggers: a later migration altering these tables or ``messages`` on SQLite restores them (``SQLITE``, below).
The whole design: docs/security.md, "Which transaction finalized a message".
"""

from django.db import migrations
from django.db.backends.base.schema import BaseDatabaseSchemaEditor
from django.db.migrations.state import StateApps

TURN_TABLES = ("message_citations", "message_caselaw_citations", "message_case_citations", "message_tool_sources")

POSTGRES_STAMP_FUNCTION = """
CREATE FUNCTION messages_stamp_finalizing_transaction() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    IF NEW.finalized_at IS NULL THEN
        NEW.finalized_xact := NULL;
    ELSIF TG_OP = 'INSERT' OR NEW.finalized_at IS DISTINCT FROM OLD.finalized_at THEN
        NEW.finalized_xact := pg_current_xact_id();
    ELSE
        NEW.finalized_xact := OLD.finalized_xact;
    END IF;
    RETURN NEW;
END
$$
"""
POSTGRES_GUARD_FUNCTION = """
CREATE FUNCTION lqai_turn_row_added_by_its_finalize() RETURNS trigger LANGUAGE plpgsql AS $$
DECLARE
    finalized timestamptz;
    finalizing xid8;
BEGIN
    SELECT m.finalized_at, m.finalized_xact INTO finalized, finalizing
        FROM messages m WHERE m.id = NEW.message_id FOR SHARE;
    IF finalized IS NULL OR finalizing = pg_current_xact_id() THEN
        RETURN NEW;
    END IF;
    RAISE EXCEPTION 'lqai_append_only: % rows cannot be added to message %: it was finalized in an earlier transaction', TG_TABLE_NAME, NEW.message_id
        USING ERRCODE = 'restrict_violation',
              HINT = 'A turn''s rows are written by the transaction that finalizes it (chats.services.finalize_turn).';
END
$$
"""
POSTGRES = [
    "ALTER TABLE messages ADD COLUMN finalized_xact xid8",
    "COMMENT ON COLUMN messages.finalized_xact IS 'The transaction that wrote finalized_at (set by trigger "
    "messages_finalizing_transaction; chats.0032)'",
    POSTGRES_STAMP_FUNCTION,
    """
CREATE TRIGGER messages_finalizing_transaction BEFORE INSERT OR UPDATE ON messages
    FOR EACH ROW EXECUTE FUNCTION messages_stamp_finalizing_transaction()
""",
    POSTGRES_GUARD_FUNCTION,
    *(
        f"CREATE TRIGGER {table}_added_by_its_finalize BEFORE INSERT ON {table} "
        "FOR EACH ROW EXECUTE FUNCTION lqai_turn_row_added_by_its_finalize()"
        for table in TURN_TABLES
    ),
]
POSTGRES_REVERSE = [
    *(f"DROP TRIGGER IF EXISTS {table}_added_by_its_finalize ON {table}" for table in TURN_TABLES),
    "DROP FUNCTION IF EXISTS lqai_turn_row_added_by_its_finalize()",
    "DROP TRIGGER IF EXISTS messages_finalizing_transaction ON messages",
    "DROP FUNCTION IF EXISTS messages_stamp_finalizing_transaction()",
    "ALTER TABLE messages DROP COLUMN IF EXISTS finalized_xact",
]

SQLITE_GUARD_TRIGGER = """
CREATE TRIGGER {table}_added_by_its_finalize BEFORE INSERT ON {table}
    FOR EACH ROW WHEN EXISTS (
        SELECT 1 FROM messages m
        WHERE m.id = NEW.message_id AND m.finalized_at IS NOT NULL AND NOT lqai_finalized_here(m.id, m.finalized_at)
    )
BEGIN
    SELECT RAISE(ABORT, 'lqai_append_only: {table} rows cannot be added to a message finalized in an earlier transaction');
END
"""
SQLITE = [
    """
CREATE TRIGGER messages_finalizing_transaction_insert AFTER INSERT ON messages
    FOR EACH ROW WHEN NEW.finalized_at IS NOT NULL
BEGIN
    SELECT lqai_note_finalized(NEW.id, NEW.finalized_at);
END
""",
    """
CREATE TRIGGER messages_finalizing_transaction_update AFTER UPDATE OF finalized_at ON messages
    FOR EACH ROW WHEN NEW.finalized_at IS NOT NULL AND NEW.finalized_at IS NOT OLD.finalized_at
BEGIN
    SELECT lqai_note_finalized(NEW.id, NEW.finalized_at);
END
""",
    *(SQLITE_GUARD_TRIGGER.format(table=table) for table in TURN_TABLES),
]
SQLITE_REVERSE = [
    *(f"DROP TRIGGER IF EXISTS {table}_added_by_its_finalize" for table in TURN_TABLES),
    "DROP TRIGGER IF EXISTS messages_finalizing_transaction_update",
    "DROP TRIGGER IF EXISTS messages_finalizing_transaction_insert",
]


def forwards(apps: StateApps, schema_editor: BaseDatabaseSchemaEditor) -> None:
    vendor = schema_editor.connection.vendor
    for statement in POSTGRES if vendor == "postgresql" else SQLITE if vendor == "sqlite" else []:
        schema_editor.execute(statement, params=None)


def backwards(apps: StateApps, schema_editor: BaseDatabaseSchemaEditor) -> None:
    vendor = schema_editor.connection.vendor
    for statement in POSTGRES_REVERSE if vendor == "postgresql" else SQLITE_REVERSE if vendor == "sqlite" else []:
        schema_editor.execute(statement, params=None)


class Migration(migrations.Migration):
    dependencies = [("chats", "0031_cited_source_fixed")]

    operations = [migrations.RunPython(forwards, backwards, elidable=False)]
