"""The ledger writer: a turn's ledger entries written just after the turn, off its request.

Why: written synchronously, a turn's entries are a second write of the rows the turn has just
committed, in a statement of its own after that commit; measured, that added 40-50% to
``finalize_turn`` at 1 and at 50 citations (``benchmarks/RESULTS.md``), which no tuning of the one
statement brings near the 10% the ledger may cost a turn. So by default (``LQAI_LEDGER_WRITE=deferred``)
the ``post_finalize`` receiver only hands the message id to this process's writer: a daemon thread, on
its own database connection, that writes the queued turns' entries with :func:`ledger.assemble_turns`
(the one mapping, one statement for the whole batch on PostgreSQL). Under load the batches grow, so the
ledger costs fewer statements than turns.

What it guarantees:

- A turn never waits for its ledger write and is never broken by it (failures are logged, never raised).
- Entries appear milliseconds after the turn commits; :meth:`LedgerWriter.flush` waits for them.
- A failed batch is retried turn by turn on a fresh connection, so one bad turn, or a connection that
  dropped while idle, costs no other turn its entries. A turn that still fails is logged with its id.
- On an orderly exit the queue is drained (``atexit``, up to :data:`DRAIN_SECONDS`). Turns still queued
  when a process dies (SIGKILL, out of memory) have no entries until ``manage.py backfill_ledger`` writes
  them; ``backfill_ledger --check`` is the monitoring probe for exactly that gap.
- A forked child (e.g. a pre-forking server's worker) starts with an empty queue and its own thread:
  what the parent had queued is the parent's to write.

``LQAI_LEDGER_WRITE=inline`` writes the entries in the receiver instead, before the response.
"""

from __future__ import annotations

import atexit
import logging
import os
import threading
from collections import deque
from collections.abc import Sequence
from contextlib import suppress
from uuid import UUID

from django.db import connection

from citations import ledger

logger = logging.getLogger(__name__)

# How long an orderly exit waits for queued turns to be written.
DRAIN_SECONDS = 10.0


class LedgerWriter:
    """A queue of finalized turns and the thread writing their ledger entries, in batches of at most
    ``max_batch`` turns. The thread starts on the first :meth:`submit`; it holds a database connection
    while there is work and closes it after ``idle_seconds`` without any, or when stopped."""

    def __init__(self, *, max_batch: int = 200, idle_seconds: float = 30.0) -> None:
        self.max_batch = max_batch
        self.idle_seconds = idle_seconds
        self._exit_hook = False
        self._reset()
        os.register_at_fork(after_in_child=self._reset)

    def _reset(self) -> None:
        # After a fork only the forking thread survives: a lock held by the parent's writer would stay held.
        self._lock = threading.Lock()
        self._work = threading.Condition(self._lock)
        self._idle = threading.Condition(self._lock)
        self._queue: deque[UUID] = deque()
        self._unfinished = 0
        self._stopping = False
        self._thread: threading.Thread | None = None

    def submit(self, message_id: UUID) -> None:
        """Queue the turn of ``message_id``; returns at once."""
        with self._lock:
            self._queue.append(message_id)
            self._unfinished += 1
            if self._thread is None:
                self._start()
            self._work.notify()

    def _start(self) -> None:
        # Called with the lock held.
        self._stopping = False
        self._thread = threading.Thread(target=self._run, name="ledger-writer", daemon=True)
        self._thread.start()
        if not self._exit_hook:
            atexit.register(self.drain_at_exit)
            self._exit_hook = True

    def flush(self, timeout: float | None = None) -> bool:
        """Wait until no submitted turn is left unwritten (each written, or failed and logged); False if
        ``timeout`` seconds passed first. Under a steady stream of turns that moment may not come soon."""
        with self._lock:
            return self._idle.wait_for(lambda: self._unfinished == 0, timeout)

    def stop(self, timeout: float | None = None) -> bool:
        """Write what is queued, then end the thread, closing its connection; False if it had not ended
        after ``timeout`` seconds (it still ends once the queue is empty). The next submit starts a new one."""
        with self._lock:
            thread = self._thread
            if thread is None:
                return True
            self._stopping = True
            self._work.notify()
        thread.join(timeout)
        return not thread.is_alive()

    @property
    def pending(self) -> int:
        """Turns submitted and not yet written."""
        with self._lock:
            return self._unfinished

    def drain_at_exit(self) -> None:
        if self.stop(DRAIN_SECONDS):
            return
        logger.error(
            "ledger: %d turns still unwritten at exit; `manage.py backfill_ledger` will write their entries",
            self.pending,
        )

    def _run(self) -> None:
        timeout: float | None = self.idle_seconds
        try:
            while (batch := self._take(timeout)) is not None:
                if not batch:
                    # Idle: give the connection back rather than hold it between bursts of turns.
                    _discard_connection()
                    timeout = None
                    continue
                timeout = self.idle_seconds
                try:
                    self._write(batch)
                finally:
                    with self._lock:
                        self._unfinished -= len(batch)
                        if self._unfinished == 0:
                            self._idle.notify_all()
        finally:
            _discard_connection()
            with self._lock:
                # Ended by something no write catches (not by stop, which has already let go of it): the
                # next submit starts a new thread, or one starts now for turns queued meanwhile.
                if self._thread is threading.current_thread():
                    self._thread = None
                    if self._queue:
                        self._start()

    def _take(self, timeout: float | None) -> list[UUID] | None:
        """The next batch; empty after ``timeout`` seconds without work; None when the thread is to end."""
        with self._lock:
            self._work.wait_for(lambda: self._queue or self._stopping, timeout)
            if self._queue:
                return [self._queue.popleft() for _ in range(min(self.max_batch, len(self._queue)))]
            if self._stopping:
                # Decided under the lock: a submit from now on starts a new thread.
                self._thread = None
                return None
            return []

    def _write(self, batch: Sequence[UUID]) -> None:
        try:
            created = ledger.assemble_turns(batch)
        except Exception:
            logger.warning(
                "ledger: writing %d turns failed; retrying them one by one on a fresh connection",
                len(batch),
                exc_info=True,
            )
            _discard_connection()
            for message_id in batch:
                try:
                    created = ledger.assemble_turns([message_id])
                except Exception:
                    logger.exception(
                        "ledger: assembly failed for message %s; run `manage.py backfill_ledger` to repair",
                        message_id,
                    )
                    _discard_connection()
                else:
                    logger.info("ledger: %d entries created for message %s", created, message_id)
            return
        logger.info("ledger: %d entries created for %d turns", created, len(batch))


def _discard_connection() -> None:
    # The failure may have been the connection itself; the next statement opens a fresh one.
    with suppress(Exception):
        connection.close()


writer = LedgerWriter()
