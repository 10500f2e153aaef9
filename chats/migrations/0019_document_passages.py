"""The passages of KB documents (chats.passages): ``document_passages``, ``documents.passages_sha256`` and
``matter_terms``. Their full-text column, index, triggers and database cascades: migration 0020."""

import django.db.models.deletion
from django.db import migrations, models


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
        migrations.CreateModel(
            name='MatterTerm',
            fields=[
                ('id', models.BigAutoField(primary_key=True, serialize=False)),
                ('lexeme', models.TextField()),
                ('passages', models.IntegerField()),
            ],
            options={
                'db_table': 'matter_terms',
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
            field=models.ForeignKey(on_delete=django.db.models.deletion.CASCADE, related_name='passages', to='chats.document'),
        ),
        migrations.AddField(
            model_name='documentpassage',
            name='project',
            field=models.ForeignKey(db_index=False, on_delete=django.db.models.deletion.CASCADE, related_name='+', to='chats.project'),
        ),
        migrations.AddField(
            model_name='matterterm',
            name='project',
            field=models.ForeignKey(db_index=False, on_delete=django.db.models.deletion.CASCADE, related_name='+', to='chats.project'),
        ),
        migrations.AddConstraint(
            model_name='documentpassage',
            constraint=models.UniqueConstraint(fields=('project', 'document', 'position'), name='document_passages_position_uniq', violation_error_message='A document has one passage at each position.'),
        ),
        migrations.AddConstraint(
            model_name='documentpassage',
            constraint=models.CheckConstraint(condition=models.Q(('start__lt', models.F('end'))), name='document_passages_span_not_empty', violation_error_message="A passage's start must be before its end."),
        ),
        migrations.AddConstraint(
            model_name='matterterm',
            constraint=models.UniqueConstraint(fields=('project', 'lexeme'), name='matter_terms_project_lexeme_uniq'),
        ),
    ]
