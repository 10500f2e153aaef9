"""The permanent record: what a finalized turn wrote never changes, and leaves only with a matter purge.

The rules are held below the application by triggers (PostgreSQL: ``chats.0014``, ``citations.0006`` and
later; both databases: ``chats.0032``, ``chats.0034``) and, as far as the ORM lets it see them, by the model
layer here: :class:`AppendOnlyModel`, :class:`AppendOnlyQuerySet`, :func:`message_change_refusal`. Each
refusal names its rule, ``lqai_append_only`` (:class:`AppendOnlyError`) or ``lqai_legal_hold``
(:class:`LegalHoldError`), in the database's error and the model layer's alike; :func:`naming_late_rows` and
:func:`naming_message_refusals` raise the database's refusals as those errors. A purge (:func:`purging`) marks
its transaction, so that the delete triggers accept its matter's rows. On SQLite the triggers call the
functions :func:`register_sqlite_record_functions` registers on each connection. Each rule, and what it does
not cover: docs/security.md.
"""

from __future__ import annotations

import contextvars
import json
from collections.abc import Iterable, Iterator, Mapping
from contextlib import contextmanager
from functools import partial
from typing import Any, ClassVar, TypeVar
from uuid import UUID

from django.db import IntegrityError, connection, connections, models, transaction

from lqai_verify import verdict as verdict_rule

APPEND_ONLY = "lqai_append_only"
LEGAL_HOLD = "lqai_legal_hold"
# The transaction-local PostgreSQL setting a purge sets to its matter's id (see the triggers).
PURGE_SETTING = "lqai.purge"

_purging: contextvars.ContextVar[UUID | None] = contextvars.ContextVar("lqai_purging", default=None)


class AppendOnlyError(IntegrityError):
    """A change the permanent record refuses (rule ``lqai_append_only``). An ``IntegrityError``, like the
    PostgreSQL trigger's refusal of the same change, so both layers give the same answer."""

    def __init__(self, detail: str) -> None:
        super().__init__(f"{APPEND_ONLY}: {detail}")


class LegalHoldError(IntegrityError):
    """A deletion refused because the matter is on legal hold (rule ``lqai_legal_hold``)."""

    def __init__(self, detail: str) -> None:
        super().__init__(f"{LEGAL_HOLD}: {detail}")


def purge_in_progress() -> UUID | None:
    """The id of the matter this context is purging, if any (see :func:`purging`)."""
    return _purging.get()


@contextmanager
def purging(project_id: UUID | None) -> Iterator[None]:
    """Mark the current transaction as the purge of matter ``project_id``: inside it, that matter's
    per-turn rows, ledger entries and messages may be deleted (and only that matter's).

    Must be entered inside ``transaction.atomic()``: the PostgreSQL setting is transaction-local
    (``set_config(..., true)``), so it ends with the transaction, committed or not. A matter-less chat's
    record (``project_id`` None) has no purge.
    """
    if project_id is None:
        raise ValueError("only a matter's record is purged: this chat has no matter")
    if not transaction.get_connection().in_atomic_block:
        raise RuntimeError("purging() must run inside transaction.atomic()")
    if connection.vendor == "postgresql":
        with connection.cursor() as cursor:
            cursor.execute(
                "SELECT set_config(%(name)s, %(value)s, true)", {"name": PURGE_SETTING, "value": str(project_id)}
            )
    token = _purging.set(project_id)
    try:
        yield
    finally:
        _purging.reset(token)
        if connection.vendor == "postgresql" and not _transaction_failed():
            with connection.cursor() as cursor:
                cursor.execute("SELECT set_config(%(name)s, '', true)", {"name": PURGE_SETTING})


def _transaction_failed() -> bool:
    """Whether PostgreSQL aborted the current transaction (a statement failed): it then only rolls back,
    which ends the transaction-local purge setting with it."""
    from psycopg.pq import TransactionStatus

    return bool(connection.connection.info.transaction_status == TransactionStatus.INERROR)


# What the insert guard's refusal says, on both databases (``chats.0032``).
FINALIZED_EARLIER = "finalized in an earlier transaction"


@contextmanager
def naming_late_rows(model: type[models.Model], message_ids: Iterable[Any]) -> Iterator[None]:
    """Inserting rows of ``model`` for the messages ``message_ids``: the database's refusal of a row added to a
    turn finalized in an earlier transaction is raised as :class:`AppendOnlyError` naming the message(s) (the
    SQLite trigger's text can only name the table)."""
    try:
        yield
    except IntegrityError as exc:
        if isinstance(exc, AppendOnlyError) or FINALIZED_EARLIER not in str(exc):
            raise
        messages = ", ".join(sorted({str(message_id) for message_id in message_ids}))
        raise AppendOnlyError(
            f"{model._meta.db_table} rows cannot be added to message {messages}: it was {FINALIZED_EARLIER}"
        ) from exc


@contextmanager
def naming_message_refusals(using: str) -> Iterator[None]:
    """Saving a message: the database's refusal of a rewrite of a finalized message is raised as
    :class:`AppendOnlyError` saying which message and why (PostgreSQL's trigger says it; SQLite's trigger can
    only raise a constant, and its rule function kept the reason on the connection)."""
    try:
        yield
    except IntegrityError as exc:
        if isinstance(exc, AppendOnlyError) or APPEND_ONLY not in str(exc):
            raise
        detail = getattr(connections[using], "lqai_message_refusal", None)
        raise AppendOnlyError(detail or str(exc).splitlines()[0].removeprefix(f"{APPEND_ONLY}: ")) from exc


def register_sqlite_record_functions(sender: Any, connection: Any, **kwargs: Any) -> None:
    """``connection_created`` receiver: on SQLite, the functions through which the triggers of ``chats.0032``
    know which messages this connection's open transaction finalized (SQLite has no transaction id in SQL).

    ``lqai_note_finalized(id, finalized_at)`` (called by the messages trigger) keeps the pair until the
    transaction commits, by ``transaction.on_commit`` (at once outside ``atomic()``: each statement is then its
    own transaction); ``lqai_finalized_here(id, finalized_at)`` (the insert guard) says whether the message's
    stored pair is one of them. A rolled-back pair stays kept, but its ``finalized_at`` is gone with the
    rollback, so it no longer matches the stored one."""
    if connection.vendor != "sqlite":
        return
    finalized_here: set[tuple[str, str]] = set()
    alias = connection.alias

    def note_finalized(message_id: str, finalized_at: str) -> None:
        pair = (message_id, finalized_at)
        finalized_here.add(pair)
        transaction.on_commit(partial(finalized_here.discard, pair), using=alias)

    def is_finalized_here(message_id: str, finalized_at: str) -> bool:
        return (message_id, finalized_at) in finalized_here

    def message_refusal(old: str, new: str) -> str | None:
        # The messages trigger (chats.0034) can only raise a constant: the reason is kept for the model layer.
        old_row, new_row = json.loads(old), json.loads(new)
        old_row["id"] = str(UUID(old_row["id"]))
        connection.lqai_message_refusal = message_change_refusal(old_row, new_row)
        return connection.lqai_message_refusal

    def purging_now() -> bool:
        # The review decisions' delete trigger (citations.0021): a delete goes only in a matter's purge.
        return purge_in_progress() is not None

    connection.connection.create_function("lqai_message_refusal", 2, message_refusal, deterministic=False)
    connection.connection.create_function("lqai_purging_now", 0, purging_now, deterministic=False)
    connection.connection.create_function("lqai_note_finalized", 2, note_finalized, deterministic=False)
    connection.connection.create_function("lqai_finalized_here", 2, is_finalized_here, deterministic=False)


_Model = TypeVar("_Model", bound=models.Model)


def attname(model: type[models.Model], name: str) -> str:
    """The column attribute of field ``name`` of ``model`` (``author`` -> ``author_id``)."""
    return str(getattr(model._meta.get_field(name), "attname", name))


class AppendOnlyQuerySet(models.QuerySet[_Model]):
    """A guarded table's queryset: ``update()`` is refused, ``delete()`` only inside a purge.

    Django's cascades go through the base manager, not this queryset, so a purge's cascade is not
    held up here; on PostgreSQL the triggers check those rows too."""

    def update(self, **kwargs: Any) -> int:
        raise AppendOnlyError(f"{self.model._meta.db_table} rows cannot be updated")

    def bulk_create(self, objs: Iterable[_Model], *args: Any, **kwargs: Any) -> list[_Model]:
        objs = list(objs)
        with naming_late_rows(self.model, (getattr(obj, "message_id", None) for obj in objs)):
            return super().bulk_create(objs, *args, **kwargs)

    def delete(self) -> tuple[int, dict[str, int]]:
        if purge_in_progress() is None:
            raise AppendOnlyError(
                f"{self.model._meta.db_table} rows cannot be deleted (only a matter purge removes them)"
            )
        return super().delete()


class AppendOnlyModel(models.Model):
    """A row of the permanent record: written once (``save()`` of a stored row is refused, but for the
    fields of ``settable_once``, each of which may go from NULL to a value once), deleted only by a purge."""

    settable_once: ClassVar[tuple[str, ...]] = ()

    class Meta:
        abstract = True

    def save(self, *args: Any, **kwargs: Any) -> None:
        if not self._state.adding and not kwargs.get("force_insert"):
            self._refuse_update(using=kwargs.get("using") or self._state.db, update_fields=kwargs.get("update_fields"))
        with naming_late_rows(type(self), [getattr(self, "message_id", None)]):
            super().save(*args, **kwargs)

    def _refuse_update(self, *, using: str | None, update_fields: Any) -> None:
        table = self._meta.db_table
        row = type(self)._base_manager.using(using).filter(pk=self.pk).values().first()
        if row is None:
            return  # not stored after all: an insert
        stored: dict[str, Any] = dict(row)
        names = {f.attname for f in self._meta.concrete_fields}
        if update_fields is not None:
            names &= {attname(type(self), name) for name in update_fields}
        changed = {name for name in names if getattr(self, name) != stored[name]}
        if not changed:
            raise AppendOnlyError(f"{table} rows cannot be updated")
        allowed = {name for name in changed if name in self.settable_once and stored[name] is None}
        if changed - allowed:
            raise AppendOnlyError(
                f"{table} rows cannot be updated"
                + (f" (only {', '.join(self.settable_once)} may be set once, from NULL)" if self.settable_once else "")
            )

    def delete(self, *args: Any, **kwargs: Any) -> tuple[int, dict[str, int]]:
        if purge_in_progress() is None:
            raise AppendOnlyError(f"{self._meta.db_table} rows cannot be deleted (only a matter purge removes them)")
        return super().delete(*args, **kwargs)


# What a finalized message keeps (the columns the trigger guards): a complete or failed message keeps all of
# them; an interrupted one (finalized, but resumable) keeps who asked what, its content only grows, its verdict
# only gets worse and its usage only accumulates.
FINAL_FIELDS = (
    "chat_id",
    "role",
    "content",
    "status",
    "verdict",
    "author_id",
    "reply_to_id",
    "finalized_at",
    "attempt",
    "model_name",
    "prompt_tokens",
    "completion_tokens",
    "latency_ms",
)
IDENTITY_FIELDS = ("chat_id", "role", "author_id", "reply_to_id")
USAGE_COUNTERS = ("prompt_tokens", "completion_tokens", "latency_ms")
VERDICT_ORDER = verdict_rule.ORDER
FINAL_STATUSES = ("complete", "failed")


def message_change_refusal(old: Mapping[str, Any], new: Mapping[str, Any]) -> str | None:
    """Why the permanent record refuses changing a message row from ``old`` to ``new`` (column values by
    attname; ``new`` may hold only the columns being written), or None if it may change. The model layer's
    statement of the rule the messages trigger holds in PostgreSQL (``chats.0014_permanent_record``)."""

    def changed(name: str) -> bool:
        return name in new and new[name] != old[name]

    if changed("verdict") and new["verdict"] == verdict_rule.SUPPORTED:
        return f"message {old['id']}: 'supported' is a verdict of earlier rules, kept by the turns sealed with it"
    if old["status"] in FINAL_STATUSES:
        frozen = [name for name in FINAL_FIELDS if changed(name)]
        if frozen:
            return f"message {old['id']} is {old['status']}: its {', '.join(frozen)} cannot change"
        return None
    if old["finalized_at"] is None:
        return None  # not finalized yet: the run is writing it
    moved = [name for name in IDENTITY_FIELDS if changed(name)]
    if moved:
        return f"message {old['id']} is finalized: its {', '.join(moved)} cannot change"
    if "content" in new and not str(new["content"]).startswith(old["content"]):
        return f"message {old['id']} is finalized: its content can only be continued, never rewritten"
    if "finalized_at" in new and new["finalized_at"] is None:
        return f"message {old['id']} is finalized: it cannot become unfinalized"
    if "status" in new and new["status"] == "pending":
        return f"message {old['id']} is finalized: it cannot go back to pending"
    if changed("verdict") and (
        new["verdict"] is None
        or (old["verdict"] is not None and VERDICT_ORDER.index(new["verdict"]) < VERDICT_ORDER.index(old["verdict"]))
    ):
        return f"message {old['id']} is finalized: its verdict can only get worse"
    shrunk = [
        name for name in USAGE_COUNTERS if changed(name) and old[name] is not None and (new[name] or 0) < old[name]
    ]
    if shrunk:
        return f"message {old['id']} is finalized: its {', '.join(shrunk)} can only accumulate"
    return None
