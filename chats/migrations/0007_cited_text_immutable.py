"""Cited evidence is immutable: each quote row stores the SHA-256 of the passage it verified, and on
PostgreSQL a trigger refuses a change of a document's ``content`` or an opinion's ``text`` once a quote
row cites it (any UPDATE: the ORM, ``QuerySet.update()``, raw SQL). The model-level guard
(``chats.models.CitedTextGuard``) gives the same answer on SQLite, where there is no trigger.

The refusal is SQLSTATE 23001 (``restrict_violation``), so Django raises ``IntegrityError``.
"""

from django.db import migrations, models


class PostgresOnlyRunSQL(migrations.RunSQL):
    """RunSQL on PostgreSQL; a no-op on any other database."""

    def database_forwards(self, app_label, schema_editor, from_state, to_state):
        if schema_editor.connection.vendor == "postgresql":
            super().database_forwards(app_label, schema_editor, from_state, to_state)

    def database_backwards(self, app_label, schema_editor, from_state, to_state):
        if schema_editor.connection.vendor == "postgresql":
            super().database_backwards(app_label, schema_editor, from_state, to_state)


# Whole statements per source table (source table, text column, quote table, quote FK column), each
# passed to RunSQL as its own list item so that no SQL splitter has to parse the function body.
REFUSE_FUNCTION = """
CREATE FUNCTION %(source)s_refuse_cited_%(text)s_change() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    IF EXISTS (SELECT 1 FROM %(quotes)s WHERE %(fk)s = OLD.id) THEN
        RAISE EXCEPTION '%(source)s row %% is cited: its %(text)s cannot change', OLD.id
            USING ERRCODE = 'restrict_violation',
                  HINT = 'Quotes point into the cited text by offset. Add a revised text as a new row.';
    END IF;
    RETURN NEW;
END
$$
"""
IMMUTABLE_TRIGGER = """
CREATE TRIGGER %(source)s_cited_%(text)s_immutable
    BEFORE UPDATE OF %(text)s ON %(source)s
    FOR EACH ROW WHEN (OLD.%(text)s IS DISTINCT FROM NEW.%(text)s)
    EXECUTE FUNCTION %(source)s_refuse_cited_%(text)s_change()
"""
DROP_TRIGGER = "DROP TRIGGER IF EXISTS %(source)s_cited_%(text)s_immutable ON %(source)s"
DROP_FUNCTION = "DROP FUNCTION IF EXISTS %(source)s_refuse_cited_%(text)s_change()"


def immutable_text(table):
    return PostgresOnlyRunSQL(
        sql=[REFUSE_FUNCTION % table, IMMUTABLE_TRIGGER % table],
        reverse_sql=[DROP_TRIGGER % table, DROP_FUNCTION % table],
    )


DOCUMENTS = {"source": "documents", "text": "content", "quotes": "message_citations", "fk": "document_id"}
OPINIONS = {"source": "caselaw_opinions", "text": "text", "quotes": "message_caselaw_citations", "fk": "opinion_id"}


class Migration(migrations.Migration):

    dependencies = [
        ('chats', '0006_message_reply_to'),
    ]

    operations = [
        migrations.AddField(
            model_name='messagecaselawcitation',
            name='passage_sha256',
            field=models.CharField(blank=True, db_default='', default='', max_length=64),
        ),
        migrations.AddField(
            model_name='messagecitation',
            name='passage_sha256',
            field=models.CharField(blank=True, db_default='', default='', max_length=64),
        ),
        migrations.AddConstraint(
            model_name='messagecaselawcitation',
            constraint=models.CheckConstraint(condition=models.Q(('passage_sha256__regex', '^([0-9a-f]{64})?$')), name='message_caselaw_citations_passage_sha256_hex', violation_error_message='passage_sha256 must be 64 lowercase hex digits (or empty).'),
        ),
        migrations.AddConstraint(
            model_name='messagecitation',
            constraint=models.CheckConstraint(condition=models.Q(('passage_sha256__regex', '^([0-9a-f]{64})?$')), name='message_citations_passage_sha256_hex', violation_error_message='passage_sha256 must be 64 lowercase hex digits (or empty).'),
        ),
        # A failed claim verified no passage, so it has no digest either.
        migrations.RemoveConstraint(
            model_name='messagecaselawcitation',
            name='message_caselaw_citations_verified_or_failed_shape',
        ),
        migrations.RemoveConstraint(
            model_name='messagecitation',
            name='message_citations_verified_or_failed_shape',
        ),
        migrations.AddConstraint(
            model_name='messagecaselawcitation',
            constraint=models.CheckConstraint(condition=models.Q(models.Q(models.Q(('verification_method', 'unverified'), _negated=True), ('opinion__isnull', False), ('source_offset_end__isnull', False), ('source_offset_start__isnull', False), ('verification_confidence__isnull', False), ('unverified_reason', '')), models.Q(('verification_method', 'unverified'), ('source_offset_end__isnull', True), ('source_offset_start__isnull', True), ('verification_confidence__isnull', True), ('passage_sha256', ''), models.Q(('unverified_reason', ''), _negated=True)), _connector='OR'), name='message_caselaw_citations_verified_or_failed_shape', violation_error_message='A verified quote needs its source, offsets and confidence and no reason; an unverified one has no offsets and no confidence, and a reason.'),
        ),
        migrations.AddConstraint(
            model_name='messagecitation',
            constraint=models.CheckConstraint(condition=models.Q(models.Q(models.Q(('verification_method', 'unverified'), _negated=True), ('document__isnull', False), ('source_offset_end__isnull', False), ('source_offset_start__isnull', False), ('verification_confidence__isnull', False), ('unverified_reason', '')), models.Q(('verification_method', 'unverified'), ('source_offset_end__isnull', True), ('source_offset_start__isnull', True), ('verification_confidence__isnull', True), ('passage_sha256', ''), models.Q(('unverified_reason', ''), _negated=True)), _connector='OR'), name='message_citations_verified_or_failed_shape', violation_error_message='A verified quote needs its source, offsets and confidence and no reason; an unverified one has no offsets and no confidence, and a reason.'),
        ),
        immutable_text(DOCUMENTS),
        immutable_text(OPINIONS),
    ]
