"""The ledger and the purge tombstones are append-only below the application (see ``chats.record``).

On PostgreSQL, triggers refuse (rule ``lqai_append_only``, SQLSTATE 23001, so ``IntegrityError``): any
UPDATE of a ledger entry except setting its reserved ``treatment_id`` once, from NULL, and nothing else;
a DELETE of one except in the purge of its own matter (``lqai_purging``, from ``chats.0014``); any
UPDATE or DELETE of a tombstone (``matter_purges``).
"""

import importlib

import django.utils.timezone
import uuid
from django.db import migrations, models

PostgresOnlyRunSQL = importlib.import_module("chats.migrations.0007_cited_text_immutable").PostgresOnlyRunSQL

LEDGER_FUNCTION = """
CREATE FUNCTION citation_ledger_entry_append_only() RETURNS trigger LANGUAGE plpgsql AS $$
DECLARE
    candidate citation_ledger_entry%ROWTYPE;
    matter uuid;
BEGIN
    IF TG_OP = 'DELETE' THEN
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
LEDGER_TRIGGER = """
CREATE TRIGGER citation_ledger_entry_append_only BEFORE UPDATE OR DELETE ON citation_ledger_entry
    FOR EACH ROW EXECUTE FUNCTION citation_ledger_entry_append_only()
"""
TOMBSTONE_FUNCTION = """
CREATE FUNCTION matter_purges_append_only() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    RAISE EXCEPTION 'lqai_append_only: matter_purges rows cannot be %', CASE TG_OP WHEN 'DELETE' THEN 'deleted' ELSE 'updated' END
        USING ERRCODE = 'restrict_violation', HINT = 'A tombstone is the record that a matter was purged.';
END
$$
"""
TOMBSTONE_TRIGGER = """
CREATE TRIGGER matter_purges_append_only BEFORE UPDATE OR DELETE ON matter_purges
    FOR EACH ROW EXECUTE FUNCTION matter_purges_append_only()
"""


class Migration(migrations.Migration):

    dependencies = [
        ('chats', '0014_permanent_record'),
        ('citations', '0005_case_citations_in_the_ledger'),
    ]

    operations = [
        migrations.CreateModel(
            name='MatterPurge',
            fields=[
                ('id', models.UUIDField(default=uuid.uuid4, editable=False, primary_key=True, serialize=False)),
                ('project_id', models.UUIDField()),
                ('project_name', models.CharField(max_length=200)),
                ('purged_by', models.CharField(max_length=150)),
                ('purged_at', models.DateTimeField(default=django.utils.timezone.now)),
                ('chats', models.PositiveIntegerField()),
                ('messages', models.PositiveIntegerField()),
                ('ledger_entries', models.PositiveIntegerField()),
                ('documents', models.PositiveIntegerField()),
            ],
            options={
                'db_table': 'matter_purges',
                'ordering': ['-purged_at'],
                'constraints': [models.UniqueConstraint(fields=('project_id',), name='matter_purges_project_uniq', violation_error_message='This matter already has a tombstone.')],
            },
        ),
        PostgresOnlyRunSQL(
            sql=[LEDGER_FUNCTION, LEDGER_TRIGGER, TOMBSTONE_FUNCTION, TOMBSTONE_TRIGGER],
            reverse_sql=[
                "DROP TRIGGER IF EXISTS matter_purges_append_only ON matter_purges",
                "DROP FUNCTION IF EXISTS matter_purges_append_only()",
                "DROP TRIGGER IF EXISTS citation_ledger_entry_append_only ON citation_ledger_entry",
                "DROP FUNCTION IF EXISTS citation_ledger_entry_append_only()",
            ],
        ),
    ]
