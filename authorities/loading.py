"""Loading USLM files into the authority library: idempotent, resumable, one transaction per batch.

A file is known by its SHA-256: once every section of it is stored (``AuthorityFile.completed_at``), loading it
again reads nothing; a load that stopped part-way (a crash, a file that breaks off) is finished by loading
the file again, which stores only the sections still missing. The resolver uses a file's sections only once
the file is complete, so a part-loaded title is reported unchecked, never "not found".

:func:`load_authority_file` is what ``manage.py load_authorities`` runs for each file (USLM XML here, case-law JSON
through the loader ``LQAI_CASELAW_LOADER`` names); :func:`load_uploaded_file` is the admin's: the same, for a
file an operator uploads, bounded in size and all or nothing.
"""

from __future__ import annotations

import hashlib
import tempfile
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass
from itertools import islice
from pathlib import Path

from django.conf import settings
from django.db import transaction
from django.utils import timezone
from django.utils.module_loading import import_string

from authorities.models import AuthorityFile, AuthorityRelease, StatuteSection
from authorities.uslm import ParsedSection, UslmError, UslmRelease, read_uslm

BATCH_SIZE = 200
# Case-law JSON: CourtListener's and CAP's, one value or an array (.json), or one a line (.jsonl, .ndjson).
CASELAW_SUFFIXES = (".json", ".jsonl", ".ndjson")
USLM_SUFFIXES = (".xml",)


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


@dataclass(frozen=True, slots=True)
class FileLoad:
    """What loading one file did, in one line for an operator (``summary``, without the file's name)."""

    name: str
    summary: str

    def line(self) -> str:
        return f"{self.name}: {self.summary}"


def load_authority_file(
    *, path: Path, progress: Callable[[int], None] | None = None, dry_run: bool = False
) -> FileLoad:
    """Load one file: case-law JSON (``CASELAW_SUFFIXES``) into the opinions, through the loader
    ``LQAI_CASELAW_LOADER`` names (the opinions are ``chats``' rows, and the library imports nothing of it); any
    other file as USLM XML into the library (:func:`load_uslm`). ``progress`` is called with the bytes read.

    Raises ``ValueError`` (:class:`~authorities.uslm.UslmError`, the case-law loader's error) with the reason, for
    an operator; what was stored before the error stays stored, as :func:`load_uslm` says."""
    if path.suffix.lower() in CASELAW_SUFFIXES:
        load = import_string(settings.LQAI_CASELAW_LOADER)
        report = load(path=path, progress=progress or (lambda position: None), dry_run=dry_run)
        suffix = " (dry run: nothing written)" if dry_run else ""
        return FileLoad(path.name, f"case law - {report.summary()}{suffix}")
    uslm = load_uslm(path=path, progress=progress, dry_run=dry_run)
    if uslm.skipped:
        return FileLoad(path.name, "loaded before, skipped")
    label = uslm.release.label if uslm.release else ""
    if dry_run:
        return FileLoad(path.name, f"{label} - {uslm.sections} sections (dry run: nothing written)")
    return FileLoad(path.name, f"{label} - {uslm.sections} sections read, {uslm.added} added")


def load_uploaded_file(*, name: str, chunks: Iterable[bytes], size: int) -> FileLoad:
    """Load a file an operator uploaded in the admin, named ``name`` (its suffix says what it is: ``.xml`` USLM,
    ``.json``/``.jsonl``/``.ndjson`` case law), its bytes ``chunks``, ``size`` of them.

    The same load as ``manage.py load_authorities`` (:func:`load_authority_file`), idempotent the same way, but all
    or nothing: one transaction, so a bad file leaves nothing written. Refused with a ``ValueError`` saying why,
    before anything is read, for a name with another suffix or a file over ``LQAI_MAX_AUTHORITY_UPLOAD_BYTES``
    (a larger file is loaded with the command, which commits batch by batch)."""
    base = Path(name).name
    if not base or Path(base).suffix.lower() not in USLM_SUFFIXES + CASELAW_SUFFIXES:
        kinds = ", ".join(USLM_SUFFIXES + CASELAW_SUFFIXES)
        raise ValueError(f"{base or 'the file'}: not a USLM XML or case-law JSON file (its name ends in {kinds})")
    limit = settings.LQAI_MAX_AUTHORITY_UPLOAD_BYTES
    if size > limit:
        raise ValueError(
            f"{base}: {size:,} bytes, over LQAI_MAX_AUTHORITY_UPLOAD_BYTES ({limit:,}): load it with "
            "manage.py load_authorities"
        )
    with tempfile.TemporaryDirectory(prefix="lqai-authority-") as directory:
        path = Path(directory) / base
        written = 0
        with path.open("wb") as handle:
            for chunk in chunks:
                written += len(chunk)
                if written > limit:
                    raise ValueError(f"{base}: over LQAI_MAX_AUTHORITY_UPLOAD_BYTES ({limit:,} bytes)")
                handle.write(chunk)
        with transaction.atomic():
            return load_authority_file(path=path)
