"""A DOCX draft's zip bounded before python-docx opens it: the same bounds as every uploaded zip
(:func:`chats.archives.check_zip`: ``LQAI_MAX_ZIP_MEMBERS``, ``LQAI_MAX_ZIP_BYTES``, ``LQAI_MAX_ZIP_RATIO``),
read from the archive's central directory before any member is inflated, said to a lawyer as a draft's error.
"""

from __future__ import annotations

import io
import zipfile

from chats.archives import ZipTooLarge
from chats.archives import check_zip as check_uploaded_zip
from drafts.errors import UnreadableDraft


def check_zip(data: bytes) -> None:
    """Refuse (:class:`UnreadableDraft`) a zip ``data`` that is not a readable archive, or that is over one of
    the upload bounds (the message names the setting). Reads the central directory only."""
    try:
        check_uploaded_zip(io.BytesIO(data))
    except (zipfile.BadZipFile, OSError, ValueError, EOFError) as error:
        if isinstance(error, ZipTooLarge):
            raise UnreadableDraft(f"The Word document is refused as a possible zip bomb: {error}") from None
        raise UnreadableDraft(
            "The file is not a Word document (DOCX) that can be read: its archive is damaged."
        ) from None
