"""Seals are append-only below the application, like the rest of a turn's record (``chats.0014``): on
PostgreSQL the trigger refuses any UPDATE of a seal, and a DELETE except in the purge of its turn's own
matter (rule ``lqai_append_only``, ``lqai_turn_row_append_only()``). The chain heads are not guarded: each
seal moves its chain's head by design, and ``verify_ledger`` checks the heads against the seals.
"""

import importlib

from django.db import migrations

PostgresOnlyRunSQL = importlib.import_module("chats.migrations.0007_cited_text_immutable").PostgresOnlyRunSQL

TRIGGER = """
CREATE TRIGGER turn_seals_append_only BEFORE UPDATE OR DELETE ON turn_seals
    FOR EACH ROW EXECUTE FUNCTION lqai_turn_row_append_only()
"""


class Migration(migrations.Migration):

    dependencies = [
        ('citations', '0011_turn_seals'),
    ]

    operations = [
        PostgresOnlyRunSQL(TRIGGER, "DROP TRIGGER IF EXISTS turn_seals_append_only ON turn_seals"),
    ]
