"""Drop the plain ``chat_id`` index of the ledger: ``ledger_chat_created_idx`` (chat_id, created_at) serves
every lookup and cascade by chat, and the plain index only cost each new entry one more index write.

Only the index goes: Django's own AlterField would also drop and re-add the foreign key (re-validating
every row, and losing the database-level ON DELETE CASCADE of 0002).
"""

from django.db import migrations, models

import django.db.models.deletion

INDEX = "citation_ledger_entry_chat_id_a6314a49"


class Migration(migrations.Migration):
    dependencies = [
        ("chats", "0002_caselaw_opinions_fts_index"),
        ("citations", "0002_ledger_fks_on_delete_cascade"),
    ]

    operations = [
        migrations.SeparateDatabaseAndState(
            state_operations=[
                migrations.AlterField(
                    model_name="citationledgerentry",
                    name="chat",
                    field=models.ForeignKey(
                        db_index=False,
                        on_delete=django.db.models.deletion.CASCADE,
                        related_name="ledger_entries",
                        to="chats.chat",
                    ),
                ),
            ],
            database_operations=[
                migrations.RunSQL(
                    f"DROP INDEX IF EXISTS {INDEX}",
                    reverse_sql=f"CREATE INDEX {INDEX} ON citation_ledger_entry (chat_id)",
                    elidable=False,
                ),
            ],
        ),
    ]
