"""Quote rows get only shapes the citation ledger can hold: a known verification method (a CHECK) and a
confidence of one type in both tables (float, so the ledger's mapping copies it without a cast).

Existing rows are checked first: if any would violate the new rules, the migration stops with the ids of
the offending rows before changing anything (and, being atomic, leaves nothing half-applied).
"""

from django.db import migrations, models
from django.db.models import Q

KNOWN_METHODS = ("exact_match", "tolerant_match")
SHOWN_IDS = 20


class RowsWouldViolateNewConstraints(Exception):
    """Rows exist that the new constraints refuse: fix or delete them, then migrate again."""


def refuse_rows_the_new_constraints_reject(apps, schema_editor):
    problems = []
    for model_name in ("MessageCitation", "MessageCaselawCitation"):
        model = apps.get_model("chats", model_name)
        offending = model.objects.using(schema_editor.connection.alias).filter(
            ~Q(verification_method__in=KNOWN_METHODS)
            | Q(verification_confidence__lt=0)
            | Q(verification_confidence__gt=1)
        )
        count = offending.count()
        if count:
            ids = ", ".join(str(pk) for pk in offending.order_by("pk").values_list("pk", flat=True)[:SHOWN_IDS])
            more = f" (and {count - SHOWN_IDS} more)" if count > SHOWN_IDS else ""
            problems.append(f"{model._meta.db_table}: {count} row(s): {ids}{more}")
    if problems:
        raise RowsWouldViolateNewConstraints(
            "chats.0004 not applied: these quote rows have a verification method other than "
            f"{' or '.join(KNOWN_METHODS)}, or a confidence outside 0..1, which the new constraints refuse. "
            "Correct or delete them, then run migrate again. " + "; ".join(problems)
        )


class Migration(migrations.Migration):
    dependencies = [
        ("chats", "0003_messages_created_idx"),
    ]

    operations = [
        migrations.RunPython(refuse_rows_the_new_constraints_reject, migrations.RunPython.noop, elidable=False),
        migrations.RemoveConstraint(
            model_name="messagecaselawcitation",
            name="message_caselaw_citations_method_not_empty",
        ),
        migrations.RemoveConstraint(
            model_name="messagecitation",
            name="message_citations_method_not_empty",
        ),
        migrations.AlterField(
            model_name="messagecaselawcitation",
            name="verification_method",
            field=models.CharField(
                choices=[("exact_match", "Exact Match"), ("tolerant_match", "Tolerant Match")], max_length=32
            ),
        ),
        migrations.AlterField(
            model_name="messagecitation",
            name="verification_confidence",
            field=models.FloatField(default=1.0),
        ),
        migrations.AlterField(
            model_name="messagecitation",
            name="verification_method",
            field=models.CharField(
                choices=[("exact_match", "Exact Match"), ("tolerant_match", "Tolerant Match")], max_length=32
            ),
        ),
        migrations.AddConstraint(
            model_name="messagecaselawcitation",
            constraint=models.CheckConstraint(
                condition=models.Q(("verification_method__in", ["exact_match", "tolerant_match"])),
                name="message_caselaw_citations_method_known",
                violation_error_message="verification_method must be one of: exact_match, tolerant_match.",
            ),
        ),
        migrations.AddConstraint(
            model_name="messagecitation",
            constraint=models.CheckConstraint(
                condition=models.Q(("verification_method__in", ["exact_match", "tolerant_match"])),
                name="message_citations_method_known",
                violation_error_message="verification_method must be one of: exact_match, tolerant_match.",
            ),
        ),
    ]
