"""Loading USLM files into the authority library: idempotent, resumable, one transaction per batch.

A file is known by its SHA-256: once every section of it is stored (``AuthorityFile.completed_at``), loading it
again reads nothing; a load that stopped part-way (a crash, a file that breaks off) is finished by loading
the file again, which stores only the sections still missing. The resolver uses a file's sections only once
the file is complete, so a part-loaded title is reported unchecked, never "not found".
"""

from __future__ import annotations

import hashlib
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass
from itertools import islice
from pathlib import Path

from django.db import transaction
from django.utils import timezone

from authorities.models import AuthorityFile, AuthorityRelease, StatuteSection
from authorities.uslm import ParsedSection, UslmError, UslmRelease, read_uslm

BATCH_SIZE = 200


@dataclass(frozen=True, slots=True)
class LoadReport:
    """What one file's load did: ``added`` sections stored now, ``sections`` read (0 when skipped)."""

    path: Path
    release: UslmRelease | None
    added: int
    sections: int
    skipped: bool  # the file was loaded whole before: nothing read


def file_sha256(path: Path) -> str:
    digest = hashlib.sha256()
    with path.open("rb") as handle:
        for block in iter(lambda: handle.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()


def _batches(items: Iterable[ParsedSection], size: int) -> Iterator[list[ParsedSection]]:
    iterator = iter(items)
    while batch := list(islice(iterator, size)):
        yield batch


def _store(release: AuthorityRelease, batch: list[ParsedSection]) -> int:
    """Store the sections of ``batch`` not yet stored for ``release``; how many were new."""
    with transaction.atomic():
        stored = set(
            StatuteSection.objects.filter(release=release, identifier__in=[s.identifier for s in batch]).values_list(
                "identifier", flat=True
            )
        )
        new: dict[str, StatuteSection] = {}
        for s in batch:
            if s.identifier in stored or s.identifier in new:
                continue  # a section stored by an earlier run, or numbered twice in the file: the first stands
            new[s.identifier] = StatuteSection(
                release=release,
                identifier=s.identifier,
                number=s.number,
                heading=s.heading,
                text=s.text,
                subdivisions=s.subdivisions,
                pages=s.pages,
                part=s.part,
            )
        StatuteSection.objects.bulk_create(new.values(), ignore_conflicts=True)
        return len(new)


def _release_row(release: UslmRelease) -> AuthorityRelease:
    row, _ = AuthorityRelease.objects.get_or_create(
        code=release.code,
        title=release.title,
        release_point=release.release_point,
        defaults={
            "label": release.label,
            "released_on": release.released_on,
            "sequence": release.sequence,
            "official": release.official,
            "legal_status": release.legal_status,
            "publisher": release.publisher,
        },
    )
    return row


def load_uslm(
    *,
    path: Path,
    progress: Callable[[int], None] | None = None,
    dry_run: bool = False,
    batch_size: int = BATCH_SIZE,
) -> LoadReport:
    """Load one USLM file (a U.S. Code title from OLRC, a CFR volume from GPO) into the library.

    ``progress`` is called with the number of bytes read so far. With ``dry_run`` the file is read whole and
    nothing is written. Raises :class:`~authorities.uslm.UslmError` for a file that is not a USLM title (nothing
    written) or that breaks off (the batches before stay stored, the file is not complete)."""
    digest = file_sha256(path)
    if AuthorityFile.objects.filter(sha256=digest, completed_at__isnull=False).exists():
        return LoadReport(path=path, release=None, added=0, sections=0, skipped=True)
    with path.open("rb") as handle:
        release, sections = read_uslm(handle)
        if dry_run:
            count = 0
            for count, _ in enumerate(sections, start=1):  # noqa: B007 - counting what a load would read
                if progress:
                    progress(handle.tell())
            return LoadReport(path=path, release=release, added=0, sections=count, skipped=False)
        row = _release_row(release)
        loaded, _ = AuthorityFile.objects.get_or_create(
            sha256=digest,
            defaults={
                "release": row,
                "name": path.name,
                "first_part": release.first_part,
                "last_part": release.last_part,
            },
        )
        if loaded.release_id != row.pk:
            raise UslmError(f"{path.name} was loaded before as part of another release ({loaded.release})")
        added = read = 0
        for batch in _batches(sections, batch_size):
            added += _store(row, batch)
            read += len(batch)
            if progress:
                progress(handle.tell())
    loaded.sections, loaded.completed_at = read, timezone.now()
    loaded.save(update_fields=["sections", "completed_at"])
    return LoadReport(path=path, release=release, added=added, sections=read, skipped=False)
