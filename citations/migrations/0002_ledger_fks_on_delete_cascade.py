"""Make the ledger's foreign keys ON DELETE CASCADE in PostgreSQL itself.

Django 5.2 cascades deletes in the ORM only; a retention job or an operator
deleting messages, chats or source rows with plain SQL would otherwise be
refused by the ledger's foreign keys (or, worse, tempted to drop them). The
database now cascades on its own. If a later migration alters one of these
fields, Django recreates its constraint without the cascade: re-run this
function in that migration.
"""

from django.db import migrations

CASCADE_SQL = """
DO $$
DECLARE fk record;
BEGIN
  FOR fk IN
    SELECT conname, pg_get_constraintdef(oid) AS def
    FROM pg_constraint
    WHERE conrelid = 'citation_ledger_entry'::regclass AND contype = 'f' AND confdeltype <> 'c'
  LOOP
    EXECUTE format('ALTER TABLE citation_ledger_entry DROP CONSTRAINT %%I', fk.conname);
    EXECUTE format(
      'ALTER TABLE citation_ledger_entry ADD CONSTRAINT %%I %%s',
      fk.conname,
      regexp_replace(fk.def, '(REFERENCES \\S+\\(\\w+\\))', '\\1 ON DELETE CASCADE')
    );
  END LOOP;
END $$;
"""


def cascade_in_database(apps, schema_editor):
    if schema_editor.connection.vendor == "postgresql":
        schema_editor.execute(CASCADE_SQL, params=())


class Migration(migrations.Migration):
    dependencies = [("citations", "0001_initial")]

    operations = [migrations.RunPython(cascade_in_database, migrations.RunPython.noop, elidable=False)]
