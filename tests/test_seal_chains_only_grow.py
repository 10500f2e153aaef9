"""A seal chain only grows, below the application (``citations.0020``, rule ``lqai_seal_chain``).

From an outside review: ``UPDATE seal_chain_heads SET sequence=1`` moved a chain's head back (the next turn's
seal then collided and the turn stayed unsealed), and ``INSERT INTO turn_seals`` of a seal numbered 999 with a
copied signature stayed for good. Both are refused, as the tables' owner and as a role that does not own them
(docs/security.md), on PostgreSQL; SQLite's triggers refuse the same. With the triggers off (as a database
superuser could), ``verify_ledger`` names the moved head and the forged seal.
"""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import pytest
from django.db import IntegrityError, connection, transaction
from rest_framework.test import APIClient

from chats.models import Chat
from citations.integrity import verify_record
from citations.models import SealChainHead, TurnSeal
from tests.test_seals import _turn, broken, matter_turns  # noqa: F401 - fixture

RULE = "lqai_seal_chain"
ROLES = ["owner", "application role"]

# The review's second probe: the chain's last seal copied under number 999, its signature with it.
_FORGE_SQL = f"""
INSERT INTO {TurnSeal._meta.db_table} (message_id, chain, sequence, previous_sha256, finalize_number,
    finalized_at, verifier_version, row_digests, facts_sha256, sealed_at, late, key_fingerprint, seal_sha256,
    signature)
SELECT message_id, chain, %(sequence)s, %(previous)s, finalize_number + 100, finalized_at, verifier_version,
       row_digests, facts_sha256, sealed_at, late, key_fingerprint, seal_sha256, signature
  FROM {TurnSeal._meta.db_table} WHERE id = %(id)s
"""


@contextmanager
def _as(role: str) -> Iterator[Any]:
    """A cursor in a savepoint of the test's transaction, as the tables' owner (the test's own role) or, on
    PostgreSQL, as a role granted ``SELECT, INSERT, UPDATE, DELETE`` and nothing more, as docs/security.md
    advises for the application. The role is created in the test's transaction and goes with its rollback."""
    with transaction.atomic(), connection.cursor() as cursor:
        if role != "owner":
            name = f"lqai_app_{uuid.uuid4().hex[:12]}"
            cursor.execute(f"CREATE ROLE {name} NOLOGIN")
            cursor.execute(f"GRANT SELECT, INSERT, UPDATE, DELETE ON ALL TABLES IN SCHEMA public TO {name}")
            cursor.execute(f"GRANT USAGE ON ALL SEQUENCES IN SCHEMA public TO {name}")
            cursor.execute(f"SET LOCAL ROLE {name}")
        yield cursor


def _last_seal(chat: Chat) -> TurnSeal:
    return TurnSeal.objects.filter(chain=f"matter:{chat.project_id}").order_by("-sequence").first()  # type: ignore[return-value]


def _forge(cursor: Any, seal: TurnSeal, *, sequence: int, previous: str) -> None:
    cursor.execute(_FORGE_SQL, {"sequence": sequence, "previous": previous, "id": seal.pk})


def _commit_checks() -> None:
    """Make now the checks PostgreSQL defers to commit (the test's transaction never commits)."""
    if connection.vendor == "postgresql":
        with connection.cursor() as cursor:
            cursor.execute("SET CONSTRAINTS ALL IMMEDIATE")
            cursor.execute("SET CONSTRAINTS ALL DEFERRED")


def _with_triggers_off(sql: str, params: dict[str, Any]) -> None:
    """A change below the application, as a database superuser could make it: the checks deferred to commit
    made first, then triggers off for the statement (``session_replication_role = replica``)."""
    _commit_checks()
    with connection.cursor() as cursor:
        cursor.execute("SET LOCAL session_replication_role = replica")
        cursor.execute(sql, params)
        cursor.execute("SET LOCAL session_replication_role = origin")


def _refused_then_sealed(api_client: APIClient, chat: Chat) -> None:
    """The chain as sealing left it: its head at its last seal, the next turn sealed after it, the record
    intact."""
    last = _last_seal(chat)
    head = SealChainHead.objects.get(chain=last.chain)
    assert (head.sequence, head.seal_sha256) == (last.sequence, last.seal_sha256)
    later = _turn(api_client, chat)
    assert TurnSeal.objects.get(message_id=later["id"]).sequence == last.sequence + 1
    _commit_checks()
    assert verify_record().intact


# --- The review's two probes, refused ----------------------------------------------------------------------------


@pytest.mark.postgres
@pytest.mark.django_db
@pytest.mark.parametrize("role", ROLES)
def test_a_chain_head_cannot_be_moved_back_in_sql(
    matter_turns: list[dict[str, Any]],  # noqa: F811
    api_client: APIClient,
    matter_chat: Chat,
    role: str,
) -> None:
    chain = f"matter:{matter_chat.project_id}"

    with (
        pytest.raises(IntegrityError, match=f"{RULE}: the head of chain {chain} only moves forward.*from #3 to #1"),
        _as(role) as cursor,
    ):
        cursor.execute("UPDATE seal_chain_heads SET sequence=1")

    _refused_then_sealed(api_client, matter_chat)


@pytest.mark.postgres
@pytest.mark.django_db
@pytest.mark.parametrize("role", ROLES)
def test_a_forged_seal_cannot_be_inserted_in_sql(
    matter_turns: list[dict[str, Any]],  # noqa: F811
    api_client: APIClient,
    matter_chat: Chat,
    role: str,
) -> None:
    last = _last_seal(matter_chat)

    with (
        pytest.raises(IntegrityError, match=f"{RULE}: seal #999 of chain {last.chain} is not its chain's head \\+ 1"),
        _as(role) as cursor,
    ):
        _forge(cursor, last, sequence=999, previous=last.seal_sha256)

    _refused_then_sealed(api_client, matter_chat)


# --- Each rule, on both databases ----------------------------------------------------------------------------


@pytest.mark.django_db
def test_a_seal_follows_its_chains_head_with_the_heads_digest(
    matter_turns: list[dict[str, Any]],  # noqa: F811
    api_client: APIClient,
    matter_chat: Chat,
) -> None:
    last = _last_seal(matter_chat)

    for sequence, previous in ((999, last.seal_sha256), (3, last.previous_sha256), (4, last.previous_sha256)):
        with pytest.raises(IntegrityError, match=RULE), _as("owner") as cursor:
            _forge(cursor, last, sequence=sequence, previous=previous)

    _refused_then_sealed(api_client, matter_chat)


@pytest.mark.django_db
def test_a_chain_head_moves_only_forward_to_its_chains_last_seal(
    matter_turns: list[dict[str, Any]],  # noqa: F811
    api_client: APIClient,
    matter_chat: Chat,
) -> None:
    last = _last_seal(matter_chat)
    moves = [
        ("sequence = 1", {}),  # back
        ("sequence = 2, seal_sha256 = %(digest)s", {"digest": last.previous_sha256}),  # back, to a real seal
        ("sequence = 4", {}),  # forward, to no seal
        ("seal_sha256 = %(digest)s", {"digest": "0" * 64}),  # in place, to another digest
        ("chain = 'matter:elsewhere'", {}),
    ]

    for change, params in moves:
        with pytest.raises(IntegrityError, match=RULE), _as("owner") as cursor:
            cursor.execute(
                f"UPDATE seal_chain_heads SET {change} WHERE chain = %(chain)s", {**params, "chain": last.chain}
            )

    _refused_then_sealed(api_client, matter_chat)


@pytest.mark.django_db
def test_a_new_chain_head_is_empty_or_at_its_chains_last_seal(matter_turns: list[dict[str, Any]]) -> None:  # noqa: F811
    project = SealChainHead.objects.get().project
    other = Chat.objects.create(title="no matter", owner=project.owner)  # type: ignore[union-attr]

    with pytest.raises(IntegrityError, match=RULE), _as("owner") as cursor:
        cursor.execute(
            "INSERT INTO seal_chain_heads (chain, sequence, seal_sha256, chat_id) VALUES (%s, 5, %s, %s)",
            [f"chat:{other.pk}", "0" * 64, other.pk.hex if connection.vendor == "sqlite" else other.pk],
        )


@pytest.mark.postgres
@pytest.mark.django_db
def test_a_seal_left_past_its_head_is_refused_at_commit(
    matter_turns: list[dict[str, Any]],  # noqa: F811
    matter_chat: Chat,
) -> None:
    # Given a seal that follows the head as the insert rule wants, but whose head is not moved to it
    last = _last_seal(matter_chat)
    with _as("owner") as cursor:
        _forge(cursor, last, sequence=last.sequence + 1, previous=last.seal_sha256)

    # Then the transaction cannot commit
    with pytest.raises(IntegrityError, match=f"{RULE}: seal #4 of chain {last.chain} is past its chain's head"):
        _commit_checks()


# --- With the triggers off, verify_ledger names what they would have refused ----------------------------------


@pytest.mark.postgres
@pytest.mark.django_db
def test_verify_ledger_names_a_chain_head_moved_back_with_the_triggers_off(
    matter_turns: list[dict[str, Any]],  # noqa: F811
    matter_chat: Chat,
) -> None:
    chain = f"matter:{matter_chat.project_id}"
    _with_triggers_off("UPDATE seal_chain_heads SET sequence=1 WHERE chain = %(chain)s", {"chain": chain})

    output = broken()
    result = verify_record()

    assert [(p.chain, p.sequence) for p in result.problems] == [(chain, 1), (chain, 3)]
    assert f"({chain} #1): the chain's head is at #1 with another digest than this seal's: the head was moved" in output
    assert (
        f"({chain} #3): the chain's head says it ends at #1, before its last seal #3: the head was moved back, "
        "or seals were inserted past it; its next seal cannot be written"
    ) in output


@pytest.mark.postgres
@pytest.mark.django_db
def test_verify_ledger_names_a_forged_seal_inserted_with_the_triggers_off(
    matter_turns: list[dict[str, Any]],  # noqa: F811
    matter_chat: Chat,
) -> None:
    last = _last_seal(matter_chat)
    _with_triggers_off(_FORGE_SQL, {"sequence": 999, "previous": last.seal_sha256, "id": last.pk})

    output = broken()
    result = verify_record()

    assert {(p.chain, p.sequence) for p in result.problems} == {(last.chain, 999)}
    assert f"({last.chain} #999): seal #999 follows #3, past its chain's head #3: it was inserted without sealing" in (
        output
    )
    assert f"({last.chain} #999): its signature is not valid" in output
