"""Outside review (review1): gaps in the append-only record of a finalized turn and in what its seals prove.

Each test states the guarantee the documentation gives (docs/security.md, docs/export.md) and fails where the
product does not hold it. ``_plain`` is a plain SQL statement as the application's own role writes it, triggers
enabled; the edits of section 2 are made below the application with triggers off, which the seals exist to
detect (as tests/test_seals.py plants them).
"""

from __future__ import annotations

from io import StringIO
from pathlib import Path
from typing import Any

import pytest
from django.core.management import call_command
from django.db import IntegrityError, connection, transaction
from rest_framework.test import APIClient

from chats.models import CaseCitation, CaselawOpinion, Chat, Document, DocumentQuote, Message
from citations.integrity import verify_record
from citations.models import CitationLedgerEntry, TurnSeal
from lqai_verify.bundle import verify_bundle
from tests.test_export import export, exported_matter, fingerprint, lines, members  # noqa: F401 - fixture
from tests.test_seals import _turn, matter_turns  # noqa: F401 - fixture


def _plain(sql: str, params: list[Any]) -> int:
    """A statement as the application's role runs it (triggers on); returns the rows it touched."""
    with transaction.atomic(), connection.cursor() as cursor:
        cursor.execute(sql, params)
        return cursor.rowcount


def _pages(path: Path) -> dict[str, Any]:
    return {p["row"]: (p["source_title"], p["pages"]) for p in lines(members(path)["passages.jsonl"])}


# --- 1. A cited source's pages and title are not fixed, not sealed, and the signed export follows them ---------


@pytest.mark.postgres
@pytest.mark.django_db(transaction=True)
def test_a_cited_opinions_pages_cannot_be_rewritten_after_its_quote_is_sealed(
    exported_matter: tuple[Chat, list[str]],  # noqa: F811
    tmp_path: Path,
) -> None:
    chat, _ = exported_matter
    opinion = CaselawOpinion.objects.get(opinion_id="fisher-2013")
    before = _pages(export(chat, tmp_path / "before.zip"))

    # The quote's pin cite (the page the passage is on) rewritten in plain SQL, as the application's role:
    touched = _plain("UPDATE caselaw_opinions SET pages = %s::jsonb WHERE id = %s", ['[[0, "999"]]', opinion.pk])

    after_path = export(chat, tmp_path / "after.zip")
    assert verify_record().intact  # verify_ledger sees nothing
    assert verify_bundle(after_path, public_key=fingerprint()).ok  # the signed export verifies
    after = _pages(after_path)
    assert (touched, after) == (0, before), "a sealed quote's page changed in the signed export"


@pytest.mark.postgres
@pytest.mark.django_db(transaction=True)
def test_a_cited_documents_title_and_pages_cannot_be_rewritten_through_the_orm(
    exported_matter: tuple[Chat, list[str]],  # noqa: F811
    tmp_path: Path,
) -> None:
    chat, _ = exported_matter
    document = Document.objects.get(project=chat.project)
    assert document.is_cited()
    before = _pages(export(chat, tmp_path / "before.zip"))

    # QuerySet.update of a quoted document: no model guard, no trigger.
    Document.objects.filter(pk=document.pk).update(title="Another memo", pages=[[0, "42"]])

    after_path = export(chat, tmp_path / "after.zip")
    assert verify_record().intact
    assert verify_bundle(after_path, public_key=fingerprint()).ok
    assert _pages(after_path) == before, "a sealed quote's source title and page changed in the signed export"


# --- 2. Columns of a turn's rows that the seal does not cover ----------------------------------------------------

UNSEALED = {
    # A case citation's pin cite and how it fared against the opinion's pages.
    "case citation pin": (
        "UPDATE message_case_citations SET pin = '9999', pin_status = 'outside' WHERE message_id = %s",
        -1,
    ),
    # Where a verified quote stands in the answer (the trace highlights it there).
    "quote answer span": (
        "UPDATE message_citations SET answer_offset_start = NULL, answer_offset_end = NULL, "
        "answer_unplaced_reason = 'the quote is not in the answer text' WHERE message_id = %s",
        0,
    ),
}


@pytest.mark.postgres
@pytest.mark.django_db(transaction=True)
@pytest.mark.parametrize("change", sorted(UNSEALED))
def test_a_row_edited_below_the_application_is_detected_whatever_its_column(
    exported_matter: tuple[Chat, list[str]],  # noqa: F811
    change: str,
) -> None:
    _, turns = exported_matter
    sql, turn = UNSEALED[change]
    with transaction.atomic(), connection.cursor() as cursor:
        cursor.execute("SET LOCAL session_replication_role = replica")
        cursor.execute(sql, [turns[turn]])
        assert cursor.rowcount >= 1, "nothing to edit"

    result = verify_record()

    assert not result.intact, f"{change} edited below the application, verify_ledger reports the record intact"


# --- 3. The chain head: DELETE is accepted (TRUNCATE is refused), unseen, and stops all later sealing -------------


@pytest.mark.postgres
@pytest.mark.django_db(transaction=True)
def test_a_chain_head_cannot_be_deleted_by_the_application_role(
    matter_turns: list[dict[str, Any]],  # noqa: F811
    api_client: APIClient,
    matter_chat: Chat,
) -> None:
    chain = f"matter:{matter_chat.project_id}"

    deleted = _plain("DELETE FROM seal_chain_heads WHERE chain = %s", [chain])
    intact_after_delete = verify_record().intact
    later = _turn(api_client, matter_chat)  # the next turn of the matter: its seal fails (sequence 1 is taken)
    repair = StringIO()
    try:
        call_command("seal_turns", stdout=repair, stderr=repair)
    except IntegrityError as error:
        repair.write(f"seal_turns failed: {error}")
    unsealed = not TurnSeal.objects.filter(message_id=later["id"]).exists()

    assert (deleted, intact_after_delete) == (0, False), (
        f"DELETE of the chain head accepted ({deleted} row) and verify_ledger intact={intact_after_delete}; "
        f"the next turn unsealed={unsealed}; {repair.getvalue().strip().splitlines()[0]}"
    )


# --- 4. Rows added to a complete turn after its transaction -------------------------------------------------------


@pytest.mark.postgres
@pytest.mark.django_db(transaction=True)
def test_a_complete_turn_gets_no_new_rows_after_it_was_finalized(
    matter_turns: list[dict[str, Any]],  # noqa: F811
) -> None:
    message = Message.objects.get(pk=matter_turns[0]["id"])
    assert message.status == Message.Status.COMPLETE

    with pytest.raises(IntegrityError, match="lqai_append_only"):
        _plain(
            "INSERT INTO message_tool_sources (id, message_id, source_kind, tool, provider, label, subtitle, url, "
            "external_ref, position, created_at) VALUES (gen_random_uuid(), %s, 'mcp', 'search', NULL, "
            "'Planted source', '', '', '', 99, now())",
            [message.pk],
        )


# --- 5. A forged month tombstone silences the ledger for every later turn -----------------------------------------


@pytest.mark.postgres
@pytest.mark.django_db(transaction=True)
def test_a_month_tombstone_cannot_be_planted_to_stop_the_ledger(
    api_client: APIClient,
    matter_chat: Chat,
) -> None:
    planted = _plain(
        "INSERT INTO ledger_partition_drops (id, range_start, range_end, partition, disposal, ledger_entries, "
        "dropped_by, dropped_at) VALUES (gen_random_uuid(), now() - interval '1 day', '2100-01-01', "
        "'citation_ledger_entry_p000000', 'dropped', 0, 'nobody', now())",
        [],
    )
    turn = _turn(api_client, matter_chat)
    result = verify_record()

    entries = CitationLedgerEntry.objects.filter(message_id=turn["id"]).count()
    rows = sum(model.objects.filter(message_id=turn["id"]).count() for model in (DocumentQuote, CaseCitation))
    assert rows > 0, "the new turn recorded nothing to index"
    assert entries > 0 or not result.intact, (
        f"tombstone planted ({planted} row, by the application's role): the new turn's {rows} row(s) got "
        f"{entries} ledger entries, and verify_ledger says intact (rows counted as dropped: {result.dropped})"
    )
