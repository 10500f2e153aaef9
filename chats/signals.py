"""Signals of the chat domain.

``post_finalize`` is sent by ``chats.services.finalize_turn`` inside the turn's
transaction, once the turn's final state (its assistant message and that turn's
quote, case-citation and tool-source rows) is written and before it commits. It exists so
that layers built on top of ``chats`` (the citation ledger) can record the turn
in the same transaction without ``chats`` knowing about them.

A receiver's writes commit or roll back with the turn; an exception it raises
rolls back the turn, so a receiver whose failure must not cost the turn catches
it itself, in a savepoint (``transaction.atomic()``).

Arguments: ``sender`` is the :class:`chats.models.Message` class, ``message``
the finalized assistant message.
"""

from django.dispatch import Signal

post_finalize = Signal()
