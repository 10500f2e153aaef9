"""A document's passages follow it to another matter (both databases).

A document's passages carry its matter (``document_passages.project_id``), and a matter's retrieval searches
only its own. The trigger of ``0020`` emptied ``documents.passages_sha256`` when a document's content changed;
it now does so when its matter changes too, by any UPDATE (the admin's form, ``QuerySet.update()``, raw SQL).
The passages are then made again under the new matter, by the document service at once (``chats.documents``) or
by the new matter's next turn (``chats.passages.ensure_passages``); until then the old matter's search drops them
(``search_matter_passages`` keeps only passages of its documents). A cited document never moves (``0014``).
"""

from django.db import migrations
from django.db.backends.base.schema import BaseDatabaseSchemaEditor
from django.db.migrations.state import StateApps


def _postgres(columns: str, when: str) -> list[str]:
    return [
        "DROP TRIGGER IF EXISTS documents_passages_stale ON documents",
        f"""
CREATE TRIGGER documents_passages_stale
    BEFORE UPDATE OF {columns} ON documents
    FOR EACH ROW WHEN ({when})
    EXECUTE FUNCTION documents_passages_stale()
""",
    ]


def _sqlite(columns: str, when: str) -> list[str]:
    return [
        "DROP TRIGGER IF EXISTS documents_passages_stale",
        f"""
CREATE TRIGGER documents_passages_stale
    AFTER UPDATE OF {columns} ON documents
    FOR EACH ROW WHEN {when}
BEGIN
    UPDATE documents SET passages_sha256 = '' WHERE id = NEW.id;
END
""",
    ]


FORWARDS = {
    "postgresql": _postgres(
        "content, project_id",
        "OLD.content IS DISTINCT FROM NEW.content OR OLD.project_id IS DISTINCT FROM NEW.project_id",
    ),
    "sqlite": _sqlite("content, project_id", "OLD.content IS NOT NEW.content OR OLD.project_id IS NOT NEW.project_id"),
}
# 0020's triggers.
BACKWARDS = {
    "postgresql": _postgres("content", "OLD.content IS DISTINCT FROM NEW.content"),
    "sqlite": _sqlite("content", "OLD.content IS NOT NEW.content"),
}


def forwards(apps: StateApps, schema_editor: BaseDatabaseSchemaEditor) -> None:
    for statement in FORWARDS.get(schema_editor.connection.vendor, []):
        schema_editor.execute(statement, params=None)


def backwards(apps: StateApps, schema_editor: BaseDatabaseSchemaEditor) -> None:
    for statement in BACKWARDS.get(schema_editor.connection.vendor, []):
        schema_editor.execute(statement, params=None)


class Migration(migrations.Migration):
    dependencies = [("chats", "0029_cited_opinion_provider_fixed")]

    operations = [migrations.RunPython(forwards, backwards, elidable=False)]
