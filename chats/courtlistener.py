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

import functools
import logging
from typing import TYPE_CHECKING, Any

import httpx
from django.conf import settings
from django.db import DatabaseError, transaction
from django.utils import timezone

from chats.models import CaselawOpinion, fit
from chats.opinion_records import COURTLISTENER, MARKUP_FIELDS, OpinionRecord, courtlistener_record

if TYPE_CHECKING:
    from courtlistener import CourtListener

logger = logging.getLogger(__name__)

PROVIDER = COURTLISTENER
# A chat turn waits for these calls: fail fast and fall back to local opinions.
TIMEOUT_SECONDS = 10.0
OPINION_FIELDS = ["id", "cluster_id", "absolute_url", "plain_text", *MARKUP_FIELDS]


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
        record = courtlistener_record(hit, {**detail, "id": opinion_id})
        if not record.text:
            logger.info("courtlistener: opinion %s has no text; skipped", opinion_id)
            continue
        try:
            opinion = save_record(record)
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


def record_metadata(record: OpinionRecord) -> dict[str, Any]:
    """What :func:`save_opinion` refreshes of an opinion, from its record."""
    return {
        "cluster_id": record.cluster_id,
        "case_name": record.case_name,
        "citation": record.citation,
        "parallel_citations": list(record.citations),
        "court": record.court,
        "date_filed": record.date_filed,
        "absolute_url": record.absolute_url,
        "retrieved_at": timezone.now(),
    }


def save_record(record: OpinionRecord) -> CaselawOpinion:
    """A CourtListener opinion read by :mod:`chats.opinion_records`, saved (:func:`save_opinion`)."""
    return save_opinion(opinion_id=record.opinion_id, metadata=record_metadata(record), text=record.text)
