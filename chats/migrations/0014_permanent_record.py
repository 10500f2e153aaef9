"""The permanent record, below the application (see ``chats.record``).

On PostgreSQL, triggers refuse, whatever the client (the ORM, ``QuerySet.update()``, raw SQL):

- ``lqai_append_only``: an UPDATE of a per-turn row; a DELETE of one, or of a message (or of a chat holding
  messages), except in the purge of its own matter (``lqai.purge``); a rewrite of a finalized message (a
  complete or failed one never changes; an interrupted one may only be continued); a change of a cited
  document's matter.
- ``lqai_legal_hold``: a DELETE of a matter on hold, of one of its chats or of one of its messages.

Each refusal is SQLSTATE 23001 (``restrict_violation``), so Django raises ``IntegrityError``, whose
message starts with the rule's name. Each rule in full: docs/security.md.
"""

import importlib

import django.db.models.deletion
from django.conf import settings
from django.db import migrations, models

PostgresOnlyRunSQL = importlib.import_module("chats.migrations.0007_cited_text_immutable").PostgresOnlyRunSQL

# Whether this transaction is purging ``matter`` (see chats.record.purging); and whether it is purging any.
# A row whose parent is already gone is accepted in any purge: its parent (a message, a chat) could only go
# in its own matter's purge, and the row must go with it (the foreign keys refuse the commit otherwise),
# whatever order the cascade deletes in.
PURGING_FUNCTION = """
CREATE FUNCTION lqai_purging(matter uuid) RETURNS boolean LANGUAGE sql STABLE AS $$
    SELECT COALESCE(matter IS NOT NULL AND current_setting('lqai.purge', true) = matter::text, false)
$$
"""
PURGE_IN_PROGRESS_FUNCTION = """
CREATE FUNCTION lqai_purge_in_progress() RETURNS boolean LANGUAGE sql STABLE AS $$
    SELECT COALESCE(current_setting('lqai.purge', true), '') <> ''
$$
"""

TURN_ROW_FUNCTION = """
CREATE FUNCTION lqai_turn_row_append_only() RETURNS trigger LANGUAGE plpgsql AS $$
DECLARE
    matter uuid;
BEGIN
    IF TG_OP = 'UPDATE' THEN
        RAISE EXCEPTION 'lqai_append_only: % rows cannot be updated', TG_TABLE_NAME
            USING ERRCODE = 'restrict_violation', HINT = 'A turn''s rows are its permanent record.';
    END IF;
    SELECT c.project_id INTO matter FROM messages m JOIN chats c ON c.id = m.chat_id WHERE m.id = OLD.message_id;
    IF lqai_purging(matter) OR (NOT FOUND AND lqai_purge_in_progress()) THEN
        RETURN OLD;
    END IF;
    RAISE EXCEPTION 'lqai_append_only: % rows cannot be deleted (only a matter purge removes them)', TG_TABLE_NAME
        USING ERRCODE = 'restrict_violation', HINT = 'Run manage.py purge_matter to remove a whole matter.';
END
$$
"""
TURN_TABLES = ("message_citations", "message_caselaw_citations", "message_case_citations", "message_tool_sources")
TURN_ROW_TRIGGER = """
CREATE TRIGGER %(table)s_append_only BEFORE UPDATE OR DELETE ON %(table)s
    FOR EACH ROW EXECUTE FUNCTION lqai_turn_row_append_only()
"""

MESSAGES_FUNCTION = """
CREATE FUNCTION lqai_messages_permanent() RETURNS trigger LANGUAGE plpgsql AS $$
DECLARE
    matter uuid;
    held boolean;
    verdicts text[] := ARRAY['none', 'pass', 'supported', 'fail'];
BEGIN
    IF TG_OP = 'DELETE' THEN
        SELECT c.project_id, p.legal_hold INTO matter, held
            FROM chats c LEFT JOIN projects p ON p.id = c.project_id WHERE c.id = OLD.chat_id;
        IF held THEN
            RAISE EXCEPTION 'lqai_legal_hold: matter % is on legal hold: its messages cannot be deleted', matter
                USING ERRCODE = 'restrict_violation';
        END IF;
        IF lqai_purging(matter) OR (NOT FOUND AND lqai_purge_in_progress()) THEN
            RETURN OLD;
        END IF;
        RAISE EXCEPTION 'lqai_append_only: messages rows cannot be deleted (only a matter purge removes them)'
            USING ERRCODE = 'restrict_violation', HINT = 'Run manage.py purge_matter to remove a whole matter.';
    END IF;
    IF OLD.status IN ('complete', 'failed') THEN
        IF (NEW.chat_id, NEW.role, NEW.content, NEW.status, NEW.verdict, NEW.author_id, NEW.reply_to_id,
            NEW.finalized_at, NEW.attempt, NEW.model_name, NEW.prompt_tokens, NEW.completion_tokens, NEW.latency_ms)
           IS DISTINCT FROM
           (OLD.chat_id, OLD.role, OLD.content, OLD.status, OLD.verdict, OLD.author_id, OLD.reply_to_id,
            OLD.finalized_at, OLD.attempt, OLD.model_name, OLD.prompt_tokens, OLD.completion_tokens, OLD.latency_ms)
        THEN
            RAISE EXCEPTION 'lqai_append_only: message % is %: its content, status, verdict, author, reply_to and usage cannot change', OLD.id, OLD.status
                USING ERRCODE = 'restrict_violation';
        END IF;
        RETURN NEW;
    END IF;
    IF OLD.finalized_at IS NULL THEN
        RETURN NEW;  -- not finalized yet: its run is writing it
    END IF;
    -- Interrupted (finalized, resumable): a resume claims it (streaming) and finalizes it again.
    IF (NEW.chat_id, NEW.role, NEW.author_id, NEW.reply_to_id) IS DISTINCT FROM (OLD.chat_id, OLD.role, OLD.author_id, OLD.reply_to_id) THEN
        RAISE EXCEPTION 'lqai_append_only: message % is finalized: its chat, role, author and reply_to cannot change', OLD.id
            USING ERRCODE = 'restrict_violation';
    END IF;
    IF left(NEW.content, length(OLD.content)) IS DISTINCT FROM OLD.content THEN
        RAISE EXCEPTION 'lqai_append_only: message % is finalized: its content can only be continued, never rewritten', OLD.id
            USING ERRCODE = 'restrict_violation';
    END IF;
    IF NEW.finalized_at IS NULL OR NEW.status = 'pending' THEN
        RAISE EXCEPTION 'lqai_append_only: message % is finalized: it cannot go back to pending or unfinalized', OLD.id
            USING ERRCODE = 'restrict_violation';
    END IF;
    IF NEW.verdict IS DISTINCT FROM OLD.verdict
       AND (NEW.verdict IS NULL OR array_position(verdicts, NEW.verdict::text) < array_position(verdicts, OLD.verdict::text)) THEN
        RAISE EXCEPTION 'lqai_append_only: message % is finalized: its verdict can only get worse', OLD.id
            USING ERRCODE = 'restrict_violation';
    END IF;
    IF COALESCE(NEW.prompt_tokens, 0) < OLD.prompt_tokens OR COALESCE(NEW.completion_tokens, 0) < OLD.completion_tokens
       OR COALESCE(NEW.latency_ms, 0) < OLD.latency_ms THEN
        RAISE EXCEPTION 'lqai_append_only: message % is finalized: its usage can only accumulate', OLD.id
            USING ERRCODE = 'restrict_violation';
    END IF;
    RETURN NEW;
END
$$
"""
MESSAGES_TRIGGER = """
CREATE TRIGGER messages_permanent_record BEFORE UPDATE OR DELETE ON messages
    FOR EACH ROW EXECUTE FUNCTION lqai_messages_permanent()
"""

HOLD_FUNCTION = """
CREATE FUNCTION lqai_refuse_deleting_held() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    IF TG_TABLE_NAME = 'projects' THEN
        IF OLD.legal_hold THEN
            RAISE EXCEPTION 'lqai_legal_hold: matter % is on legal hold: it cannot be deleted', OLD.id
                USING ERRCODE = 'restrict_violation', HINT = 'Its owner or an operator lifts the hold first.';
        END IF;
    ELSE
        IF EXISTS (SELECT 1 FROM projects p WHERE p.id = OLD.project_id AND p.legal_hold) THEN
            RAISE EXCEPTION 'lqai_legal_hold: matter % is on legal hold: its chats cannot be deleted', OLD.project_id
                USING ERRCODE = 'restrict_violation', HINT = 'Its owner or an operator lifts the hold first.';
        END IF;
        IF NOT lqai_purging(OLD.project_id) AND EXISTS (SELECT 1 FROM messages m WHERE m.chat_id = OLD.id) THEN
            RAISE EXCEPTION 'lqai_append_only: chats rows holding messages cannot be deleted (only a matter purge removes them)'
                USING ERRCODE = 'restrict_violation', HINT = 'Run manage.py purge_matter to remove a whole matter.';
        END IF;
    END IF;
    RETURN OLD;
END
$$
"""
HOLD_TRIGGER = """
CREATE TRIGGER %(table)s_legal_hold BEFORE DELETE ON %(table)s
    FOR EACH ROW EXECUTE FUNCTION lqai_refuse_deleting_held()
"""

CITED_DOCUMENT_FUNCTION = """
CREATE FUNCTION documents_refuse_cited_move() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    IF EXISTS (SELECT 1 FROM message_citations WHERE document_id = OLD.id) THEN
        RAISE EXCEPTION 'lqai_append_only: documents row % is cited: its matter cannot change', OLD.id
            USING ERRCODE = 'restrict_violation', HINT = 'Another matter''s chats must not quote it. Add a copy to the other matter.';
    END IF;
    RETURN NEW;
END
$$
"""
CITED_DOCUMENT_TRIGGER = """
CREATE TRIGGER documents_cited_project_immutable BEFORE UPDATE OF project_id ON documents
    FOR EACH ROW WHEN (OLD.project_id IS DISTINCT FROM NEW.project_id)
    EXECUTE FUNCTION documents_refuse_cited_move()
"""

PERMANENT_RECORD = PostgresOnlyRunSQL(
    sql=[
        PURGING_FUNCTION,
        PURGE_IN_PROGRESS_FUNCTION,
        TURN_ROW_FUNCTION,
        *(TURN_ROW_TRIGGER % {"table": table} for table in TURN_TABLES),
        MESSAGES_FUNCTION,
        MESSAGES_TRIGGER,
        HOLD_FUNCTION,
        *(HOLD_TRIGGER % {"table": table} for table in ("projects", "chats")),
        CITED_DOCUMENT_FUNCTION,
        CITED_DOCUMENT_TRIGGER,
    ],
    reverse_sql=[
        "DROP TRIGGER IF EXISTS documents_cited_project_immutable ON documents",
        "DROP FUNCTION IF EXISTS documents_refuse_cited_move()",
        *(f"DROP TRIGGER IF EXISTS {table}_legal_hold ON {table}" for table in ("projects", "chats")),
        "DROP FUNCTION IF EXISTS lqai_refuse_deleting_held()",
        "DROP TRIGGER IF EXISTS messages_permanent_record ON messages",
        "DROP FUNCTION IF EXISTS lqai_messages_permanent()",
        *(f"DROP TRIGGER IF EXISTS {table}_append_only ON {table}" for table in TURN_TABLES),
        "DROP FUNCTION IF EXISTS lqai_turn_row_append_only()",
        "DROP FUNCTION IF EXISTS lqai_purge_in_progress()",
        "DROP FUNCTION IF EXISTS lqai_purging(uuid)",
    ],
)


class Migration(migrations.Migration):

    dependencies = [
        ('chats', '0013_throttle_cache_table'),
        migrations.swappable_dependency(settings.AUTH_USER_MODEL),
    ]

    operations = [
        migrations.AddField(
            model_name='message',
            name='attempt',
            field=models.PositiveIntegerField(db_default=0, default=0),
        ),
        migrations.AddField(
            model_name='project',
            name='legal_hold',
            field=models.BooleanField(db_default=False, default=False, help_text='While on hold, neither the matter nor its chats or messages can be deleted.'),
        ),
        migrations.AlterField(
            model_name='chat',
            name='owner',
            field=models.ForeignKey(on_delete=django.db.models.deletion.PROTECT, related_name='chats', to=settings.AUTH_USER_MODEL),
        ),
        migrations.AlterField(
            model_name='message',
            name='author',
            field=models.ForeignKey(blank=True, db_index=False, null=True, on_delete=django.db.models.deletion.PROTECT, related_name='+', to=settings.AUTH_USER_MODEL),
        ),
        migrations.AlterField(
            model_name='project',
            name='owner',
            field=models.ForeignKey(on_delete=django.db.models.deletion.PROTECT, related_name='owned_projects', to=settings.AUTH_USER_MODEL),
        ),
        PERMANENT_RECORD,
    ]
