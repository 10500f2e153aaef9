"""A quote row may be ``unchecked``: a quotation nothing could check (a draft's quotation with no citation, or
citing a case nothing resolved), recorded with no source, no span, no confidence and the reason, so that the turn
reads ``review``. The two quote tables' checks change. SQLite rebuilds both tables to change a check, which drops
their triggers (those of ``0032``, the only ones SQLite has on them): they are written again after the rebuild,
exactly as ``0032`` wrote them; backwards, the rebuilds run first and the triggers come back at the end (as
``citations.0023`` does). PostgreSQL alters the checks in place and keeps its triggers.
"""

import importlib

from django.db import migrations, models
from django.db.backends.base.schema import BaseDatabaseSchemaEditor
from django.db.migrations.state import StateApps

TURN_ROWS_GUARD = importlib.import_module("chats.migrations.0032_turn_rows_added_only_by_their_finalize")
TABLES = ("message_citations", "message_caselaw_citations")


def sqlite_triggers(apps: StateApps, schema_editor: BaseDatabaseSchemaEditor) -> None:
    if schema_editor.connection.vendor != "sqlite":
        return
    for table in TABLES:
        schema_editor.execute(f"DROP TRIGGER IF EXISTS {table}_added_by_its_finalize", params=None)
        schema_editor.execute(TURN_ROWS_GUARD.SQLITE_GUARD_TRIGGER.format(table=table), params=None)


class Migration(migrations.Migration):

    dependencies = [
        ('chats', '0043_certificate_wording'),
    ]

    operations = [
        # Backwards, the rebuilds below run after this: the triggers come back at its end.
        migrations.RunPython(migrations.RunPython.noop, sqlite_triggers, elidable=False),
        migrations.RemoveConstraint(
            model_name='documentquote',
            name='message_citations_verified_or_failed_shape',
        ),
        migrations.RemoveConstraint(
            model_name='documentquote',
            name='message_citations_method_known',
        ),
        migrations.RemoveConstraint(
            model_name='opinionquote',
            name='message_caselaw_citations_verified_or_failed_shape',
        ),
        migrations.RemoveConstraint(
            model_name='opinionquote',
            name='message_caselaw_citations_method_known',
        ),
        migrations.AlterField(
            model_name='documentquote',
            name='verification_method',
            field=models.CharField(choices=[('exact_match', 'Exact Match'), ('tolerant_match', 'Tolerant Match'), ('altered', 'Altered'), ('unverified', 'Unverified'), ('unchecked', 'Unchecked')], max_length=32),
        ),
        migrations.AlterField(
            model_name='opinionquote',
            name='verification_method',
            field=models.CharField(choices=[('exact_match', 'Exact Match'), ('tolerant_match', 'Tolerant Match'), ('altered', 'Altered'), ('unverified', 'Unverified'), ('unchecked', 'Unchecked')], max_length=32),
        ),
        migrations.AddConstraint(
            model_name='documentquote',
            constraint=models.CheckConstraint(condition=models.Q(('verification_method__in', ['exact_match', 'tolerant_match', 'altered', 'unverified', 'unchecked'])), name='message_citations_method_known', violation_error_message='verification_method must be one of: exact_match, tolerant_match, altered, unverified, unchecked.'),
        ),
        migrations.AddConstraint(
            model_name='documentquote',
            constraint=models.CheckConstraint(condition=models.Q(models.Q(models.Q(('verification_method__in', ['unverified', 'unchecked']), _negated=True), ('document__isnull', False), ('source_offset_end__isnull', False), ('source_offset_start__isnull', False), ('verification_confidence__isnull', False), ('unverified_reason', '')), models.Q(('verification_method', 'unverified'), ('source_offset_end__isnull', True), ('source_offset_start__isnull', True), ('verification_confidence__isnull', True), ('passage_sha256', ''), models.Q(('unverified_reason', ''), _negated=True)), models.Q(('verification_method', 'unchecked'), ('document__isnull', True), ('source_offset_end__isnull', True), ('source_offset_start__isnull', True), ('verification_confidence__isnull', True), ('passage_sha256', ''), models.Q(('unverified_reason', ''), _negated=True)), _connector='OR'), name='message_citations_verified_or_failed_shape', violation_error_message='A verified quote needs its source, offsets and confidence and no reason; an unverified one has no offsets and no confidence, and a reason; an unchecked one has no source, no offsets and no confidence, and a reason.'),
        ),
        migrations.AddConstraint(
            model_name='opinionquote',
            constraint=models.CheckConstraint(condition=models.Q(('verification_method__in', ['exact_match', 'tolerant_match', 'altered', 'unverified', 'unchecked'])), name='message_caselaw_citations_method_known', violation_error_message='verification_method must be one of: exact_match, tolerant_match, altered, unverified, unchecked.'),
        ),
        migrations.AddConstraint(
            model_name='opinionquote',
            constraint=models.CheckConstraint(condition=models.Q(models.Q(models.Q(('verification_method__in', ['unverified', 'unchecked']), _negated=True), ('opinion__isnull', False), ('source_offset_end__isnull', False), ('source_offset_start__isnull', False), ('verification_confidence__isnull', False), ('unverified_reason', '')), models.Q(('verification_method', 'unverified'), ('source_offset_end__isnull', True), ('source_offset_start__isnull', True), ('verification_confidence__isnull', True), ('passage_sha256', ''), models.Q(('unverified_reason', ''), _negated=True)), models.Q(('verification_method', 'unchecked'), ('opinion__isnull', True), ('source_offset_end__isnull', True), ('source_offset_start__isnull', True), ('verification_confidence__isnull', True), ('passage_sha256', ''), models.Q(('unverified_reason', ''), _negated=True)), _connector='OR'), name='message_caselaw_citations_verified_or_failed_shape', violation_error_message='A verified quote needs its source, offsets and confidence and no reason; an unverified one has no offsets and no confidence, and a reason; an unchecked one has no source, no offsets and no confidence, and a reason.'),
        ),
        migrations.RunPython(sqlite_triggers, migrations.RunPython.noop, elidable=False),
    ]
