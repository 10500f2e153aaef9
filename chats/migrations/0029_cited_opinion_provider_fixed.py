"""A cited opinion keeps its provider, below the application (PostgreSQL).

Which provider a quoted opinion came from is one of its quote's sealed facts (``citations.seals``), like the
matter of a cited document (``0014``). Changing it would make every sealed turn quoting the opinion read as
tampered with. A trigger refuses the change of ``caselaw_opinions.provider`` once a quote row
(``message_caselaw_citations``) cites the opinion (rule ``lqai_append_only``, SQLSTATE 23001, so
``IntegrityError``); the model layer (``CaselawOpinion.cited_fixed_fields``) refuses the same on SQLite.
"""

import importlib

from django.db import migrations

PostgresOnlyRunSQL = importlib.import_module("chats.migrations.0007_cited_text_immutable").PostgresOnlyRunSQL

REFUSE_FUNCTION = """
CREATE FUNCTION caselaw_opinions_refuse_cited_provider_change() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    IF EXISTS (SELECT 1 FROM message_caselaw_citations WHERE opinion_id = OLD.id) THEN
        RAISE EXCEPTION 'lqai_append_only: caselaw_opinions row % is cited: its provider cannot change', OLD.id
            USING ERRCODE = 'restrict_violation',
                  HINT = 'Its quotes were sealed with it. Materialize the other provider''s copy as its own opinion.';
    END IF;
    RETURN NEW;
END
$$
"""
REFUSE_TRIGGER = """
CREATE TRIGGER caselaw_opinions_cited_provider_immutable BEFORE UPDATE OF provider ON caselaw_opinions
    FOR EACH ROW WHEN (OLD.provider IS DISTINCT FROM NEW.provider)
    EXECUTE FUNCTION caselaw_opinions_refuse_cited_provider_change()
"""


class Migration(migrations.Migration):
    dependencies = [("chats", "0028_chat_matter_fixed_with_turns")]

    operations = [
        PostgresOnlyRunSQL(
            sql=[REFUSE_FUNCTION, REFUSE_TRIGGER],
            reverse_sql=[
                "DROP TRIGGER IF EXISTS caselaw_opinions_cited_provider_immutable ON caselaw_opinions",
                "DROP FUNCTION IF EXISTS caselaw_opinions_refuse_cited_provider_change()",
            ],
        ),
    ]
