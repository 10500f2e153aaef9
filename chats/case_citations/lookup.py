"""Where a case citation leads: the local opinion store, then CourtListener's citation-lookup API.

:func:`find_local` looks citation keys up in ``caselaw_opinions`` (seeded ``local`` opinions and every
opinion materialized earlier), whatever spelling of the reporter the stored citation uses.
:func:`lookup_courtlistener` asks CourtListener about the keys the store does not hold, in as few requests
as its per-request limit allows, through the official client, maps each per-citation status explicitly and
materializes the clusters it returns, like the ``caselaw_search`` tool does, so that they are local next time.

A :class:`Lookup` is the outcome for one key. CourtListener's failures (HTTP 429 with its ``wait_until``,
other API errors, the network) become ``unchecked`` lookups with the reason: they never raise.
"""

from __future__ import annotations

import functools
import logging
import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import httpx
from django.core.cache import cache
from django.db import DatabaseError

from chats import courtlistener
from chats.case_citations.extraction import CitationKey
from chats.case_citations.names import parse_case_name
from chats.models import CaselawOpinion
from chats.opinion_records import courtlistener_record, courtlistener_text

if TYPE_CHECKING:
    from courtlistener import CourtListener

logger = logging.getLogger(__name__)

LOCAL = "local"
COURTLISTENER = courtlistener.PROVIDER
MAX_CANDIDATES = 5  # candidates kept (and materialized) for an ambiguous citation
# Rows read by one local lookup (those of the cited volumes, newest first): enough for any real answer.
LOCAL_ROW_LIMIT = 2000
# The most citations CourtListener's citation-lookup API looks up in one request (the rest come back 429).
MAX_CITATIONS_PER_REQUEST = 250
# How long CourtListener's "no case at this citation" is trusted without asking again (the default cache).
NOT_FOUND_CACHE_SECONDS = 24 * 60 * 60
_OPINION_URL_ID = re.compile(r"/opinions/(\d+)/?$")


class Outcome:
    RESOLVED = "resolved"
    AMBIGUOUS = "ambiguous"
    NOT_FOUND = "not_found"
    UNCHECKED = "unchecked"


@dataclass(frozen=True, slots=True)
class Lookup:
    """What one citation key resolved to.

    ``outcome`` is one of :class:`Outcome`. ``opinion`` is set when resolved; ``candidates`` when
    ambiguous; ``official_names`` are the names the resolved case goes by (CourtListener gives a short,
    a full and a usual one); ``detail`` says why for every outcome but ``resolved``.
    """

    outcome: str
    provider: str = ""
    opinion: CaselawOpinion | None = None
    candidates: tuple[CaselawOpinion, ...] = ()
    official_names: tuple[str, ...] = ()
    detail: str = ""


# --- the local store ----------------------------------------------------------------------------------------


@functools.cache
def _reporter_spellings() -> Mapping[str, tuple[str, ...]]:
    from reporters_db import VARIATIONS_ONLY

    spellings: dict[str, set[str]] = {}
    for variant, canonicals in VARIATIONS_ONLY.items():
        for canonical in canonicals:
            spellings.setdefault(canonical, {canonical}).add(variant)
    return {canonical: tuple(sorted(names)) for canonical, names in spellings.items()}


def _prefixes(key: CitationKey) -> list[str]:
    spellings = _reporter_spellings().get(key.reporter, (key.reporter,))
    return [f"{key.volume} {spelling} {key.page}" for spelling in {key.reporter, *spellings}]


def _held_at(citation: str, prefix: str) -> bool:
    rest = citation[len(prefix) :]
    return citation.startswith(prefix) and not (rest[:1].isalnum())


def find_local(keys: Iterable[CitationKey]) -> dict[CitationKey, Lookup]:
    """The local lookup of each key: resolved, ambiguous, or not found. One query for all the keys.

    A stored citation matches a key when it starts with the key's volume, any spelling of its reporter
    known to reporters-db, and its page (``570 U. S. 297 (2013)`` holds ``570 U.S. 297``). Opinions with the
    same case name under one key (the same case materialized from two providers) count as one; a
    ``local`` one is preferred.
    """
    keys = set(keys)
    if not keys:
        return {}
    prefixes: dict[str, list[tuple[str, CitationKey]]] = {}
    for key in keys:
        prefixes.setdefault(key.volume, []).extend((prefix, key) for prefix in _prefixes(key))
    # The database narrows to the cited volumes (one pattern, whatever the number of keys); the reporter
    # and page are compared here, against every spelling.
    volumes = "|".join(re.escape(volume) for volume in sorted(prefixes))
    rows = (
        CaselawOpinion.objects.filter(citation__regex=f"^({volumes}) ")
        .defer("text")
        .order_by("-retrieved_at", "id")[:LOCAL_ROW_LIMIT]
    )
    held: dict[CitationKey, list[CaselawOpinion]] = {}
    for opinion in rows:
        for prefix, key in prefixes.get(opinion.citation.split(" ", 1)[0], []):
            if _held_at(opinion.citation, prefix) and opinion not in held.setdefault(key, []):
                held[key].append(opinion)
    return {key: _local_lookup(held.get(key, [])) for key in keys}


def _local_lookup(opinions: Sequence[CaselawOpinion]) -> Lookup:
    if not opinions:
        return Lookup(Outcome.NOT_FOUND, provider=LOCAL, detail="not in the local opinion store")
    by_case: dict[Any, CaselawOpinion] = {}
    for opinion in sorted(opinions, key=lambda o: o.provider != LOCAL):  # stable: local first, then newest
        by_case.setdefault(parse_case_name(opinion.case_name), opinion)
    distinct = list(by_case.values())
    if len(distinct) == 1:
        opinion = distinct[0]
        return Lookup(Outcome.RESOLVED, provider=opinion.provider, opinion=opinion, official_names=(opinion.case_name,))
    return Lookup(
        Outcome.AMBIGUOUS,
        provider=LOCAL,
        candidates=tuple(distinct[:MAX_CANDIDATES]),
        detail=f"{len(distinct)} different cases in the local opinion store have this citation",
    )


# --- CourtListener ------------------------------------------------------------------------------------------


def lookup_courtlistener(client: CourtListener, keys: Sequence[CitationKey]) -> dict[CitationKey, Lookup]:
    """CourtListener's answer for each key, resolved clusters materialized: one request per
    :data:`MAX_CITATIONS_PER_REQUEST` keys (the most the API looks up in one request).

    Per-citation statuses: 200 with one cluster resolves it, with several is ambiguous; 300 is ambiguous;
    404 is not found; 400 (invalid citation) and 429 (over the per-request citation limit) leave it
    unchecked, as does a key CourtListener returned nothing for. A whole-request failure leaves every key of
    that request unchecked with the reason (HTTP 429 with its ``wait_until``, another HTTP error, or the
    network), and the keys of the requests not yet made too: after a failure CourtListener is not asked again.
    Its answers are kept: a case found is materialized, so local the next time; "not found" is cached for
    :data:`NOT_FOUND_CACHE_SECONDS` (Django's default cache).
    """
    lookups = _cached_not_found(client, keys)
    keys = [key for key in keys if key not in lookups]
    for first in range(0, len(keys), MAX_CITATIONS_PER_REQUEST):
        batch = keys[first : first + MAX_CITATIONS_PER_REQUEST]
        answered, failure = _lookup_batch(client, batch)
        lookups |= answered
        _cache_not_found(client, answered)
        if failure:
            rest = keys[first + MAX_CITATIONS_PER_REQUEST :]
            lookups |= dict.fromkeys(rest, Lookup(Outcome.UNCHECKED, provider=COURTLISTENER, detail=failure))
            break
    return lookups


def _not_found_cache_key(client: CourtListener, key: CitationKey) -> str:
    return f"courtlistener-not-found:{client.base_url}:{key}".replace(" ", "_")


def _cached_not_found(client: CourtListener, keys: Sequence[CitationKey]) -> dict[CitationKey, Lookup]:
    """The keys CourtListener said it had no case at within :data:`NOT_FOUND_CACHE_SECONDS`, not asked again."""
    wanted = {_not_found_cache_key(client, key): key for key in keys}
    held = cache.get_many(list(wanted))
    return {
        wanted[name]: Lookup(Outcome.NOT_FOUND, provider=COURTLISTENER, detail=str(detail))
        for name, detail in held.items()
    }


def _cache_not_found(client: CourtListener, answered: Mapping[CitationKey, Lookup]) -> None:
    # A case found is materialized (local the next time); a citation to nothing is remembered for a while, since
    # CourtListener may add the case later.
    missing = {
        _not_found_cache_key(client, key): lookup.detail
        for key, lookup in answered.items()
        if lookup.outcome == Outcome.NOT_FOUND
    }
    if missing:
        cache.set_many(missing, timeout=NOT_FOUND_CACHE_SECONDS)


def _lookup_batch(client: CourtListener, keys: Sequence[CitationKey]) -> tuple[dict[CitationKey, Lookup], str]:
    """One request's answers, and why the whole request failed ("" if it did not)."""
    from courtlistener import CourtListenerAPIError
    from courtlistener.sync_client.citation_lookup import parse_wait_until

    if not keys:
        return {}, ""
    text, offsets = _lookup_text(keys)
    try:
        results = client.citation_lookup.lookup_text(text)
    except CourtListenerAPIError as exc:
        if exc.status_code == 429:
            wait_until = parse_wait_until(exc.detail)
            reason = "CourtListener is rate-limiting this account" + (
                f" until {wait_until.isoformat()}" if wait_until else ""
            )
        else:
            reason = f"CourtListener answered HTTP {exc.status_code}"
        logger.warning("case citations: %s; %d citation(s) left unchecked", reason, len(keys))
        return dict.fromkeys(keys, Lookup(Outcome.UNCHECKED, provider=COURTLISTENER, detail=reason)), reason
    except (httpx.HTTPError, ValueError) as exc:
        reason = f"CourtListener could not be reached ({type(exc).__name__})"
        logger.warning("case citations: %s; %d citation(s) left unchecked", reason, len(keys), exc_info=True)
        return dict.fromkeys(keys, Lookup(Outcome.UNCHECKED, provider=COURTLISTENER, detail=reason)), reason

    lookups: dict[CitationKey, Lookup] = {}
    for result in results if isinstance(results, list) else []:
        start = result.get("start_index") if isinstance(result, dict) else None
        key = offsets.get(start) if isinstance(start, int) else None
        if key is None or key in lookups:
            continue
        try:
            lookups[key] = _courtlistener_lookup(client, key, result)
        except (KeyError, TypeError, ValueError) as exc:  # a result in an unexpected shape: that key only
            logger.warning("case citations: unexpected CourtListener result for %s (%s)", key, exc)
            lookups[key] = Lookup(
                Outcome.UNCHECKED, provider=COURTLISTENER, detail="CourtListener's answer could not be read"
            )
    for key in keys:
        lookups.setdefault(
            key, Lookup(Outcome.UNCHECKED, provider=COURTLISTENER, detail="CourtListener returned no result for it")
        )
    return lookups, ""


def _lookup_text(keys: Sequence[CitationKey]) -> tuple[str, dict[int, CitationKey]]:
    """One text with each key on its own line, and the offset where each starts (results are matched back
    by their ``start_index``)."""
    offsets: dict[int, CitationKey] = {}
    lines: list[str] = []
    at = 0
    for key in keys:
        offsets[at] = key
        lines.append(str(key))
        at += len(str(key)) + 1
    return "\n".join(lines), offsets


def _courtlistener_lookup(client: CourtListener, key: CitationKey, result: Mapping[str, Any]) -> Lookup:
    status = result.get("status")
    clusters = [c for c in result.get("clusters") or [] if isinstance(c, dict)]
    message = str(result.get("error_message") or "").strip()
    if status == 200 and len(clusters) == 1:
        opinion = _materialize(client, key, clusters[0])
        if opinion is None:
            return Lookup(Outcome.UNCHECKED, provider=COURTLISTENER, detail="the opinion could not be stored")
        names = tuple(n for n in (clusters[0].get(f) for f in ("case_name", "case_name_full", "case_name_short")) if n)
        return Lookup(Outcome.RESOLVED, provider=COURTLISTENER, opinion=opinion, official_names=names)
    if status in (200, 300) and clusters:
        candidates = [_materialize(client, key, cluster) for cluster in clusters[:MAX_CANDIDATES]]
        return Lookup(
            Outcome.AMBIGUOUS,
            provider=COURTLISTENER,
            candidates=tuple(c for c in candidates if c is not None),
            detail=f"CourtListener has {len(clusters)} cases at this citation",
        )
    if status == 404:
        return Lookup(
            Outcome.NOT_FOUND, provider=COURTLISTENER, detail=message or "CourtListener has no case at this citation"
        )
    if status == 400:
        return Lookup(Outcome.UNCHECKED, provider=COURTLISTENER, detail=f"invalid citation: {message or 'HTTP 400'}")
    if status == 429:
        return Lookup(
            Outcome.UNCHECKED,
            provider=COURTLISTENER,
            detail="CourtListener did not look it up (too many citations in one request)",
        )
    return Lookup(Outcome.UNCHECKED, provider=COURTLISTENER, detail=f"unexpected CourtListener status {status}")


def _materialize(client: CourtListener, key: CitationKey, cluster: Mapping[str, Any]) -> CaselawOpinion | None:
    """The cluster's lead opinion as a ``courtlistener`` opinion (its text fetched; an opinion already
    materialized is updated, never duplicated); ``None`` if it cannot be stored."""
    cluster_id = cluster["id"]
    sub_opinions = cluster.get("sub_opinions") or []
    found = _OPINION_URL_ID.search(str(sub_opinions[0])) if sub_opinions else None
    opinion_id = found.group(1) if found else f"cluster-{cluster_id}"
    text = _opinion_text(client, opinion_id) if found else ""
    named = cluster.get("case_name") or cluster.get("case_name_full") or f"Cluster {cluster_id}"
    record = courtlistener_record({**cluster, "case_name": named}, {"id": opinion_id})
    # Stored under the citation looked up (the key the answer cites), its parallel citations after it.
    metadata = {
        **courtlistener.record_metadata(record),
        "citation": str(key),
        "parallel_citations": list(dict.fromkeys([str(key), *record.citations])),
    }
    if not record.court:  # a cluster names no court: keep the one stored, if any
        del metadata["court"]
    try:
        return courtlistener.save_opinion(opinion_id=opinion_id, metadata=metadata, text=text)
    except DatabaseError:
        logger.warning("case citations: CourtListener cluster %s could not be materialized", cluster_id, exc_info=True)
        return None


def _opinion_text(client: CourtListener, opinion_id: str) -> str:
    from courtlistener import CourtListenerAPIError

    try:
        return courtlistener_text(client.opinions.get(int(opinion_id), fields=courtlistener.OPINION_FIELDS))
    except (CourtListenerAPIError, httpx.HTTPError, ValueError, KeyError, TypeError):
        # The citation is still resolved; only quotes from this opinion cannot be verified until it is fetched.
        logger.warning("case citations: text of CourtListener opinion %s not fetched", opinion_id, exc_info=True)
        return ""
