"""Time-ordered keys (UUID version 7) for the rows a turn writes, and ``uuid_generate_v7()`` for rows
inserted in SQL (see chats.ids). Existing rows keep their ids: only the default of new ones changes.

The function (PostgreSQL; SQLite gets the same one on each connection from chats.ids) follows RFC 9562:
48 bits of Unix time in milliseconds, the version (7), 12 bits of sub-millisecond fraction (section 6.2,
method 3, so ids made in one statement still order by time), the variant and 62 random bits, taken from
``gen_random_uuid()`` (whose variant bits are already right). ``clock_timestamp()``, not ``now()``: every
row of a statement gets the time it was made, so a long ``INSERT ... SELECT`` still appends in order.
"""

import chats.ids
from django.db import migrations, models

from django.db.backends.base.schema import BaseDatabaseSchemaEditor
from django.db.migrations.state import StateApps

UUID_GENERATE_V7 = """
CREATE OR REPLACE FUNCTION uuid_generate_v7() RETURNS uuid
LANGUAGE plpgsql VOLATILE PARALLEL SAFE AS $$
DECLARE
    unix_us bigint := floor(extract(epoch FROM clock_timestamp()) * 1000000);
    sub_ms integer := (mod(unix_us, 1000) * 4096 / 1000)::integer;
    bytes bytea := uuid_send(gen_random_uuid());
BEGIN
    -- Bytes 0-5: milliseconds since the epoch, big-endian (the low 6 bytes of the bigint).
    bytes := overlay(bytes PLACING substring(int8send(unix_us / 1000) FROM 3) FROM 1 FOR 6);
    -- Byte 6: the version (7) and the top 4 bits of the fraction; byte 7: its low 8 bits.
    bytes := set_byte(bytes, 6, (7 << 4) | (sub_ms >> 8));
    bytes := set_byte(bytes, 7, sub_ms & 255);
    RETURN encode(bytes, 'hex')::uuid;
END
$$
"""


def create_uuid_generate_v7(apps: StateApps, schema_editor: BaseDatabaseSchemaEditor) -> None:
    if schema_editor.connection.vendor == "postgresql":
        schema_editor.execute(UUID_GENERATE_V7)


def drop_uuid_generate_v7(apps: StateApps, schema_editor: BaseDatabaseSchemaEditor) -> None:
    if schema_editor.connection.vendor == "postgresql":
        schema_editor.execute("DROP FUNCTION IF EXISTS uuid_generate_v7()")


class Migration(migrations.Migration):

    dependencies = [
        ('chats', '0017_quote_answer_positions_and_turn_rate_counts'),
    ]

    operations = [
        migrations.RunPython(create_uuid_generate_v7, drop_uuid_generate_v7, elidable=False),
        migrations.AlterField(
            model_name='message',
            name='id',
            field=models.UUIDField(default=chats.ids.uuid7, editable=False, primary_key=True, serialize=False),
        ),
        migrations.AlterField(
            model_name='messagecasecitation',
            name='id',
            field=models.UUIDField(default=chats.ids.uuid7, editable=False, primary_key=True, serialize=False),
        ),
        migrations.AlterField(
            model_name='messagecaselawcitation',
            name='id',
            field=models.UUIDField(default=chats.ids.uuid7, editable=False, primary_key=True, serialize=False),
        ),
        migrations.AlterField(
            model_name='messagecitation',
            name='id',
            field=models.UUIDField(default=chats.ids.uuid7, editable=False, primary_key=True, serialize=False),
        ),
        migrations.AlterField(
            model_name='messagetoolsource',
            name='id',
            field=models.UUIDField(default=chats.ids.uuid7, editable=False, primary_key=True, serialize=False),
        ),
    ]
