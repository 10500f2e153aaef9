"""A GIN full-text index on caselaw_opinions.text, on PostgreSQL only.

Used by the caselaw_search tool (chats.retrieval.rank_sources over all materialized opinions):
its ``to_tsvector('english', COALESCE(text, '')) @@ to_tsquery(...)`` filter is this expression
exactly, as Django's SearchVector("text", config="english") writes it. SQLite has no such index
(the term-overlap scorer runs there instead), so this migration does nothing on it. Raw SQL in
RunPython, not a model Meta index: the model state stays backend-neutral.
"""

from django.db import migrations

INDEX = "caselaw_opinions_text_fts_idx"


def create_index(apps, schema_editor):
    if schema_editor.connection.vendor != "postgresql":
        return
    schema_editor.execute(
        f"CREATE INDEX IF NOT EXISTS {INDEX} ON caselaw_opinions "
        "USING gin (to_tsvector('english'::regconfig, COALESCE(text, '')))"
    )


def drop_index(apps, schema_editor):
    if schema_editor.connection.vendor != "postgresql":
        return
    schema_editor.execute(f"DROP INDEX IF EXISTS {INDEX}")


class Migration(migrations.Migration):
    dependencies = [("chats", "0001_initial")]

    operations = [migrations.RunPython(create_index, drop_index, elidable=False)]
