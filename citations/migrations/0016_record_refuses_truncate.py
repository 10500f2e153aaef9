"""TRUNCATE of the ledger, the seals and the tombstones is refused below the application (PostgreSQL), as
``chats.0025`` refuses it for a turn's rows, with its function ``lqai_refuse_truncate()``: unless the
session has set ``lqai.allow_truncate`` to ``on`` (the throwaway databases of ``lqai.settings_test``).

A statement trigger on a partitioned table is not cloned onto its partitions (row triggers are), and a
partition can be truncated on its own: each partition of the ledger gets the trigger too, the months kept
detached by ``ledger_partitions --drop-before --keep-detached`` included, and ``citations.partitions`` gives
it to every month it creates or detaches from now on.
"""

import importlib

from django.db import migrations

PostgresOnlyRunSQL = importlib.import_module("chats.migrations.0007_cited_text_immutable").PostgresOnlyRunSQL

TABLES = ("citation_ledger_entry", "turn_seals", "seal_chain_heads", "matter_purges", "ledger_partition_drops")
# The ledger's partitions and its detached months still kept, each given (or rid of) the trigger.
EACH_MONTH = """
DO $$
DECLARE
    month text;
BEGIN
    FOR month IN
        SELECT c.relname::text FROM pg_inherits i JOIN pg_class c ON c.oid = i.inhrelid
         WHERE i.inhparent = 'citation_ledger_entry'::regclass
        UNION
        SELECT partition FROM ledger_partition_drops
         WHERE disposal = 'detached' AND to_regclass(partition) IS NOT NULL
    LOOP
        EXECUTE format('%s', month);
    END LOOP;
END
$$
"""
CREATE = (
    "CREATE TRIGGER citation_ledger_entry_no_truncate BEFORE TRUNCATE ON %I "
    "FOR EACH STATEMENT EXECUTE FUNCTION lqai_refuse_truncate()"
)
DROP = "DROP TRIGGER IF EXISTS citation_ledger_entry_no_truncate ON %I"


class Migration(migrations.Migration):
    dependencies = [("citations", "0015_turn_seals_one_index_by_message"), ("chats", "0025_record_refuses_truncate")]

    operations = [
        PostgresOnlyRunSQL(
            sql=[
                *(
                    f"CREATE TRIGGER {table}_no_truncate BEFORE TRUNCATE ON {table} "
                    "FOR EACH STATEMENT EXECUTE FUNCTION lqai_refuse_truncate()"
                    for table in TABLES
                ),
                EACH_MONTH % CREATE,
            ],
            reverse_sql=[
                EACH_MONTH % DROP,
                *(f"DROP TRIGGER IF EXISTS {table}_no_truncate ON {table}" for table in TABLES),
            ],
        ),
    ]
