"""The passages of KB documents, made once per content and searched through an index (chats.passages).

PostgreSQL: ``document_passages.search_vector``, a stored generated column ``to_tsvector('english', text)``,
with a GIN index, for the turn's full-text search; a column of the database only (the ORM never writes it),
so the model state stays backend-neutral, like the opinions' index of 0002. The foreign keys of the
passages and word counts cascade in the database too, as the ledger's do (citations.0002). Both databases:
a trigger that empties ``documents.passages_sha256`` when a document's content changes by any UPDATE (``save()``
makes the new passages at once; ``QuerySet.update()`` and raw SQL leave them to the next turn that needs
them). Existing documents get theirs on first use (their ``passages_sha256`` starts empty).
"""

from django.db import migrations
from django.db.backends.base.schema import BaseDatabaseSchemaEditor
from django.db.migrations.state import StateApps

POSTGRES = [
    "ALTER TABLE document_passages ADD COLUMN search_vector tsvector "
    "GENERATED ALWAYS AS (to_tsvector('english'::regconfig, text)) STORED",
    "CREATE INDEX document_passages_search_idx ON document_passages USING gin (search_vector)",
    """
CREATE FUNCTION documents_passages_stale() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    NEW.passages_sha256 := '';
    RETURN NEW;
END
$$
""",
    """
CREATE TRIGGER documents_passages_stale
    BEFORE UPDATE OF content ON documents
    FOR EACH ROW WHEN (OLD.content IS DISTINCT FROM NEW.content)
    EXECUTE FUNCTION documents_passages_stale()
""",
]
# Passages and word counts are derived from their documents and matter: the database itself cascades a
# delete to them (Django cascades in the ORM only), so a purge or an operator's DELETE in plain SQL never
# trips over them. The same loop as citations.0002 for the ledger.
for table in ("document_passages", "matter_terms"):
    POSTGRES.append(
        f"""
DO $$
DECLARE fk record;
BEGIN
  FOR fk IN
    SELECT conname, pg_get_constraintdef(oid) AS def
    FROM pg_constraint
    WHERE conrelid = '{table}'::regclass AND contype = 'f' AND confdeltype <> 'c'
  LOOP
    EXECUTE format('ALTER TABLE {table} DROP CONSTRAINT %I', fk.conname);
    EXECUTE format(
      'ALTER TABLE {table} ADD CONSTRAINT %I %s',
      fk.conname,
      regexp_replace(fk.def, '(REFERENCES \\S+\\(\\w+\\))', '\\1 ON DELETE CASCADE')
    );
  END LOOP;
END $$;
"""
    )
POSTGRES_REVERSE = [
    "DROP TRIGGER IF EXISTS documents_passages_stale ON documents",
    "DROP FUNCTION IF EXISTS documents_passages_stale()",
    "DROP INDEX IF EXISTS document_passages_search_idx",
    "ALTER TABLE document_passages DROP COLUMN IF EXISTS search_vector",
]
SQLITE = [
    """
CREATE TRIGGER documents_passages_stale
    AFTER UPDATE OF content ON documents
    FOR EACH ROW WHEN OLD.content IS NOT NEW.content
BEGIN
    UPDATE documents SET passages_sha256 = '' WHERE id = NEW.id;
END
""",
]
SQLITE_REVERSE = ["DROP TRIGGER IF EXISTS documents_passages_stale"]


def forwards(apps: StateApps, schema_editor: BaseDatabaseSchemaEditor) -> None:
    vendor = schema_editor.connection.vendor
    for statement in POSTGRES if vendor == "postgresql" else SQLITE if vendor == "sqlite" else []:
        schema_editor.execute(statement, params=None)


def backwards(apps: StateApps, schema_editor: BaseDatabaseSchemaEditor) -> None:
    vendor = schema_editor.connection.vendor
    for statement in POSTGRES_REVERSE if vendor == "postgresql" else SQLITE_REVERSE if vendor == "sqlite" else []:
        schema_editor.execute(statement)


class Migration(migrations.Migration):
    # Its own migration: the foreign keys of 0019's new tables exist only once that migration has ended
    # (Django creates them last), and the cascades below rewrite them.
    dependencies = [("chats", "0019_document_passages")]

    operations = [migrations.RunPython(forwards, backwards, elidable=False)]
