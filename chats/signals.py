"""Signals of the chat domain.

``post_finalize`` is sent once a chat turn's final state (its assistant message
and that turn's citation and tool-source rows) is committed. It exists so that
layers built on top of ``chats`` (the citation ledger) can react without
``chats`` knowing about them.

Arguments: ``sender`` is the :class:`chats.models.Message` class, ``message``
the finalized assistant message.
"""

from django.dispatch import Signal

post_finalize = Signal()
