"""Bounds on an uploaded zip (a DOCX is one) checked before any member is read: how many members, how many
bytes they hold uncompressed, and how far each is compressed. :func:`check_zip` reads only the archive's
central directory. Python's ``zipfile`` (and so python-docx, which reads a DOCX through it) never inflates a
member past the size the directory declares, so these bounds also bound the work of reading it afterwards:
a zip bomb, a few kilobytes inflating to gigabytes, is refused before it is inflated.

The limits are settings: ``LQAI_MAX_ZIP_MEMBERS``, ``LQAI_MAX_ZIP_BYTES`` (all members, uncompressed) and
``LQAI_MAX_ZIP_RATIO`` (a member's uncompressed size over its compressed size, for members over
:data:`RATIO_FLOOR_BYTES`). A refusal (:class:`ZipTooLarge`) names the setting.
"""

from __future__ import annotations

import zipfile
from typing import IO

from django.conf import settings

ZIP_MAGIC = b"PK\x03\x04"
# A member this small is not held to the ratio: a short run of spaces compresses a thousandfold, harmlessly.
RATIO_FLOOR_BYTES = 1024 * 1024


class ZipTooLarge(ValueError):
    """The zip is over one of its bounds; the message names the setting."""


def check_zip(stream: IO[bytes]) -> None:
    """Refuse (:class:`ZipTooLarge`) a zip over its bounds (see the module docstring); a stream that is not a
    zip at all raises ``zipfile.BadZipFile``. Leaves the stream at its start."""
    try:
        with zipfile.ZipFile(stream) as archive:
            members = archive.infolist()
    finally:
        stream.seek(0)
    if len(members) > settings.LQAI_MAX_ZIP_MEMBERS:
        raise ZipTooLarge(f"The archive has more than {settings.LQAI_MAX_ZIP_MEMBERS} files (LQAI_MAX_ZIP_MEMBERS).")
    if sum(member.file_size for member in members) > settings.LQAI_MAX_ZIP_BYTES:
        raise ZipTooLarge(
            f"The archive's files are larger than {settings.LQAI_MAX_ZIP_BYTES} bytes uncompressed "
            "(LQAI_MAX_ZIP_BYTES)."
        )
    for member in members:
        if (
            member.file_size > RATIO_FLOOR_BYTES
            and member.file_size > member.compress_size * settings.LQAI_MAX_ZIP_RATIO
        ):
            raise ZipTooLarge(
                f"The archive's file {member.filename[:100]!r} is compressed more than "
                f"{settings.LQAI_MAX_ZIP_RATIO} to 1 (LQAI_MAX_ZIP_RATIO)."
            )
