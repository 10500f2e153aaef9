"""The table of the ``throttle`` cache (``settings.CACHES``), where the turn endpoints' rate counts live:
``createcachetable`` as a migration, so that no deployment can run without it (it creates only what is
missing, so running it again, or ``createcachetable`` by hand, changes nothing)."""

from django.core.management import call_command
from django.db import migrations
from django.db.backends.base.schema import BaseDatabaseSchemaEditor
from django.db.migrations.state import StateApps


def create_cache_tables(apps: StateApps, schema_editor: BaseDatabaseSchemaEditor) -> None:
    call_command("createcachetable", database=schema_editor.connection.alias, verbosity=0)


class Migration(migrations.Migration):
    dependencies = [
        ("chats", "0012_claim_position"),
    ]

    operations = [
        # Kept on a rollback: the counts are disposable, and the table is harmless.
        migrations.RunPython(create_cache_tables, migrations.RunPython.noop, elidable=False),
    ]
