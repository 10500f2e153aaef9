"""A chain's head row stays while its matter does (PostgreSQL).

``seal_chain_heads`` holds where each chain ends, and each seal is numbered after it: a head deleted would
let the chain's next seal restart at #1, where it collides with the first seal, so that every later turn of
the matter stays unsealed (``0016`` refuses TRUNCATE already). A trigger refuses a DELETE of a head row except
in the purge of its own matter (``lqai_purging``, from ``chats.0014``; a matter-less chat's head, whose chat
is already gone, in any purge, as the other triggers accept a row whose parent went in a purge): rule
``lqai_append_only``, SQLSTATE 23001 (``restrict_violation``), so ``IntegrityError``. Each seal still moves
its head (an UPDATE), and ``verify_ledger`` checks the heads against the seals, a chain with seals but no
head included. The model layer (``citations.models.SealChainHead``) refuses the same on SQLite.
"""

import importlib

from django.db import migrations

PostgresOnlyRunSQL = importlib.import_module("chats.migrations.0007_cited_text_immutable").PostgresOnlyRunSQL

FUNCTION = """
CREATE FUNCTION seal_chain_heads_kept() RETURNS trigger LANGUAGE plpgsql AS $$
DECLARE
    matter uuid := OLD.project_id;
    gone boolean := false;
BEGIN
    IF matter IS NULL THEN
        SELECT c.project_id INTO matter FROM chats c WHERE c.id = OLD.chat_id;
        gone := NOT FOUND;
    END IF;
    IF lqai_purging(matter) OR (gone AND lqai_purge_in_progress()) THEN
        RETURN OLD;
    END IF;
    RAISE EXCEPTION 'lqai_append_only: seal_chain_heads rows cannot be deleted (only a matter purge removes them): chain %', OLD.chain
        USING ERRCODE = 'restrict_violation',
              HINT = 'Its chain''s next seal is numbered after it. Run manage.py purge_matter to remove a whole matter.';
END
$$
"""
TRIGGER = """
CREATE TRIGGER seal_chain_heads_kept BEFORE DELETE ON seal_chain_heads
    FOR EACH ROW EXECUTE FUNCTION seal_chain_heads_kept()
"""


class Migration(migrations.Migration):
    dependencies = [("citations", "0017_ledger_messages_name_quotes"), ("chats", "0014_permanent_record")]

    operations = [
        PostgresOnlyRunSQL(
            sql=[FUNCTION, TRIGGER],
            reverse_sql=[
                "DROP TRIGGER IF EXISTS seal_chain_heads_kept ON seal_chain_heads",
                "DROP FUNCTION IF EXISTS seal_chain_heads_kept()",
            ],
        ),
    ]
