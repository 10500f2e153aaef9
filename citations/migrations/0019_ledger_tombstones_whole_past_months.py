"""A ledger tombstone is what ``ledger_partitions --drop-before`` writes (PostgreSQL).

A row of ``ledger_partition_drops`` silences the ledger over its range, and stays once written. A trigger
therefore refuses an INSERT unless the row is the tombstone ``citations.partitions.drop_months_before``
writes, in the transaction that detaches the month, before it does: ``range_start`` and ``range_end`` bound
one whole UTC month, before the current one, and ``partition`` names a partition attached to
``citation_ledger_entry`` with exactly those bounds.

Refused under rule ``lqai_ledger_tombstone``, SQLSTATE 23001 (``restrict_violation``), so ``IntegrityError``,
as the other triggers of the record. ``citations.models.LedgerPartitionDrop.save()`` refuses the same range
with the same message on every database (the partition check is PostgreSQL's only).
"""

import importlib

from django.db import migrations

PostgresOnlyRunSQL = importlib.import_module("chats.migrations.0007_cited_text_immutable").PostgresOnlyRunSQL

FUNCTION = """
CREATE FUNCTION ledger_partition_drops_whole_past_month() RETURNS trigger LANGUAGE plpgsql AS $$
DECLARE
    month_start timestamptz := date_trunc('month', NEW.range_start AT TIME ZONE 'UTC') AT TIME ZONE 'UTC';
    current_month timestamptz := date_trunc('month', now() AT TIME ZONE 'UTC') AT TIME ZONE 'UTC';
    bounds text[];
BEGIN
    IF NEW.range_start <> month_start
       OR NEW.range_end <> (date_trunc('month', NEW.range_start AT TIME ZONE 'UTC') + interval '1 month') AT TIME ZONE 'UTC'
       OR NEW.range_end > current_month THEN
        RAISE EXCEPTION 'lqai_ledger_tombstone: a ledger_partition_drops row covers one whole past month (UTC), not [%, %)',
            NEW.range_start, NEW.range_end
            USING ERRCODE = 'restrict_violation',
                  HINT = 'Only manage.py ledger_partitions --drop-before writes a tombstone, for a month before this one.';
    END IF;
    SELECT regexp_match(pg_get_expr(c.relpartbound, c.oid), 'FROM \\(''([^'']+)''\\) TO \\(''([^'']+)''\\)')
        INTO bounds
        FROM pg_inherits i JOIN pg_class c ON c.oid = i.inhrelid
        WHERE i.inhparent = to_regclass('citation_ledger_entry') AND c.relname = NEW.partition;
    IF bounds IS NULL OR bounds[1]::timestamptz <> NEW.range_start OR bounds[2]::timestamptz <> NEW.range_end THEN
        RAISE EXCEPTION 'lqai_ledger_tombstone: a ledger_partition_drops row names the attached partition of its month; % is not attached to citation_ledger_entry for [%, %)',
            NEW.partition, NEW.range_start, NEW.range_end
            USING ERRCODE = 'restrict_violation',
                  HINT = 'Only manage.py ledger_partitions --drop-before writes a tombstone, before it detaches the month.';
    END IF;
    RETURN NEW;
END
$$
"""
TRIGGER = """
CREATE TRIGGER ledger_partition_drops_whole_past_month BEFORE INSERT ON ledger_partition_drops
    FOR EACH ROW EXECUTE FUNCTION ledger_partition_drops_whole_past_month()
"""


class Migration(migrations.Migration):
    dependencies = [("citations", "0018_seal_chain_heads_kept")]

    operations = [
        PostgresOnlyRunSQL(
            sql=[FUNCTION, TRIGGER],
            reverse_sql=[
                "DROP TRIGGER IF EXISTS ledger_partition_drops_whole_past_month ON ledger_partition_drops",
                "DROP FUNCTION IF EXISTS ledger_partition_drops_whole_past_month()",
            ],
        ),
    ]
