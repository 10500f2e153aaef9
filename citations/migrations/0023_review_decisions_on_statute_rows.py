"""A review decision may be about a statute row of a turn (``message_statute_citations``, ``chats.0042``): the
known claim tables grow by one. SQLite rebuilds ``review_decisions`` to change the check, which drops its
triggers: they are created again after it (those of ``citations.0021``, unchanged)."""

import importlib

from django.db import migrations, models
from django.db.backends.base.schema import BaseDatabaseSchemaEditor
from django.db.migrations.state import StateApps

_0021 = importlib.import_module("citations.migrations.0021_review_decisions")
TABLES = ("message_citations", "message_caselaw_citations", "message_case_citations", "message_statute_citations")


def sqlite_triggers(apps: StateApps, schema_editor: BaseDatabaseSchemaEditor) -> None:
    if schema_editor.connection.vendor != "sqlite":
        return
    for statement in (*_0021.SQLITE_REVERSE, *_0021.SQLITE):
        schema_editor.execute(statement, params=None)




class Migration(migrations.Migration):
    dependencies = [
        ("chats", "0042_statute_citations"),
        ("citations", "0022_statute_rows_in_the_ledger"),
    ]

    operations = [
        # Backwards, the rebuilds below run after this: the triggers come back at its end.
        migrations.RunPython(migrations.RunPython.noop, sqlite_triggers, elidable=False),
        migrations.RemoveConstraint(model_name="reviewdecision", name="review_decisions_claim_table_known"),
        migrations.AddConstraint(
            model_name="reviewdecision",
            constraint=models.CheckConstraint(
                condition=models.Q(claim_table__in=TABLES),
                name="review_decisions_claim_table_known",
                violation_error_message="A decision is about a quote, a case citation or a statute row of a turn.",
            ),
        ),
        migrations.RunPython(sqlite_triggers, migrations.RunPython.noop, elidable=False),
    ]
