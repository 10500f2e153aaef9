"""The ledger's monthly partitions (PostgreSQL) and what makes them safe on every database: an entry carries its
row's time, a row of a dropped month gets no entry again, and ``verify_ledger`` tells a dropped month from a
missing entry.

On PostgreSQL: an entry of a month without a partition lands in the default partition and ``ledger_partitions``
moves it, unchanged, into its month's new partition; the triggers and constraints refuse on each partition what
they refuse on the parent; a matter on legal hold blocks a drop; ``citations.0014`` rebuilds a ledger holding
entries, every row and rule kept.
"""

from __future__ import annotations

import datetime
from collections.abc import Iterator
from io import StringIO
from typing import Any

import pytest
from django.core.management import CommandError, call_command
from django.db import IntegrityError, connection, transaction
from django.db.migrations.executor import MigrationExecutor
from django.utils import timezone

from chats.models import Message, Project
from chats.record import LegalHoldError
from citations import ledger, partitions, seals
from citations.backfill import backfill_ledger
from citations.models import CitationLedgerEntry, LedgerPartitionDrop
from tests import factories
from tests.test_ledger import INVALID, make_turn
from tests.test_seals import _raw, verify

UTC = datetime.UTC
# A month long before the migration's first partition: its entries land in the default partition.
OLD_MONTH = datetime.date(2020, 1, 1)
OLD_TIME = datetime.datetime(2020, 1, 15, 12, 0, tzinfo=UTC)


def _turn_at(when: datetime.datetime) -> Message:
    """A turn whose three source rows were written at ``when``."""
    with transaction.atomic():  # a turn and its rows, in one transaction as a finalize writes them
        message = factories.MessageFactory.create()
        factories.DocumentQuoteFactory.create(message=message, created_at=when)
        factories.OpinionQuoteFactory.create(message=message, created_at=when)
        factories.MessageToolSourceFactory.create(message=message, created_at=when)
    return message


def _rows(where: str = "", params: Any = None, table: str = "citation_ledger_entry") -> list[tuple[Any, ...]]:
    with connection.cursor() as cursor:
        cursor.execute(f"SELECT * FROM {table} {where} ORDER BY id", params or [])
        return cursor.fetchall()


def _execute(*statements: tuple[str, list[Any]]) -> None:
    """Run SQL statements in a savepoint of their own (so that a refusal leaves the test's transaction usable)."""
    with transaction.atomic(), connection.cursor() as cursor:
        for sql, params in statements:
            cursor.execute(sql, params)


def _home(entry_id: Any) -> str:
    """The partition holding an entry."""
    with connection.cursor() as cursor:
        cursor.execute("SELECT tableoid::regclass::text FROM citation_ledger_entry WHERE id = %s", [entry_id])
        return str(cursor.fetchone()[0])


# --- Every database: an entry's time is its row's --------------------------------------------------------------


@pytest.mark.django_db
@pytest.mark.parametrize("writer", ["assemble", "backfill"])
def test_an_entry_written_later_carries_its_rows_time_and_a_second_write_is_a_no_op(writer: str) -> None:
    # Given a turn's rows written 40 days ago, whose entries are written only now (a backfill's repair)
    then = timezone.now() - datetime.timedelta(days=40)
    message = _turn_at(then)

    # When the ledger writes them, twice
    first = ledger.assemble(message) if writer == "assemble" else backfill_ledger().total_created
    second = ledger.assemble(message) if writer == "assemble" else backfill_ledger().total_created

    # Then each entry has its row's time, not the time it was written, and the second write wrote nothing
    assert (first, second) == (3, 0)
    entries = list(CitationLedgerEntry.objects.filter(message=message))
    assert len(entries) == 3
    assert {e.created_at for e in entries} == {then}


@pytest.mark.django_db
def test_a_row_whose_entry_was_stamped_with_its_write_time_gets_no_second_entry() -> None:
    # Given an entry written before entries carried their row's time (stamped a minute after its row)
    turn = make_turn()
    factories.CitationLedgerEntryFactory.create(
        message_citation=turn.kb, message=turn.message, created_at=turn.kb.created_at + datetime.timedelta(minutes=1)
    )

    # When the ledger writes the turn (assemble, then the backfill)
    created = ledger.assemble(turn.message) + backfill_ledger().total_created

    # Then the KB quote keeps its one entry; only the other two rows got theirs
    assert created == 2
    assert CitationLedgerEntry.objects.filter(message_citation=turn.kb).count() == 1
    assert CitationLedgerEntry.objects.filter(message=turn.message).count() == 3


def _drop_month(month: datetime.date, *, entries: int = 0) -> LedgerPartitionDrop:
    """``month`` (a past one) dropped as ``ledger_partitions --drop-before`` drops it, with its tombstone: on
    PostgreSQL for real (the month's partition made, its entries moved in, then the month dropped); elsewhere,
    with no partitions, the tombstone alone (the entries counted are ``entries``)."""
    if connection.vendor == "postgresql":
        partitions.ensure_partitions(ahead=0, today=month)
        (tombstone,) = partitions.drop_months_before(before=partitions.next_month(month), dropped_by="ops")
        return tombstone
    return LedgerPartitionDrop.objects.create(
        range_start=partitions.month_start(month),
        range_end=partitions.month_start(partitions.next_month(month)),
        partition=partitions.partition_name(month),
        disposal=LedgerPartitionDrop.Disposal.DROPPED,
        ledger_entries=entries,
        dropped_by="ops",
    )


@pytest.mark.django_db
def test_rows_of_a_dropped_month_get_no_entry_again() -> None:
    # Given a dropped month's tombstone, and a turn with rows of that month but no entries
    _drop_month(OLD_MONTH)
    message = _turn_at(OLD_TIME)

    # When the backfill and assemble() run over it
    result = backfill_ledger()
    assembled = ledger.assemble(message)

    # Then no entry comes back (the backfill counts the rows as ones the ledger cannot hold)
    assert (result.total_created, assembled, result.total_skipped) == (0, 0, 3)
    assert not CitationLedgerEntry.objects.filter(message=message).exists()


@pytest.mark.django_db
def test_a_partition_tombstone_is_never_updated_or_deleted() -> None:
    tombstone = _drop_month(OLD_MONTH)
    with pytest.raises(IntegrityError, match="lqai_append_only"):
        LedgerPartitionDrop.objects.filter(pk=tombstone.pk).update(ledger_entries=1)
    with pytest.raises(IntegrityError, match="lqai_append_only"):
        tombstone.delete()
    if connection.vendor == "postgresql":
        for sql in ("UPDATE ledger_partition_drops SET ledger_entries = 1", "DELETE FROM ledger_partition_drops"):
            with pytest.raises(IntegrityError, match="lqai_append_only"):
                _execute((sql, []))


@pytest.mark.django_db
def test_verify_ledger_counts_a_dropped_months_entries_as_dropped_not_missing() -> None:
    # Given three sealed turns of an old month with their entries
    turns = [_turn_at(OLD_TIME) for _ in range(3)]
    for message in turns:
        assert ledger.assemble(message) == 3
        seals.seal_turn(message_id=message.pk)
    status, output = verify()
    assert status == 0, output
    if connection.vendor != "postgresql":
        # With no partition to drop, the entries go below the application, as a dropped partition takes them
        _raw("DELETE FROM citation_ledger_entry", {})
        status, output = verify()
        assert status == 1
        assert "has no ledger entry" in output

    # When the month is dropped
    tombstone = _drop_month(OLD_MONTH, entries=9)

    # Then the entries are gone, the record is intact, and the dropped entries are counted
    assert tombstone.ledger_entries == 9
    assert not CitationLedgerEntry.objects.filter(message__in=turns).exists()
    status, output = verify()
    assert status == 0, output
    assert "rows' entries dropped with their months" in output


# --- Every database: a tombstone is one whole past month ---------------------------------------------------------


def _tombstone(start: datetime.datetime, end: datetime.datetime, partition: str) -> LedgerPartitionDrop:
    return LedgerPartitionDrop.objects.create(
        range_start=start,
        range_end=end,
        partition=partition,
        disposal=LedgerPartitionDrop.Disposal.DROPPED,
        ledger_entries=0,
        dropped_by="nobody",
    )


def _this_month() -> datetime.date:
    return timezone.now().astimezone(UTC).date().replace(day=1)


@pytest.mark.django_db
@pytest.mark.parametrize(
    "case", ["from yesterday on", "this month", "next month", "mid-month start", "two months", "an hour short"]
)
def test_a_tombstone_of_anything_but_one_whole_past_month_is_refused(case: str) -> None:
    this_month = partitions.month_start(_this_month())
    next_month = partitions.month_start(partitions.next_month(_this_month()))
    old, old_end = partitions.month_start(OLD_MONTH), partitions.month_start(partitions.next_month(OLD_MONTH))
    start, end = {
        "from yesterday on": (timezone.now() - datetime.timedelta(days=1), datetime.datetime(2100, 1, 1, tzinfo=UTC)),
        "this month": (this_month, next_month),
        "next month": (next_month, partitions.month_start(partitions.next_month(next_month.date()))),
        "mid-month start": (old + datetime.timedelta(days=14), old_end),
        "two months": (old, partitions.month_start(partitions.next_month(old_end.date()))),
        "an hour short": (old, old_end - datetime.timedelta(hours=1)),
    }[case]

    with transaction.atomic(), pytest.raises(IntegrityError, match=r"lqai_ledger_tombstone: .* one whole past month"):
        _tombstone(start, end, partitions.partition_name(start.date()))
    assert not LedgerPartitionDrop.objects.exists()


@pytest.mark.postgres
@pytest.mark.django_db
def test_a_tombstone_planted_in_sql_is_refused_and_the_ledger_goes_on(api_client: Any, matter_chat: Any) -> None:
    # Given the current month's partition, attached (and an old month's, attached too)
    partitions.ensure_partitions(ahead=0)
    partitions.ensure_partitions(ahead=0, today=OLD_MONTH)
    this_month = _this_month()
    insert = (
        "INSERT INTO ledger_partition_drops (id, range_start, range_end, partition, disposal, ledger_entries, "
        "dropped_by, dropped_at) VALUES (gen_random_uuid(), %s, %s, %s, 'dropped', 0, 'nobody', now())"
    )
    planted = [
        # from yesterday to 2100, as the review planted it: not a month, and not past
        ("now() - interval '1 day'", "'2100-01-01'", "citation_ledger_entry_p000000", "one whole past month"),
        # this month, under its attached partition: not past
        (
            partitions.month_start(this_month),
            partitions.month_start(partitions.next_month(this_month)),
            partitions.partition_name(this_month),
            "one whole past month",
        ),
        # a whole past month whose partition is not attached (never made)
        (
            datetime.datetime(2019, 6, 1, tzinfo=UTC),
            datetime.datetime(2019, 7, 1, tzinfo=UTC),
            "citation_ledger_entry_y2019m06",
            "not attached",
        ),
        # a whole past month under another month's attached partition
        (
            datetime.datetime(2019, 6, 1, tzinfo=UTC),
            datetime.datetime(2019, 7, 1, tzinfo=UTC),
            partitions.partition_name(OLD_MONTH),
            "not attached",
        ),
    ]
    for start, end, partition, why in planted:
        if isinstance(start, str):
            sql = insert.replace("%s, %s, %s", f"{start}, {end}, %s")
            params: list[Any] = [partition]
        else:
            sql, params = insert, [start, end, partition]
        with pytest.raises(IntegrityError, match=rf"lqai_ledger_tombstone: .*{why}"):
            _execute((sql, params))
    assert not LedgerPartitionDrop.objects.exists()

    # And a new turn's rows get their entries, which verify_ledger finds
    from tests.test_seals import _turn

    turn = _turn(api_client, matter_chat)
    assert CitationLedgerEntry.objects.filter(message_id=turn["id"]).exists()
    status, output = verify()
    assert status == 0, output


@pytest.mark.django_db
def test_the_command_says_partitions_are_postgresql_only_on_sqlite() -> None:
    if connection.vendor == "postgresql":
        pytest.skip("on PostgreSQL the ledger is partitioned")
    with pytest.raises(CommandError, match="partitioned on PostgreSQL only"):
        call_command("ledger_partitions", "--ahead", "3")


# --- PostgreSQL: the default partition and the move -------------------------------------------------------------


def _ledger_partitions(*args: str) -> str:
    out = StringIO()
    call_command("ledger_partitions", *args, "--no-progress", stdout=out)
    return out.getvalue()


@pytest.mark.postgres
@pytest.mark.django_db
def test_entries_of_a_month_without_a_partition_land_in_the_default_and_move_unchanged() -> None:
    # Given a turn of a month with no partition of its own, assembled: its entries are in the default partition
    message = _turn_at(OLD_TIME)
    assert ledger.assemble(message) == 3
    entries = list(CitationLedgerEntry.objects.filter(message=message))
    assert {_home(e.pk) for e in entries} == {partitions.DEFAULT_PARTITION}
    before = _rows("WHERE message_id = %s", [message.pk])

    # When the partition command runs (as from cron)
    output = _ledger_partitions("--ahead", "2")

    # Then the month got its partition and the entries moved into it, every column unchanged
    name = partitions.partition_name(OLD_MONTH)
    assert f"Created {name}, moving 3 entries out of the default partition" in output
    assert {_home(e.pk) for e in entries} == {name}
    assert _rows("WHERE message_id = %s", [message.pk]) == before
    assert _rows(table=partitions.DEFAULT_PARTITION) == []
    # And a rerun changes nothing
    assert "0 partition(s) created, 0 entries moved" in _ledger_partitions("--ahead", "2")
    # And the moved entries are as append-only as ever, on their new partition too
    with pytest.raises(IntegrityError, match="lqai_append_only"):
        _execute((f"DELETE FROM {name} WHERE message_id = %s", [message.pk]))
    # And a second write of the turn still writes nothing
    assert ledger.assemble(message) == 0


@pytest.mark.postgres
@pytest.mark.django_db
def test_the_months_ahead_are_created_and_listed() -> None:
    today = timezone.now().date()
    far = today.replace(day=1)
    for _ in range(6):
        far = partitions.next_month(far)
    result = partitions.ensure_partitions(ahead=6)
    names = {p.name for p in partitions.partitions()}
    assert partitions.partition_name(far) in names
    assert partitions.partition_name(far) in result.created
    assert partitions.partition_name(far) in _ledger_partitions()


@pytest.mark.postgres
@pytest.mark.django_db
def test_rows_may_leave_the_default_partition_only_under_the_move_marker() -> None:
    message = _turn_at(OLD_TIME)
    ledger.assemble(message)
    # Without the marker, a delete from the default partition is refused like any other
    with pytest.raises(IntegrityError, match="lqai_append_only"):
        _execute((f"DELETE FROM {partitions.DEFAULT_PARTITION}", []))
    # And the marker opens the default partition only, not a month's partition
    partitions.ensure_partitions(ahead=0)
    month = partitions.partition_name(timezone.now().date())
    factories.CitationLedgerEntryFactory.create()
    with pytest.raises(IntegrityError, match="lqai_append_only"):
        _execute(("SELECT set_config(%s, 'on', true)", [partitions.MOVE_SETTING]), (f"DELETE FROM {month}", []))


# --- PostgreSQL: each partition refuses what the parent refuses --------------------------------------------------


def _insert_into(table: str, entry: CitationLedgerEntry) -> None:
    fields = CitationLedgerEntry._meta.concrete_fields
    columns = ", ".join(connection.ops.quote_name(f.column) for f in fields)
    values = [f.get_db_prep_save(getattr(entry, f.attname), connection) for f in fields]
    with transaction.atomic(), connection.cursor() as cursor:
        cursor.execute(f"INSERT INTO {table} ({columns}) VALUES ({', '.join(['%s'] * len(fields))})", values)


@pytest.mark.postgres
@pytest.mark.django_db
@pytest.mark.parametrize("target", ["parent", "month", "default"])
@pytest.mark.parametrize("case", sorted(INVALID))
def test_each_partition_refuses_the_inserts_the_parent_refuses(case: str, target: str) -> None:
    partitions.ensure_partitions(ahead=0)  # this month's partition (a new installation has only the default)
    invalid = INVALID[case]
    entry = invalid.make()
    if target == "default":
        entry.created_at = OLD_TIME  # a month with no partition: the default partition's
    table = {
        "parent": "citation_ledger_entry",
        "month": partitions.partition_name(entry.created_at.date()),
        "default": partitions.DEFAULT_PARTITION,
    }[target]
    with pytest.raises(IntegrityError, match=invalid.database_error):
        _insert_into(table, entry)


@pytest.mark.postgres
@pytest.mark.django_db
@pytest.mark.parametrize("target", ["parent", "month", "default"])
def test_each_partition_refuses_the_updates_and_deletes_the_parent_refuses(target: str) -> None:
    partitions.ensure_partitions(ahead=0)
    message = _turn_at(OLD_TIME) if target == "default" else make_turn().message
    ledger.assemble(message)
    entry = CitationLedgerEntry.objects.filter(message=message).first()
    assert entry is not None
    table = {
        "parent": "citation_ledger_entry",
        "month": partitions.partition_name(entry.created_at.date()),
        "default": partitions.DEFAULT_PARTITION,
    }[target]
    assert target == "parent" or _home(entry.pk) == table
    refused = {
        "update": (f"UPDATE {table} SET provider = 'other' WHERE id = %s", "cannot be updated"),
        "delete": (f"DELETE FROM {table} WHERE id = %s", "cannot be deleted"),
        "move to another month": (
            f"UPDATE {table} SET created_at = created_at - interval '40 days' WHERE id = %s",
            "cannot be updated",
        ),
    }
    for sql, why in refused.values():
        with pytest.raises(IntegrityError, match=f"lqai_append_only: citation_ledger_entry rows {why}"):
            _execute((sql, [entry.pk]))
    # The one change allowed, on a partition as on the parent: treatment_id, once, from NULL
    with connection.cursor() as cursor:
        cursor.execute(f"UPDATE {table} SET treatment_id = gen_random_uuid() WHERE id = %s", [entry.pk])
    with pytest.raises(IntegrityError, match="lqai_append_only"):
        _execute((f"UPDATE {table} SET treatment_id = gen_random_uuid() WHERE id = %s", [entry.pk]))


@pytest.mark.postgres
@pytest.mark.django_db
def test_every_partition_has_the_parents_triggers_checks_and_unique_keys() -> None:
    partitions.ensure_partitions(ahead=1)
    names = [p.name for p in partitions.partitions()]
    with connection.cursor() as cursor:
        for name in names:
            cursor.execute(
                "SELECT tgname FROM pg_trigger WHERE tgrelid = %s::regclass AND NOT tgisinternal ORDER BY 1", [name]
            )
            assert [row[0] for row in cursor.fetchall()] == [
                "citation_ledger_entry_append_only",
                "citation_ledger_entry_no_truncate",
                "citation_ledger_entry_one_per_source",
            ], name
            constraints = connection.introspection.get_constraints(cursor, name)
            checks = {n for n, c in constraints.items() if c["check"]}
            assert "citation_ledger_entry_exactly_one_source" in checks, name
            unique = sorted(c["columns"] for c in constraints.values() if c["unique"])
            assert ["message_citation_id", "created_at"] in unique, name
            assert ["id", "created_at"] in unique, name


# --- PostgreSQL: dropping months -----------------------------------------------------------------------------


@pytest.mark.postgres
@pytest.mark.django_db
def test_a_matter_on_legal_hold_blocks_dropping_its_month_and_a_drop_leaves_a_tombstone() -> None:
    # Given an old month with its partition, holding a turn of a matter on legal hold
    message = _turn_at(OLD_TIME)
    ledger.assemble(message)
    partitions.ensure_partitions(ahead=0)
    name = partitions.partition_name(OLD_MONTH)
    project = Project.objects.get(chats__messages=message)
    Project.objects.filter(pk=project.pk).update(legal_hold=True)

    # When the month is dropped, it is refused, naming the matter, and nothing changes
    with pytest.raises(LegalHoldError, match=str(project.pk)):
        partitions.drop_months_before(before=datetime.date(2020, 2, 1), dropped_by="ops")
    with pytest.raises(CommandError, match="legal hold"):
        _ledger_partitions("--drop-before", "2020-02", "--confirm")
    assert name in {p.name for p in partitions.partitions()}
    assert CitationLedgerEntry.objects.filter(message=message).count() == 3
    assert not LedgerPartitionDrop.objects.exists()

    # And without --confirm it only says what would go
    Project.objects.filter(pk=project.pk).update(legal_hold=False)
    assert f"Would drop {name} (3 entries)" in _ledger_partitions("--drop-before", "2020-02")
    assert name in {p.name for p in partitions.partitions()}

    # Once the hold is lifted, the drop goes through and leaves its tombstone
    output = _ledger_partitions("--drop-before", "2020-02", "--confirm", "--by", "ops")
    assert "Dropped 1 month(s), 3 entries" in output
    assert name not in {p.name for p in partitions.partitions()}
    tombstone = LedgerPartitionDrop.objects.get()
    assert (tombstone.partition, tombstone.ledger_entries, tombstone.dropped_by) == (name, 3, "ops")
    assert tombstone.range_start == datetime.datetime(2020, 1, 1, tzinfo=UTC)
    # And neither the backfill nor the partition command brings the month back
    assert backfill_ledger().total_created == 0
    assert ledger.assemble(message) == 0
    partitions.ensure_partitions(ahead=0)
    assert name not in {p.name for p in partitions.partitions()}
    assert _rows(table=partitions.DEFAULT_PARTITION) == []


@pytest.mark.postgres
@pytest.mark.django_db
def test_a_drop_keeps_the_detached_month_as_a_plain_table_when_asked() -> None:
    message = _turn_at(OLD_TIME)
    ledger.assemble(message)
    partitions.ensure_partitions(ahead=0)
    name = partitions.partition_name(OLD_MONTH)
    _ledger_partitions("--drop-before", "2020-02", "--confirm", "--keep-detached")
    assert name not in {p.name for p in partitions.partitions()}
    assert len(_rows(table=name)) == 3
    assert LedgerPartitionDrop.objects.get().disposal == LedgerPartitionDrop.Disposal.DETACHED
    # The kept month is as append-only as the ledger
    for sql in (f"UPDATE {name} SET provider = 'other'", f"DELETE FROM {name}"):
        with pytest.raises(IntegrityError, match="lqai_append_only"):
            _execute((sql, []))


@pytest.mark.postgres
@pytest.mark.django_db
@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--drop-before", "2020-13"], "is not a month"),
        (["--drop-before", "2999-01", "--confirm"], "Only months before the current one"),
        (["--ahead", "-1"], "from 0 to 120"),
        (["--confirm"], "go with --drop-before"),
        (["--ahead", "1", "--lock-timeout", "0"], "--lock-timeout must be a positive"),
    ],
)
def test_bad_input_is_a_clear_command_error(args: list[str], message: str) -> None:
    with pytest.raises(CommandError, match=message):
        _ledger_partitions(*args)


@pytest.mark.postgres
@pytest.mark.django_db
def test_a_lock_wait_past_the_timeout_is_a_clear_command_error_and_changes_nothing() -> None:
    import psycopg

    # Given another session holding the default partition (a long transaction reading it)
    before = {p.name for p in partitions.partitions()}
    with psycopg.connect(**connection.get_connection_params()) as other:
        other.execute(f"LOCK TABLE {partitions.DEFAULT_PARTITION} IN ACCESS SHARE MODE")
        # When the command must create months, it gives up after its lock timeout
        with pytest.raises(CommandError, match=r"Gave up waiting 0\.2 s for a lock"):
            _ledger_partitions("--ahead", "12", "--lock-timeout", "0.2")
    # Then no partition was created
    assert {p.name for p in partitions.partitions()} == before


@pytest.mark.postgres
@pytest.mark.django_db
def test_a_drop_is_refused_while_the_default_partition_holds_entries_of_those_months() -> None:
    message = _turn_at(OLD_TIME)
    ledger.assemble(message)
    with pytest.raises(CommandError, match="default partition holds 3 entries"):
        _ledger_partitions("--drop-before", "2020-02", "--confirm")


# --- PostgreSQL: the migration, on a ledger holding entries ------------------------------------------------------

# A KB quote's entry, written in SQL, dated ``{at}``.
KB_ENTRY_SQL = """
INSERT INTO citation_ledger_entry (id, project_id, chat_id, message_id, source_kind, message_citation_id,
                                   verification_status, confidence, created_at)
SELECT gen_random_uuid(), c.project_id, m.chat_id, m.id, 'kb_document', s.id,
       s.verification_method, s.verification_confidence, {at}
FROM message_citations s JOIN messages m ON m.id = s.message_id JOIN chats c ON c.id = m.chat_id
WHERE s.id = %s
"""
BEFORE = ("citations", "0013_ledger_admin_indexes")
PARTITIONED = ("citations", "0014_ledger_partitions")


def _migrate(*targets: tuple[str, str]) -> None:
    MigrationExecutor(connection).migrate(list(targets))


@pytest.fixture
def back_to_latest() -> Iterator[None]:
    try:
        yield
    finally:
        _migrate(*MigrationExecutor(connection).loader.graph.leaf_nodes())


def _relkind() -> str:
    with connection.cursor() as cursor:
        cursor.execute("SELECT relkind FROM pg_class WHERE oid = 'citation_ledger_entry'::regclass")
        return str(cursor.fetchone()[0])


def _rules() -> dict[str, tuple[Any, ...]]:
    with connection.cursor() as cursor:
        constraints = connection.introspection.get_constraints(cursor, "citation_ledger_entry")
    return {
        name: (c["primary_key"], c["unique"], c["check"], c["foreign_key"], c["index"], tuple(c["columns"]))
        for name, c in constraints.items()
    }


@pytest.mark.postgres
@pytest.mark.django_db(transaction=True)
@pytest.mark.usefixtures("back_to_latest")
def test_the_migration_partitions_a_ledger_holding_entries_keeping_every_row_and_rule() -> None:
    # Given the plain ledger of before the migration, holding entries of several months, one of them as the
    # old ledger wrote them: stamped with its write time, not its row's
    recent = [make_turn() for _ in range(3)]
    old = [_turn_at(OLD_TIME), _turn_at(datetime.datetime(2021, 6, 30, 23, 59, 59, tzinfo=UTC))]
    for message in [t.message for t in recent[1:]] + old:
        ledger.assemble(message)
    _migrate(BEFORE)
    assert _relkind() == "r"
    rules_before = _rules()
    with connection.cursor() as cursor:
        cursor.execute(KB_ENTRY_SQL.format(at="s.created_at + interval '1 minute'"), [recent[0].kb.pk])
    before = _rows()
    assert len(before) == 13

    # When the migration runs
    _migrate(PARTITIONED)

    # Then the ledger is partitioned, with a month per month of entries, and holds the same rows
    assert _relkind() == "p"
    names = {p.name for p in partitions.partitions()}
    assert {"citation_ledger_entry_y2020m01", "citation_ledger_entry_y2021m06", partitions.DEFAULT_PARTITION} <= names
    assert partitions.partition_name(timezone.now().date()) in names
    assert _rows() == before
    assert _rows(table=partitions.DEFAULT_PARTITION) == []
    # Under the same names: the keys and unique source constraints with created_at added, the rest unchanged
    rules_after = _rules()
    assert set(rules_after) == set(rules_before)
    for name, (primary, unique, check, foreign, index, columns) in rules_before.items():
        if primary or unique:
            columns = (*columns, "created_at")
        assert rules_after[name] == (primary, unique, check, foreign, index, columns), name
    # And the writers still write one entry per row (the write-time-stamped ones included): today's writers, on
    # the ledger of today's migrations (the later ones, such as citations.0022's column, on the partitioned table)
    _migrate(*MigrationExecutor(connection).loader.graph.leaf_nodes())
    for turn in recent[1:]:
        assert ledger.assemble(turn.message) == 0
    assert ledger.assemble(recent[0].message) == 2  # its other two rows had no entry yet
    assert backfill_ledger().total_created == 0
    assert CitationLedgerEntry.objects.filter(message_citation=recent[0].kb).count() == 1
    # And the database refuses a second entry for that row at its row's time, in SQL, like the old constraint
    with pytest.raises(IntegrityError, match="citation_ledger_entry_message_citation_uniq"):
        _execute((KB_ENTRY_SQL.format(at="s.created_at"), [recent[0].kb.pk]))
    _migrate(PARTITIONED)  # the later migrations undone on the partitioned table, its rows kept
    before = _rows()
    assert len(before) == 15

    # And back: the plain table again, the same rows and rules
    _migrate(BEFORE)
    assert _relkind() == "r"
    assert _rows() == before
    assert _rules() == rules_before
