"""The ledger's constraint messages name the rows as the models now do (``chats.0023``): a document quote, an
opinion quote. ``AlterConstraint`` changes Django's state only: the database's constraints are untouched."""

from django.db import migrations, models


class Migration(migrations.Migration):
    dependencies = [
        ("citations", "0016_record_refuses_truncate"),
    ]

    operations = [
        migrations.AlterConstraint(
            model_name="citationledgerentry",
            name="citation_ledger_entry_kb_kind",
            constraint=models.CheckConstraint(
                condition=models.Q(("message_citation__isnull", True), ("source_kind", "kb_document"), _connector="OR"),
                name="citation_ledger_entry_kb_kind",
                violation_error_message="An entry for a document quote must have source_kind 'kb_document'.",
            ),
        ),
        migrations.AlterConstraint(
            model_name="citationledgerentry",
            name="citation_ledger_entry_caselaw_kind",
            constraint=models.CheckConstraint(
                condition=models.Q(
                    ("message_caselaw_citation__isnull", True), ("source_kind", "caselaw"), _connector="OR"
                ),
                name="citation_ledger_entry_caselaw_kind",
                violation_error_message="An entry for an opinion quote must have source_kind 'caselaw'.",
            ),
        ),
        migrations.AlterConstraint(
            model_name="citationledgerentry",
            name="citation_ledger_entry_message_citation_uniq",
            constraint=models.UniqueConstraint(
                fields=("message_citation",),
                name="citation_ledger_entry_message_citation_uniq",
                violation_error_message="This document quote already has a ledger entry.",
            ),
        ),
        migrations.AlterConstraint(
            model_name="citationledgerentry",
            name="citation_ledger_entry_caselaw_citation_uniq",
            constraint=models.UniqueConstraint(
                fields=("message_caselaw_citation",),
                name="citation_ledger_entry_caselaw_citation_uniq",
                violation_error_message="This opinion quote already has a ledger entry.",
            ),
        ),
    ]
