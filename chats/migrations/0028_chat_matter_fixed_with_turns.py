"""A chat holding turns keeps its matter, below the application (PostgreSQL).

A turn's matter is one of its sealed facts, and its seal sits in its matter's chain (a matter-less chat's
turns in the chat's own). Moving a chat that holds turns to another matter, out of its matter or into one
would make each of its sealed turns read as tampered with (``verify_ledger``: "the turn differs from its
seal"), leave its seals in a chain its matter's export no longer covers, and hand its record to the other
matter's members. A trigger refuses the change of ``chats.project_id`` once the chat holds a message (rule
``lqai_append_only``, SQLSTATE 23001, so ``IntegrityError``); its title and a chat without turns stay free.
A turn starting in the chat at that moment is seen, not slipped past the check (and then sealed under the
matter the chat no longer has): each message's insert locks its chat (``KEY SHARE``, at once, where Django's
deferred foreign key would lock it only at commit), and the move waits for those locks (``FOR UPDATE``)
before it looks for messages; a message inserted after the move's lock waits for the move to end.
The model layer (``Chat.save``, ``ChatQuerySet.update``) refuses the same on SQLite.
"""

import importlib

from django.db import migrations

PostgresOnlyRunSQL = importlib.import_module("chats.migrations.0007_cited_text_immutable").PostgresOnlyRunSQL

REFUSE_MOVE_FUNCTION = """
CREATE FUNCTION chats_refuse_move_with_turns() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    -- A message being inserted into this chat holds a KEY SHARE lock on it until it commits (below), which the
    -- update itself does not wait for: FOR UPDATE does, so that the check below sees that message.
    PERFORM 1 FROM chats WHERE id = OLD.id FOR UPDATE;
    IF EXISTS (SELECT 1 FROM messages WHERE chat_id = OLD.id) THEN
        RAISE EXCEPTION 'lqai_append_only: chats row % holds turns: its matter cannot change', OLD.id
            USING ERRCODE = 'restrict_violation',
                  HINT = 'Its turns are sealed in its matter''s chain. Start a new chat in the other matter.';
    END IF;
    RETURN NEW;
END
$$
"""
# Django's foreign keys are DEFERRABLE INITIALLY DEFERRED: a message's insert locks its chat only at commit.
# This locks it at once, for the move above to wait on.
LOCK_CHAT_FUNCTION = """
CREATE FUNCTION messages_lock_their_chat() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    PERFORM 1 FROM chats WHERE id = NEW.chat_id FOR KEY SHARE;
    RETURN NEW;
END
$$
"""
LOCK_CHAT_TRIGGER = """
CREATE TRIGGER messages_lock_their_chat BEFORE INSERT ON messages
    FOR EACH ROW EXECUTE FUNCTION messages_lock_their_chat()
"""
REFUSE_MOVE_TRIGGER = """
CREATE TRIGGER chats_matter_fixed_with_turns BEFORE UPDATE OF project_id ON chats
    FOR EACH ROW WHEN (OLD.project_id IS DISTINCT FROM NEW.project_id)
    EXECUTE FUNCTION chats_refuse_move_with_turns()
"""


class Migration(migrations.Migration):
    dependencies = [("chats", "0027_document_passages_matter_search_index")]

    operations = [
        PostgresOnlyRunSQL(
            sql=[REFUSE_MOVE_FUNCTION, REFUSE_MOVE_TRIGGER, LOCK_CHAT_FUNCTION, LOCK_CHAT_TRIGGER],
            reverse_sql=[
                "DROP TRIGGER IF EXISTS messages_lock_their_chat ON messages",
                "DROP FUNCTION IF EXISTS messages_lock_their_chat()",
                "DROP TRIGGER IF EXISTS chats_matter_fixed_with_turns ON chats",
                "DROP FUNCTION IF EXISTS chats_refuse_move_with_turns()",
            ],
        ),
    ]
