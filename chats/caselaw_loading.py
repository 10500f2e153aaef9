"""Case law in bulk: CourtListener and Caselaw Access Project JSON files loaded into ``caselaw_opinions``.

``manage.py load_authorities FILE.json`` calls :func:`load_caselaw_file` (named by ``LQAI_CASELAW_LOADER``: the
authority library's command does not import ``chats``). A file is read as a stream, item by item (ijson for a JSON
array or an API page, line by line for JSON Lines), so memory stays flat in the file's size; each item is read into
:class:`~chats.opinion_records.OpinionRecord` by the code that reads the opinions fetched at run time. Opinions are
stored in batches, one transaction each; an opinion already stored (the same provider's id, whether loaded or
fetched before) is left as it is, so loading a file again adds nothing and a load that stopped is finished by
loading the file again.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass
from itertools import islice
from pathlib import Path
from typing import IO, Any

import ijson
from django.db import DatabaseError, transaction
from django.utils import timezone

from chats.courtlistener import record_metadata
from chats.models import CaselawOpinion, fit
from chats.opinion_records import OpinionRecord, RecordError, records_of
from chats.pages import opinion_pages

logger = logging.getLogger(__name__)

BATCH_SIZE = 100
JSON_LINES = (".jsonl", ".ndjson")


class CaselawFileError(ValueError):
    """A file that is not CourtListener or CAP JSON, or an item in it that is not an opinion: the message says
    where (the line or item) and why."""


@dataclass(frozen=True, slots=True)
class CaselawLoadReport:
    """What one file's load did: opinions ``read``, ``added`` now, ``stored_before`` (left as they were),
    ``without_text`` (nothing to quote: not stored) and ``refused`` by the database (logged with the reason)."""

    path: Path
    read: int = 0
    added: int = 0
    stored_before: int = 0
    without_text: int = 0
    refused: int = 0

    def summary(self) -> str:
        parts = [f"{self.read} opinions read", f"{self.added} added", f"{self.stored_before} stored before"]
        parts += [f"{self.without_text} without text, skipped"] if self.without_text else []
        parts += [f"{self.refused} refused by the database (see the log)"] if self.refused else []
        return ", ".join(parts)


def _has_top_level_results(handle: IO[bytes]) -> bool:
    """Whether the JSON object in ``handle`` is an API page (a top-level ``results`` key); reads it as a stream."""
    try:
        found = any(event == ("", "map_key", "results") for event in ijson.parse(handle) if event[0] == "")
    finally:
        handle.seek(0)
    return found


def _items(handle: IO[bytes], *, lines: bool) -> Iterator[tuple[str, Any]]:
    """``(where, item)`` for each JSON value of the file: each line of JSON Lines; each element of a top-level
    array or of an API page's ``results``; or the one object the file holds."""
    if lines:
        for number, line in enumerate(handle, start=1):
            if line.strip():
                try:
                    yield f"line {number}", json.loads(line)
                except ValueError as exc:
                    raise CaselawFileError(f"line {number} is not JSON: {exc}") from None
        return
    first = handle.read(64).lstrip()[:1]
    handle.seek(0)
    if first == b"[":
        prefix = "item"
    elif first == b"{" and _has_top_level_results(handle):
        prefix = "results.item"
    elif first == b"{":
        yield "the file", json.load(handle)  # one cluster or case: the size of one case
        return
    else:
        raise CaselawFileError("the file is not JSON (neither an object nor an array)")
    for number, item in enumerate(ijson.items(handle, prefix, use_float=True), start=1):
        yield f"item {number}", item


def _records(items: Iterable[tuple[str, Any]]) -> Iterator[OpinionRecord]:
    for where, item in items:
        try:
            yield from records_of(item)
        except RecordError as exc:
            raise CaselawFileError(f"{where}: {exc}") from None


def _opinion(record: OpinionRecord, *, now: Any) -> CaselawOpinion:
    """The row of a record: what the run-time fetch saves of it (``courtlistener.record_metadata``), each value
    fitted to its column, its pages computed from the text (``bulk_create`` does not call ``save()``)."""
    values = {
        "provider": record.provider,
        "opinion_id": record.opinion_id,
        **record_metadata(record),
        "retrieved_at": now,
    }
    fitted = {name: fit(CaselawOpinion, name, value) for name, value in values.items()}
    return CaselawOpinion(**fitted, text=record.text, pages=opinion_pages(record.text, citation=fitted["citation"]))


def _store(batch: list[OpinionRecord]) -> tuple[int, int, int]:
    """Store the opinions of ``batch`` not yet stored: ``(added, stored_before, refused)``. One transaction; a
    batch the database refuses (a text too long for the full-text index, say) is stored row by row instead, each
    refusal logged and counted."""
    keys = {(r.provider, r.opinion_id): r for r in batch}
    with transaction.atomic():
        candidates = CaselawOpinion.objects.filter(
            provider__in={p for p, _ in keys}, opinion_id__in={o for _, o in keys}
        ).values_list("provider", "opinion_id")
        stored = set(candidates) & keys.keys()
        now = timezone.now()
        rows = [_opinion(record, now=now) for key, record in keys.items() if key not in stored]
        try:
            with transaction.atomic():
                CaselawOpinion.objects.bulk_create(rows)
            return len(rows), len(stored), 0
        except DatabaseError:
            refused = 0
            for row in rows:
                try:
                    with transaction.atomic():
                        row.save(force_insert=True)
                except DatabaseError:
                    logger.warning("caselaw: %s opinion %s refused", row.provider, row.opinion_id, exc_info=True)
                    refused += 1
            return len(rows) - refused, len(stored), refused


def load_caselaw_file(
    *, path: Path, progress: Callable[[int], None] = lambda position: None, dry_run: bool = False
) -> CaselawLoadReport:
    """Load the CourtListener or CAP JSON file at ``path`` (see the module docstring); ``progress`` is called with
    the byte position reached after each batch. ``dry_run`` reads the whole file and writes nothing. Raises
    :class:`CaselawFileError` at the first item that is not JSON or not an opinion, naming it; the batches stored
    before it stay."""
    read = added = stored_before = without_text = refused = 0
    with path.open("rb") as handle:
        records = _records(_items(handle, lines=path.suffix.lower() in JSON_LINES))
        try:
            while batch := list(islice(records, BATCH_SIZE)):
                read += len(batch)
                with_text = [r for r in batch if r.text]
                without_text += len(batch) - len(with_text)
                if not dry_run and with_text:
                    new, before, refusals = _store(with_text)
                    added, stored_before, refused = added + new, stored_before + before, refused + refusals
                progress(handle.tell())
        except ijson.JSONError as exc:
            raise CaselawFileError(f"the file is not well-formed JSON: {exc}") from None
        except json.JSONDecodeError as exc:
            raise CaselawFileError(f"the file is not well-formed JSON: {exc}") from None
    return CaselawLoadReport(path, read, added, stored_before, without_text, refused)
