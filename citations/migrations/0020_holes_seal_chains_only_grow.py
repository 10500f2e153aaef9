"""A seal chain only grows, below the application (both databases): rule ``lqai_seal_chain``.

Triggers refuse a seal whose sequence is not its chain's head + 1 or whose ``previous_sha256`` is not the head's
digest (no head row yet: #0, ``''``; in a batch, a seal may follow the seal just before it when that one is past
the head, so written by this transaction), and any change of a head but a move forward to its chain's last seal,
with its number and digest (the lock's no-op upsert passes; a new head is empty or at its chain's last seal).
PostgreSQL also refuses, at commit (a deferred constraint trigger), a seal left past its head; SQLite has no
deferred triggers. So sealing writes each seal, then moves the head to the last one (``citations.seals``).

Every committed seal is at or below its head, so a seal past the head is this transaction's. PostgreSQL's
refusal is SQLSTATE 23001 (``restrict_violation``) naming the chain and numbers; SQLite's ``RAISE`` takes a
constant naming the rule. Both are ``IntegrityError``. A later migration rebuilding ``turn_seals`` or
``seal_chain_heads`` on SQLite must recreate the triggers. See docs/security.md.
"""

from django.db import migrations
from django.db.backends.base.schema import BaseDatabaseSchemaEditor
from django.db.migrations.state import StateApps

POSTGRES_SEAL_FUNCTION = """
CREATE FUNCTION turn_seals_follow_their_head() RETURNS trigger LANGUAGE plpgsql AS $$
DECLARE
    head_sequence bigint;
    head_digest text;
    expected text;
BEGIN
    SELECT h.sequence, h.seal_sha256 INTO head_sequence, head_digest FROM seal_chain_heads h WHERE h.chain = NEW.chain;
    IF NOT FOUND THEN
        head_sequence := 0;
        head_digest := '';
    END IF;
    IF NEW.sequence = head_sequence + 1 THEN
        expected := head_digest;
    ELSIF NEW.sequence > head_sequence + 1 THEN
        SELECT s.seal_sha256 INTO expected FROM turn_seals s WHERE s.chain = NEW.chain AND s.sequence = NEW.sequence - 1;
    END IF;
    IF expected IS NULL THEN
        RAISE EXCEPTION 'lqai_seal_chain: seal #% of chain % is not its chain''s head + 1 (the head is at #%)',
            NEW.sequence, NEW.chain, head_sequence
            USING ERRCODE = 'restrict_violation',
                  HINT = 'Seals are written by sealing a finalized turn (citations.seals), never by hand.';
    END IF;
    IF NEW.previous_sha256 IS DISTINCT FROM expected THEN
        RAISE EXCEPTION 'lqai_seal_chain: seal #% of chain % does not name its predecessor''s digest (%) as its previous digest',
            NEW.sequence, NEW.chain, expected
            USING ERRCODE = 'restrict_violation',
                  HINT = 'Seals are written by sealing a finalized turn (citations.seals), never by hand.';
    END IF;
    RETURN NEW;
END
$$
"""
POSTGRES_HEAD_FUNCTION = """
CREATE FUNCTION seal_chain_heads_advance() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    IF TG_OP = 'UPDATE' THEN
        IF NEW IS NOT DISTINCT FROM OLD THEN
            RETURN NEW;  -- the lock of the head (an upsert that changes nothing)
        END IF;
        IF (NEW.chain, NEW.project_id, NEW.chat_id) IS DISTINCT FROM (OLD.chain, OLD.project_id, OLD.chat_id) THEN
            RAISE EXCEPTION 'lqai_seal_chain: the head of chain % keeps its chain and its owner', OLD.chain
                USING ERRCODE = 'restrict_violation';
        END IF;
        IF NEW.sequence <= OLD.sequence THEN
            RAISE EXCEPTION 'lqai_seal_chain: the head of chain % only moves forward, to the seal written with it: not from #% to #%',
                OLD.chain, OLD.sequence, NEW.sequence
                USING ERRCODE = 'restrict_violation',
                      HINT = 'A head moved back makes the chain''s next seal collide with one already written.';
        END IF;
    ELSIF NEW.sequence = 0 AND NEW.seal_sha256 = '' THEN
        RETURN NEW;  -- a new chain's empty head (or the lock's proposed row, which then conflicts)
    END IF;
    IF NOT EXISTS (SELECT 1 FROM turn_seals s
                    WHERE s.chain = NEW.chain AND s.sequence = NEW.sequence AND s.seal_sha256 = NEW.seal_sha256)
       OR EXISTS (SELECT 1 FROM turn_seals s WHERE s.chain = NEW.chain AND s.sequence > NEW.sequence) THEN
        RAISE EXCEPTION 'lqai_seal_chain: the head of chain % moves only to its chain''s last seal, written in its transaction: not to #% with digest %',
            NEW.chain, NEW.sequence, NEW.seal_sha256
            USING ERRCODE = 'restrict_violation';
    END IF;
    RETURN NEW;
END
$$
"""
POSTGRES_UNDER_HEAD_FUNCTION = """
CREATE FUNCTION turn_seals_under_their_head() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    IF EXISTS (SELECT 1 FROM turn_seals s WHERE s.id = NEW.id)
       AND NOT EXISTS (SELECT 1 FROM seal_chain_heads h WHERE h.chain = NEW.chain AND h.sequence >= NEW.sequence) THEN
        RAISE EXCEPTION 'lqai_seal_chain: seal #% of chain % is past its chain''s head at commit: a seal''s transaction moves the head to it',
            NEW.sequence, NEW.chain
            USING ERRCODE = 'restrict_violation';
    END IF;
    RETURN NULL;
END
$$
"""
POSTGRES = [
    POSTGRES_SEAL_FUNCTION,
    "CREATE TRIGGER turn_seals_follow_their_head BEFORE INSERT ON turn_seals "
    "FOR EACH ROW EXECUTE FUNCTION turn_seals_follow_their_head()",
    POSTGRES_HEAD_FUNCTION,
    "CREATE TRIGGER seal_chain_heads_advance BEFORE INSERT OR UPDATE ON seal_chain_heads "
    "FOR EACH ROW EXECUTE FUNCTION seal_chain_heads_advance()",
    POSTGRES_UNDER_HEAD_FUNCTION,
    "CREATE CONSTRAINT TRIGGER turn_seals_under_their_head AFTER INSERT ON turn_seals "
    "DEFERRABLE INITIALLY DEFERRED FOR EACH ROW EXECUTE FUNCTION turn_seals_under_their_head()",
]
POSTGRES_REVERSE = [
    "DROP TRIGGER IF EXISTS turn_seals_under_their_head ON turn_seals",
    "DROP FUNCTION IF EXISTS turn_seals_under_their_head()",
    "DROP TRIGGER IF EXISTS seal_chain_heads_advance ON seal_chain_heads",
    "DROP FUNCTION IF EXISTS seal_chain_heads_advance()",
    "DROP TRIGGER IF EXISTS turn_seals_follow_their_head ON turn_seals",
    "DROP FUNCTION IF EXISTS turn_seals_follow_their_head()",
]

# Where a chain's head is, on SQLite: its sequence and digest, or #0 and '' without a head row.
_HEAD_SEQUENCE = "COALESCE((SELECT h.sequence FROM seal_chain_heads h WHERE h.chain = NEW.chain), 0)"
_HEAD_DIGEST = "COALESCE((SELECT h.seal_sha256 FROM seal_chain_heads h WHERE h.chain = NEW.chain), '')"
# A head at NEW's number and digest is at its chain's last seal.
_AT_LAST_SEAL = """
EXISTS (SELECT 1 FROM turn_seals s
         WHERE s.chain = NEW.chain AND s.sequence = NEW.sequence AND s.seal_sha256 = NEW.seal_sha256)
AND NOT EXISTS (SELECT 1 FROM turn_seals s WHERE s.chain = NEW.chain AND s.sequence > NEW.sequence)
"""
SQLITE = [
    f"""
CREATE TRIGGER turn_seals_follow_their_head BEFORE INSERT ON turn_seals
    FOR EACH ROW WHEN NOT (
        (NEW.sequence = {_HEAD_SEQUENCE} + 1 AND NEW.previous_sha256 = {_HEAD_DIGEST})
        OR (NEW.sequence > {_HEAD_SEQUENCE} + 1 AND EXISTS (
            SELECT 1 FROM turn_seals s
             WHERE s.chain = NEW.chain AND s.sequence = NEW.sequence - 1 AND s.seal_sha256 = NEW.previous_sha256))
    )
BEGIN
    SELECT RAISE(ABORT, 'lqai_seal_chain: a seal''s sequence is its chain''s head + 1 and its previous digest the head''s');
END
""",
    f"""
CREATE TRIGGER seal_chain_heads_advance BEFORE UPDATE ON seal_chain_heads
    FOR EACH ROW WHEN (NEW.chain, NEW.sequence, NEW.seal_sha256, NEW.project_id, NEW.chat_id)
                      IS NOT (OLD.chain, OLD.sequence, OLD.seal_sha256, OLD.project_id, OLD.chat_id)
        AND NOT (
            NEW.chain = OLD.chain AND NEW.project_id IS OLD.project_id AND NEW.chat_id IS OLD.chat_id
            AND NEW.sequence > OLD.sequence AND {_AT_LAST_SEAL}
        )
BEGIN
    SELECT RAISE(ABORT, 'lqai_seal_chain: a chain''s head only moves forward, to its chain''s last seal');
END
""",
    f"""
CREATE TRIGGER seal_chain_heads_start BEFORE INSERT ON seal_chain_heads
    FOR EACH ROW WHEN NOT ((NEW.sequence = 0 AND NEW.seal_sha256 = '') OR ({_AT_LAST_SEAL}))
BEGIN
    SELECT RAISE(ABORT, 'lqai_seal_chain: a new chain head is empty, or at its chain''s last seal');
END
""",
]
SQLITE_REVERSE = [
    "DROP TRIGGER IF EXISTS seal_chain_heads_start",
    "DROP TRIGGER IF EXISTS seal_chain_heads_advance",
    "DROP TRIGGER IF EXISTS turn_seals_follow_their_head",
]


def forwards(apps: StateApps, schema_editor: BaseDatabaseSchemaEditor) -> None:
    vendor = schema_editor.connection.vendor
    for statement in POSTGRES if vendor == "postgresql" else SQLITE if vendor == "sqlite" else []:
        schema_editor.execute(statement, params=None)


def backwards(apps: StateApps, schema_editor: BaseDatabaseSchemaEditor) -> None:
    vendor = schema_editor.connection.vendor
    for statement in POSTGRES_REVERSE if vendor == "postgresql" else SQLITE_REVERSE if vendor == "sqlite" else []:
        schema_editor.execute(statement, params=None)


class Migration(migrations.Migration):
    dependencies = [("citations", "0019_ledger_tombstones_whole_past_months")]

    operations = [migrations.RunPython(forwards, backwards, elidable=False)]
