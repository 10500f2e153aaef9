"""turn_seals keeps one index by message: the unique (message_id, finalize_number) constraint's, which serves
every lookup by message and the cascade. The index of the same columns and the foreign key's own index on
message_id were written on every seal for nothing."""

import django.db.models.deletion
from django.db import migrations, models


class Migration(migrations.Migration):

    dependencies = [
        ('chats', '0023_rename_quote_and_case_citation_models'),
        ('citations', '0014_ledger_partitions'),
    ]

    operations = [
        migrations.RemoveIndex(
            model_name='turnseal',
            name='turn_seals_message_idx',
        ),
        migrations.AlterField(
            model_name='turnseal',
            name='message',
            field=models.ForeignKey(db_index=False, on_delete=django.db.models.deletion.CASCADE, related_name='+', to='chats.message'),
        ),
    ]
