"""Trigram indexes (``pg_trgm``) on what the ledger admin's text search matches (``citations.selectors.
rows_citing``): a document's title, an opinion's case name and citation, each as Django's ``icontains``
compares it (``UPPER(column::text) LIKE UPPER(%term%)``). Without them that search reads every document
and every opinion (the opinions alone were much of a changelist's time on a large ledger: docs/scale.md), and a
store of opinions grows with the caselaw it holds, not with the firm.

PostgreSQL only (the extension is a trusted one: the migrating role needs CREATE on the database, not
superuser); built CONCURRENTLY (the migration is not atomic), so that writes go on meanwhile. Terms of fewer
than three characters have no trigram: those searches read the table as before.
"""

import importlib

from django.db import migrations

PostgresOnlyRunSQL = importlib.import_module("chats.migrations.0007_cited_text_immutable").PostgresOnlyRunSQL

INDEXES = {
    "documents_title_trgm": "documents USING gin (UPPER(title::text) gin_trgm_ops)",
    "caselaw_opinions_name_citation_trgm": (
        "caselaw_opinions USING gin (UPPER(case_name::text) gin_trgm_ops, UPPER(citation::text) gin_trgm_ops)"
    ),
}


class Migration(migrations.Migration):
    atomic = False

    dependencies = [("chats", "0025_record_refuses_truncate")]

    operations = [
        # Left in place going back: other schemas of the database may use it.
        PostgresOnlyRunSQL(sql="CREATE EXTENSION IF NOT EXISTS pg_trgm", reverse_sql=migrations.RunSQL.noop),
        *(
            PostgresOnlyRunSQL(
                sql=f"CREATE INDEX CONCURRENTLY IF NOT EXISTS {name} ON {definition}",
                reverse_sql=f"DROP INDEX CONCURRENTLY IF EXISTS {name}",
            )
            for name, definition in INDEXES.items()
        ),
    ]
