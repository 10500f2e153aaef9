"""Receivers connecting the chat domain to the ledger (connected in ``CitationsConfig.ready``)."""

from __future__ import annotations

import logging
from typing import Any

from django.conf import settings

from chats.models import Message
from citations import ledger
from citations.writer import writer

logger = logging.getLogger(__name__)


def assemble_ledger_on_finalize(sender: type[Message], message: Message, **kwargs: Any) -> None:
    """Have the ledger entries of a finalized turn written; a ledger failure never breaks the turn.

    ``chats.services.finalize_turn`` sends ``post_finalize`` from ``transaction.on_commit``, so the turn is
    already committed when this runs and nothing here can roll it back. By default the turn is handed to
    the ledger writer (``citations.writer``), which writes its entries just after, off the request. With
    ``LQAI_LEDGER_WRITE=inline`` they are written here: ``assemble()`` is all or nothing, and if the signal
    is ever sent inside a transaction it runs in a savepoint whose rollback leaves the enclosing
    transaction (and the connection) usable after a failure.
    """
    if settings.LQAI_LEDGER_WRITE == "deferred":
        writer.submit(message.pk)
        return
    try:
        created = ledger.assemble(message)
    except Exception:
        logger.exception(
            "ledger: assembly failed for message %s; run `manage.py backfill_ledger` to repair", message.pk
        )
        return
    logger.info("ledger: %d entries created for message %s", created, message.pk)
