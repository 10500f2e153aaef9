"""A quote's ledger entry may be ``unchecked`` (``chats.0044``: a quotation nothing could check): the ledger's
checks of a quote's status and of the case-citation statuses let it through on a quote's entry only. The ledger
has no SQLite trigger for its rebuild to drop; PostgreSQL alters the checks on the partitioned table in place."""

from django.db import migrations, models


class Migration(migrations.Migration):

    dependencies = [
        ('chats', '0044_unchecked_quotes'),
        ('citations', '0025_review_chain_heads'),
    ]

    operations = [
        migrations.RemoveConstraint(
            model_name='citationledgerentry',
            name='citation_ledger_entry_case_citation_status',
        ),
        migrations.RemoveConstraint(
            model_name='citationledgerentry',
            name='citation_ledger_entry_quote_status_known',
        ),
        migrations.AddConstraint(
            model_name='citationledgerentry',
            constraint=models.CheckConstraint(condition=models.Q(models.Q(('message_case_citation__isnull', True), models.Q(('verification_status__in', ('verified', 'name_mismatch', 'pin_mismatch', 'not_found', 'ambiguous')), _negated=True)), models.Q(('message_case_citation__isnull', False), ('verification_status__in', ('verified', 'name_mismatch', 'pin_mismatch', 'not_found', 'ambiguous', 'unchecked'))), _connector='OR'), name='citation_ledger_entry_case_citation_status', violation_error_message="A case-citation entry has the check's status (verified, name_mismatch, pin_mismatch, not_found, ambiguous, unchecked), and only a case-citation entry has one (but 'unchecked', also a quote's)."),
        ),
        migrations.AddConstraint(
            model_name='citationledgerentry',
            constraint=models.CheckConstraint(condition=models.Q(models.Q(('message_citation__isnull', True), ('message_caselaw_citation__isnull', True)), ('verification_status__in', ('exact_match', 'tolerant_match', 'altered', 'unverified', 'unchecked')), _connector='OR'), name='citation_ledger_entry_quote_status_known', violation_error_message="A quote's entry has a quote's status (exact_match, tolerant_match, altered, unverified, unchecked)."),
        ),
    ]
