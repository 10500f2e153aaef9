"""Sealed turns and ``verify_ledger``: every finalize of a turn is sealed in its transaction, chained per matter
and signed; ``verify_ledger`` recomputes the record and names what a change below the application broke."""

from __future__ import annotations

import base64
import datetime
import logging
import re
import threading
import time
from collections.abc import Callable
from io import StringIO
from typing import Any

import pytest
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey
from cryptography.hazmat.primitives.serialization import Encoding, NoEncryption, PrivateFormat
from django.core.management import call_command
from django.core.management.base import CommandError
from django.db import connection, connections, transaction
from django.db.models import QuerySet
from django.utils import timezone
from rest_framework.test import APIClient

from chats.models import CaseCitation, Chat, DocumentQuote, Message
from chats.record import purging
from chats.services import ClaimedCitation, finalize_turn, start_turn
from citations import integrity, keys, ledger, seals
from citations.integrity import verify_record
from citations.models import CitationLedgerEntry, SealChainHead, TurnSeal
from citations.purge import purge_matter
from lqai_verify import record
from tests import factories
from tests.conftest import triggers_off

TURN_TABLES = ("message_citations", "message_caselaw_citations", "message_tool_sources", "message_case_citations")
QUESTION = "Must the reviewing court be satisfied that no workable race-neutral alternative exists?"


def _turn(client: APIClient, chat: Chat) -> dict[str, Any]:
    response = client.post(f"/api/chats/{chat.pk}/messages/", {"content": QUESTION}, format="json")
    assert response.status_code == 201, response.content
    return response.json()["message"]


def verify(*args: str) -> tuple[int, str]:
    """``verify_ledger``'s exit status and its output (stdout and stderr)."""
    out, err = StringIO(), StringIO()
    try:
        call_command("verify_ledger", *args, stdout=out, stderr=err)
    except SystemExit as exit_:
        return int(exit_.code or 0), out.getvalue() + err.getvalue()
    return 0, out.getvalue() + err.getvalue()


def broken(*args: str) -> str:
    """``verify_ledger``'s output for a record it finds broken (exit status 1)."""
    status, output = verify(*args)
    assert status == 1, output
    return output


@pytest.fixture
def matter_turns(api_client: APIClient, matter_chat: Chat) -> list[dict[str, Any]]:
    """Three answered turns of alice's matter chat (the default backend quotes the matter's document)."""
    return [_turn(api_client, matter_chat) for _ in range(3)]


def _first_quote(message_id: Any) -> DocumentQuote:
    return DocumentQuote.objects.filter(message_id=message_id).order_by("id").first()  # type: ignore[return-value]


# --- Sealing with the turn -----------------------------------------------------------------------------------


@pytest.mark.django_db
def test_each_finalized_turn_is_sealed_in_its_matter_chain(
    matter_turns: list[dict[str, Any]], matter_chat: Chat
) -> None:
    seals_ = list(TurnSeal.objects.order_by("sequence"))

    assert [str(s.message_id) for s in seals_] == [t["id"] for t in matter_turns]
    assert {s.chain for s in seals_} == {f"matter:{matter_chat.project_id}"}
    assert [s.sequence for s in seals_] == [1, 2, 3]
    assert seals_[0].previous_sha256 == ""
    assert [s.previous_sha256 for s in seals_[1:]] == [s.seal_sha256 for s in seals_[:-1]]
    assert all(not s.late for s in seals_)
    assert _first_quote(matter_turns[0]["id"]) is not None  # the turns quoted something
    assert len(seals_[0].row_digests["rows"]) >= 1
    head = SealChainHead.objects.get(chain=seals_[0].chain)
    assert (head.sequence, head.seal_sha256) == (3, seals_[-1].seal_sha256)


@pytest.mark.django_db
def test_a_matterless_chat_chains_on_its_own(api_client: APIClient, user: Any) -> None:
    chat = factories.ChatFactory.create(project=None, owner=user)

    turn = _turn(api_client, chat)

    seal = TurnSeal.objects.get(message_id=turn["id"])
    assert (seal.chain, seal.sequence) == (f"chat:{chat.pk}", 1)


@pytest.mark.django_db
def test_the_seal_signs_the_turns_facts_with_the_ledger_key(matter_turns: list[dict[str, Any]]) -> None:
    seal = TurnSeal.objects.get(message_id=matter_turns[0]["id"])
    fields = seals.seal_fields(seal)
    facts = seals.turn_facts([seal.message_id])[str(seal.message_id)]

    assert seal.row_digests == facts.digests()
    assert record.sha256_hex(record.seal_payload(fields)) == seal.seal_sha256
    public = seals.keys.signing_key().public_key()
    assert record.signature_valid(public, seal.signature, record.seal_payload(fields))
    assert seal.key_fingerprint == record.fingerprint(public)


@pytest.mark.django_db
def test_a_resumed_turn_gets_a_second_seal_further_down_its_chain(matter_chat: Chat, user: Any) -> None:
    # Given a turn interrupted after one quote, and another turn of the matter finalized meanwhile
    _, answer = start_turn(chat=matter_chat, content=QUESTION, author=user)
    claim = ClaimedCitation("must ultimately be satisfied", document_id=matter_chat.project.documents.get().pk)  # type: ignore[union-attr]
    finalize_turn(message=answer, content="Partial", status=Message.Status.INTERRUPTED, claimed_citations=[claim])
    _, other = start_turn(chat=matter_chat, content=QUESTION, author=user)
    finalize_turn(message=other, content="Other", status=Message.Status.COMPLETE)

    # When the first turn is resumed and finalized again
    answer.refresh_from_db()
    finalize_turn(
        message=answer, content="Partial, then whole", status=Message.Status.COMPLETE, claimed_citations=[claim]
    )

    # Then it has two seals, the second after the other turn's, over all its rows
    mine = list(TurnSeal.objects.filter(message_id=answer.pk).order_by("finalize_number"))
    assert [(s.finalize_number, s.sequence) for s in mine] == [(1, 1), (2, 3)]
    assert set(mine[0].row_digests["rows"]) < set(mine[1].row_digests["rows"])
    status, output = verify()
    assert status == 0, output


@pytest.mark.django_db
def test_a_sealing_failure_never_breaks_the_turn(
    api_client: APIClient, matter_chat: Chat, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    def broken(**kwargs: Any) -> None:
        raise RuntimeError("the chain head is unreachable")

    monkeypatch.setattr(seals, "record", type("R", (), {"__getattr__": lambda self, name: broken})())
    with caplog.at_level(logging.ERROR, logger="citations.receivers"):
        turn = _turn(api_client, matter_chat)
    monkeypatch.undo()

    assert Message.objects.get(pk=turn["id"]).status == Message.Status.COMPLETE
    assert CitationLedgerEntry.objects.filter(message_id=turn["id"]).exists()  # the ledger's write stayed
    assert not TurnSeal.objects.exists()
    assert f"sealing failed for message {turn['id']}" in caplog.text
    status, output = verify()
    assert status == 1
    assert f"turn {turn['id']}: unsealed" in output

    out = StringIO()
    call_command("seal_turns", stdout=out)

    assert "sealed 1 turn(s) late" in out.getvalue()
    assert TurnSeal.objects.get(message_id=turn["id"]).late
    assert verify()[0] == 0


@pytest.mark.postgres
@pytest.mark.django_db
def test_a_database_error_in_the_seals_read_never_breaks_the_turn(
    api_client: APIClient, matter_chat: Chat, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    # Given the read of the facts to seal failing in the database (outside a savepoint, such an error leaves the
    # turn's whole transaction aborted, and the answer is lost)
    read = seals.turn_facts

    def failing_read(message_ids: Any) -> Any:
        with connection.cursor() as cursor:
            cursor.execute("SELECT 1 / 0")
        return read(message_ids)

    monkeypatch.setattr(seals, "turn_facts", failing_read)

    # When a turn is asked for
    with caplog.at_level(logging.ERROR, logger="citations.receivers"):
        turn = _turn(api_client, matter_chat)
    monkeypatch.undo()

    # Then it commits with its ledger entries, unsealed, the failure logged
    assert Message.objects.get(pk=turn["id"]).status == Message.Status.COMPLETE
    assert CitationLedgerEntry.objects.filter(message_id=turn["id"]).exists()
    assert not TurnSeal.objects.exists()
    assert f"sealing failed for message {turn['id']}" in caplog.text
    assert "division by zero" in caplog.text


# --- verify_ledger ---------------------------------------------------------------------------------------------


@pytest.mark.django_db
@pytest.mark.usefixtures("matter_turns")
def test_verify_ledger_passes_an_intact_record() -> None:
    status, output = verify()

    assert status == 0, output
    assert "intact: 3 seals in 1 chain(s), 3 turns" in output
    assert "lqai-turn-facts/1" not in output  # new seals are of the current facts format


def _raw(sql: str, params: dict[str, Any]) -> None:
    """A change below the application, as a database superuser could make it (:func:`triggers_off`)."""
    with connection.cursor() as cursor, triggers_off(cursor):
        cursor.execute(sql, params)


def _db_id(value: Any) -> Any:
    return value if connection.vendor == "postgresql" else value.hex


@pytest.mark.django_db
def test_verify_ledger_names_a_planted_edit(matter_turns: list[dict[str, Any]]) -> None:
    # Given the second turn's quote changed in SQL, its passage digest recomputed to match
    quote = _first_quote(matter_turns[1]["id"])
    _raw(
        "UPDATE message_citations SET quote = %(quote)s WHERE id = %(id)s",
        {"quote": "must never be satisfied", "id": _db_id(quote.pk)},
    )

    status, output = verify()

    assert status == 1
    assert f"BROKEN at turn {matter_turns[1]['id']}" in output
    assert f"row message_citations:{quote.pk} differs from its seal (edited)" in output


@pytest.mark.django_db
def test_verify_ledger_names_a_planted_deletion(matter_turns: list[dict[str, Any]]) -> None:
    quote = _first_quote(matter_turns[0]["id"])
    _raw("DELETE FROM citation_ledger_entry WHERE message_citation_id = %(id)s", {"id": _db_id(quote.pk)})
    _raw("DELETE FROM message_citations WHERE id = %(id)s", {"id": _db_id(quote.pk)})

    status, output = verify()

    assert status == 1
    assert f"BROKEN at turn {matter_turns[0]['id']}" in output
    assert f"sealed row message_citations:{quote.pk} is missing (deleted)" in output


@pytest.mark.django_db
def test_verify_ledger_names_a_planted_insertion(matter_turns: list[dict[str, Any]]) -> None:
    message = Message.objects.get(pk=matter_turns[2]["id"])
    planted = factories.DocumentQuoteFactory.create(message=message, document=_first_quote(message.pk).document)

    status, output = verify()

    assert status == 1
    assert f"BROKEN at turn {message.pk}" in output
    assert f"row message_citations:{planted.pk} is not in its seal (inserted)" in output


# A quote's place in the answer, its context flags and a case citation's pin cite: sealed from facts format /2.
FLAG = {"flag": "limited_after", "source_start": 40, "source_end": 45}


@pytest.fixture
def placed_turn(matter_chat: Chat) -> Message:
    """A sealed turn whose KB quotes are placed in its answer (one of them altered, with a context flag) and
    whose case citation has a pin cite within its opinion's pages."""
    message = factories.MessageFactory.create(chat=matter_chat)
    factories.DocumentQuoteFactory.create(message=message, answer_offset_start=10, answer_offset_end=38)
    factories.DocumentQuoteFactory.create(
        message=message,
        answer_offset_start=50,
        answer_offset_end=78,
        verification_method="altered",
        verification_confidence=0.6,
        context_flags=[FLAG],
    )
    factories.CaseCitationFactory.create(message=message, pin="310", pin_status="within")
    ledger.assemble(message)
    seals.seal_turn(message_id=message.pk)
    return message


def _planted(table: str, assignments: str, row_id: Any, **values: Any) -> None:
    _raw(f"UPDATE {table} SET {assignments} WHERE id = %(id)s", {"id": _db_id(row_id), **values})


def _json(name: str) -> str:
    return f"CAST(%({name})s AS jsonb)" if connection.vendor == "postgresql" else f"%({name})s"


PLACED_EDITS = [
    ("message_citations", "answer_offset_start = 11, answer_offset_end = 39", {}),
    (
        "message_citations",
        "answer_offset_start = NULL, answer_offset_end = NULL, answer_unplaced_reason = %(reason)s",
        {"reason": "the quote is not in the answer"},
    ),
    ("message_citations", "context_flags = {json}", {"flags": "[]"}),
    ("message_case_citations", "pin = %(pin)s", {"pin": "311"}),
    ("message_case_citations", "pin_status = %(status)s", {"status": "unchecked"}),
]


@pytest.mark.django_db
@pytest.mark.parametrize(
    ("table", "assignments", "values"),
    PLACED_EDITS,
    ids=["answer offsets", "unplaced reason", "context flags", "pin", "pin status"],
)
def test_verify_ledger_names_a_planted_edit_of_a_quotes_place_or_flags_or_a_pin_cite(
    placed_turn: Message, table: str, assignments: str, values: dict[str, Any]
) -> None:
    # Given a sealed turn's quote place, context flags or pin cite changed in SQL, triggers off
    target: CaseCitation | DocumentQuote = (
        CaseCitation.objects.get(message=placed_turn)
        if table == "message_case_citations"
        else DocumentQuote.objects.get(message=placed_turn, verification_method="altered")
    )
    assert verify()[0] == 0
    _planted(table, assignments.format(json=_json("flags")), target.pk, **values)

    output = broken()

    assert f"BROKEN at turn {placed_turn.pk}" in output
    assert f"row {table}:{target.pk} differs from its seal (edited)" in output


@pytest.mark.django_db
def test_a_seal_names_its_facts_format_inside_what_it_signs(placed_turn: Message) -> None:
    seal = TurnSeal.objects.get(message=placed_turn)
    assert seal.row_digests["format"] == record.FACTS_FORMAT == "lqai-turn-facts/2"
    # Claiming the first format, whose rows' digests leave the pin cite out, breaks the facts digest
    fields = {**seals.seal_fields(seal), "row_digests": {**seal.row_digests, "format": record.FACTS_FORMAT_1}}
    assert record.seal_differences(fields) == ["its row digests do not add up to its facts digest"]
    unknown = {**seals.seal_fields(seal), "row_digests": {**seal.row_digests, "format": "lqai-turn-facts/9"}}
    assert record.seal_differences(unknown) == [
        "its facts format 'lqai-turn-facts/9' is none of lqai-turn-facts/1, lqai-turn-facts/2"
    ]


# The fields facts format /2 added to each table's rows. Written out, not derived from lqai_verify.record: seals of
# /1 were made by the earlier release, which digested each row whole, with every field it had then (a case
# citation's answer offsets among them).
ADDED_IN_FACTS_FORMAT_2 = {
    record.KB: {"answer_offset_start", "answer_offset_end", "answer_unplaced_reason", "context_flags"},
    record.CASELAW: {"answer_offset_start", "answer_offset_end", "answer_unplaced_reason", "context_flags"},
    record.TOOL: set(),
    record.CASE: {"pin", "pin_status"},
}


def _first_format_row(row: dict[str, Any]) -> dict[str, Any]:
    """A row as the earlier release read it: without the fields facts format /2 added."""
    return {name: value for name, value in row.items() if name not in ADDED_IN_FACTS_FORMAT_2[row["table"]]}


def _first_format_digests(facts: seals.TurnFacts) -> dict[str, Any]:
    """A turn's row digests as the earlier release sealed them (``lqai-turn-facts/1``: no ``format`` key, each
    row's digest that of its whole canonical JSON then)."""
    return {
        "turn": record.turn_sha256(facts.turn),
        "rows": {
            record.row_key(row): record.sha256_hex(record.canonical_json(_first_format_row(row))) for row in facts.rows
        },
    }


def seal_as_the_earlier_release(message: Message) -> TurnSeal:
    """Index ``message`` and seal it in ``lqai-turn-facts/1``, as the earlier release sealed a turn."""
    ledger.assemble(message)
    with pytest.MonkeyPatch.context() as patched:
        patched.setattr(seals.TurnFacts, "digests", _first_format_digests)
        return seals.seal_turn(message_id=message.pk)


@pytest.mark.django_db
def test_seals_of_the_first_facts_format_still_verify_and_cover_what_they_sealed(matter_chat: Chat) -> None:
    # Given a turn sealed in the first facts format, before its rows' places and pin cites were sealed
    message = factories.MessageFactory.create(chat=matter_chat)
    factories.DocumentQuoteFactory.create(message=message, answer_offset_start=10, answer_offset_end=38)
    citation = factories.CaseCitationFactory.create(message=message, pin="310", pin_status="within")
    seal_as_the_earlier_release(message)
    seal = TurnSeal.objects.get(message=message)
    assert "format" not in seal.row_digests
    status, output = verify()
    assert status == 0, output
    assert (
        "1 turn(s) sealed in lqai-turn-facts/1 (a quote's place and context flags and a pin cite not sealed" in output
    )

    # Then a change of what it did not seal goes unseen; a change of what it sealed is found
    _planted("message_case_citations", "pin_status = %(status)s", citation.pk, status="unchecked")
    assert verify()[0] == 0
    # (a case citation's place in the answer was sealed from the first format on)
    _planted(
        "message_case_citations",
        "answer_offset_start = answer_offset_start + 1, answer_offset_end = answer_offset_end + 1",
        citation.pk,
    )
    assert f"row message_case_citations:{citation.pk} differs from its seal (edited)" in broken()


@pytest.mark.django_db
def test_verify_ledger_names_a_ledger_entry_that_disagrees_with_its_sealed_row(
    matter_turns: list[dict[str, Any]],
) -> None:
    quote = _first_quote(matter_turns[0]["id"])
    _raw(
        "UPDATE citation_ledger_entry SET confidence = 0.5, verification_status = 'tolerant_match' "
        "WHERE message_citation_id = %(id)s",
        {"id": _db_id(quote.pk)},
    )

    status, output = verify()

    assert status == 1
    assert f"BROKEN at turn {matter_turns[0]['id']}" in output
    assert "its verification_status is 'tolerant_match', its sealed row says 'exact_match'" in output


@pytest.mark.django_db
@pytest.mark.parametrize("matter", [False, True], ids=["whole record", "one matter"])
def test_verify_ledger_names_a_ledger_entry_filed_away_from_its_row(
    matter_turns: list[dict[str, Any]], matter_chat: Chat, matter: bool
) -> None:
    # Given one entry moved in SQL to another time (the whole record's check reads a batch's entries filed
    # within its rows' times only), and another to another turn
    moved, rehomed = (_first_quote(turn["id"]) for turn in matter_turns[:2])
    _raw(
        "UPDATE citation_ledger_entry SET created_at = %(when)s WHERE message_citation_id = %(id)s",
        {
            "when": connection.ops.adapt_datetimefield_value(datetime.datetime(2001, 1, 1, tzinfo=datetime.UTC)),
            "id": _db_id(moved.pk),
        },
    )
    _raw(
        "UPDATE citation_ledger_entry SET message_id = %(other)s WHERE message_citation_id = %(id)s",
        {"other": _db_id(Message.objects.get(pk=matter_turns[2]["id"]).pk), "id": _db_id(rehomed.pk)},
    )

    output = broken(*(["--matter", str(matter_chat.project_id)] if matter else []))

    # Then both are named, by the turn each entry now claims
    assert f"turn {matter_turns[0]['id']}: ledger entry " in output
    assert f"points at message_citations:{moved.pk}, not filed with its row (another turn or another time)" in output
    assert f"turn {matter_turns[2]['id']}: ledger entry " in output
    assert f"points at message_citations:{rehomed.pk}, not filed with its row" in output


@pytest.mark.django_db
@pytest.mark.usefixtures("matter_turns")
def test_verify_ledger_draws_a_bar_a_pass_on_a_terminal(monkeypatch: pytest.MonkeyPatch) -> None:
    from citations.management.commands import verify_ledger as command
    from tests.test_backfill import _Terminal

    # Given a record of PROGRESS_FROM seals and a terminal
    terminal = _Terminal()
    monkeypatch.setattr(command, "PROGRESS_FROM", 3)
    monkeypatch.setattr("sys.stderr", terminal)

    status, output = verify("--batch-size", "2")

    # Then each pass has its bar, each to the end
    assert status == 0, output
    drawn = terminal.getvalue()
    assert re.search(r"verify_ledger: chains: 100%.*3/3", drawn), drawn
    assert re.search(r"verify_ledger: turns: 100%.*3/3", drawn), drawn


@pytest.mark.postgres
@pytest.mark.django_db
def test_the_whole_records_check_reads_a_batchs_entries_in_its_months_only(matter_turns: list[dict[str, Any]]) -> None:
    # Given a ledger with the partitions of the three months before this one and of the next (a deployment
    # keeps every month of its record), and turns of this month
    from django.test.utils import CaptureQueriesContext

    from citations import partitions

    months = [timezone.now().date().replace(day=1)]
    for _ in range(3):
        months.insert(0, (months[0] - datetime.timedelta(days=1)).replace(day=1))
    partitions.ensure_partitions(ahead=4, today=months[0])

    with CaptureQueriesContext(connection) as captured:
        assert verify_record().intact
    reads = [q["sql"] for q in captured.captured_queries if "FROM citation_ledger_entry\n WHERE message_id" in q["sql"]]
    assert reads

    # Then each batch's read of its entries plans this month's partition, and none of the months before
    for sql in reads:
        with connection.cursor() as cursor:
            cursor.execute(f"EXPLAIN {sql}")
            plan = "\n".join(row[0] for row in cursor.fetchall())
        assert partitions.partition_name(months[-1]) in plan, plan
        for month in months[:-1]:
            assert partitions.partition_name(month) not in plan, plan


@pytest.mark.django_db
def test_verify_ledger_checks_turns_in_the_order_they_were_sealed_across_chains(
    api_client: APIClient, matter_chat: Chat, user: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Given turns of two chains, alternating
    other = factories.ChatFactory.create(project=None, owner=user)
    turns = [_turn(api_client, chat)["id"] for chat in (matter_chat, other, matter_chat, other)]
    checked: list[str] = []
    differences = record.facts_differences

    def noting(**kwargs: Any) -> list[str]:
        checked.append(kwargs["seal"]["message"])
        return differences(**kwargs)

    monkeypatch.setattr(record, "facts_differences", noting)

    # When the whole record is checked a seal a batch
    result = verify_record(batch_size=1)

    # Then the turns are checked in the order they were sealed (their rows are neighbours on disk), not chain
    # by chain, and the chains are still followed link by link
    assert result.intact, [str(p) for p in result.problems]
    assert checked == turns
    assert (result.seals, result.chains, result.signatures) == (4, 2, 2)


@pytest.mark.django_db
def test_verify_ledger_names_a_deleted_turn_by_the_gap_in_its_chain(
    matter_turns: list[dict[str, Any]], matter_chat: Chat
) -> None:
    _raw(
        "DELETE FROM turn_seals WHERE message_id = %(id)s",
        {"id": _db_id(Message.objects.get(pk=matter_turns[1]["id"]).pk)},
    )
    with transaction.atomic(), purging(matter_chat.project_id):  # as an operator with the purge's rights could
        Message.objects.filter(pk=matter_turns[1]["id"]).delete()

    status, output = verify()

    assert status == 1
    assert f"turn {matter_turns[2]['id']}" in output
    assert "seal #3 follows #1: 1 seal(s) missing (deleted turns)" in output


@pytest.mark.django_db
def test_verify_ledger_detects_a_seal_recomputed_without_the_key(matter_turns: list[dict[str, Any]]) -> None:
    # Given the last seal's facts digest rewritten (and its own digest recomputed) by someone without the key
    seal = TurnSeal.objects.get(message_id=matter_turns[2]["id"])
    seal.row_digests["turn"] = "0" * 64
    fields = {**seals.seal_fields(seal), "row_digests": seal.row_digests}
    fields["facts_sha256"] = record.facts_sha256(
        turn_digest="0" * 64, row_digests=seal.row_digests["rows"], verifier_version=seal.verifier_version
    )
    with connection.cursor() as cursor:  # below the application, triggers off, as a database superuser could
        if connection.vendor == "postgresql":
            cursor.execute("SET LOCAL session_replication_role = replica")
        QuerySet.update(
            TurnSeal.objects.filter(pk=seal.pk),
            row_digests=seal.row_digests,
            facts_sha256=fields["facts_sha256"],
            seal_sha256=record.sha256_hex(record.seal_payload(fields)),
        )
        if connection.vendor == "postgresql":
            cursor.execute("SET LOCAL session_replication_role = origin")

    status, output = verify()

    assert status == 1
    assert "its signature is not valid" in output


@pytest.mark.django_db
def test_verify_ledger_checks_one_matter(matter_turns: list[dict[str, Any]], matter_chat: Chat, user: Any) -> None:
    # Given another matter of alice's whose one turn was edited below the application
    other_chat = factories.ChatFactory.create(project=factories.ProjectFactory.create(owner=user), owner=user)
    factories.DocumentFactory.create(project=other_chat.project)
    client = APIClient()
    client.force_authenticate(user=user)
    other = _turn(client, other_chat)
    _raw(
        "UPDATE messages SET content = 'changed' WHERE id = %(id)s",
        {"id": _db_id(Message.objects.get(pk=other["id"]).pk)},
    )

    intact, intact_output = verify("--matter", str(matter_chat.project_id))
    broken, broken_output = verify("--matter", str(other_chat.project_id))

    assert intact == 0, intact_output
    assert "3 seals in 1 chain(s)" in intact_output
    assert broken == 1
    assert f"turn {other['id']} (matter:{other_chat.project_id} #1): the turn (question, answer" in broken_output


def test_verify_ledger_refuses_an_unknown_matter(db: None) -> None:
    with pytest.raises(CommandError, match="No matter"):
        call_command("verify_ledger", "--matter", "00000000-0000-0000-0000-000000000000")


def _seal_id(message_id: Any) -> int:
    return TurnSeal.objects.get(message_id=message_id).pk


@pytest.mark.django_db
def test_verify_ledger_names_the_missing_start_of_a_chain(matter_turns: list[dict[str, Any]]) -> None:
    _raw("DELETE FROM turn_seals WHERE id = %(id)s", {"id": _seal_id(matter_turns[0]["id"])})

    output = broken()

    assert f"BROKEN at turn {matter_turns[1]['id']}" in output
    assert "the chain starts at #2: seals before it are missing" in output


@pytest.mark.django_db
def test_verify_ledger_names_the_missing_end_of_a_chain(matter_turns: list[dict[str, Any]], matter_chat: Chat) -> None:
    _raw("DELETE FROM turn_seals WHERE id = %(id)s", {"id": _seal_id(matter_turns[2]["id"])})

    output = broken()

    assert (
        f"turn {matter_turns[1]['id']} (matter:{matter_chat.project_id} #2): the chain's head says it ends at #3, "
        "its last seal is #2 (seals at its end are missing)"
    ) in output
    assert f"turn {matter_turns[2]['id']}: unsealed" in output


@pytest.mark.django_db
def test_verify_ledger_names_a_chain_whose_seals_are_all_gone(
    matter_turns: list[dict[str, Any]], matter_chat: Chat
) -> None:
    _raw("DELETE FROM turn_seals WHERE chain = %(chain)s", {"chain": f"matter:{matter_chat.project_id}"})

    output = broken()

    assert "the record: the chain's head says it ends at #3, but it has no seals" in output
    assert "verify_ledger: 4 problem(s)" in output  # the head, and each of the three turns unsealed


@pytest.mark.django_db
def test_verify_ledger_names_a_seal_whose_digest_was_rewritten(matter_turns: list[dict[str, Any]]) -> None:
    _raw(
        "UPDATE turn_seals SET seal_sha256 = %(digest)s WHERE id = %(id)s",
        {"digest": "0" * 64, "id": _seal_id(matter_turns[0]["id"])},
    )

    output = broken()

    assert f"BROKEN at turn {matter_turns[0]['id']}" in output
    assert "its seal digest does not match its fields" in output
    assert f"turn {matter_turns[1]['id']} (matter:" in output
    assert "its link to the previous seal is broken" in output


# PostgreSQL: with its triggers off, as a database superuser could (SQLite checks each test's foreign keys).
@pytest.mark.postgres
@pytest.mark.django_db
@pytest.mark.parametrize("with_its_rows", [True, False], ids=["with its rows", "its rows left behind"])
def test_verify_ledger_names_a_sealed_turn_deleted_below_the_application(
    matter_turns: list[dict[str, Any]], with_its_rows: bool
) -> None:
    # Given the second turn deleted in SQL, with or without its rows and entries, its seal left (the seals'
    # foreign-key checks, deferred to the end of the test's transaction, made first, while their turns exist)
    with connection.cursor() as cursor:
        cursor.execute("SET CONSTRAINTS ALL IMMEDIATE")
        cursor.execute("SET CONSTRAINTS ALL DEFERRED")
    message_id = Message.objects.get(pk=matter_turns[1]["id"]).pk
    for table in ("citation_ledger_entry", *TURN_TABLES) if with_its_rows else ():
        _raw(f"DELETE FROM {table} WHERE message_id = %(id)s", {"id": message_id})
    _raw("DELETE FROM messages WHERE id = %(id)s", {"id": message_id})

    output = broken()

    assert f"BROKEN at turn {matter_turns[1]['id']}" in output
    assert "the sealed turn is missing (deleted)" in output


@pytest.mark.django_db
def test_verify_ledger_lists_at_most_limit_problems_and_counts_the_rest(matter_turns: list[dict[str, Any]]) -> None:
    for turn in matter_turns:
        _raw(
            "UPDATE messages SET content = 'changed' WHERE id = %(id)s",
            {"id": _db_id(Message.objects.get(pk=turn["id"]).pk)},
        )

    output = broken("--limit", "1")

    assert f"BROKEN at turn {matter_turns[0]['id']}" in output
    assert "also" not in output
    assert "  ... and 2 more" in output
    assert "verify_ledger: 3 problem(s)" in output


@pytest.mark.django_db
@pytest.mark.usefixtures("matter_turns")
def test_verify_ledger_checks_every_signature_on_request() -> None:
    status, output = verify("--all-signatures")

    assert status == 0, output
    assert "3 seals in 1 chain(s)" in output
    assert "3 signatures checked" in output


@pytest.mark.django_db
def test_seals_under_a_retired_key_verify_with_its_public_key_only(
    matter_turns: list[dict[str, Any]], settings: Any
) -> None:
    # Given the record sealed under the current key, then that key replaced by a new one
    retired = keys.signing_key().public_key()
    new_key = Ed25519PrivateKey.generate().private_bytes(Encoding.Raw, PrivateFormat.Raw, NoEncryption())
    settings.LQAI_LEDGER_KEY = base64.b64encode(new_key).decode("ascii")

    # Then without the retired key's public key, the seals are signed by an unknown key
    unknown, unknown_output = verify()
    assert unknown == 1
    assert f"signed by an unknown key {record.fingerprint(retired)[:16]}... (not the current key" in unknown_output

    # And with it among the retired public keys, the record is intact
    settings.LQAI_LEDGER_RETIRED_PUBLIC_KEYS = [record.public_key_b64(retired)]
    intact, intact_output = verify()
    assert intact == 0, intact_output


@pytest.mark.parametrize(
    ("command", "arguments", "error"),
    [
        ("verify_ledger", ["--batch-size", "0"], "--batch-size and --limit must be at least 1."),
        ("verify_ledger", ["--limit", "0"], "--batch-size and --limit must be at least 1."),
        ("seal_turns", ["--batch-size", "0"], "--batch-size must be at least 1."),
        ("seal_turns", ["--matter", "00000000-0000-0000-0000-000000000000"], "No matter 00000000-"),
    ],
)
def test_the_seal_commands_refuse_bad_arguments(db: None, command: str, arguments: list[str], error: str) -> None:
    with pytest.raises(CommandError, match=re.escape(error)):
        call_command(command, *arguments, stdout=StringIO())
    assert not TurnSeal.objects.exists()


# --- Older turns -----------------------------------------------------------------------------------------------


@pytest.mark.django_db
def test_seal_turns_seals_older_turns_late_and_resumably(matter_chat: Chat) -> None:
    older = [factories.assembled_turn(matter_chat) for _ in range(3)]
    out = StringIO()
    call_command("seal_turns", "--dry-run", stdout=out)
    assert "would seal 3 turn(s) late" in out.getvalue()
    assert not TurnSeal.objects.exists()

    call_command("seal_turns", "--batch-size", "2", stdout=out)
    call_command("seal_turns", stdout=out)

    assert "sealed 3 turn(s) late; 0 unsealed" in out.getvalue()
    assert "sealed 0 turn(s) late; 0 unsealed" in out.getvalue()
    sealed = list(TurnSeal.objects.order_by("sequence"))
    assert [s.message_id for s in sealed] == [m.pk for m in sorted(older, key=lambda m: (m.finalized_at, m.pk))]
    assert all(s.late and s.sealed_at >= s.finalized_at for s in sealed)
    assert verify()[0] == 0


@pytest.mark.django_db
@pytest.mark.parametrize("batch_size", [1, 2, 500])
def test_seal_turns_walks_turns_finalized_at_one_instant_in_id_order(matter_chat: Chat, batch_size: int) -> None:
    # Given five unsealed turns, three of them finalized at the same microsecond (the keyset's tie)
    instant = timezone.now()
    turns = [
        factories.MessageFactory.create(chat=matter_chat, finalized_at=instant + datetime.timedelta(seconds=offset))
        for offset in (1, 0, 0, -1, 0)
    ]

    # When they are sealed late in batches of one, two or all
    assert seals.seal_late(batch_size=batch_size) == 5

    # Then each is sealed once, in finalize order and, at the tie, in id order
    sealed = list(TurnSeal.objects.order_by("sequence").values_list("message_id", flat=True))
    assert sealed == [m.pk for m in sorted(turns, key=lambda m: (m.finalized_at, m.pk))]
    assert seals.seal_late(batch_size=batch_size) == 0


@pytest.mark.postgres
@pytest.mark.django_db
def test_each_seal_turns_batch_reads_the_index_from_where_the_last_one_ended(matter_chat: Chat) -> None:
    last = factories.MessageFactory.create(chat=matter_chat)
    with connection.cursor() as cursor:
        cursor.execute("SET LOCAL enable_seqscan = off")
        plan = seals.unsealed_after((last.finalized_at, last.pk)).explain()  # type: ignore[arg-type]

    # A range scan of the finalized answers starting at the last turn sealed, not a read of all the turns
    assert "messages_finalized_idx" in plan, plan
    assert re.search(r"Index Cond: .*finalized_at >= ", plan), plan


# --- Concurrency -----------------------------------------------------------------------------------------------


@pytest.mark.postgres
@pytest.mark.django_db(transaction=True)
@pytest.mark.timeout(120)
def test_sixteen_concurrent_turns_of_one_matter_leave_an_intact_chain(
    committed_matter_chat: tuple[APIClient, Chat],
) -> None:
    _, chat = committed_matter_chat
    user = chat.owner
    answers = [start_turn(chat=chat, content=QUESTION, author=user)[1] for _ in range(16)]
    document = chat.project.documents.get()  # type: ignore[union-attr]
    barrier = threading.Barrier(16, timeout=30)
    errors: list[BaseException] = []

    def finalize(answer: Message) -> None:
        try:
            barrier.wait()
            finalize_turn(
                message=answer,
                content="Answer",
                status=Message.Status.COMPLETE,
                claimed_citations=[ClaimedCitation("must ultimately be satisfied", document_id=document.pk)],
            )
        except BaseException as exc:
            errors.append(exc)
        finally:
            connections.close_all()

    threads = [threading.Thread(target=finalize, args=(answer,)) for answer in answers]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=60)
    assert not any(thread.is_alive() for thread in threads), "a finalize hung"

    assert errors == []
    chain = list(TurnSeal.objects.filter(chain=f"matter:{chat.project_id}").order_by("sequence"))
    assert [s.sequence for s in chain] == list(range(1, 17))
    assert {s.message_id for s in chain} == {a.pk for a in answers}
    assert [s.previous_sha256 for s in chain[1:]] == [s.seal_sha256 for s in chain[:-1]]
    result = verify_record()
    assert result.intact, [str(p) for p in result.problems]
    assert result.seals == 16


@pytest.mark.postgres
@pytest.mark.django_db(transaction=True)
@pytest.mark.timeout(60)
def test_a_chain_head_locked_elsewhere_holds_the_turn_only_for_the_bound(
    committed_matter_chat: tuple[APIClient, Chat], settings: Any, caplog: pytest.LogCaptureFixture
) -> None:
    # Given a matter whose chain head another connection holds locked for longer than the bound
    settings.LQAI_LEDGER_TIMEOUT = 0.5
    client, chat = committed_matter_chat
    _turn(client, chat)
    locked, release = threading.Event(), threading.Event()

    def hold_the_head() -> None:
        try:
            with transaction.atomic(), connection.cursor() as cursor:
                cursor.execute(
                    f"SELECT 1 FROM {SealChainHead._meta.db_table} WHERE chain = %s FOR UPDATE",
                    [f"matter:{chat.project_id}"],
                )
                locked.set()
                release.wait(timeout=20)
        finally:
            connections.close_all()

    holder = threading.Thread(target=hold_the_head)
    holder.start()
    try:
        assert locked.wait(timeout=10)
        # When a turn is asked for
        started = time.monotonic()
        with caplog.at_level(logging.ERROR, logger="citations.receivers"):
            answer = _turn(client, chat)
        elapsed = time.monotonic() - started
    finally:
        release.set()
        holder.join(timeout=30)

    # Then it answers in about the bound, committed unsealed, the failure logged with the repair
    assert elapsed < 0.5 + 3.0
    assert not TurnSeal.objects.filter(message_id=answer["id"]).exists()
    (logged,) = [r for r in caplog.records if r.name == "citations.receivers" and r.levelno == logging.ERROR]
    assert answer["id"] in logged.getMessage()
    assert "seal_turns" in logged.getMessage()
    # (lock_timeout or statement_timeout, whichever fires first: both are the bound)
    assert "timeout" in (logged.exc_text or "")
    assert "seal_chain_heads" in (logged.exc_text or "")
    # and the caller's lock_timeout is what it was: the next turn seals, and seal_turns repairs the gap
    _turn(client, chat)
    assert seals.seal_late() == 1
    assert verify()[0] == 0


@pytest.mark.postgres
@pytest.mark.django_db(transaction=True)
@pytest.mark.timeout(60)
def test_verify_ledger_checks_one_instant_of_a_record_that_grows_while_it_reads(
    committed_matter_chat: tuple[APIClient, Chat], monkeypatch: pytest.MonkeyPatch
) -> None:
    # Given a matter with two sealed turns
    client, chat = committed_matter_chat
    _turn(client, chat)
    _turn(client, chat)
    # and a third turn committed by another connection once verify_ledger has started reading (after it read
    # where each chain ends, before it reads the seals)
    monkeypatch.setattr(integrity, "_seal_page", a_turn_commits_first(client, chat, integrity._seal_page))

    # When the record is checked
    result = verify_record()

    # Then it is intact as of the instant the check started: the two seals it found the chain ending at
    assert result.intact, [str(p) for p in result.problems]
    assert result.seals == 2
    assert TurnSeal.objects.filter(chain=f"matter:{chat.project_id}").count() == 3
    # and the next check sees the third
    assert verify_record().seals == 3


def a_turn_commits_first(client: APIClient, chat: Chat, read: Callable[..., Any]) -> Callable[..., Any]:
    """``read``, made to wait at its first call until another connection has committed a turn of ``chat``
    (a record that grows while it is read)."""
    grown: list[dict[str, Any]] = []

    def another_turn() -> None:
        try:
            grown.append(_turn(client, chat))
        finally:
            connections.close_all()

    def reading(*args: Any, **kwargs: Any) -> Any:
        if not grown:
            worker = threading.Thread(target=another_turn)
            worker.start()
            worker.join(timeout=30)
            assert grown, "the concurrent turn did not commit"
        return read(*args, **kwargs)

    return reading


def _settings_while_walking(monkeypatch: pytest.MonkeyPatch) -> dict[str, Any]:
    """What the connection says of its transaction while verify_ledger reads its first batch."""
    seen: dict[str, Any] = {}
    batches = integrity._batches

    def noting(**kwargs: Any) -> Any:
        seen["in_transaction"] = connection.in_atomic_block
        if connection.vendor == "postgresql":
            with connection.cursor() as cursor:
                for name in ("transaction_isolation", "transaction_read_only", "random_page_cost"):
                    cursor.execute(f"SHOW {name}")
                    seen[name] = cursor.fetchone()[0]
        return batches(**kwargs)

    monkeypatch.setattr(integrity, "_batches", noting)
    return seen


@pytest.mark.postgres
@pytest.mark.django_db(transaction=True)
@pytest.mark.timeout(60)
def test_verify_ledger_reads_a_read_only_snapshot_and_leaves_the_planner_alone(
    committed_matter_chat: tuple[APIClient, Chat], monkeypatch: pytest.MonkeyPatch
) -> None:
    client, chat = committed_matter_chat
    _turn(client, chat)
    seen = _settings_while_walking(monkeypatch)

    assert verify_record().intact

    assert seen == {
        "in_transaction": True,
        "transaction_isolation": "repeatable read",
        "transaction_read_only": "on",
        "random_page_cost": "4",  # PostgreSQL's default: no planner setting of its own
    }
    with connection.cursor() as cursor:  # the session's own setting, untouched
        cursor.execute("SHOW random_page_cost")
        assert cursor.fetchone()[0] == "4"


@pytest.mark.postgres
@pytest.mark.django_db(transaction=True)
@pytest.mark.timeout(60)
def test_verify_ledger_keeps_a_deployments_lower_random_page_cost(
    committed_matter_chat: tuple[APIClient, Chat], monkeypatch: pytest.MonkeyPatch
) -> None:
    client, chat = committed_matter_chat
    _turn(client, chat)
    with connection.cursor() as cursor:
        cursor.execute("SET random_page_cost = 0.5")
    seen = _settings_while_walking(monkeypatch)
    try:
        assert verify_record().intact
    finally:
        with connection.cursor() as cursor:
            cursor.execute("RESET random_page_cost")

    assert seen["random_page_cost"] == "0.5"


@pytest.mark.django_db(transaction=True)
@pytest.mark.timeout(60)
def test_verify_ledger_on_sqlite_holds_no_transaction_that_would_block_writers(
    committed_matter_chat: tuple[APIClient, Chat], monkeypatch: pytest.MonkeyPatch
) -> None:
    if connection.vendor != "sqlite":
        pytest.skip("SQLite only: on PostgreSQL verify_ledger reads one snapshot (the tests above)")
    client, chat = committed_matter_chat
    _turn(client, chat)
    seen = _settings_while_walking(monkeypatch)

    assert verify_record().intact
    assert seen == {"in_transaction": False}


@pytest.mark.django_db
def test_deleting_a_matter_takes_its_chain_with_it(matter_turns: list[dict[str, Any]], matter_chat: Chat) -> None:
    purge_matter(project_id=matter_chat.project_id, purged_by="operator")  # type: ignore[arg-type]

    assert not TurnSeal.objects.exists()
    assert not SealChainHead.objects.exists()
    assert verify()[0] == 0


@pytest.mark.django_db
def test_verify_ledger_reads_in_batches_across_chains(
    matter_turns: list[dict[str, Any]], api_client: APIClient, user: Any
) -> None:
    # Given a second chain (a matter-less chat) beside the matter's three seals
    _turn(api_client, factories.ChatFactory.create(project=None, owner=user))

    status, output = verify("--batch-size", "1")
    gap_status, gap_output = verify("--batch-size", "2")

    assert status == 0, output
    assert "4 seals in 2 chain(s), 4 turns" in output
    assert gap_status == 0, gap_output


@pytest.mark.django_db
def test_verify_ledger_names_problems_in_chain_order_across_batches(
    matter_turns: list[dict[str, Any]],
) -> None:
    # Given the second and the third turn's quotes changed in SQL
    for turn in matter_turns[1:]:
        _raw(
            "UPDATE message_citations SET quote = %(quote)s WHERE id = %(id)s",
            {"quote": "must never be satisfied", "id": _db_id(_first_quote(turn["id"]).pk)},
        )

    # When the record is checked a seal a batch
    result = verify_record(batch_size=1)

    # Then both are named, the earlier turn first
    assert [problem.message for problem in result.problems] == [matter_turns[1]["id"], matter_turns[2]["id"]]
    assert result.seals == 3


@pytest.mark.django_db
@pytest.mark.usefixtures("matter_turns")
def test_an_error_in_the_check_of_a_batch_fails_verify_ledger_rather_than_passing(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # Given the check of the second seal failing
    checked = []

    def fail_on_the_second(**kwargs: Any) -> list[str]:
        checked.append(kwargs["seal"]["sequence"])
        if len(checked) == 2:
            raise RuntimeError("the check broke")
        return []

    monkeypatch.setattr(record, "facts_differences", fail_on_the_second)

    # Then the check's error reaches the caller, and no later seal is checked
    with pytest.raises(RuntimeError, match="the check broke"):
        verify_record(batch_size=1)
    assert checked == [1, 2]


@pytest.mark.postgres
@pytest.mark.django_db
@pytest.mark.parametrize(
    "value",
    [
        datetime.datetime(2024, 1, 1, tzinfo=datetime.UTC),
        datetime.datetime(2026, 12, 2, 11, 21, 26, 123456, tzinfo=datetime.UTC),
        datetime.datetime(2024, 6, 1, 8, 0, 0, 5, tzinfo=datetime.timezone(datetime.timedelta(hours=5))),
        datetime.datetime(999, 3, 4, 23, 59, 59, 999999, tzinfo=datetime.UTC),
    ],
)
def test_timestamps_the_database_prints_are_printed_as_sealed(value: datetime.datetime) -> None:
    # Given a timestamp read the way turn_facts and verify_ledger read theirs (printed by the server)
    with connection.cursor() as cursor:
        cursor.execute(f"SELECT {integrity.iso_sql('CAST(%(value)s AS timestamptz)')}", {"value": value})
        printed = cursor.fetchone()[0]

    # Then it is the text a seal holds for it
    assert integrity.timestamp_text(printed) == seals.iso(value) == printed


# --- The byte format of what is sealed -------------------------------------------------------------------------


def _fixed_turn() -> Message:
    """A turn with every id, time and value fixed: a KB quote altered (with its alterations and a context flag),
    a caselaw quote, a tool source and a case citation with a pin cite, answering a question."""
    at = datetime.datetime(2026, 12, 1, 9, 40, 4, 123456, tzinfo=datetime.UTC)
    uid = "00000000-0000-7000-8000-{:012d}".format
    project = factories.ProjectFactory.create(pk=uid(1))
    chat = factories.ChatFactory.create(pk=uid(2), project=project)
    document = factories.DocumentFactory.create(pk=uid(3), project=project)
    opinion = factories.CaselawOpinionFactory.create(pk=uid(4), provider="courtlistener")
    question = factories.UserMessageFactory.create(pk=uid(5), chat=chat, content="Must the court be satisfied?")
    message = factories.MessageFactory.create(
        pk=uid(6), chat=chat, reply_to=question, content="It must.", finalized_at=at, model_name="m", verdict="pass"
    )
    factories.DocumentQuoteFactory.create(
        pk=uid(7), message=message, document=document, altered=True, verification_method="altered",
        verification_confidence=0.6, created_at=at, position=0,
        answer_offset_start=3, answer_offset_end=7, context_flags=[FLAG],
    )  # fmt: skip
    factories.OpinionQuoteFactory.create(pk=uid(8), message=message, opinion=opinion, created_at=at, position=1)
    factories.MessageToolSourceFactory.create(pk=uid(9), message=message, created_at=at, label="L", external_ref="1")
    factories.CaseCitationFactory.create(
        pk=uid(10), message=message, opinion=opinion, created_at=at, answer_offset_start=0, pin="310",
        pin_status="within", case_name="Doe v. Roe", detail="570 U.S. 297 is Doe v. Roe",
    )  # fmt: skip
    return message


@pytest.mark.django_db
def test_the_facts_sealed_are_byte_for_byte_those_the_earlier_release_sealed() -> None:
    # Given a turn whose every sealed value is fixed
    message = _fixed_turn()

    # When its facts are read as a seal reads them
    facts = seals.turn_facts([message.pk])[str(message.pk)]
    digests = facts.digests()

    # Then its digests are those the release before the plain seal (bf2dfcb, one UNION ALL) computed for the
    # same turn on either database: a seal it made still verifies
    assert digests == EARLIER_RELEASE_DIGESTS


# The digests the release before the plain seal computed for :func:`_fixed_turn`, on SQLite and PostgreSQL alike.
EARLIER_RELEASE_DIGESTS = {
    "format": "lqai-turn-facts/2",
    "turn": "17df1070ad8e8a9af09d970967ca458a9b5c716754881eb2709b1753a8523ab7",
    "rows": {
        "message_citations:00000000-0000-7000-8000-000000000007": (
            "316a976f0a1c6a0167890357ccfe832726ae93de74f99ed49b1a515df73d39e9"
        ),
        "message_caselaw_citations:00000000-0000-7000-8000-000000000008": (
            "5fce3b64ab9ad92f5e851f553a678c771a823971401bfc5c310c2f7384547470"
        ),
        "message_tool_sources:00000000-0000-7000-8000-000000000009": (
            "fe08bdb12a816c930e46842c2cae841dae629dfbd3c34238e9fd205aeb6f7200"
        ),
        "message_case_citations:00000000-0000-7000-8000-000000000010": (
            "b3a969e23fcfdc8d474b2935a1b902fadfd459690015a6b7fdcc2b0dd8e84eac"
        ),
    },
}
