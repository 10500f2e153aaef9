"""Statute and regulation citations and quotes of an answer, checked by the authority library, on the record.

``message_statute_citations`` is a per-turn table like the four others, and the permanent-record triggers cover
it exactly as they cover ``message_case_citations``: on PostgreSQL ``lqai_turn_row_append_only`` (``0014``:
no UPDATE, no DELETE but a matter purge's) and ``lqai_refuse_truncate`` (``0025``); on both databases the insert
guard of ``0032`` (rows are added only by the transaction that finalizes their turn).
"""

import importlib

import chats.db_functions
import chats.ids
import django.db.models.deletion
import django.db.models.lookups
import django.utils.timezone
from django.db import migrations, models


TABLE = "message_statute_citations"
_0032 = importlib.import_module("chats.migrations.0032_turn_rows_added_only_by_their_finalize")

POSTGRES = [
    f"CREATE TRIGGER {TABLE}_append_only BEFORE UPDATE OR DELETE ON {TABLE} "
    "FOR EACH ROW EXECUTE FUNCTION lqai_turn_row_append_only()",
    f"CREATE TRIGGER {TABLE}_no_truncate BEFORE TRUNCATE ON {TABLE} "
    "FOR EACH STATEMENT EXECUTE FUNCTION lqai_refuse_truncate()",
    f"CREATE TRIGGER {TABLE}_added_by_its_finalize BEFORE INSERT ON {TABLE} "
    "FOR EACH ROW EXECUTE FUNCTION lqai_turn_row_added_by_its_finalize()",
]
POSTGRES_REVERSE = [
    f"DROP TRIGGER IF EXISTS {TABLE}_added_by_its_finalize ON {TABLE}",
    f"DROP TRIGGER IF EXISTS {TABLE}_no_truncate ON {TABLE}",
    f"DROP TRIGGER IF EXISTS {TABLE}_append_only ON {TABLE}",
]
SQLITE = [_0032.SQLITE_GUARD_TRIGGER.format(table=TABLE)]
SQLITE_REVERSE = [f"DROP TRIGGER IF EXISTS {TABLE}_added_by_its_finalize"]


def forwards(apps, schema_editor):
    vendor = schema_editor.connection.vendor
    for statement in POSTGRES if vendor == "postgresql" else SQLITE if vendor == "sqlite" else []:
        schema_editor.execute(statement, params=None)


def backwards(apps, schema_editor):
    vendor = schema_editor.connection.vendor
    for statement in POSTGRES_REVERSE if vendor == "postgresql" else SQLITE_REVERSE if vendor == "sqlite" else []:
        schema_editor.execute(statement, params=None)


class Migration(migrations.Migration):

    dependencies = [
        ('authorities', '0001_authorities_library'),
        ('chats', '0041_message_kind'),
    ]

    operations = [
        migrations.CreateModel(
            name='StatuteCitation',
            fields=[
                ('id', models.UUIDField(default=chats.ids.uuid7, editable=False, primary_key=True, serialize=False)),
                ('kind', models.CharField(choices=[('citation', 'Citation'), ('quote', 'Quote')], max_length=16)),
                ('position', models.PositiveIntegerField(default=0)),
                ('citation', models.CharField(max_length=200)),
                ('answer_offset_start', models.PositiveIntegerField()),
                ('answer_offset_end', models.PositiveIntegerField()),
                ('cited', models.CharField(blank=True, max_length=255)),
                ('identifier', models.CharField(blank=True, max_length=255)),
                ('pin', models.CharField(blank=True, max_length=64)),
                ('code', models.CharField(blank=True, max_length=8)),
                ('title', models.PositiveIntegerField(blank=True, null=True)),
                ('release_point', models.CharField(blank=True, max_length=64)),
                ('release_label', models.CharField(blank=True, max_length=128)),
                ('release_official', models.BooleanField(blank=True, null=True)),
                ('status', models.CharField(choices=[('verified', 'Verified'), ('not_found', 'Not Found'), ('unchecked', 'Unchecked'), ('altered', 'Altered'), ('found_elsewhere', 'Found Elsewhere'), ('failed', 'Failed')], max_length=16)),
                ('reason', models.CharField(max_length=1000)),
                ('quote', models.TextField(blank=True)),
                ('verification_method', models.CharField(blank=True, max_length=32)),
                ('verification_confidence', models.FloatField(blank=True, null=True)),
                ('source_offset_start', models.IntegerField(blank=True, null=True)),
                ('source_offset_end', models.IntegerField(blank=True, null=True)),
                ('passage_sha256', models.CharField(blank=True, max_length=64)),
                ('alterations', models.JSONField(blank=True, default=list)),
                ('context_flags', models.JSONField(blank=True, default=list)),
                ('found_in', models.CharField(blank=True, max_length=255)),
                ('created_at', models.DateTimeField(default=django.utils.timezone.now, editable=False)),
                ('message', models.ForeignKey(on_delete=django.db.models.deletion.CASCADE, related_name='statute_citations', to='chats.message')),
                ('section', models.ForeignKey(blank=True, null=True, on_delete=django.db.models.deletion.RESTRICT, related_name='statute_citations', to='authorities.statutesection')),
            ],
            options={
                'db_table': 'message_statute_citations',
                'ordering': ['created_at', 'position', 'id'],
                'constraints': [models.CheckConstraint(condition=models.Q(models.Q(('kind', 'citation'), ('status__in', ('verified', 'not_found', 'unchecked'))), models.Q(('kind', 'quote'), ('status__in', ('verified', 'altered', 'found_elsewhere', 'failed', 'unchecked'))), _connector='OR'), name='message_statute_citations_kind_status_valid', violation_error_message='A citation is verified, not_found or unchecked; a quote is verified, altered, found_elsewhere, failed or unchecked.'), models.CheckConstraint(condition=models.Q(('answer_offset_end__gt', models.F('answer_offset_start')), models.Q(('citation', ''), _negated=True), models.Q(('reason', ''), _negated=True)), name='message_statute_citations_written_and_reasoned', violation_error_message='A statute row needs its citation, a non-empty answer span and a reason.'), models.CheckConstraint(condition=models.Q(models.Q(('kind', 'citation'), ('status', 'verified'), _negated=True), models.Q(models.Q(('identifier', ''), _negated=True), models.Q(('release_point', ''), _negated=True), ('title__isnull', False), models.Q(('code', ''), _negated=True)), _connector='OR'), name='message_statute_citations_verified_named', violation_error_message='A verified citation names its section and release.'), models.CheckConstraint(condition=models.Q(models.Q(('kind', 'citation'), _negated=True), models.Q(('found_in', ''), ('passage_sha256', ''), ('quote', ''), ('verification_method', ''), ('source_offset_end__isnull', True), ('source_offset_start__isnull', True), ('alterations', []), ('context_flags', []), ('verification_confidence__isnull', True)), _connector='OR'), name='message_statute_citations_citation_shape', violation_error_message='A citation row has no quote, offsets, digest, alterations or found_in.'), models.CheckConstraint(condition=models.Q(models.Q(('kind', 'quote'), _negated=True), models.Q(('status__in', ('verified', 'altered', 'found_elsewhere')), models.Q(('quote', ''), _negated=True), ('section__isnull', False), ('source_offset_end__isnull', False), ('source_offset_start__isnull', False), ('source_offset_end__gte', models.F('source_offset_start')), ('source_offset_start__gte', 0), ('passage_sha256__regex', '^[0-9a-f]{64}$'), ('verification_confidence__isnull', False), ('verification_method__in', ('exact_match', 'tolerant_match', 'altered')), models.Q(('identifier', ''), _negated=True), models.Q(('release_point', ''), _negated=True)), models.Q(models.Q(('status__in', ('verified', 'altered', 'found_elsewhere')), _negated=True), models.Q(('quote', ''), _negated=True), ('passage_sha256', ''), ('source_offset_end__isnull', True), ('source_offset_start__isnull', True), ('verification_confidence__isnull', True), ('verification_method', ''), ('alterations', []), ('context_flags', []), ('found_in', '')), _connector='OR'), name='message_statute_citations_quote_shape', violation_error_message='A quote found holds its section, span, digest and match; one not found holds none of them.'), models.CheckConstraint(condition=models.Q(models.Q(('found_in__gt', ''), ('status', 'found_elsewhere')), models.Q(models.Q(('status', 'found_elsewhere'), _negated=True), ('found_in', '')), _connector='OR'), name='message_statute_citations_found_in_iff_elsewhere', violation_error_message='found_in is set exactly for a quote found elsewhere.'), models.CheckConstraint(condition=models.Q(models.Q(('kind', 'quote'), _negated=True), models.Q(('status__in', ('verified', 'altered', 'found_elsewhere')), _negated=True), ('status', 'found_elsewhere'), models.Q(('status', 'altered'), ('verification_method', 'altered')), models.Q(('status', 'verified'), models.Q(('verification_method', 'altered'), _negated=True)), _connector='OR'), name='message_statute_citations_altered_is_altered', violation_error_message="A quote is altered exactly when the verifier's match is altered."), models.CheckConstraint(condition=models.Q(django.db.models.lookups.Exact(chats.db_functions.JSONTypeOf('alterations'), models.Value('array')), django.db.models.lookups.Exact(chats.db_functions.JSONTypeOf('context_flags'), models.Value('array'))), name='message_statute_citations_lists', violation_error_message='alterations and context_flags must be JSON arrays.'), models.CheckConstraint(condition=models.Q(('verification_confidence__isnull', True), models.Q(('verification_confidence__gte', 0), ('verification_confidence__lte', 1)), _connector='OR'), name='message_statute_citations_confidence_range', violation_error_message='verification_confidence must be within 0..1.')],
            },
        ),
        migrations.RunPython(forwards, backwards, elidable=False),
    ]
