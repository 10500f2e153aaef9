"""The ledger partitioned by month on PostgreSQL, and the tombstone of a dropped month.

On PostgreSQL, ``citation_ledger_entry`` is rebuilt as ``PARTITION BY RANGE (created_at)``: one partition per
calendar month (UTC) from its oldest entry's month to ``AHEAD`` months after this one, and a ``DEFAULT``
partition, so that an insert never fails for want of one. The old table's CHECK constraints, keys (unique keys
with ``created_at`` added, as PostgreSQL requires), indexes, foreign keys and row triggers are carried over
under the same names; a ``BEFORE INSERT`` trigger (``citation_ledger_entry_one_per_source``) keeps one entry
per source row across partitions; the append-only trigger lets ``citations.partitions`` move rows out of the
default partition (``lqai.ledger_move``). The rows are copied in one statement and counted, with the old
table locked; reversible. On SQLite the ledger stays a plain table; the tombstone table is created everywhere.
What is carried over and why: docs/scale.md.
"""

import datetime
import importlib

import django.utils.timezone
import uuid
from django.db import migrations, models

PostgresOnlyRunSQL = importlib.import_module("chats.migrations.0007_cited_text_immutable").PostgresOnlyRunSQL

LEDGER = "citation_ledger_entry"
REPLACED = "citation_ledger_entry_replaced"
DEFAULT_PARTITION = "citation_ledger_entry_default"
# Months created ahead of the current one (the cron job keeps creating more; docs/operations.md).
AHEAD = 3


def month_partition(month: datetime.date) -> str:
    """The partition holding ``month``'s entries (as ``citations.partitions.partition_name``)."""
    return f"{LEDGER}_y{month.year:04d}m{month.month:02d}"


def _next_month(month: datetime.date) -> datetime.date:
    return datetime.date(month.year + month.month // 12, month.month % 12 + 1, 1)


def _bound(month: datetime.date) -> str:
    return f"'{month.isoformat()} 00:00:00+00'"


# A partition's indexes, each with the ledger's index it belongs to (as citations.partitions).
PARTITION_INDEXES_SQL = """
SELECT child.relname, parent.relname
FROM pg_inherits i
JOIN pg_class child ON child.oid = i.inhrelid
JOIN pg_class parent ON parent.oid = i.inhparent
JOIN pg_index x ON x.indexrelid = child.oid
WHERE parent.relkind = 'I' AND x.indrelid = %s::regclass
"""


def _name_partition_indexes(schema_editor, cursor, partition):
    """Each of the partition's indexes named after the ledger's: ``<index>_<month or default>``."""
    suffix = partition[len(LEDGER) + 1:]
    cursor.execute(PARTITION_INDEXES_SQL, [partition])
    for child, parent in cursor.fetchall():
        if child != f"{parent}_{suffix}":
            schema_editor.execute(f"ALTER INDEX {child} RENAME TO {parent}_{suffix}")


def _catalog(cursor, table):
    """What to carry over from ``table``: its primary and unique keys (name, columns), foreign keys, plain
    indexes and triggers (name, definition)."""
    cursor.execute(
        """
        SELECT c.conname, c.contype, pg_get_constraintdef(c.oid),
               ARRAY(SELECT a.attname FROM unnest(c.conkey) WITH ORDINALITY AS k(attnum, i)
                     JOIN pg_attribute a ON a.attrelid = c.conrelid AND a.attnum = k.attnum ORDER BY k.i)
        FROM pg_constraint c WHERE c.conrelid = %s::regclass AND c.contype IN ('p', 'u', 'f') ORDER BY c.conname
        """,
        [table],
    )
    constraints = cursor.fetchall()
    cursor.execute(
        """
        SELECT i.relname, pg_get_indexdef(x.indexrelid)
        FROM pg_index x JOIN pg_class i ON i.oid = x.indexrelid
        WHERE x.indrelid = %s::regclass
          AND NOT EXISTS (SELECT 1 FROM pg_constraint c WHERE c.conindid = x.indexrelid AND c.conrelid = x.indrelid)
        ORDER BY i.relname
        """,
        [table],
    )
    indexes = cursor.fetchall()
    cursor.execute(
        "SELECT tgname, pg_get_triggerdef(oid), (tgtype & 1) = 1 FROM pg_trigger "
        "WHERE tgrelid = %s::regclass AND NOT tgisinternal ORDER BY tgname",
        [table],
    )
    triggers = cursor.fetchall()
    return constraints, indexes, triggers


def _rebuild(schema_editor, *, partitioned: bool) -> None:
    """Rebuild the ledger as a partitioned table (or back as a plain one), rows, names and rules kept."""
    execute = schema_editor.execute
    with schema_editor.connection.cursor() as cursor:
        cursor.execute(
            "SELECT conrelid::regclass::text, conname FROM pg_constraint "
            "WHERE confrelid = %s::regclass AND conrelid <> confrelid",
            [LEDGER],
        )
        referencing = cursor.fetchall()
        if referencing:
            raise RuntimeError(
                f"citations.0014 not applied: {referencing} reference {LEDGER} by foreign key; a foreign key "
                "to a partitioned table must name a key that includes created_at. Change those first."
            )
        constraints, indexes, triggers = _catalog(cursor, LEDGER)
        statement_level = [name for name, _, row_level in triggers if not row_level]
        if statement_level:
            raise RuntimeError(
                f"citations.0014 not applied: statement-level triggers {statement_level} on {LEDGER} would not "
                "reach the partitions (PostgreSQL clones row triggers only)."
            )
        cursor.execute("SELECT count(*) FROM " + LEDGER)
        (rows,) = cursor.fetchone()
        months = []
        # An empty ledger (a new installation) gets the default partition only, until the nightly
        # `ledger_partitions --ahead` creates its months (and moves what the default partition took).
        if partitioned and rows:
            cursor.execute(
                f"SELECT CAST(date_trunc('month', min(created_at) AT TIME ZONE 'UTC') AS date), "
                f"CAST(date_trunc('month', max(created_at) AT TIME ZONE 'UTC') AS date) FROM {LEDGER}"
            )
            month, newest = cursor.fetchone()
            last = django.utils.timezone.now().date().replace(day=1)
            for _ in range(AHEAD):
                last = _next_month(last)
            while month <= max(last, newest):
                months.append(month)
                month = _next_month(month)

        # The old table keeps its rows under another name; its keys and indexes go, freeing their names.
        execute(f"ALTER TABLE {LEDGER} RENAME TO {REPLACED}")
        for name, kind, _, _ in constraints:
            if kind in ("p", "u"):
                execute(f"ALTER TABLE {REPLACED} DROP CONSTRAINT {name}")
        for name, _ in indexes:
            execute(f"DROP INDEX {name}")

        execute(
            f"CREATE TABLE {LEDGER} (LIKE {REPLACED} INCLUDING DEFAULTS INCLUDING CONSTRAINTS)"
            + (" PARTITION BY RANGE (created_at)" if partitioned else "")
        )
        if partitioned:
            execute(f"CREATE TABLE {DEFAULT_PARTITION} PARTITION OF {LEDGER} DEFAULT")
            for month in months:
                execute(
                    f"CREATE TABLE {month_partition(month)} PARTITION OF {LEDGER} "
                    f"FOR VALUES FROM ({_bound(month)}) TO ({_bound(_next_month(month))})"
                )
        # The rows first, the keys and indexes after (built once rather than row by row).
        cursor.execute(
            "SELECT string_agg(quote_ident(attname), ', ' ORDER BY attnum) FROM pg_attribute "
            "WHERE attrelid = %s::regclass AND attnum > 0 AND NOT attisdropped",
            [LEDGER],
        )
        (columns,) = cursor.fetchone()
        cursor.execute(f"INSERT INTO {LEDGER} ({columns}) SELECT {columns} FROM {REPLACED}")
        if cursor.rowcount != rows:
            raise RuntimeError(f"citations.0014: {cursor.rowcount} rows copied of {rows}")

        for name, kind, _, keys in constraints:
            if kind in ("p", "u"):
                keys = [key for key in keys if key != "created_at"] + (["created_at"] if partitioned else [])
                what = "PRIMARY KEY" if kind == "p" else "UNIQUE"
                execute(f"ALTER TABLE {LEDGER} ADD CONSTRAINT {name} {what} ({', '.join(keys)})")
        for _, definition in indexes:
            execute(definition.replace(" ON ONLY ", " ON "))
        if partitioned:
            for partition in [DEFAULT_PARTITION, *map(month_partition, months)]:
                _name_partition_indexes(schema_editor, cursor, partition)
        for name, kind, definition, _ in constraints:
            if kind == "f":
                execute(f"ALTER TABLE {LEDGER} ADD CONSTRAINT {name} {definition}")
        for _, definition, _ in triggers:
            execute(definition)
        execute(f"DROP TABLE {REPLACED}")
        cursor.execute(f"SELECT count(*) FROM {LEDGER}")
        (copied,) = cursor.fetchone()
        if copied != rows:
            raise RuntimeError(f"citations.0014: the rebuilt ledger holds {copied} rows, the old one {rows}")
    execute(f"ANALYZE {LEDGER}")


def partition_ledger(apps, schema_editor):
    if schema_editor.connection.vendor == "postgresql":
        _rebuild(schema_editor, partitioned=True)


def unpartition_ledger(apps, schema_editor):
    if schema_editor.connection.vendor == "postgresql":
        _rebuild(schema_editor, partitioned=False)


# citations.0006's function, with the one exception for rows moved out of the default partition.
LEDGER_FUNCTION = """
CREATE OR REPLACE FUNCTION citation_ledger_entry_append_only() RETURNS trigger LANGUAGE plpgsql AS $$
DECLARE
    candidate citation_ledger_entry%ROWTYPE;
    matter uuid;
BEGIN
    IF TG_OP = 'DELETE' THEN
        -- Moved into its month's new partition in this transaction, unchanged (citations.partitions).
        IF TG_TABLE_NAME = 'citation_ledger_entry_default' AND current_setting('lqai.ledger_move', true) = 'on' THEN
            RETURN OLD;
        END IF;
        SELECT c.project_id INTO matter FROM chats c WHERE c.id = OLD.chat_id;
        -- A chat already gone went in its own matter's purge (see chats.0014): the entry goes with it.
        IF lqai_purging(COALESCE(OLD.project_id, matter)) OR (NOT FOUND AND lqai_purge_in_progress()) THEN
            RETURN OLD;
        END IF;
        RAISE EXCEPTION 'lqai_append_only: citation_ledger_entry rows cannot be deleted (only a matter purge removes them)'
            USING ERRCODE = 'restrict_violation', HINT = 'Run manage.py purge_matter to remove a whole matter.';
    END IF;
    IF OLD.treatment_id IS NULL AND NEW.treatment_id IS NOT NULL THEN
        candidate := NEW;
        candidate.treatment_id := NULL;
        IF ROW(candidate.*) IS NOT DISTINCT FROM ROW(OLD.*) THEN
            RETURN NEW;
        END IF;
    END IF;
    RAISE EXCEPTION 'lqai_append_only: citation_ledger_entry rows cannot be updated (only treatment_id, once, from NULL)'
        USING ERRCODE = 'restrict_violation';
END
$$
"""
OLD_LEDGER_FUNCTION = importlib.import_module("citations.migrations.0006_permanent_record").LEDGER_FUNCTION.replace(
    "CREATE FUNCTION", "CREATE OR REPLACE FUNCTION", 1
)
# One entry per source row across partitions. Every writer stamps an entry with its row's created_at
# (citations.ledger), so two entries of one row at its time meet in one partition's unique index
# ((<source>, created_at)), where ON CONFLICT settles concurrent writers. The rest is an entry *not* at its
# row's time: those written before this migration (stamped with their write time) and any written by hand.
# Each such entry's row is listed in citation_ledger_off_time (filled here for the entries already there,
# then by this trigger), so the trigger refuses, from any client, as the single-column unique constraint did
# (SQLSTATE 23505, under its name): any entry of a listed row, and an entry not at its row's time for a row
# that has an entry. Probing every partition for a row's entries is costly, so only an entry not at its
# row's time does it; every other entry costs two primary-key lookups (its row, the list).
OFF_TIME_TABLE = """
CREATE TABLE citation_ledger_off_time (
    source_id uuid NOT NULL,
    source_column text NOT NULL,
    PRIMARY KEY (source_id, source_column)
)
"""
OFF_TIME_FILL = """
INSERT INTO citation_ledger_off_time (source_id, source_column)
SELECT e.{column}, '{column}' FROM citation_ledger_entry e JOIN {source} s ON s.id = e.{column}
WHERE e.created_at <> s.created_at
ON CONFLICT DO NOTHING
"""
ONE_PER_SOURCE_FUNCTION = """
CREATE FUNCTION citation_ledger_entry_one_per_source() RETURNS trigger LANGUAGE plpgsql AS $$
DECLARE
    row_id uuid;
    row_column text;
    row_time timestamptz;
    other uuid;
    rule text;
BEGIN
    IF NEW.message_citation_id IS NOT NULL THEN
        row_id := NEW.message_citation_id; row_column := 'message_citation_id';
        rule := 'citation_ledger_entry_message_citation_uniq';
        SELECT created_at INTO row_time FROM message_citations WHERE id = row_id;
    ELSIF NEW.message_caselaw_citation_id IS NOT NULL THEN
        row_id := NEW.message_caselaw_citation_id; row_column := 'message_caselaw_citation_id';
        rule := 'citation_ledger_entry_caselaw_citation_uniq';
        SELECT created_at INTO row_time FROM message_caselaw_citations WHERE id = row_id;
    ELSIF NEW.message_tool_source_id IS NOT NULL THEN
        row_id := NEW.message_tool_source_id; row_column := 'message_tool_source_id';
        rule := 'citation_ledger_entry_tool_source_uniq';
        SELECT created_at INTO row_time FROM message_tool_sources WHERE id = row_id;
    ELSIF NEW.message_case_citation_id IS NOT NULL THEN
        row_id := NEW.message_case_citation_id; row_column := 'message_case_citation_id';
        rule := 'citation_ledger_entry_case_citation_uniq';
        SELECT created_at INTO row_time FROM message_case_citations WHERE id = row_id;
    ELSE
        RETURN NEW;  -- no source: the exactly-one-source CHECK refuses it
    END IF;
    IF EXISTS (SELECT 1 FROM citation_ledger_off_time o WHERE o.source_id = row_id AND o.source_column = row_column) THEN
        RAISE EXCEPTION 'duplicate key value violates unique constraint "%"', rule
            USING ERRCODE = 'unique_violation', CONSTRAINT = rule, TABLE = 'citation_ledger_entry',
                  DETAIL = 'Its source row already has a ledger entry (not at the row''s time).';
    END IF;
    IF NEW.created_at = row_time THEN
        RETURN NEW;
    END IF;
    IF row_column = 'message_citation_id' THEN
        SELECT e.id INTO other FROM citation_ledger_entry e WHERE e.message_citation_id = row_id LIMIT 1;
    ELSIF row_column = 'message_caselaw_citation_id' THEN
        SELECT e.id INTO other FROM citation_ledger_entry e WHERE e.message_caselaw_citation_id = row_id LIMIT 1;
    ELSIF row_column = 'message_tool_source_id' THEN
        SELECT e.id INTO other FROM citation_ledger_entry e WHERE e.message_tool_source_id = row_id LIMIT 1;
    ELSE
        SELECT e.id INTO other FROM citation_ledger_entry e WHERE e.message_case_citation_id = row_id LIMIT 1;
    END IF;
    IF other IS NOT NULL THEN
        RAISE EXCEPTION 'duplicate key value violates unique constraint "%"', rule
            USING ERRCODE = 'unique_violation', CONSTRAINT = rule, TABLE = 'citation_ledger_entry',
                  DETAIL = format('Its source row already has ledger entry %s.', other);
    END IF;
    -- Listed: a later entry of the row is refused above. A concurrent one waits here, then fails.
    INSERT INTO citation_ledger_off_time (source_id, source_column) VALUES (row_id, row_column);
    RETURN NEW;
END
$$
"""
ONE_PER_SOURCE_TRIGGER = """
CREATE TRIGGER citation_ledger_entry_one_per_source BEFORE INSERT ON citation_ledger_entry
    FOR EACH ROW EXECUTE FUNCTION citation_ledger_entry_one_per_source()
"""
SOURCES = (
    ("message_citations", "message_citation_id"),
    ("message_caselaw_citations", "message_caselaw_citation_id"),
    ("message_tool_sources", "message_tool_source_id"),
    ("message_case_citations", "message_case_citation_id"),
)


def add_one_per_source_trigger(apps, schema_editor):
    if schema_editor.connection.vendor != "postgresql":
        return
    schema_editor.execute(OFF_TIME_TABLE)
    for source, column in SOURCES:
        schema_editor.execute(OFF_TIME_FILL.format(source=source, column=column))
    schema_editor.execute(ONE_PER_SOURCE_FUNCTION, params=None)
    schema_editor.execute(ONE_PER_SOURCE_TRIGGER)


def drop_one_per_source_trigger(apps, schema_editor):
    if schema_editor.connection.vendor == "postgresql":
        schema_editor.execute("DROP TRIGGER IF EXISTS citation_ledger_entry_one_per_source ON citation_ledger_entry")
        schema_editor.execute("DROP FUNCTION IF EXISTS citation_ledger_entry_one_per_source()")
        schema_editor.execute("DROP TABLE IF EXISTS citation_ledger_off_time")


TOMBSTONE_FUNCTION = """
CREATE FUNCTION ledger_partition_drops_append_only() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    RAISE EXCEPTION 'lqai_append_only: ledger_partition_drops rows cannot be %', CASE TG_OP WHEN 'DELETE' THEN 'deleted' ELSE 'updated' END
        USING ERRCODE = 'restrict_violation', HINT = 'A tombstone is the record that a month of the ledger was dropped.';
END
$$
"""
TOMBSTONE_TRIGGER = """
CREATE TRIGGER ledger_partition_drops_append_only BEFORE UPDATE OR DELETE ON ledger_partition_drops
    FOR EACH ROW EXECUTE FUNCTION ledger_partition_drops_append_only()
"""


class Migration(migrations.Migration):

    dependencies = [
        ('chats', '0023_rename_quote_and_case_citation_models'),
        ('citations', '0013_ledger_admin_indexes'),
    ]

    operations = [
        migrations.CreateModel(
            name='LedgerPartitionDrop',
            fields=[
                ('id', models.UUIDField(default=uuid.uuid4, editable=False, primary_key=True, serialize=False)),
                ('range_start', models.DateTimeField()),
                ('range_end', models.DateTimeField()),
                ('partition', models.CharField(max_length=63)),
                ('disposal', models.CharField(choices=[('dropped', 'dropped'), ('detached', 'detached')], max_length=16)),
                ('ledger_entries', models.PositiveBigIntegerField()),
                ('dropped_by', models.CharField(max_length=150)),
                ('dropped_at', models.DateTimeField(default=django.utils.timezone.now)),
            ],
            options={
                'db_table': 'ledger_partition_drops',
                'ordering': ['range_start'],
                'constraints': [
                    models.UniqueConstraint(fields=('range_start',), name='ledger_partition_drops_month_uniq', violation_error_message='This month of the ledger already has a tombstone.'),
                    models.CheckConstraint(condition=models.Q(('range_start__lt', models.F('range_end'))), name='ledger_partition_drops_range_ordered', violation_error_message='A dropped month starts before it ends.'),
                ],
            },
        ),
        PostgresOnlyRunSQL(
            sql=[TOMBSTONE_FUNCTION, TOMBSTONE_TRIGGER, LEDGER_FUNCTION],
            reverse_sql=[
                OLD_LEDGER_FUNCTION,
                "DROP TRIGGER IF EXISTS ledger_partition_drops_append_only ON ledger_partition_drops",
                "DROP FUNCTION IF EXISTS ledger_partition_drops_append_only()",
            ],
        ),
        migrations.RunPython(partition_ledger, unpartition_ledger, elidable=False),
        migrations.RunPython(add_one_per_source_trigger, drop_one_per_source_trigger, elidable=False),
    ]
