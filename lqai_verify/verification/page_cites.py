"""Page cites: the pages a quoted passage spans, as a lawyer writes them (``p. 676``, ``pp. 676-677`` with an en dash).

Pure text, like the rest of this package, so that the offline verifier's report (``lqai_verify.report``) cites
pages exactly as the server's pages and API do (``chats.pages`` finds the labels)."""

from __future__ import annotations

from collections.abc import Sequence


def page_cite(labels: Sequence[str] | None) -> str:
    """Page labels (from ``chats.pages.pages_of_span``) as a page cite: ``"p. 676"``, ``"pp. 676\u2013677"`` (a
    label that is itself a range, ``"673-674"``, reads as one); empty when no page is known."""
    if not labels:
        return ""
    first, last = labels[0].split("-")[0], labels[-1].split("-")[-1]
    return f"p. {first}" if first == last else f"pp. {first}\u2013{last}"
