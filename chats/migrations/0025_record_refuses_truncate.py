"""TRUNCATE of the permanent record is refused below the application (PostgreSQL).

The row triggers of 0014 never fire on ``TRUNCATE``, which empties a table at once: ``manage.py flush`` or a
stray ``TRUNCATE messages CASCADE`` would erase every turn. A statement trigger ``BEFORE TRUNCATE`` on each
table of a turn's record refuses it (rule ``lqai_append_only``, SQLSTATE 23001, so ``IntegrityError``)
unless the session has set ``lqai.allow_truncate`` to ``on``: the test suite's and the benchmarks'
throwaway databases do (``lqai.settings_test``); a deployment never needs to (a matter leaves through
``manage.py purge_matter``). A ``TRUNCATE ... CASCADE`` fires the trigger of every table it reaches, so one
of projects, chats, documents or opinions that would reach a turn's rows is refused too.
``citations.0016`` guards the ledger, the seals and the tombstones with the same function.
"""

import importlib

from django.db import migrations

PostgresOnlyRunSQL = importlib.import_module("chats.migrations.0007_cited_text_immutable").PostgresOnlyRunSQL

REFUSE_TRUNCATE_FUNCTION = """
CREATE FUNCTION lqai_refuse_truncate() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    IF COALESCE(current_setting('lqai.allow_truncate', true), '') = 'on' THEN
        RETURN NULL;
    END IF;
    RAISE EXCEPTION 'lqai_append_only: % cannot be truncated (only a matter purge removes a matter''s record)', TG_TABLE_NAME
        USING ERRCODE = 'restrict_violation', HINT = 'Run manage.py purge_matter to remove a whole matter.';
END
$$
"""
TABLES = ("messages", "message_citations", "message_caselaw_citations", "message_case_citations", "message_tool_sources")


class Migration(migrations.Migration):
    dependencies = [("chats", "0024_messages_finalized_idx")]

    operations = [
        PostgresOnlyRunSQL(
            sql=[
                REFUSE_TRUNCATE_FUNCTION,
                *(
                    f"CREATE TRIGGER {table}_no_truncate BEFORE TRUNCATE ON {table} "
                    "FOR EACH STATEMENT EXECUTE FUNCTION lqai_refuse_truncate()"
                    for table in TABLES
                ),
            ],
            reverse_sql=[
                *(f"DROP TRIGGER IF EXISTS {table}_no_truncate ON {table}" for table in TABLES),
                "DROP FUNCTION IF EXISTS lqai_refuse_truncate()",
            ],
        ),
    ]
