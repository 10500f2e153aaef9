"""The passage in context for the server's pages: the admin's ledger entry page and the trace pages (``pages``)
draw a verified quote through :func:`passage_in_context_html`, the one drawing
(:mod:`lqai_verify.passage_html`, pure, which the export report uses too), marked safe for templates.
``citations/passage.css`` styles it.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from django.utils.safestring import SafeString

from citations.selectors import PassageInContext
from lqai_verify import passage_html

STYLESHEET = "citations/passage.css"


def passage_in_context_html(
    context: PassageInContext,
    alterations: Sequence[dict[str, Any]],
    *,
    offsets: bool = True,
    context_flags: Sequence[dict[str, Any]] = (),
) -> SafeString:
    """:func:`lqai_verify.passage_html.passage_in_context_html`, whose every value is escaped, as safe HTML."""
    return SafeString(
        passage_html.passage_in_context_html(context, alterations, offsets=offsets, context_flags=context_flags)
    )
