"""The benchmarks' switch of ``post_finalize`` receivers: off or on inside the block, and afterwards every
receiver back in its shipped order (the seal last), whatever happened inside."""

from __future__ import annotations

from types import SimpleNamespace
from typing import Any

import pytest

from benchmarks.ledger_bench import post_finalize_receivers, receiver_connected
from chats.models import Message
from chats.signals import post_finalize
from citations import ledger, seals
from citations.receivers import POST_FINALIZE_RECEIVERS
from tests import factories

LEDGER_UID, SEAL_UID = (uid for uid, _ in POST_FINALIZE_RECEIVERS)


@pytest.fixture
def calls(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """What the shipped receivers call, in the order they call it (nothing is written)."""
    called: list[str] = []

    def assemble(message: Message, **kwargs: Any) -> int:
        called.append("ledger")
        return 0

    def seal_turn(**kwargs: Any) -> SimpleNamespace:
        called.append("seal")
        return SimpleNamespace(chain="chain", sequence=1)

    monkeypatch.setattr(ledger, "assemble", assemble)
    monkeypatch.setattr(seals, "seal_turn", seal_turn)
    return called


def receivers_run(calls: list[str]) -> list[str]:
    """The receivers ``post_finalize`` runs for a message, in their order."""
    calls.clear()
    post_finalize.send(sender=Message, message=factories.MessageFactory.build())
    return calls[:]


@pytest.mark.parametrize(
    ("dispatch_uid", "connected", "inside"),
    [
        (LEDGER_UID, False, ["seal"]),
        (LEDGER_UID, True, ["ledger", "seal"]),
        (SEAL_UID, False, ["ledger"]),
        (SEAL_UID, True, ["ledger", "seal"]),
    ],
)
def test_receivers_run_in_the_shipped_order_after_the_block(
    calls: list[str], dispatch_uid: str, connected: bool, inside: list[str]
) -> None:
    # Given the shipped order: the ledger, then the seal
    assert receivers_run(calls) == ["ledger", "seal"]

    # When one receiver is switched off or on for a block
    with receiver_connected(dispatch_uid, connected=connected):
        assert receivers_run(calls) == inside

    # Then afterwards every receiver runs again, in the order from before the block
    assert receivers_run(calls) == ["ledger", "seal"]


def test_the_order_is_restored_when_the_block_raises(calls: list[str]) -> None:
    with pytest.raises(RuntimeError, match="measurement failed"), receiver_connected(LEDGER_UID, connected=False):
        raise RuntimeError("measurement failed")

    assert receivers_run(calls) == ["ledger", "seal"]


def test_all_receivers_off_and_back(calls: list[str]) -> None:
    with post_finalize_receivers(without=[LEDGER_UID, SEAL_UID]):
        assert receivers_run(calls) == []

    assert receivers_run(calls) == ["ledger", "seal"]


def test_an_unknown_receiver_is_refused_and_nothing_changes(calls: list[str]) -> None:
    # A misspelt uid would otherwise measure with every receiver still on
    with (
        pytest.raises(ValueError, match=r"not a post_finalize receiver: citations\.ledger_typo"),
        post_finalize_receivers(without=["citations.ledger_typo"]),
    ):
        pass

    assert receivers_run(calls) == ["ledger", "seal"]


def test_a_timed_receiver_runs_as_shipped_and_each_call_is_timed(calls: list[str]) -> None:
    seconds: list[float] = []

    with receiver_connected(SEAL_UID, connected=True, seconds=seconds):
        assert receivers_run(calls) == ["ledger", "seal"]
        assert receivers_run(calls) == ["ledger", "seal"]

    # One duration per call of the timed receiver, none of the other's; none once the block is left
    assert len(seconds) == 2
    assert all(0 < second < 5 for second in seconds)
    assert receivers_run(calls) == ["ledger", "seal"]
    assert len(seconds) == 2


def test_a_receiver_switched_off_is_not_timed(calls: list[str]) -> None:
    seconds: list[float] = []

    with receiver_connected(SEAL_UID, connected=False, seconds=seconds):
        assert receivers_run(calls) == ["ledger"]

    assert seconds == []


def test_timing_an_unknown_receiver_is_refused(calls: list[str]) -> None:
    with (
        pytest.raises(ValueError, match=r"not a post_finalize receiver: citations\.seal_typo"),
        post_finalize_receivers(timed={"citations.seal_typo": []}),
    ):
        pass

    assert receivers_run(calls) == ["ledger", "seal"]
