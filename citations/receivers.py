"""Receivers connecting the chat domain to the ledger (connected in ``CitationsConfig.ready``)."""

from __future__ import annotations

import logging
from collections.abc import Callable
from typing import Any

from django.conf import settings

from chats.models import Message
from citations import ledger, seals

logger = logging.getLogger(__name__)


def assemble_ledger_on_finalize(sender: type[Message], message: Message, **kwargs: Any) -> None:
    """Write the ledger entries of a turn being finalized, in the turn's own transaction.

    ``chats.services.finalize_turn`` sends ``post_finalize`` inside its transaction, so the entries commit
    with the turn (and roll back with it). This is the one place that keeps a ledger failure from breaking
    the turn: ``ledger.assemble`` runs in a savepoint, bounded by ``LQAI_LEDGER_TIMEOUT`` seconds of lock
    waits and execution; if it fails, the savepoint is rolled back, the failure is logged with the message
    id, and the turn goes on and commits without entries, for ``backfill_ledger`` to repair.
    """
    try:
        created = ledger.assemble(message, timeout=settings.LQAI_LEDGER_TIMEOUT)
    except Exception:
        logger.exception(
            "ledger: assembly failed for message %s; the turn is saved without its entries: "
            "run `manage.py backfill_ledger` to repair",
            message.pk,
        )
        return
    logger.debug("ledger: %d entries created for message %s", created, message.pk)


def seal_turn_on_finalize(sender: type[Message], message: Message, **kwargs: Any) -> None:
    """Seal the turn being finalized, as the last write of the turn's transaction (connected after the
    ledger's receiver, so that its chain's head row is locked only from here to the commit).

    The one place that keeps a sealing failure from breaking the turn: ``seals.seal_turn`` runs in a
    savepoint; if it fails, the savepoint is rolled back, the failure is logged with the message id, and
    the turn commits unsealed, for ``verify_ledger`` to list and ``seal_turns`` to repair.
    """
    try:
        seal = seals.seal_turn(message_id=message.pk)
    except Exception:
        logger.exception(
            "seal: sealing failed for message %s; the turn is saved unsealed: run `manage.py seal_turns` to repair",
            message.pk,
        )
        return
    logger.debug("seal: message %s sealed as %s #%d", message.pk, seal.chain, seal.sequence)


# ``post_finalize``'s receivers by ``dispatch_uid``, in the order ``CitationsConfig.ready`` connects them and so
# the order they run in: the seal after the ledger, as the last write of the turn's transaction.
POST_FINALIZE_RECEIVERS: tuple[tuple[str, Callable[..., None]], ...] = (
    ("citations.assemble_ledger_on_finalize", assemble_ledger_on_finalize),
    ("citations.seal_turn_on_finalize", seal_turn_on_finalize),
)
