"""Court opinions as their providers publish them, read into one shape: :class:`OpinionRecord`.

The one normalising code for opinions from outside: CourtListener's JSON (REST API v4 clusters with their
opinions, as its API gives them, and the search hits the caselaw tool fetches at run time) and the
Caselaw Access Project's case JSON (its API's, with the body as text or as XML/HTML, and the static case.law
files'). A record keeps the case name, every parallel citation, the court, the date, and the text with the
reporter's page markers where the source has them (CourtListener's ``star-pagination`` spans, read by
``lqai_verify.verification.page_breaks``, and CAP's ``page-number`` elements, both written ``*1047`` in the text),
so that the pages are derived from the text where every other opinion's are. Pure: no database.
"""

from __future__ import annotations

import datetime
import html
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from typing import Any

from django.utils.html import strip_tags

from lqai_verify.verification import page_breaks

COURTLISTENER, CAP = "courtlistener", "cap"
COURTLISTENER_SITE = "https://www.courtlistener.com"
# CourtListener's text fields, markup first: where one carries the reporter's page markers it is the text.
MARKUP_FIELDS = ("html_with_citations", "xml_harvard", "html", "html_lawbox", "html_columbia", "html_anon_2020")
# How a source marks the reporter's pages inline: CourtListener's spans, CAP's XML/HTML elements.
PAGE_MARKUP = ('class="star-pagination"', "<page-number", 'class="page-label"')


class RecordError(ValueError):
    """A JSON value that is not an opinion, a cluster or a case of a known provider; the message says why."""


@dataclass(frozen=True, slots=True)
class OpinionRecord:
    """One opinion, as stored in ``caselaw_opinions``: ``citations`` are all its parallel citations, the
    reporter's first (``citation``); ``text`` may be empty (no text published)."""

    provider: str
    opinion_id: str
    cluster_id: str
    case_name: str
    citations: tuple[str, ...]
    court: str
    date_filed: datetime.date | None
    absolute_url: str
    text: str

    @property
    def citation(self) -> str:
        return self.citations[0] if self.citations else ""


def markup_text(markup: str) -> str:
    """The text of an opinion's HTML or XML: tags dropped, entities read, page markers (``*1047``) kept."""
    return html.unescape(strip_tags(markup)).strip()


def parse_date(value: Any) -> datetime.date | None:
    """An ISO date (``1965-03-01``, or the date part of a timestamp); None for anything else."""
    if not isinstance(value, str) or not value:
        return None
    try:
        return datetime.date.fromisoformat(value[:10])
    except ValueError:
        return None


def courtlistener_url(url: Any) -> str:
    """An absolute CourtListener URL (the API gives paths)."""
    if not isinstance(url, str) or not url:
        return ""
    return url if url.startswith(("http://", "https://")) else f"{COURTLISTENER_SITE}{url}"


def courtlistener_text(opinion: Mapping[str, Any]) -> str:
    """An opinion's text: the first markup field with the reporter's page markers (CourtListener's
    ``star-pagination`` spans written as inline star paging of the case's first reporter,
    ``page_breaks.star_paged_markup``), else ``plain_text``, else the first markup field with anything in it."""
    for key in MARKUP_FIELDS:
        markup = opinion.get(key) or ""
        if isinstance(markup, str) and any(marker in markup for marker in PAGE_MARKUP):
            return markup_text(page_breaks.star_paged_markup(markup))
    if isinstance(plain := opinion.get("plain_text"), str) and plain.strip():
        return plain.strip()
    for key in MARKUP_FIELDS:
        if isinstance(markup := opinion.get(key), str) and markup.strip():
            return markup_text(markup)
    return ""


def _citation(value: Any) -> str:
    """``570 U.S. 297`` from a v4 citation object, or a citation already written (a search hit's)."""
    if isinstance(value, Mapping):
        return " ".join(str(value.get(part) or "").strip() for part in ("volume", "reporter", "page")).strip()
    return str(value).strip() if isinstance(value, str | int) else ""


def courtlistener_citations(cluster: Mapping[str, Any]) -> tuple[str, ...]:
    """Every citation of a cluster, in CourtListener's order of citation types (official reporters first)."""
    raw = cluster.get("citations")
    if raw is None:
        raw = cluster.get("citation")  # a search hit's list of strings
    if not isinstance(raw, list):
        raw = [raw] if raw else []
    ordered = sorted(raw, key=lambda c: (c.get("type") or 99) if isinstance(c, Mapping) else 0)
    return tuple(dict.fromkeys(c for c in map(_citation, ordered) if c))


def _court(cluster: Mapping[str, Any]) -> str:
    court = cluster.get("court")
    if isinstance(court, str) and court and "/" not in court:
        return court
    docket = cluster.get("docket")
    if isinstance(docket, Mapping):
        return str(docket.get("court_id") or docket.get("court") or "")
    return str(cluster.get("court_id") or "")


def courtlistener_record(cluster: Mapping[str, Any], opinion: Mapping[str, Any]) -> OpinionRecord:
    """One CourtListener opinion with its cluster's metadata. ``cluster`` is a v4 cluster or a search hit
    (``caseName``, ``dateFiled``, ``citation``: the names the search API uses)."""
    opinion_id = opinion.get("id")
    if opinion_id in (None, ""):
        raise RecordError("a CourtListener opinion without an id")
    cluster_id = cluster.get("cluster_id") or cluster.get("id") or opinion.get("cluster_id") or ""
    case_name = (
        cluster.get("case_name")
        or cluster.get("caseName")
        or cluster.get("case_name_full")
        or cluster.get("caseNameFull")
        or f"Opinion {opinion_id}"
    )
    return OpinionRecord(
        provider=COURTLISTENER,
        opinion_id=str(opinion_id),
        cluster_id=str(cluster_id),
        case_name=str(case_name),
        citations=courtlistener_citations(cluster),
        court=_court(cluster),
        date_filed=parse_date(cluster.get("date_filed") or cluster.get("dateFiled")),
        absolute_url=courtlistener_url(cluster.get("absolute_url") or opinion.get("absolute_url")),
        text=courtlistener_text(opinion),
    )


def courtlistener_cluster_records(cluster: Mapping[str, Any]) -> Iterator[OpinionRecord]:
    """The opinions of a v4 cluster whose ``sub_opinions`` (or ``opinions``) hold the opinions themselves;
    an opinion given only by its URL has no text here and is not read."""
    opinions = cluster.get("sub_opinions") or cluster.get("opinions") or []
    embedded = [o for o in opinions if isinstance(o, Mapping)] if isinstance(opinions, list) else []
    if not embedded:
        raise RecordError(f"CourtListener cluster {cluster.get('id')} holds no opinions (only their URLs?)")
    for opinion in embedded:
        yield courtlistener_record(cluster, opinion)


def _cap_body_text(body: Any) -> str:
    """A CAP case body's text: XML/HTML (with its page markers) or the text format's head matter and opinions."""
    if isinstance(body, str):
        return markup_text(body)
    if not isinstance(body, Mapping):
        return ""
    parts = [str(body.get("head_matter") or "").strip()]
    for opinion in body.get("opinions") or []:
        if isinstance(opinion, Mapping):
            parts.append(str(opinion.get("text") or "").strip())
    return "\n\n".join(part for part in parts if part)


def cap_record(case: Mapping[str, Any]) -> OpinionRecord:
    """A Caselaw Access Project case as one opinion: the whole case body (head matter and every opinion, as
    the reporter printed them), with its citations, official first."""
    case_id = case.get("id")
    if case_id in (None, ""):
        raise RecordError("a CAP case without an id")
    body = case.get("casebody")
    if isinstance(body, Mapping) and "data" in body:  # the API's envelope: {"status": "ok", "data": ...}
        body = body["data"]
    citations = [c for c in case.get("citations") or [] if isinstance(c, Mapping) and c.get("cite")]
    citations.sort(key=lambda c: c.get("type") != "official")
    court = case.get("court")
    return OpinionRecord(
        provider=CAP,
        opinion_id=str(case_id),
        cluster_id="",
        case_name=str(case.get("name_abbreviation") or case.get("name") or f"Case {case_id}"),
        citations=tuple(dict.fromkeys(str(c["cite"]).strip() for c in citations)),
        court=str(court.get("name") or "") if isinstance(court, Mapping) else str(court or ""),
        date_filed=parse_date(case.get("decision_date")),
        absolute_url=str(case.get("frontend_url") or ""),
        text=_cap_body_text(body),
    )


def records_of(item: Any) -> Iterator[OpinionRecord]:
    """The opinions of one JSON value of a case-law file: a CAP case (it has a ``casebody``), a CourtListener
    cluster with its opinions, or an API page of either (``results``). Raises :class:`RecordError` otherwise."""
    if not isinstance(item, Mapping):
        raise RecordError(f"expected a JSON object, got {type(item).__name__}")
    if isinstance(item.get("results"), list):
        for result in item["results"]:
            yield from records_of(result)
    elif "casebody" in item or "name_abbreviation" in item:
        yield cap_record(item)
    elif "sub_opinions" in item or "opinions" in item:
        yield from courtlistener_cluster_records(item)
    else:
        raise RecordError("neither a CAP case (casebody) nor a CourtListener cluster (sub_opinions)")
