"""Primary keys of the rows written per turn: time-ordered UUIDs (version 7, RFC 9562).

A version 7 UUID starts with its creation time in milliseconds, so new keys land at the right edge of
every B-tree index that holds them (the primary key, and the ledger's unique and foreign-key indexes on
source and message ids) instead of on a random page: a write touches the few hot pages at the end, not
a cold page per index once the indexes outgrow memory (see docs/scale.md). The rest is random, so a key
still reveals nothing but its creation time, which every such row also stores in ``created_at``.

Rows inserted in SQL take theirs from the database function ``uuid_generate_v7()`` (migration
``chats.0018``; on SQLite the same function is registered on each connection by
:func:`register_sqlite_functions`), with the same layout.
"""

from __future__ import annotations

import uuid
from typing import Any

from uuid_utils import compat


def uuid7() -> uuid.UUID:
    """A new version 7 UUID (a standard ``uuid.UUID``); later calls in one process return greater values,
    and the time they carry stays the clock's however many are made per millisecond (``uuid_utils``: a
    counter in the bits after the time, as RFC 9562 section 6.2 method 1 describes, like Python 3.14's
    ``uuid.uuid7``)."""
    return compat.uuid7()


def register_sqlite_functions(sender: Any, connection: Any, **kwargs: Any) -> None:
    """``connection_created`` receiver: ``uuid_generate_v7()`` on SQLite, as 32 hex characters (how
    Django stores a UUIDField there), so that SQL written for both backends can call it."""
    if connection.vendor == "sqlite":
        connection.connection.create_function("uuid_generate_v7", 0, lambda: uuid7().hex, deterministic=False)
