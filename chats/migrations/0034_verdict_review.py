"""The verdict ``review``: nothing failed, but a claim needs a person (``lqai_verify.verdict``).

The CHECK accepts ``review`` beside ``none``, ``pass`` and ``fail``, and still ``supported``, the verdict
earlier rules gave, which the turns sealed with it keep (their seals cover it). On PostgreSQL the messages
trigger of ``0014`` is replaced by the same function with two changes: a verdict that only gets worse orders
``none < pass < supported < review < fail``, and no update writes ``supported`` on a row that did not hold it
already (a finalize writes the new vocabulary; ``chats.record.message_change_refusal`` says the same).
SQLite rebuilds ``messages`` to change its CHECK: the triggers of ``0032`` that name it are dropped first and
written again after.
"""

import importlib

from django.conf import settings
from django.db import migrations, models

from django.db.backends.base.schema import BaseDatabaseSchemaEditor
from django.db.migrations.state import StateApps

PostgresOnlyRunSQL = importlib.import_module("chats.migrations.0007_cited_text_immutable").PostgresOnlyRunSQL
TURN_ROWS_GUARD = importlib.import_module("chats.migrations.0032_turn_rows_added_only_by_their_finalize")


def _sqlite(statements: list[str]):  # type: ignore[no-untyped-def]
    def run(apps: StateApps, schema_editor: BaseDatabaseSchemaEditor) -> None:
        if schema_editor.connection.vendor == "sqlite":
            for statement in statements:
                schema_editor.execute(statement, params=None)

    return run


# On SQLite, the triggers naming messages, out of the way of its rebuild and back after it.
SQLITE_TRIGGERS_OFF = migrations.RunPython(
    _sqlite(TURN_ROWS_GUARD.SQLITE_REVERSE), _sqlite(TURN_ROWS_GUARD.SQLITE), elidable=False
)
SQLITE_TRIGGERS_ON = migrations.RunPython(
    _sqlite(TURN_ROWS_GUARD.SQLITE), _sqlite(TURN_ROWS_GUARD.SQLITE_REVERSE), elidable=False
)

MESSAGES_FUNCTION = """
CREATE OR REPLACE FUNCTION lqai_messages_permanent() RETURNS trigger LANGUAGE plpgsql AS $$
DECLARE
    matter uuid;
    held boolean;
    verdicts text[] := ARRAY['none', 'pass', 'supported', 'review', 'fail'];
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
    IF NEW.verdict = 'supported' AND OLD.verdict IS DISTINCT FROM 'supported' THEN
        RAISE EXCEPTION 'lqai_append_only: message %: ''supported'' is a verdict of earlier rules, kept by the turns sealed with it', OLD.id
            USING ERRCODE = 'restrict_violation', HINT = 'A finalize writes pass, review, fail or none.';
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

# The function as 0014 wrote it, for the way back.
EARLIER_MESSAGES_FUNCTION = """
CREATE OR REPLACE FUNCTION lqai_messages_permanent() RETURNS trigger LANGUAGE plpgsql AS $$
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


class Migration(migrations.Migration):

    dependencies = [
        ('chats', '0033_messages_unfinished_idx'),
        migrations.swappable_dependency(settings.AUTH_USER_MODEL),
    ]

    operations = [
        SQLITE_TRIGGERS_OFF,
        migrations.RemoveConstraint(
            model_name='message',
            name='messages_verdict_valid',
        ),
        migrations.AlterField(
            model_name='message',
            name='verdict',
            field=models.CharField(blank=True, choices=[('none', 'none (no claim)'), ('pass', 'pass (every quote and case cited verified)'), ('review', 'review (nothing failed, but a claim needs a person)'), ('fail', 'fail (a claim failed: not in its source, or a case cited wrong)'), ('supported', 'supported (earlier rules: all verified, some tolerant or altered)')], max_length=16, null=True),
        ),
        migrations.AddConstraint(
            model_name='message',
            constraint=models.CheckConstraint(condition=models.Q(('verdict__isnull', True), models.Q(('finalized_at__isnull', False), ('role', 'assistant'), ('verdict__in', ['none', 'pass', 'review', 'fail', 'supported'])), _connector='OR'), name='messages_verdict_valid', violation_error_message='A verdict is one of pass, review, fail, none (or supported, of earlier rules), on a finalized turn.'),
        ),
        SQLITE_TRIGGERS_ON,
        PostgresOnlyRunSQL(sql=[MESSAGES_FUNCTION], reverse_sql=[EARLIER_MESSAGES_FUNCTION]),
    ]
