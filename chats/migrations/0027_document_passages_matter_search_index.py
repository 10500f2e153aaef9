"""The passages' full-text index takes the matter first: a GIN index on ``(project_id, search_vector)``
(``btree_gin``) in place of 0020's on ``search_vector`` alone.

A turn searches one matter's passages (``chats.passages.SEARCH_SQL``: ``project_id = %s AND search_vector @@
%s``). With the words alone indexed, the index found every matter's passages holding the question's words and
the matter's were then picked out of them: a turn's search grew with every matter of the database that shares
its vocabulary (legal words are shared by all), not with its own. With the matter in the same index, the
index scan skips to the matter's entries of each word.

PostgreSQL only (``btree_gin`` is a trusted extension: the migrating role needs CREATE on the database, not
superuser); built CONCURRENTLY (the migration is not atomic), so that writes go on meanwhile, and the old
index is dropped once the new one is in place.
"""

import importlib

from django.db import migrations

PostgresOnlyRunSQL = importlib.import_module("chats.migrations.0007_cited_text_immutable").PostgresOnlyRunSQL

NEW = "document_passages_matter_search_idx ON document_passages USING gin (project_id, search_vector)"
OLD = "document_passages_search_idx ON document_passages USING gin (search_vector)"


class Migration(migrations.Migration):
    atomic = False

    dependencies = [("chats", "0026_title_and_case_name_trigram_indexes")]

    operations = [
        # Left in place going back: other schemas of the database may use it.
        PostgresOnlyRunSQL(sql="CREATE EXTENSION IF NOT EXISTS btree_gin", reverse_sql=migrations.RunSQL.noop),
        PostgresOnlyRunSQL(
            sql=f"CREATE INDEX CONCURRENTLY IF NOT EXISTS {NEW}",
            reverse_sql="DROP INDEX CONCURRENTLY IF EXISTS document_passages_matter_search_idx",
        ),
        PostgresOnlyRunSQL(
            sql="DROP INDEX CONCURRENTLY IF EXISTS document_passages_search_idx",
            reverse_sql=f"CREATE INDEX CONCURRENTLY IF NOT EXISTS {OLD}",
        ),
    ]
