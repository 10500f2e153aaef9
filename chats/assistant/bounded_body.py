"""The model server's responses, read up to a bound: the HTTP client's response hook for the model backend.

The ``openai`` package reads a server-sent event whole, without a size limit (an endless line is held in
memory), and a completion's body whole. So the backend's HTTP client reads each response body through
:class:`BoundedBody`: past ``LQAI_OPENAI_MAX_RESPONSE_BYTES`` bytes the read raises a :class:`BackendError`
(the turn fails, naming the setting). The client asks for an uncompressed body (``Accept-Encoding:
identity``), so that the bytes counted are the bytes held; a body sent compressed anyway is refused as it is
read, since a few compressed bytes can inflate to any size.

Imported with the ``openai`` package, on the first turn (``httpx2`` is slow to import).
"""

from __future__ import annotations

from collections.abc import Callable, Iterator

import httpx2

from chats.assistant.backends import BackendError


class BoundedBody(httpx2.SyncByteStream):
    """A response's body, read as it arrives, raising once more than ``max_bytes`` have come."""

    def __init__(self, body: httpx2.SyncByteStream, *, max_bytes: int, encoding: str) -> None:
        self._body = body
        self._max_bytes = max_bytes
        self._encoding = encoding

    def __iter__(self) -> Iterator[bytes]:
        if self._encoding not in {"", "identity"}:
            raise BackendError(f"the model server sent its response compressed ({self._encoding}) though asked not to")
        read = 0
        for chunk in self._body:
            read += len(chunk)
            if read > self._max_bytes:
                raise BackendError(
                    f"the model server sent more than {self._max_bytes} bytes in one response "
                    "(LQAI_OPENAI_MAX_RESPONSE_BYTES)"
                )
            yield chunk

    def close(self) -> None:
        self._body.close()


def bounded_responses(max_bytes: int) -> Callable[[httpx2.Response], None]:
    """A response hook reading each body through :class:`BoundedBody` (before anything reads it)."""

    def hook(response: httpx2.Response) -> None:
        body = response.stream
        if isinstance(body, httpx2.SyncByteStream):
            encoding = response.headers.get("content-encoding", "").strip().lower()
            response.stream = BoundedBody(body, max_bytes=max_bytes, encoding=encoding)

    return hook
