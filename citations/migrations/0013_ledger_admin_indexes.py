"""Indexes for the ledger admin's filters and its search by a matter's id (issue 25): each a value's
entries newest first. ``(project, -created_at, id)`` replaces the plain ``project_id`` index (it serves
the cascade from projects too); altering the field recreates its foreign key, so the database's ON
DELETE CASCADE is restored after it (``0002``)."""

import importlib

import django.db.models.deletion
from django.db import migrations, models

cascade_in_database = importlib.import_module("citations.migrations.0002_ledger_fks_on_delete_cascade").cascade_in_database


class Migration(migrations.Migration):

    dependencies = [
        ('chats', '0021_quote_rows_altered_and_context_flags_and_pin_cites'),
        ('citations', '0012_turn_seals_append_only'),
    ]

    operations = [
        migrations.AlterField(
            model_name='citationledgerentry',
            name='project',
            field=models.ForeignKey(blank=True, db_index=False, null=True, on_delete=django.db.models.deletion.CASCADE, related_name='+', to='chats.project'),
        ),
        migrations.RunPython(cascade_in_database, migrations.RunPython.noop, elidable=False),
        migrations.AddIndex(
            model_name='citationledgerentry',
            index=models.Index(fields=['verification_status', '-created_at', 'id'], name='ledger_status_created_idx'),
        ),
        migrations.AddIndex(
            model_name='citationledgerentry',
            index=models.Index(fields=['source_kind', '-created_at', 'id'], name='ledger_kind_created_idx'),
        ),
        migrations.AddIndex(
            model_name='citationledgerentry',
            index=models.Index(fields=['provider', '-created_at', 'id'], name='ledger_provider_created_idx'),
        ),
        migrations.AddIndex(
            model_name='citationledgerentry',
            index=models.Index(fields=['project', '-created_at', 'id'], name='ledger_project_created_idx'),
        ),
    ]
