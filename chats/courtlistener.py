"""CourtListener as a caselaw provider, through the official ``courtlistener-api-client``.

:func:`search_and_materialize` searches opinions, fetches each hit's opinion text and
materializes it into ``caselaw_opinions`` (provider ``courtlistener``), so that quotes from
it can be verified at finalize and re-verified later, whatever happens upstream.

:func:`build_client` is the one place a client is made; tests replace the HTTP layer by
passing an ``httpx`` transport (recorded responses), never the network. The SDK is imported
there, on first use, so that processes that never call CourtListener (every ``manage.py``
command, a server until its first CourtListener search) do not pay for importing it.
"""

from __future__ import annotations

import datetime
import functools
import html
import logging
from typing import TYPE_CHECKING, Any

import httpx
from django.conf import settings
from django.db import DatabaseError, transaction
from django.utils import timezone
from django.utils.html import strip_tags

from chats.models import CaselawOpinion, fit
from lqai_verify.verification import page_breaks

if TYPE_CHECKING:
    from courtlistener import CourtListener

logger = logging.getLogger(__name__)

PROVIDER = "courtlistener"
SITE = "https://www.courtlistener.com"
# A chat turn waits for these calls: fail fast and fall back to local opinions.
TIMEOUT_SECONDS = 10.0
OPINION_FIELDS = ["id", "cluster_id", "absolute_url", "plain_text", "html_with_citations", "html"]


@functools.cache
def _client_class() -> type[CourtListener]:
    """The official client, with an injectable ``httpx`` transport (defined on first use: see the module docstring)."""
    from courtlistener import CourtListener

    class Client(CourtListener):
        def __init__(self, *, api_token: str, transport: httpx.BaseTransport | None, base_url: str | None) -> None:
            super().__init__(api_token=api_token, base_url=base_url, timeout=TIMEOUT_SECONDS)
            # The parent builds this lazily, with no way to pass a transport; build it now instead.
            self._http_client = httpx.Client(
                base_url=self.base_url,
                headers={"Authorization": f"Token {api_token}"},
                timeout=self.timeout,
                transport=transport,
            )

    return Client


def build_client(
    api_token: str, *, transport: httpx.BaseTransport | None = None, base_url: str | None = None
) -> CourtListener:
    """A CourtListener client for ``api_token`` (``transport``/``base_url``: for tests)."""
    client_class: Any = _client_class()
    client: CourtListener = client_class(api_token=api_token, transport=transport, base_url=base_url)
    return client


def client_from_settings() -> CourtListener | None:
    """A client for ``settings.COURTLISTENER_API_TOKEN``; ``None`` when it is unset (CourtListener is off)."""
    token = settings.COURTLISTENER_API_TOKEN
    return build_client(token) if token else None


def _date(value: Any) -> datetime.date | None:
    if not isinstance(value, str) or not value:
        return None
    try:
        return datetime.date.fromisoformat(value[:10])
    except ValueError:
        return None


def opinion_text(detail: dict[str, Any]) -> str:
    """The text of a CourtListener opinion: its ``html_with_citations`` when that carries star-pagination
    markers (kept as inline star paging, from which the opinion's pages are read when it is saved), else its
    plain text, else its markup's text."""
    with_citations = detail.get("html_with_citations") or ""
    if "star-pagination" in with_citations:
        return _markup_text(page_breaks.star_paged_markup(with_citations))
    if plain := (detail.get("plain_text") or "").strip():
        return plain
    for key in ("html_with_citations", "html"):
        if markup := detail.get(key):
            return _markup_text(markup)
    return ""


def _markup_text(markup: str) -> str:
    return html.unescape(strip_tags(markup)).strip()


def _absolute(url: Any) -> str:
    if not isinstance(url, str) or not url:
        return ""
    return url if url.startswith(("http://", "https://")) else f"{SITE}{url}"


def search_and_materialize(client: CourtListener, query: str, *, limit: int) -> list[CaselawOpinion]:
    """Search CourtListener's opinions for ``query`` and materialize the first ``limit`` hits that have text.

    Raises whatever the client raises (``CourtListenerAPIError``, ``httpx.HTTPError``, a
    validation error): the caller decides how to degrade.
    """
    hits = client.search.list(q=query, type="o").get_results()
    opinions: list[CaselawOpinion] = []
    for hit in hits:
        if len(opinions) >= limit:
            break
        hit_opinions = hit.get("opinions") or []
        if not hit_opinions:
            continue
        opinion_id = hit_opinions[0]["id"]
        detail = client.opinions.get(opinion_id, fields=OPINION_FIELDS)
        text = opinion_text(detail)
        if not text:
            logger.info("courtlistener: opinion %s has no text; skipped", opinion_id)
            continue
        citations = hit.get("citation") or []
        try:
            opinion = _materialize(hit, opinion_id=opinion_id, detail=detail, text=text, citations=citations)
        except DatabaseError:
            # E.g. a text too long for PostgreSQL's full-text index: skip this hit, keep the others.
            logger.warning("courtlistener: opinion %s could not be materialized; skipped", opinion_id, exc_info=True)
            continue
        opinions.append(opinion)
    return opinions


def save_opinion(*, opinion_id: str, metadata: dict[str, Any], text: str) -> CaselawOpinion:
    """Create or refresh the materialized copy of one CourtListener opinion: the one way a provider's opinion
    is saved (the caselaw search tool and the case-citation lookup both call it).

    ``metadata`` (case name, citation, court, URL, ...) is refreshed, each value fitted to its column. The
    text is set on creation and refreshed when one was fetched (``text`` not empty). Unless a quote already
    cites the stored opinion: a cited opinion keeps its text (its quotes point into it by offset) and what the
    record shows of it (``CaselawOpinion.cited_fixed_fields``: its case name, citation, pages), so that its
    quotes read as they were verified, and the turn goes on; the rest of its metadata is refreshed. In a
    savepoint, so that a ``DatabaseError`` (which it raises) leaves the caller's transaction usable.
    """
    metadata = {name: fit(CaselawOpinion, name, value) for name, value in metadata.items()}
    with transaction.atomic():
        # The row is locked (SELECT ... FOR UPDATE) until this block ends, so no quote of it can commit
        # between the checks below and the updates (a quote's foreign key waits for the lock).
        stored = CaselawOpinion.objects.select_for_update().filter(provider=PROVIDER, opinion_id=opinion_id).first()
        cited = stored is not None and stored.is_cited()
        refreshed = {
            name: value for name, value in metadata.items() if not (cited and name in CaselawOpinion.cited_fixed_fields)
        }
        opinion, created = CaselawOpinion.objects.update_or_create(
            provider=PROVIDER,
            opinion_id=opinion_id,
            defaults=refreshed,
            create_defaults={**metadata, "text": text},
        )
        if not created and text and opinion.text != text:
            if cited:
                logger.info("courtlistener: opinion %s is cited; its stored text is kept", opinion_id)
            else:
                opinion.text = text
                opinion.save(update_fields=["text"])
    return opinion


def _materialize(
    hit: dict[str, Any], *, opinion_id: Any, detail: dict[str, Any], text: str, citations: list[str]
) -> CaselawOpinion:
    """The search hit's opinion, saved (:func:`save_opinion`)."""
    metadata = {
        "cluster_id": str(hit.get("cluster_id") or ""),
        "case_name": hit.get("caseName") or hit.get("caseNameFull") or f"Opinion {opinion_id}",
        "citation": citations[0] if citations else "",
        "court": hit.get("court") or "",
        "date_filed": _date(hit.get("dateFiled")),
        "absolute_url": _absolute(hit.get("absolute_url") or detail.get("absolute_url")),
        "retrieved_at": timezone.now(),
    }
    return save_opinion(opinion_id=str(opinion_id), metadata=metadata, text=text)
