"""The text of each page of an uploaded PDF, read in a process of its own (``chats.documents.text_of_pdf``).

Run as a script (``python -I chats/pdf_text.py --max-pages N --max-chars N --seconds S``): reads the PDF on
stdin, writes one JSON object on stdout, ``{"pages": [<text of each page>]}`` or ``{"refused": <why>}`` with
``why`` one of ``pages`` (more than ``--max-pages`` pages), ``chars`` (more text than ``--max-chars``),
``encrypted`` or ``unreadable``. Its CPU time is limited to ``--seconds`` (the kernel stops it past that) and
it runs at a lower priority than the server's workers, so a PDF that is costly to read slows the server's
turns as little as possible; the caller bounds its wall time too. Imports only the standard library and
pypdf: no Django, so that it starts quickly. ``-I`` keeps this directory off ``sys.path`` (``chats/selectors.py``
would shadow the standard library's ``selectors``).
"""

from __future__ import annotations

import argparse
import io
import json
import math
import os
import resource
import sys
from typing import Any

from pypdf import PdfReader

# Between two pages' texts in the count of characters (chats.pages.PAGE_SEPARATOR's length).
SEPARATOR_CHARS = 2


def page_count_within(reader: PdfReader, limit: int) -> bool:
    """Whether the page tree has at most ``limit`` pages, counted as a reader walks it: every time a node is
    listed, even a node listed many times over (a few kilobytes can list one page a million times). Stops
    as soon as the count passes ``limit``, or the nodes walked pass twice as many (a tree of empty nodes), so
    the walk costs at most that many steps whatever the file says its count is."""
    stack: list[Any] = [reader.root_object["/Pages"]]
    pages = nodes = 0
    while stack:
        node = stack.pop().get_object()
        nodes += 1
        if nodes > 2 * limit + 1:
            return False
        kids = node.get("/Kids")
        if kids is None:
            pages += 1
            if pages > limit:
                return False
        else:
            stack.extend(kids.get_object())
    return True


def refusal_before_reading(data: bytes, *, max_pages: int) -> str | None:
    """Why the PDF ``data`` is refused before any page is read (``encrypted``, ``pages``; ``unreadable`` if
    pypdf cannot parse it), or None. Costs the parse of the file's structure and at most ``2 * max_pages + 1``
    steps of the page tree: the server runs it itself, before it starts a process to read the pages."""
    try:
        reader = PdfReader(io.BytesIO(data))
        if reader.is_encrypted:
            return "encrypted"
        return None if page_count_within(reader, max_pages) else "pages"
    except Exception:  # whatever the file breaks in pypdf is the file's fault
        return "unreadable"


def page_texts(data: bytes, *, max_pages: int, max_chars: int) -> dict[str, Any]:
    """What the script writes for the PDF ``data`` (see the module docstring)."""
    try:
        reader = PdfReader(io.BytesIO(data))
        if reader.is_encrypted:
            return {"refused": "encrypted"}
        if not page_count_within(reader, max_pages):
            return {"refused": "pages"}
        texts: list[str] = []
        length = 0
        for page in reader.pages:
            texts.append(page.extract_text() or "")
            length += len(texts[-1]) + SEPARATOR_CHARS
            if length > max_chars:
                return {"refused": "chars"}
    except Exception as exc:  # whatever the file breaks in pypdf is the file's fault
        return {"refused": "unreadable", "error": repr(exc)[:500]}
    return {"pages": texts}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--max-pages", type=int, required=True)
    parser.add_argument("--max-chars", type=int, required=True)
    parser.add_argument("--seconds", type=float, required=True)
    arguments = parser.parse_args()
    cpu = math.ceil(arguments.seconds)
    _, hard = resource.getrlimit(resource.RLIMIT_CPU)
    resource.setrlimit(resource.RLIMIT_CPU, (cpu, cpu + 1 if hard == resource.RLIM_INFINITY else min(cpu + 1, hard)))
    os.nice(10)
    outcome = page_texts(sys.stdin.buffer.read(), max_pages=arguments.max_pages, max_chars=arguments.max_chars)
    json.dump(outcome, sys.stdout)  # ASCII: a lone surrogate of a broken text layer is escaped, not an error


if __name__ == "__main__":
    main()
