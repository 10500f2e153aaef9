"""The passages of KB documents, made once per content and searched through an index (chats.passages).

PostgreSQL: ``document_passages.search_vector``, a stored generated column ``to_tsvector('english', text)``,
with a GIN index, for the turn's full-text search; a column of the database only (the ORM never writes it),
so the model state stays backend-neutral, like the opinions' index of 0002. ``matter_terms`` counts a
matter's passages per word (kept on PostgreSQL only). Both databases: a trigger
that empties ``documents.passages_sha256`` when a document's content changes by any UPDATE (``save()``
makes the new passages at once; ``QuerySet.update()`` and raw SQL leave them to the next turn that needs
them). Existing documents get theirs on first use (their ``passages_sha256`` starts empty).
"""

import django.db.models.deletion
from django.db import migrations, models

from django.db.backends.base.schema import BaseDatabaseSchemaEditor
from django.db.migrations.state import StateApps

POSTGRES = [
    "ALTER TABLE document_passages ADD COLUMN search_vector tsvector "
    "GENERATED ALWAYS AS (to_tsvector('english'::regconfig, text)) STORED",
    "CREATE INDEX document_passages_search_idx ON document_passages USING gin (search_vector)",
    """
CREATE FUNCTION documents_passages_stale() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    NEW.passages_sha256 := '';
    RETURN NEW;
END
$$
""",
    """
CREATE TRIGGER documents_passages_stale
    BEFORE UPDATE OF content ON documents
    FOR EACH ROW WHEN (OLD.content IS DISTINCT FROM NEW.content)
    EXECUTE FUNCTION documents_passages_stale()
""",
]
POSTGRES_REVERSE = [
    "DROP TRIGGER IF EXISTS documents_passages_stale ON documents",
    "DROP FUNCTION IF EXISTS documents_passages_stale()",
    "DROP INDEX IF EXISTS document_passages_search_idx",
    "ALTER TABLE document_passages DROP COLUMN IF EXISTS search_vector",
]
SQLITE = [
    """
CREATE TRIGGER documents_passages_stale
    AFTER UPDATE OF content ON documents
    FOR EACH ROW WHEN OLD.content IS NOT NEW.content
BEGIN
    UPDATE documents SET passages_sha256 = '' WHERE id = NEW.id;
END
""",
]
SQLITE_REVERSE = ["DROP TRIGGER IF EXISTS documents_passages_stale"]


def forwards(apps: StateApps, schema_editor: BaseDatabaseSchemaEditor) -> None:
    vendor = schema_editor.connection.vendor
    for statement in POSTGRES if vendor == "postgresql" else SQLITE if vendor == "sqlite" else []:
        schema_editor.execute(statement)


def backwards(apps: StateApps, schema_editor: BaseDatabaseSchemaEditor) -> None:
    vendor = schema_editor.connection.vendor
    for statement in POSTGRES_REVERSE if vendor == "postgresql" else SQLITE_REVERSE if vendor == "sqlite" else []:
        schema_editor.execute(statement)


class Migration(migrations.Migration):

    dependencies = [
        ('chats', '0018_time_ordered_ids'),
    ]

    operations = [
        migrations.CreateModel(
            name='DocumentPassage',
            fields=[
                ('id', models.BigAutoField(primary_key=True, serialize=False)),
                ('position', models.PositiveIntegerField()),
                ('start', models.PositiveIntegerField()),
                ('end', models.PositiveIntegerField()),
                ('text', models.TextField()),
            ],
            options={
                'db_table': 'document_passages',
                'ordering': ['document', 'position'],
            },
        ),
        migrations.AddField(
            model_name='document',
            name='passages_sha256',
            field=models.CharField(blank=True, db_default='', default='', editable=False, max_length=64),
        ),
        migrations.AddIndex(
            model_name='document',
            index=models.Index(condition=models.Q(('passages_sha256', '')), fields=['project'], name='documents_passages_missing_idx'),
        ),
        migrations.AddField(
            model_name='documentpassage',
            name='document',
            field=models.ForeignKey(db_index=False, on_delete=django.db.models.deletion.CASCADE, related_name='passages', to='chats.document'),
        ),
        migrations.AddField(
            model_name='documentpassage',
            name='project',
            field=models.ForeignKey(db_index=False, on_delete=django.db.models.deletion.CASCADE, related_name='+', to='chats.project'),
        ),
        migrations.AddIndex(
            model_name='documentpassage',
            index=models.Index(fields=['project', 'document', 'position'], name='document_passages_project_idx'),
        ),
        migrations.AddConstraint(
            model_name='documentpassage',
            constraint=models.UniqueConstraint(fields=('document', 'position'), name='document_passages_position_uniq'),
        ),
        migrations.AddConstraint(
            model_name='documentpassage',
            constraint=models.CheckConstraint(condition=models.Q(('start__lt', models.F('end'))), name='document_passages_span_not_empty', violation_error_message="A passage's start must be before its end."),
        ),
        migrations.CreateModel(
            name='MatterTerm',
            fields=[
                ('id', models.BigAutoField(primary_key=True, serialize=False)),
                ('lexeme', models.TextField()),
                ('passages', models.IntegerField()),
                ('project', models.ForeignKey(db_index=False, on_delete=django.db.models.deletion.CASCADE, related_name='+', to='chats.project')),
            ],
            options={
                'db_table': 'matter_terms',
                'constraints': [models.UniqueConstraint(fields=('project', 'lexeme'), name='matter_terms_project_lexeme_uniq')],
            },
        ),
    
        migrations.RunPython(forwards, backwards, elidable=False),
    ]
