"""Bounds on a zip archive (a DOCX is one), checked from its central directory before any member is inflated.

A zip bomb is a small file whose members inflate to gigabytes, or that holds so many members that listing them
is the attack. :func:`check_zip` refuses an archive whose member count, total uncompressed size or compression
ratio is beyond what a brief needs, reading only the sizes the archive declares; python-docx opens the file
only after it. Inflating is then bounded too: a member that inflates past its declared size is a corrupt zip,
which :mod:`zipfile` refuses itself.
"""

from __future__ import annotations

import io
import zipfile

from drafts.errors import UnreadableDraft

MAX_MEMBERS = 1000  # a Word document has a few dozen parts; more is not a brief
MAX_UNCOMPRESSED_BYTES = 100 * 1024 * 1024  # all members inflated
MAX_RATIO = 200  # a member's uncompressed size over its compressed size (XML compresses up to about 20:1)
_RATIO_FLOOR_BYTES = 1024 * 1024  # a member this small inflated may have any ratio (an empty part is 1000:1)


def check_zip(data: bytes) -> None:
    """Refuse (:class:`UnreadableDraft`) a zip ``data`` that is not a readable archive, or has more than
    :data:`MAX_MEMBERS` members, more than :data:`MAX_UNCOMPRESSED_BYTES` inflated, or a member over 1 MB
    inflated whose compression ratio exceeds :data:`MAX_RATIO`. Reads the central directory only."""
    try:
        with zipfile.ZipFile(io.BytesIO(data)) as archive:
            members = archive.infolist()
    except (zipfile.BadZipFile, OSError, ValueError, EOFError):
        raise UnreadableDraft(
            "The file is not a Word document (DOCX) that can be read: its archive is damaged."
        ) from None
    if len(members) > MAX_MEMBERS:
        raise UnreadableDraft(
            f"The Word document holds {len(members)} files inside it, more than the {MAX_MEMBERS} a document "
            "can have: it is refused as a possible zip bomb."
        )
    total = sum(member.file_size for member in members)
    if total > MAX_UNCOMPRESSED_BYTES:
        raise UnreadableDraft(
            f"The Word document would unpack to {total // (1024 * 1024)} MB, more than the "
            f"{MAX_UNCOMPRESSED_BYTES // (1024 * 1024)} MB allowed: it is refused as a possible zip bomb."
        )
    for member in members:
        if member.file_size > _RATIO_FLOOR_BYTES and member.file_size > MAX_RATIO * max(member.compress_size, 1):
            raise UnreadableDraft(
                f"A part of the Word document ({member.filename}) is compressed more than {MAX_RATIO} to 1: "
                "it is refused as a possible zip bomb."
            )
