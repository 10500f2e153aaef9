"""The tools: ``caselaw_search`` over local opinions and CourtListener, and the generic MCP wrapper.

CourtListener is never called over the network: the official client gets an ``httpx.MockTransport``
serving the JSON files of ``tests/fixtures/courtlistener/``. Those are hand-made in the shape of the
v4 REST API's responses (``/search/?type=o`` and ``/opinions/<id>/``); their opinion texts are excerpts
of the public-domain corpus in ``chats/data/opinions/``, so their ids are synthetic.
"""

from __future__ import annotations

import json
import logging
from pathlib import Path
from typing import Any

import httpx
import pytest
from django.conf import LazySettings

from chats import courtlistener
from chats.models import CaselawOpinion, MessageToolSource
from chats.retrieval import rank_sources
from chats.tools import CaselawSearchTool, caselaw_source, default_tools
from tests import factories

pytestmark = pytest.mark.django_db

FIXTURES = Path(__file__).resolve().parent / "fixtures" / "courtlistener"
TOKEN = "test-token"
QUERY = "workable race-neutral alternatives strict scrutiny"


def recorded(name: str) -> Any:
    return json.loads((FIXTURES / name).read_text(encoding="utf-8"))


def fake_courtlistener(
    requests: list[httpx.Request] | None = None, *, fail_with: int | None = None, search: Any = None
) -> httpx.MockTransport:
    """A local CourtListener: the recorded search (or ``search``) and opinion responses, or ``fail_with`` for
    every call."""

    def handle(request: httpx.Request) -> httpx.Response:
        if requests is not None:
            requests.append(request)
        if fail_with is not None:
            return httpx.Response(fail_with, json=recorded("error_500.json"))
        path = request.url.path
        if path == "/api/rest/v4/search/":
            return httpx.Response(200, json=search or recorded("search_race_neutral.json"))
        if path.startswith("/api/rest/v4/opinions/"):
            opinion_id = path.rstrip("/").rsplit("/", 1)[1]
            return httpx.Response(200, json=recorded(f"opinion_{opinion_id}.json"))
        return httpx.Response(404, json={"detail": "Not found."})

    return httpx.MockTransport(handle)


def tool_with(transport: httpx.BaseTransport) -> CaselawSearchTool:
    return CaselawSearchTool(courtlistener_client=courtlistener.build_client(TOKEN, transport=transport))


# --- local opinions ---------------------------------------------------------------------------------------------


def test_caselaw_search_ranks_local_opinions_by_the_query_terms_case_insensitively(
    local_opinion: CaselawOpinion,
) -> None:
    # Given the seeded Fisher opinion and an unrelated one
    factories.CaselawOpinionFactory.create(provider="local", case_name="Unrelated v. Case", text="A contract dispute.")

    # When searching in capitals
    output = CaselawSearchTool().run({"query": "WORKABLE RACE-NEUTRAL Alternatives"})

    # Then only Fisher is found, with a verbatim passage and its provenance
    [result] = output.payload["results"]
    assert result["opinion_id"] == str(local_opinion.pk)
    assert result["case_name"] == "Fisher v. University of Texas at Austin"
    passage = result["passage"]
    assert local_opinion.text[passage["start"] : passage["end"]] == passage["text"]
    assert "race-neutral" in passage["text"]
    [source] = output.sources
    assert source == caselaw_source(local_opinion, tool="caselaw_search")
    assert (source.source_kind, source.provider, source.label) == ("caselaw", "local", local_opinion.case_name)
    assert source.subtitle == "570 U.S. 297 · Supreme Court of the United States"
    assert source.external_ref == "fisher-2013"
    assert source.url == local_opinion.absolute_url


@pytest.mark.parametrize("query", ["", "   ", "the of and", "zzzunknownterm"])
def test_caselaw_search_without_usable_terms_finds_nothing(local_opinion: CaselawOpinion, query: str) -> None:
    output = CaselawSearchTool().run({"query": query})

    assert output.payload["results"] == []
    assert output.sources == ()


def test_caselaw_search_is_deterministic(local_opinion: CaselawOpinion) -> None:
    factories.CaselawOpinionFactory.create_batch(3, provider="local")

    assert CaselawSearchTool().run({"query": QUERY}) == CaselawSearchTool().run({"query": QUERY})


def test_without_a_token_the_default_tool_never_builds_a_courtlistener_client(settings: LazySettings) -> None:
    settings.COURTLISTENER_API_TOKEN = ""

    tool = default_tools()["caselaw_search"]

    assert isinstance(tool, CaselawSearchTool)
    assert tool.courtlistener_client is None


def test_with_a_token_the_default_tool_uses_courtlistener(settings: LazySettings) -> None:
    settings.COURTLISTENER_API_TOKEN = TOKEN

    tool = default_tools()["caselaw_search"]

    assert isinstance(tool, CaselawSearchTool)
    assert tool.courtlistener_client is not None
    assert tool.courtlistener_client.api_token == TOKEN


# --- CourtListener (local fake) -----------------------------------------------------------------------------------


def test_courtlistener_hits_are_materialized_and_consulted(local_opinion: CaselawOpinion) -> None:
    requests: list[httpx.Request] = []

    output = tool_with(fake_courtlistener(requests)).run({"query": QUERY})

    # The search, then one opinion fetch per hit, all with the token
    assert [r.url.path for r in requests] == [
        "/api/rest/v4/search/",
        "/api/rest/v4/opinions/910001/",
        "/api/rest/v4/opinions/910002/",
        "/api/rest/v4/opinions/910003/",
    ]
    assert requests[0].url.params["q"] == QUERY
    assert requests[0].url.params["type"] == "o"
    assert all(r.headers["Authorization"] == f"Token {TOKEN}" for r in requests)

    # Hits with text are materialized (plain text as is; HTML stripped and unescaped); the text-less one is skipped
    fetched = {o.opinion_id: o for o in CaselawOpinion.objects.filter(provider="courtlistener")}
    assert set(fetched) == {"910001", "910002"}
    fisher = fetched["910001"]
    assert fisher.cluster_id == "900001"
    assert fisher.case_name == "Fisher v. University of Texas at Austin"
    assert fisher.citation == "570 U.S. 297"
    assert fisher.court == "Supreme Court of the United States"
    assert fisher.date_filed is not None
    assert fisher.date_filed.isoformat() == "2013-06-24"
    assert fisher.absolute_url == "https://www.courtlistener.com/opinion/900001/fisher-v-university-of-texas-at-austin/"
    assert fisher.text == recorded("opinion_910001.json")["plain_text"].strip()
    hogarth = fetched["910002"]
    assert "<p>" not in hogarth.text
    assert "SUSAN JANE HOGARTH" in hogarth.text
    assert hogarth.citation == ""

    # CourtListener's opinions come first, then local ones; each one consulted is a caselaw source
    results = output.payload["results"]
    assert [r["provider"] for r in results] == ["courtlistener", "courtlistener", "local"]
    sources = {(s.provider, s.external_ref): s for s in output.sources}
    assert set(sources) == {("courtlistener", "900001"), ("courtlistener", "900002"), ("local", "fisher-2013")}
    cl_fisher = sources["courtlistener", "900001"]
    assert cl_fisher.source_kind == MessageToolSource.SourceKind.CASELAW
    assert cl_fisher.label == "Fisher v. University of Texas at Austin"
    assert cl_fisher.subtitle == "570 U.S. 297 · Supreme Court of the United States · 2013-06-24"
    assert cl_fisher.url == fisher.absolute_url


def test_fetching_again_updates_the_materialized_opinions_never_duplicates_them(db: None) -> None:
    tool = tool_with(fake_courtlistener())
    tool.run({"query": QUERY})
    CaselawOpinion.objects.filter(opinion_id="910001").update(text="stale", case_name="Stale")

    tool.run({"query": QUERY})

    assert CaselawOpinion.objects.filter(provider="courtlistener").count() == 2
    refreshed = CaselawOpinion.objects.get(provider="courtlistener", opinion_id="910001")
    assert refreshed.case_name == "Fisher v. University of Texas at Austin"
    assert refreshed.text != "stale"


def test_a_hit_without_an_opinion_is_skipped_and_one_without_a_date_or_url_kept_without_a_date(db: None) -> None:
    # Given a search whose first hit has no opinion, and whose Fisher hit has an unreadable date and no url
    search = recorded("search_race_neutral.json")
    fisher, *others = search["results"]
    no_opinion = {**fisher, "cluster_id": 900009, "opinions": []}
    search["results"] = [no_opinion, {**fisher, "dateFiled": "24 June 2013", "absolute_url": ""}, *others]
    tool = CaselawSearchTool(
        courtlistener_client=courtlistener.build_client(TOKEN, transport=fake_courtlistener(search=search)), limit=1
    )

    output = tool.run({"query": QUERY})

    # Then only Fisher is materialized (the limit reached with it), without a date, with its opinion's url
    (opinion,) = CaselawOpinion.objects.filter(provider="courtlistener")
    assert (opinion.cluster_id, opinion.date_filed) == ("900001", None)
    assert (
        opinion.absolute_url == "https://www.courtlistener.com/opinion/900001/fisher-v-university-of-texas-at-austin/"
    )
    assert [r["provider"] for r in output.payload["results"]] == ["courtlistener"]


@pytest.mark.parametrize(
    "transport",
    [
        pytest.param(fake_courtlistener(fail_with=500), id="http-500"),
        pytest.param(fake_courtlistener(fail_with=401), id="http-401"),
        pytest.param(
            httpx.MockTransport(lambda request: (_ for _ in ()).throw(httpx.ConnectError("refused"))),
            id="connection-refused",
        ),
        pytest.param(httpx.MockTransport(lambda request: httpx.Response(200, json={"oops": 1})), id="malformed-body"),
    ],
)
def test_a_courtlistener_error_degrades_to_local_results_with_a_warning(
    local_opinion: CaselawOpinion, transport: httpx.BaseTransport, caplog: pytest.LogCaptureFixture
) -> None:
    with caplog.at_level(logging.WARNING, logger="chats.tools"):
        output = tool_with(transport).run({"query": QUERY})

    assert [r["opinion_id"] for r in output.payload["results"]] == [str(local_opinion.pk)]
    assert [s.provider for s in output.sources] == ["local"]
    assert not CaselawOpinion.objects.filter(provider="courtlistener").exists()
    [warning] = [r for r in caplog.records if r.name == "chats.tools"]
    assert warning.levelno == logging.WARNING
    assert "CourtListener failed" in warning.getMessage()


# --- Opinion search on PostgreSQL -------------------------------------------------------------------------------


@pytest.mark.postgres
def test_on_postgresql_opinions_are_ranked_by_full_text_search_with_stemming(local_opinion: CaselawOpinion) -> None:
    # "satisfy" only meets "satisfied" through the english stemmer (the term-overlap scorer would miss it)
    other = factories.CaselawOpinionFactory.create(provider="local", text="The parties were satisfied with the deal.")
    factories.CaselawOpinionFactory.create(provider="local", text="Nothing relevant here at all.")

    found = rank_sources(CaselawOpinion.objects.all(), field="text", question="satisfy", limit=5)

    assert set(found) == {local_opinion, other}


@pytest.mark.postgres
def test_on_postgresql_the_opinion_search_can_use_the_gin_index(local_opinion: CaselawOpinion) -> None:
    from django.contrib.postgres.search import SearchQuery, SearchVector
    from django.db import connection

    queryset = CaselawOpinion.objects.annotate(search=SearchVector("text", config="english")).filter(
        search=SearchQuery("scrutiny", search_type="raw", config="english")
    )
    with connection.cursor() as cursor:
        cursor.execute("SET LOCAL enable_seqscan = off")
        plan = queryset.explain()

    assert "caselaw_opinions_text_fts_idx" in plan
