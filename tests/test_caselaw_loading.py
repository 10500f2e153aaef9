"""Case law in bulk: ``manage.py load_authorities`` on CourtListener and Caselaw Access Project JSON
(tests/fixtures/caselaw: a v4 cluster with its opinion's ``html_with_citations`` star pagination, a CAP case whose
XML body has its ``page-number``), the one normalising code the opinions fetched at run time go through too, and
the reporter pin cites the loaded opinions' quotes get."""

from __future__ import annotations

import copy
import json
import tracemalloc
from io import StringIO
from pathlib import Path
from typing import Any

import httpx
import pytest
from django.core.management import call_command
from django.core.management.base import CommandError

from chats import courtlistener
from chats.caselaw_loading import load_caselaw_file
from chats.models import CaselawOpinion, Message
from chats.opinion_records import RecordError, cap_record, courtlistener_text, records_of
from chats.serializers import quote_pages, quote_pin_cite
from chats.services import ClaimedCitation, finalize_turn, start_turn
from tests import factories

FIXTURES = Path(__file__).parent / "fixtures" / "caselaw"
CLUSTER = FIXTURES / "courtlistener_cluster_ventresca.json"
CASE = FIXTURES / "cap_case_cannon.json"


def fixture(path: Path) -> dict[str, Any]:
    return json.loads(path.read_text(encoding="utf-8"))


def load(*paths: Path, dry_run: bool = False) -> str:
    out = StringIO()
    call_command("load_authorities", *map(str, paths), *(["--dry-run"] if dry_run else []), stdout=out, verbosity=0)
    return out.getvalue()


# --- Reading the providers' JSON ---------------------------------------------------------------------------------


def test_a_courtlistener_cluster_gives_its_opinion_with_every_citation_and_its_star_pagination() -> None:
    [record] = records_of(fixture(CLUSTER))

    assert (record.provider, record.opinion_id, record.cluster_id) == ("courtlistener", "9990106", "106990")
    assert record.case_name == "United States v. Ventresca"
    # every parallel citation, the official reporter first (CourtListener's citation types)
    assert record.citations == ("380 U.S. 102", "85 S. Ct. 741", "13 L. Ed. 2d 684")
    assert record.citation == "380 U.S. 102"
    assert (record.court, record.date_filed.isoformat() if record.date_filed else None) == ("scotus", "1965-03-01")
    assert record.absolute_url == "https://www.courtlistener.com/opinion/106990/united-states-v-ventresca/"
    # the text without tags, the reporter's page markers kept where they stand
    assert "<span" not in record.text
    assert "*103 Frank I. Goodman argued the cause" in record.text
    assert "the results of their *104 observations" in record.text


def test_a_cap_case_gives_the_whole_case_body_with_its_page_markers_and_the_official_citation_first() -> None:
    case = fixture(CASE)
    case["citations"] = [{"type": "parallel", "cite": "32 S.E.2d 1"}, *case["citations"]]

    record = cap_record(case)

    assert (record.provider, record.opinion_id, record.case_name) == ("cap", "9990757", "Cannon v. State")
    assert record.citations == ("71 Ga. App. 757", "32 S.E.2d 1")
    assert record.court == "Court of Appeals of Georgia"
    assert record.date_filed is not None
    assert record.date_filed.isoformat() == "1944-11-18"
    assert "*758B. B. Giles, for plaintiff in error." in record.text
    assert "I concur in the reversal for this additional reason." in record.text
    assert "<opinion" not in record.text


@pytest.mark.parametrize(
    "casebody",
    [
        # the API's text format
        {"status": "ok", "data": {"head_matter": "CANNON v. THE STATE.", "opinions": [{"text": "Judgment reversed."}]}},
        # the static case.law files
        {"head_matter": "CANNON v. THE STATE.", "opinions": [{"type": "majority", "text": "Judgment reversed."}]},
    ],
)
def test_a_cap_case_as_text_gives_its_head_matter_and_opinions(casebody: dict[str, Any]) -> None:
    case = {**fixture(CASE), "casebody": casebody}

    assert cap_record(case).text == "CANNON v. THE STATE.\n\nJudgment reversed."


def test_courtlistener_text_prefers_the_markup_with_page_markers_to_plain_text() -> None:
    opinion = {
        "plain_text": "No pages here.",
        "html_with_citations": '<p>A <span class="star-pagination">*5</span> B</p>',
    }

    assert courtlistener_text(opinion) == "A *5 B"
    assert courtlistener_text({**opinion, "html_with_citations": "<p>No pages either.</p>"}) == "No pages here."
    assert courtlistener_text({"html": "<p>Only &amp; HTML.</p>"}) == "Only & HTML."


@pytest.mark.parametrize(
    ("item", "reason"),
    [
        ({"id": 1, "sub_opinions": ["https://www.courtlistener.com/api/rest/v4/opinions/1/"]}, "only their URLs"),
        ({"count": 1}, "neither a CAP case"),
        (["not", "an", "object"], "expected a JSON object"),
        ({"name_abbreviation": "A v. B", "casebody": {}}, "without an id"),
    ],
)  # fmt: skip
def test_what_is_not_an_opinion_is_refused_saying_why(item: Any, reason: str) -> None:
    with pytest.raises(RecordError, match=reason):
        list(records_of(item))


# --- Loading ----------------------------------------------------------------------------------------------------


@pytest.mark.django_db
def test_loading_both_providers_stores_each_opinion_with_its_citations_court_date_text_and_pages() -> None:
    output = load(CLUSTER, CASE)

    assert "courtlistener_cluster_ventresca.json: case law - 1 opinions read, 1 added, 0 stored before" in output
    assert "cap_case_cannon.json: case law - 1 opinions read, 1 added, 0 stored before" in output
    ventresca = CaselawOpinion.objects.get(provider="courtlistener", opinion_id="9990106")
    assert ventresca.parallel_citations == ["380 U.S. 102", "85 S. Ct. 741", "13 L. Ed. 2d 684"]
    assert (ventresca.citation, ventresca.court) == ("380 U.S. 102", "scotus")
    assert [label for _, label in ventresca.pages] == ["102", "103", "104", "105"]
    cannon = CaselawOpinion.objects.get(provider="cap", opinion_id="9990757")
    assert (cannon.case_name, cannon.citation, cannon.court) == (
        "Cannon v. State",
        "71 Ga. App. 757",
        "Court of Appeals of Georgia",
    )
    assert [label for _, label in cannon.pages] == ["757", "758"]


@pytest.mark.django_db
def test_loading_the_same_files_again_adds_nothing() -> None:
    load(CLUSTER, CASE)
    before = list(CaselawOpinion.objects.order_by("id").values())

    output = load(CLUSTER, CASE)

    assert "1 opinions read, 0 added, 1 stored before" in output
    assert list(CaselawOpinion.objects.order_by("id").values()) == before


@pytest.mark.django_db
def test_quotes_of_the_loaded_opinions_get_reporter_pin_cites(user: Any) -> None:
    # Given both files loaded, and a turn quoting each opinion on one page and across a page break
    load(CLUSTER, CASE)
    ventresca = CaselawOpinion.objects.get(provider="courtlistener")
    cannon = CaselawOpinion.objects.get(provider="cap")
    chat = factories.ChatFactory.create(owner=user)
    _, answer = start_turn(chat=chat, content="When is an affidavit enough?", author=user)
    v, c = ventresca.pk, cannon.pk
    claims = [
        ClaimedCitation("Respondent, Ventresca, was convicted in the United States District Court", opinion_id=v),
        ClaimedCitation("this request for the issuance of a search warrant is made.", opinion_id=v),
        ClaimedCitation("other reliable investigators. The *105 Court of Appeals reasoned", opinion_id=v),
        ClaimedCitation("The evidence adduced to show the guilt, of the accused on count 1", opinion_id=c),
    ]

    # When the turn is finalized
    finalize_turn(message=answer, content="An answer.", status=Message.Status.COMPLETE, claimed_citations=claims)

    # Then each quote verifies and names the reporter's pages it is on
    rows = list(answer.caselaw_citations.order_by("position"))
    assert [row.verification_method for row in rows] == ["exact_match"] * 4
    assert [quote_pages(row) for row in rows] == [["103"], ["104"], ["104", "105"], ["758"]]
    assert [quote_pin_cite(row) for row in rows] == [
        "380 U.S. at 103",
        "380 U.S. at 104",
        "380 U.S. at 104\u201305",
        "71 Ga. App. at 758",
    ]


@pytest.mark.django_db
@pytest.mark.parametrize("shape", ["array", "api_page", "json_lines"])
def test_a_file_of_many_is_read_item_by_item_whatever_its_shape(tmp_path: Path, shape: str) -> None:
    cluster, case = fixture(CLUSTER), fixture(CASE)
    items = [cluster, case, {**copy.deepcopy(cluster), "id": 2}]
    items[2]["sub_opinions"][0]["id"] = 2
    path = tmp_path / ("many.jsonl" if shape == "json_lines" else "many.json")
    if shape == "json_lines":
        path.write_text("".join(json.dumps(i) + "\n" for i in items), encoding="utf-8")
    else:
        value: Any = items if shape == "array" else {"count": 3, "next": None, "previous": None, "results": items}
        path.write_text(json.dumps(value), encoding="utf-8")

    output = load(path)

    assert "3 opinions read, 3 added" in output
    assert CaselawOpinion.objects.count() == 3


@pytest.mark.django_db
def test_memory_stays_flat_in_the_files_size(tmp_path: Path) -> None:
    # Given a JSON array of 400 clusters (about 4 MB)
    cluster = fixture(CLUSTER)
    path = tmp_path / "big.json"
    with path.open("w", encoding="utf-8") as handle:
        handle.write("[")
        for n in range(400):
            cluster["id"] = n
            cluster["sub_opinions"][0]["id"] = n
            cluster["sub_opinions"][0]["plain_text"] = f"Opinion {n}. " + "x" * 6000
            handle.write(("," if n else "") + json.dumps(cluster))
        handle.write("]")
    size = path.stat().st_size

    # When it is read whole (a dry run: the parse and the records, no database)
    tracemalloc.start()
    report = load_caselaw_file(path=path, dry_run=True)
    _, peak = tracemalloc.get_traced_memory()
    tracemalloc.stop()

    # Then every opinion was read, in memory a small part of the file
    assert report.read == 400
    assert peak < size / 4, (peak, size)


@pytest.mark.django_db
def test_a_dry_run_reads_everything_and_writes_nothing() -> None:
    output = load(CLUSTER, CASE, dry_run=True)

    assert "1 opinions read, 0 added, 0 stored before (dry run: nothing written)" in output
    assert not CaselawOpinion.objects.exists()


@pytest.mark.django_db
@pytest.mark.parametrize(
    ("content", "name", "reason"),
    [
        ("{not json", "broken.json", "not well-formed JSON"),
        ('[{"id": 1, "sub_opinions": [{"id": 1, "plain_text": "A."}]}, {"count": 2}]', "odd.json", "item 2: neither"),
        ('{"id": 1, "sub_opinions": [{"id": 1, "plain_text": "A."}]}\nnot json\n', "odd.jsonl", "line 2 is not JSON"),
        ("plain words", "words.json", "not JSON"),
    ],
)
def test_a_bad_file_is_refused_naming_the_file_and_the_item(
    tmp_path: Path, content: str, name: str, reason: str
) -> None:
    path = tmp_path / name
    path.write_text(content, encoding="utf-8")

    with pytest.raises(CommandError, match=reason) as refused:
        load(path)

    assert str(path) in str(refused.value)


# --- The same code at run time -------------------------------------------------------------------------------------


@pytest.mark.django_db
def test_an_opinion_fetched_at_run_time_is_read_by_the_same_code_and_is_the_bulk_loaded_one() -> None:
    # Given the Ventresca cluster loaded in bulk, and CourtListener's search finding the same opinion
    load(CLUSTER)
    opinion = fixture(CLUSTER)["sub_opinions"][0]
    hit = {
        "caseName": "United States v. Ventresca",
        "citation": ["380 U.S. 102", "85 S. Ct. 741"],
        "court": "Supreme Court of the United States",
        "dateFiled": "1965-03-01T00:00:00-08:00",
        "cluster_id": 106990,
        "absolute_url": "/opinion/106990/united-states-v-ventresca/",
        "opinions": [{"id": opinion["id"]}],
    }

    def serve(request: httpx.Request) -> httpx.Response:
        if request.url.path == "/api/rest/v4/search/":
            return httpx.Response(200, json={"count": 1, "next": None, "previous": None, "results": [hit]})
        return httpx.Response(200, json={**opinion, "plain_text": "The same opinion without its pages."})

    client = courtlistener.build_client("token", transport=httpx.MockTransport(serve))

    # When the caselaw tool's search materializes it
    [fetched] = courtlistener.search_and_materialize(client, "affidavit", limit=1)

    # Then it is the same row, its text the one with the reporter's pages, its metadata refreshed from the search
    assert CaselawOpinion.objects.count() == 1
    assert fetched.opinion_id == "9990106"
    assert "*104 observations" in fetched.text
    assert [label for _, label in fetched.pages] == ["102", "103", "104", "105"]
    assert (fetched.court, fetched.parallel_citations) == (
        "Supreme Court of the United States",
        ["380 U.S. 102", "85 S. Ct. 741"],
    )


@pytest.mark.postgres
@pytest.mark.django_db
def test_an_opinion_the_database_refuses_is_counted_and_the_rest_of_its_batch_stored(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    # Given three clusters in one batch, the second's text holding a NUL (PostgreSQL's text cannot store it)
    clusters = []
    for n in (1, 2, 3):
        cluster = fixture(CLUSTER)
        cluster["id"] = n
        cluster["sub_opinions"][0] |= {"id": n, "html_with_citations": "", "plain_text": f"Opinion {n}."}
        clusters.append(cluster)
    clusters[1]["sub_opinions"][0]["plain_text"] = "Opinion\x00 2."
    path = tmp_path / "three.jsonl"
    path.write_text("".join(json.dumps(c) + "\n" for c in clusters), encoding="utf-8")

    # When they are loaded
    report = load_caselaw_file(path=path)

    # Then the other two are stored, and the refusal is counted and logged with the opinion's id
    assert (report.read, report.added, report.refused) == (3, 2, 1)
    assert sorted(CaselawOpinion.objects.values_list("opinion_id", flat=True)) == ["1", "3"]
    assert "courtlistener opinion 2 refused" in caplog.text
