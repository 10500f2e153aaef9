"""What the record shows of a cited source is fixed, below the application (PostgreSQL).

A quote's source is shown by the trace, the signed export (``passages.jsonl``: the source's title and the
pages the passage spans) and its report: a document by its title and pages, an opinion by its case name,
citation and pages. Once a quote row cites the source (``message_citations``, ``message_caselaw_citations``),
triggers refuse a change of those columns, whatever the client (the ORM, ``QuerySet.update()``, raw SQL): rule
``lqai_append_only``, SQLSTATE 23001 (``restrict_violation``), so ``IntegrityError``, naming the columns. They
join what was fixed before: a cited document's content (``0007``) and matter (``0014``), an opinion's text
(``0007``) and provider (``0029``). An opinion's court, date, URL and retrieval time may still be refreshed.

The model layer says the same (``chats.models.CitedTextGuard.cited_fixed_fields``, in ``save()`` and in
``QuerySet.update()``), on SQLite too.
"""

import importlib

from django.db import migrations

PostgresOnlyRunSQL = importlib.import_module("chats.migrations.0007_cited_text_immutable").PostgresOnlyRunSQL

# (source table, quote table, quote foreign key, the columns fixed here)
DOCUMENTS = ("documents", "message_citations", "document_id", ("title", "pages"))
OPINIONS = ("caselaw_opinions", "message_caselaw_citations", "opinion_id", ("case_name", "citation", "pages"))

FUNCTION = """
CREATE FUNCTION {source}_refuse_cited_record_change() RETURNS trigger LANGUAGE plpgsql AS $$
DECLARE
    changed text[] := ARRAY[]::text[];
BEGIN
    IF NOT EXISTS (SELECT 1 FROM {quotes} WHERE {fk} = OLD.id) THEN
        RETURN NEW;
    END IF;
{checks}
    RAISE EXCEPTION 'lqai_append_only: {source} row % is cited: its % cannot change', OLD.id,
        array_to_string(changed, ' and ')
        USING ERRCODE = 'restrict_violation',
              HINT = 'Its quotes are shown and sealed with it. Add a revised source as a new row.';
END
$$
"""
CHECK = "    IF NEW.{column} IS DISTINCT FROM OLD.{column} THEN changed := changed || '{column}'::text; END IF;"
TRIGGER = """
CREATE TRIGGER {source}_cited_record_fixed BEFORE UPDATE OF {columns} ON {source}
    FOR EACH ROW WHEN (({old}) IS DISTINCT FROM ({new}))
    EXECUTE FUNCTION {source}_refuse_cited_record_change()
"""


def fixed_when_cited(source: str, quotes: str, fk: str, columns: tuple[str, ...]) -> PostgresOnlyRunSQL:
    checks = "\n".join(CHECK.format(column=column) for column in columns)
    return PostgresOnlyRunSQL(
        sql=[
            FUNCTION.format(source=source, quotes=quotes, fk=fk, checks=checks),
            TRIGGER.format(
                source=source,
                columns=", ".join(columns),
                old=", ".join(f"OLD.{column}" for column in columns),
                new=", ".join(f"NEW.{column}" for column in columns),
            ),
        ],
        reverse_sql=[
            f"DROP TRIGGER IF EXISTS {source}_cited_record_fixed ON {source}",
            f"DROP FUNCTION IF EXISTS {source}_refuse_cited_record_change()",
        ],
    )


class Migration(migrations.Migration):
    dependencies = [("chats", "0030_document_passages_follow_their_matter")]

    operations = [fixed_when_cited(*DOCUMENTS), fixed_when_cited(*OPINIONS)]
