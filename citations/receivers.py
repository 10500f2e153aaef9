"""Receivers connecting the chat domain to the ledger (connected in ``CitationsConfig.ready``)."""

from __future__ import annotations

import logging
from typing import Any

from chats.models import Message
from citations import ledger

logger = logging.getLogger(__name__)


def assemble_ledger_on_finalize(sender: type[Message], message: Message, **kwargs: Any) -> None:
    """Write the ledger entries of a finalized turn; a ledger failure never breaks the turn.

    ``chats.services.finalize_turn`` sends ``post_finalize`` from ``transaction.on_commit``, so
    the turn is already committed when this runs and nothing here can roll it back. ``assemble()``
    is all or nothing, and if the signal is ever sent inside a transaction it runs in a savepoint
    whose rollback leaves the enclosing transaction (and the connection) usable after a failure.
    """
    try:
        created = ledger.assemble(message)
    except Exception:
        logger.exception(
            "ledger: assembly failed for message %s; run `manage.py backfill_ledger` to repair", message.pk
        )
        return
    logger.info("ledger: %d entries created for message %s", created, message.pk)
