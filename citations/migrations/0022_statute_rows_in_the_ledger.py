"""The ledger indexes statute rows (``chats.StatuteCitation``): a fifth source column under the exactly-one-source
CHECK, the kind rule (``statute``) and the status rule (``statute_...``), one entry per row.

On PostgreSQL the ledger is partitioned by ``created_at`` (``0014``): the one-entry-per-row key is
``UNIQUE (message_statute_citation_id, created_at)`` under the constraint's name, and the trigger
``citation_ledger_entry_one_per_source`` learns the new column, as it knows the four others. On SQLite the
plain unique constraint, as a unique index.
"""

import importlib

import django.db.models.deletion
from django.db import migrations, models

_0014 = importlib.import_module("citations.migrations.0014_ledger_partitions")
# The new foreign key cascades in PostgreSQL itself, like the others (see 0002).
cascade_in_database = importlib.import_module("citations.migrations.0002_ledger_fks_on_delete_cascade").cascade_in_database

UNIQUE = models.UniqueConstraint(
    fields=("message_statute_citation",),
    name="citation_ledger_entry_statute_citation_uniq",
    violation_error_message="This statute citation or quote already has a ledger entry.",
)
NEW_BRANCH = """
    ELSIF NEW.message_statute_citation_id IS NOT NULL THEN
        row_id := NEW.message_statute_citation_id; row_column := 'message_statute_citation_id';
        rule := 'citation_ledger_entry_statute_citation_uniq';
        SELECT created_at INTO row_time FROM message_statute_citations WHERE id = row_id;
    ELSE
        RETURN NEW;  -- no source: the exactly-one-source CHECK refuses it"""
OLD_BRANCH = """
    ELSE
        RETURN NEW;  -- no source: the exactly-one-source CHECK refuses it"""
NEW_PROBE = """
    ELSIF row_column = 'message_case_citation_id' THEN
        SELECT e.id INTO other FROM citation_ledger_entry e WHERE e.message_case_citation_id = row_id LIMIT 1;
    ELSE
        SELECT e.id INTO other FROM citation_ledger_entry e WHERE e.message_statute_citation_id = row_id LIMIT 1;"""
OLD_PROBE = """
    ELSE
        SELECT e.id INTO other FROM citation_ledger_entry e WHERE e.message_case_citation_id = row_id LIMIT 1;"""


def _function(branch: bool) -> str:
    function = _0014.ONE_PER_SOURCE_FUNCTION.replace("CREATE FUNCTION", "CREATE OR REPLACE FUNCTION", 1)
    if branch:
        assert OLD_BRANCH in function and OLD_PROBE in function
        function = function.replace(OLD_BRANCH, NEW_BRANCH, 1).replace(OLD_PROBE, NEW_PROBE, 1)
    return function


def forwards(apps, schema_editor):
    if schema_editor.connection.vendor != "postgresql":
        # A unique index, as SQLite keeps a unique constraint added later (no rebuild of the table).
        schema_editor.execute(
            f"CREATE UNIQUE INDEX {UNIQUE.name} ON citation_ledger_entry (message_statute_citation_id)"
        )
        return
    schema_editor.execute(
        f"ALTER TABLE citation_ledger_entry ADD CONSTRAINT {UNIQUE.name} "
        "UNIQUE (message_statute_citation_id, created_at)"
    )
    schema_editor.execute(_function(branch=True), params=None)


def backwards(apps, schema_editor):
    if schema_editor.connection.vendor != "postgresql":
        schema_editor.execute(f"DROP INDEX IF EXISTS {UNIQUE.name}")
        return
    schema_editor.execute(_function(branch=False), params=None)
    schema_editor.execute(f"ALTER TABLE citation_ledger_entry DROP CONSTRAINT IF EXISTS {UNIQUE.name}")


class Migration(migrations.Migration):

    dependencies = [
        ('chats', '0042_statute_citations'),
        ('citations', '0021_review_decisions'),
    ]

    operations = [
        migrations.RemoveConstraint(
            model_name='citationledgerentry',
            name='citation_ledger_entry_exactly_one_source',
        ),
        migrations.RemoveConstraint(
            model_name='citationledgerentry',
            name='citation_ledger_entry_confidence_exactly_when_verified',
        ),
        migrations.AddField(
            model_name='citationledgerentry',
            name='message_statute_citation',
            field=models.ForeignKey(blank=True, db_index=False, null=True, on_delete=django.db.models.deletion.CASCADE, related_name='+', to='chats.statutecitation'),
        ),
        migrations.AddConstraint(
            model_name='citationledgerentry',
            constraint=models.CheckConstraint(condition=models.Q(models.Q(('message_case_citation__isnull', True), ('message_caselaw_citation__isnull', True), ('message_citation__isnull', False), ('message_statute_citation__isnull', True), ('message_tool_source__isnull', True)), models.Q(('message_case_citation__isnull', True), ('message_caselaw_citation__isnull', False), ('message_citation__isnull', True), ('message_statute_citation__isnull', True), ('message_tool_source__isnull', True)), models.Q(('message_case_citation__isnull', True), ('message_caselaw_citation__isnull', True), ('message_citation__isnull', True), ('message_statute_citation__isnull', True), ('message_tool_source__isnull', False)), models.Q(('message_case_citation__isnull', False), ('message_caselaw_citation__isnull', True), ('message_citation__isnull', True), ('message_statute_citation__isnull', True), ('message_tool_source__isnull', True)), models.Q(('message_case_citation__isnull', True), ('message_caselaw_citation__isnull', True), ('message_citation__isnull', True), ('message_statute_citation__isnull', False), ('message_tool_source__isnull', True)), _connector='OR'), name='citation_ledger_entry_exactly_one_source', violation_error_message='Exactly one of message_citation, message_caselaw_citation, message_tool_source, message_case_citation and message_statute_citation must be set.'),
        ),
        migrations.AddConstraint(
            model_name='citationledgerentry',
            constraint=models.CheckConstraint(condition=models.Q(('message_statute_citation__isnull', True), ('source_kind', 'statute'), _connector='OR'), name='citation_ledger_entry_statute_kind', violation_error_message="An entry for a statute citation or quote must have source_kind 'statute'."),
        ),
        migrations.AddConstraint(
            model_name='citationledgerentry',
            constraint=models.CheckConstraint(condition=models.Q(models.Q(('message_statute_citation__isnull', True), models.Q(('verification_status__in', ('statute_verified', 'statute_not_found', 'statute_unchecked', 'statute_quote_verified', 'statute_quote_altered', 'statute_quote_found_elsewhere', 'statute_quote_failed', 'statute_quote_unchecked')), _negated=True)), models.Q(('message_statute_citation__isnull', False), ('verification_status__in', ('statute_verified', 'statute_not_found', 'statute_unchecked', 'statute_quote_verified', 'statute_quote_altered', 'statute_quote_found_elsewhere', 'statute_quote_failed', 'statute_quote_unchecked'))), _connector='OR'), name='citation_ledger_entry_statute_status', violation_error_message="A statute entry has the library's status (statute_verified, statute_not_found, statute_unchecked, statute_quote_verified, statute_quote_altered, statute_quote_found_elsewhere, statute_quote_failed, statute_quote_unchecked), and only a statute entry has one."),
        ),
        migrations.AddConstraint(
            model_name='citationledgerentry',
            constraint=models.CheckConstraint(condition=models.Q(models.Q(('confidence__isnull', True), ('verification_status__in', ('provenance', 'unverified', 'verified', 'name_mismatch', 'pin_mismatch', 'not_found', 'ambiguous', 'unchecked', 'statute_verified', 'statute_not_found', 'statute_unchecked', 'statute_quote_failed', 'statute_quote_unchecked'))), models.Q(models.Q(('verification_status__in', ('provenance', 'unverified', 'verified', 'name_mismatch', 'pin_mismatch', 'not_found', 'ambiguous', 'unchecked', 'statute_verified', 'statute_not_found', 'statute_unchecked', 'statute_quote_failed', 'statute_quote_unchecked')), _negated=True), ('confidence__isnull', False)), _connector='OR'), name='citation_ledger_entry_confidence_exactly_when_verified', violation_error_message="Confidence must be empty for 'provenance', 'unverified' and case-citation entries, and set for every verified quote."),
        ),
        migrations.SeparateDatabaseAndState(
            state_operations=[migrations.AddConstraint(model_name='citationledgerentry', constraint=UNIQUE)],
            database_operations=[migrations.RunPython(forwards, backwards, elidable=False)],
        ),
        migrations.RunPython(cascade_in_database, migrations.RunPython.noop, elidable=False),
    ]
