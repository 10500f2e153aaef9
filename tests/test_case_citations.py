"""The case-citation check: eyecite extraction on real opinion text, the local store, CourtListener's
citation-lookup API, and the case-name comparison.

CourtListener is never called over the network: a fake of its API runs on 127.0.0.1 (a free port) and the
official client's base URL points at it. It answers ``/citation-lookup/`` from
``tests/fixtures/courtlistener/citation_lookup.json`` (results in the v4 API's shape, keyed by citation,
with ``start_index``/``end_index`` computed from the posted text like the real endpoint) and
``/opinions/<id>/`` from ``opinion_<id>.json``; the case names and citations are real, the ids synthetic.
"""

from __future__ import annotations

import json
import logging
import socket
import subprocess
import sys
import threading
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any
from urllib.parse import parse_qs

import pytest
from django.conf import LazySettings

from chats import courtlistener
from chats.case_citations import CheckedCitation, Kind, Status, check_case_citations
from chats.case_citations.extraction import (
    CitationKey,
    extract_citations,
)
from chats.case_citations.names import names_match, parse_case_name
from chats.models import CaselawOpinion
from tests import factories
from tests.conftest import FISHER, corpus_text

ROOT = Path(__file__).resolve().parent.parent
FIXTURES = Path(__file__).resolve().parent / "fixtures" / "courtlistener"
FISHER_TEXT = corpus_text(FISHER)
TOKEN = "test-token"


# --- a local fake of CourtListener's API ---------------------------------------------------------------------


@dataclass
class FakeCourtListener:
    """What the fake answers (``mode``: ``ok``, ``throttled`` for an HTTP 429, ``error`` for an HTTP 500)
    and what it was asked."""

    base_url: str
    mode: str = "ok"
    # In mode ``ok``: a change to the per-citation results before they are sent (a result in another shape).
    rewrite: Callable[[list[dict[str, Any]]], list[dict[str, Any]]] | None = None
    lookups: list[str] = field(default_factory=list)
    opinion_fetches: list[str] = field(default_factory=list)

    def client(self) -> Any:
        return courtlistener.build_client(TOKEN, base_url=self.base_url)


def _lookup_results(text: str) -> list[dict[str, Any]]:
    recorded = json.loads((FIXTURES / "citation_lookup.json").read_text(encoding="utf-8"))
    results = []
    at = 0
    for line in text.split("\n"):
        result = recorded.get(line) or {
            "citation": line,
            "normalized_citations": [line],
            "status": 404,
            "error_message": f"Citation not found: '{line}'",
            "clusters": [],
        }
        results.append(result | {"start_index": at, "end_index": at + len(line)})
        at += len(line) + 1
    return results


@pytest.fixture
def fake_courtlistener() -> Iterator[FakeCourtListener]:
    state: dict[str, FakeCourtListener] = {}

    class Handler(BaseHTTPRequestHandler):
        def log_message(self, format: str, *args: Any) -> None:
            pass

        def _send(self, status: int, body: Any) -> None:
            payload = json.dumps(body).encode()
            self.send_response(status)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(payload)))
            self.end_headers()
            self.wfile.write(payload)

        def do_POST(self) -> None:
            fake = state["fake"]
            form = parse_qs(self.rfile.read(int(self.headers["Content-Length"])).decode())
            text = form["text"][0]
            fake.lookups.append(text)
            if fake.mode == "throttled":
                self._send(429, json.loads((FIXTURES / "citation_lookup_throttled.json").read_text()))
            elif fake.mode == "error":
                self._send(500, json.loads((FIXTURES / "error_500.json").read_text()))
            else:
                results = _lookup_results(text)
                self._send(200, fake.rewrite(results) if fake.rewrite else results)

        def do_GET(self) -> None:
            opinion_id = self.path.split("?")[0].rstrip("/").rsplit("/", 1)[1]
            state["fake"].opinion_fetches.append(opinion_id)
            recorded = FIXTURES / f"opinion_{opinion_id}.json"
            if recorded.exists():
                self._send(200, json.loads(recorded.read_text()))
            else:
                self._send(404, {"detail": "No Opinion matches the given query."})

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    state["fake"] = FakeCourtListener(base_url=f"http://127.0.0.1:{server.server_port}/api/rest/v4")
    thread = threading.Thread(target=server.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True)
    thread.start()
    try:
        yield state["fake"]
    finally:
        server.shutdown()
        server.server_close()
        thread.join(timeout=5)


@pytest.fixture
def unreachable_base_url() -> str:
    """A 127.0.0.1 URL where nothing listens (the port was free a moment ago)."""
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    return f"http://127.0.0.1:{port}/api/rest/v4"


@pytest.fixture
def no_courtlistener_token(settings: LazySettings) -> None:
    settings.COURTLISTENER_API_TOKEN = ""


@pytest.fixture
def fisher(db: None) -> CaselawOpinion:
    """The demo's seeded Fisher opinion, with its citation as the demo stores it."""
    return factories.CaselawOpinionFactory.create(
        provider="local",
        opinion_id="fisher-2013",
        case_name="Fisher v. University of Texas at Austin",
        citation="570 U.S. 297 (2013)",
        text=FISHER_TEXT,
    )


def by_text(checked: list[CheckedCitation]) -> dict[str, CheckedCitation]:
    return {c.text: c for c in checked}


# --- extraction -----------------------------------------------------------------------------------------------

# The syllabus of the real Fisher slip opinion: full citations, a short form, id., supra, and a statute.
SYLLABUS = FISHER_TEXT[: FISHER_TEXT.index("produce the educational benefits of diversity.")]


def test_citations_of_real_opinion_text_are_extracted_with_their_offsets() -> None:
    found = extract_citations(SYLLABUS)

    assert found, "the Fisher syllabus cites cases"
    for citation in found:
        assert SYLLABUS[citation.start : citation.end] == citation.text
    kinds = {c.kind for c in found}
    assert {Kind.FULL, Kind.SHORT, Kind.ID, Kind.SUPRA} <= kinds
    bakke = next(c for c in found if c.kind is Kind.FULL and c.key == CitationKey("438", "U.S.", "265"))
    assert bakke.text == "438 U. S. 265"
    assert bakke.citation == "438 U.S. 265"
    assert "Bakke" in bakke.case_name
    detroit_timber = found[0]
    assert detroit_timber.case_name == "United States v. Detroit Timber & Lumber Co."


def test_short_forms_id_and_supra_resolve_to_their_antecedents_in_real_text() -> None:
    found = extract_citations(SYLLABUS)

    short = next(c for c in found if c.kind is Kind.SHORT and c.text.startswith("438 U. S., at 287"))
    assert short.antecedent is not None
    assert found[short.antecedent].key == CitationKey("438", "U.S.", "265")
    first_id = next(c for c in found if c.kind is Kind.ID)
    assert first_id.antecedent == found.index(short)  # "id., at 299" refers to the Bakke short form before it
    supra = next(c for c in found if c.kind is Kind.SUPRA and c.case_name == "Gratz")
    assert supra.antecedent is not None
    assert found[supra.antecedent].key == CitationKey("539", "U.S.", "244")


def test_eyecite_is_imported_on_first_use_not_with_the_app() -> None:
    script = (
        "import os, sys; os.environ['DJANGO_SETTINGS_MODULE'] = 'lqai.settings_test'; import django; django.setup(); "
        "import chats.services, chats.views, chats.case_citations; "
        "print(sorted(m for m in ('eyecite', 'reporters_db', 'courts_db') if m in sys.modules))"
    )
    done = subprocess.run(  # noqa: S603 - this interpreter, a constant script
        [sys.executable, "-c", script], cwd=ROOT, capture_output=True, text=True, check=True, timeout=60
    )

    assert done.stdout.strip() == "[]"


def test_eyecites_overlap_warnings_do_not_reach_the_logs(caplog: pytest.LogCaptureFixture) -> None:
    text = "See Grutter v. Bollinger, 539 U.S. 306, 328 (2003). Fisher, 570 U.S., at 311."

    with caplog.at_level(logging.DEBUG):
        found = extract_citations(text)

    assert len(found) == 2
    assert "overlap" not in caplog.text
    assert "Grutter" not in caplog.text


def test_the_case_name_is_read_as_written_before_the_citation() -> None:
    text = (
        "The Court held in Fisher v. University of Texas at Austin, 570 U. S. 297, 310 (2013), that strict "
        "scrutiny applies. See Grutter v. Bollinger, 539 U.S. 306, 328 (2003). Fisher, 570 U.S., at 311. "
        "In re Gault, 387 U.S. 1 (1967). Smith v. Acme, Inc., 1 F.3d 2 (1st Cir. 1990)."
    )

    names = [(c.kind, c.case_name) for c in extract_citations(text)]

    assert names == [
        (Kind.FULL, "Fisher v. University of Texas at Austin"),
        (Kind.FULL, "Grutter v. Bollinger"),
        (Kind.SHORT, "Fisher"),
        (Kind.FULL, "In re Gault"),
        (Kind.FULL, "Smith v. Acme, Inc."),
    ]


@pytest.mark.parametrize(
    ("text", "names"),
    [
        (
            "In *Fisher v. University of Texas at Austin*, 570 U.S. 297 (2013), the Court held. *Fisher*, 570 U.S., "
            "at 310. *Id.* at 311.",
            [(Kind.FULL, "Fisher v. University of Texas at Austin"), (Kind.SHORT, "Fisher"), (Kind.ID, "")],
        ),
        (
            "See, e.g., _Smith v. Jones_, 570 U.S. 297, 299 (2013) (Kennedy, J.) (plurality opinion); "
            "**Grutter v. Bollinger**, 539 U.S. 306 (2003).",
            [(Kind.FULL, "Smith v. Jones"), (Kind.FULL, "Grutter v. Bollinger")],
        ),
        (
            "As explained in Fisher v. Univ. of Tex. at Austin (Fisher I), 570 U.S. 297 (2013), strict scrutiny "
            "applies.",
            [(Kind.FULL, "Fisher v. Univ. of Tex. at Austin")],
        ),
        (
            "Cf. Students for Fair Admissions, Inc. v. President & Fellows of Harvard Coll., 600 U.S. 181 (2023).",
            [(Kind.FULL, "Students for Fair Admissions, Inc. v. President & Fellows of Harvard Coll.")],
        ),
        (
            '- "strict scrutiny" (Fisher v. University of Texas at Austin, 570 U.S. 297)',
            [(Kind.FULL, "Fisher v. University of Texas at Austin")],
        ),
    ],
    ids=[
        "markdown italics",
        "signals and parentheticals",
        "a defined short name",
        "a comma before Inc.",
        "inside parentheses",
    ],
)
def test_names_are_read_in_the_forms_answers_write_them(text: str, names: list[tuple[Kind, str]]) -> None:
    found = extract_citations(text)

    assert [(c.kind, c.case_name) for c in found] == names
    for citation in found:
        assert text[citation.start : citation.end] == citation.text


def test_eyecite_is_used_as_published() -> None:
    # Given eyecite loaded by a check
    import eyecite.helpers

    extract_citations("Fisher v. University of Texas at Austin, 570 U.S. 297 (2013) (Fisher I)")

    # then its module globals are its own: its court lookup is not replaced process-wide
    assert eyecite.helpers.get_court_by_paren.__module__ == "eyecite.helpers"
    assert eyecite.helpers.get_court_by_paren("5th Cir.") == "ca5"


def test_extraction_finds_every_citation_eyecite_finds_in_a_whole_opinion() -> None:
    import eyecite

    # Given a whole opinion, read by eyecite as published
    expected = sorted(c.span() for c in eyecite.get_citations(FISHER_TEXT))

    # when the answer's citations are extracted
    found = [(c.start, c.end) for c in extract_citations(FISHER_TEXT) if not c.unresolvable]

    # then each of eyecite's citations is listed once, at the same place
    assert len(expected) > 100
    assert sorted(found) == expected


# --- names ----------------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("written", "official"),
    [
        ("Fisher v. University of Texas at Austin", "Fisher v. University of Texas at Austin"),
        ("Fisher v. Univ. of Tex. at Austin", "Fisher v. University of Texas at Austin"),
        ("FISHER vs. UNIVERSITY OF TEXAS", "Fisher v. University of Texas at Austin"),
        ("Fisher v. Univ. of Tex. at Austin et al.", "Fisher v. University of Texas at Austin"),
        ("Regents of Univ. of Cal. v. Bakke", "Regents of the University of California v. Bakke"),
        (
            "Democracy N.C. v. N.C. State Bd. of Elections",
            "Democracy North Carolina v. North Carolina State Board of Elections",
        ),
        ("United States v. Detroit Timber & Lumber Co.", "United States v. Detroit Timber and Lumber Company"),
        ("Smith v. Acme Corp.", "Smith v. Acme Corporation, Inc."),
        ("Brown v. Bd. of Educ.", "Brown v. Board of Education of Topeka"),
        (
            "Nat'l Ass'n for Advancement of Colored People v. Button",
            "National Association for the Advancement of Colored People v. Button",
        ),
        ("In re Gault", "In re Gault"),
        ("Ex parte Young", "Ex parte Young"),
        ("Int'l Shoe Co. v. Washington", "International Shoe Co. v. State of Washington"),
        (
            "Students for Fair Admissions, Inc. v. President & Fellows of Harvard Coll.",
            "Students for Fair Admissions, Inc. v. President and Fellows of Harvard College",
        ),
    ],
)
def test_names_written_differently_match(written: str, official: str) -> None:
    assert names_match(written, [official])


@pytest.mark.parametrize(
    ("written", "official"),
    [
        ("Smith v. Jones", "Fisher v. University of Texas at Austin"),
        ("Smith v. University of Texas at Austin", "Fisher v. University of Texas at Austin"),
        ("Fisher v. University of Houston", "Fisher v. University of Texas at Austin"),
        ("Gratz v. Bollinger", "Grutter v. Bollinger"),
        ("Bollinger v. Grutter", "Grutter v. Bollinger"),
        ("In re Winship", "In re Gault"),
        ("", "Fisher v. University of Texas at Austin"),
    ],
)
def test_names_of_other_cases_do_not_match(written: str, official: str) -> None:
    assert not names_match(written, [official])


def test_a_short_form_matches_either_party() -> None:
    official = ["Grutter v. Bollinger"]
    assert names_match("Grutter", official, short_form=True)
    assert names_match("Bollinger", official, short_form=True)
    assert not names_match("Gratz", official, short_form=True)


def test_generic_words_alone_do_not_make_a_party_match() -> None:
    assert parse_case_name("University of Houston").parties == (frozenset({"university", "houston"}),)
    assert not names_match("Fisher v. University", ["Fisher v. State"])
    assert names_match("United States v. Virginia", ["United States v. Virginia"])


# --- the local store ------------------------------------------------------------------------------------------


@pytest.mark.usefixtures("no_courtlistener_token")
def test_a_correct_citation_verifies_against_the_local_store(fisher: CaselawOpinion) -> None:
    answer = "Under Fisher v. University of Texas at Austin, 570 U. S. 297, 310 (2013), strict scrutiny applies."

    [checked] = check_case_citations(answer)

    assert checked.status is Status.VERIFIED
    assert checked.kind is Kind.FULL
    assert (checked.start, checked.end) == (answer.index("570"), answer.index("570") + len("570 U. S. 297"))
    assert checked.citation == "570 U.S. 297"
    assert checked.case_name == "Fisher v. University of Texas at Austin"
    assert checked.opinion == fisher
    assert checked.provider == "local"


@pytest.mark.usefixtures("no_courtlistener_token")
def test_a_markdown_answer_verifies_with_offsets_into_the_answer_as_written(fisher: CaselawOpinion) -> None:
    answer = (
        "Under *Fisher v. Univ. of Tex. at Austin*, 570 U.S. 297 (2013), and *id.* at 310, strict scrutiny applies."
    )

    checked = check_case_citations(answer)

    assert [(c.kind, c.status, c.text) for c in checked] == [
        (Kind.FULL, Status.VERIFIED, "570 U.S. 297"),
        (Kind.ID, Status.VERIFIED, "id."),
    ]


@pytest.mark.usefixtures("no_courtlistener_token")
def test_a_real_citation_under_a_wrong_name_is_a_name_mismatch(fisher: CaselawOpinion) -> None:
    answer = "See Smith v. Jones, 570 U.S. 297 (2013)."

    [checked] = check_case_citations(answer)

    assert checked.status is Status.NAME_MISMATCH
    assert checked.opinion == fisher
    assert "'Smith v. Jones'" in checked.detail
    assert "'Fisher v. University of Texas at Austin'" in checked.detail


def test_a_fabricated_volume_and_page_is_not_found(
    fisher: CaselawOpinion, fake_courtlistener: FakeCourtListener
) -> None:
    answer = "See Fisher v. University of Texas at Austin, 999 U.S. 999 (2013)."

    [checked] = check_case_citations(answer, courtlistener_client=fake_courtlistener.client())

    assert checked.status is Status.NOT_FOUND
    assert checked.opinion is None
    assert checked.citation == "999 U.S. 999"
    assert checked.provider == "courtlistener"


@pytest.mark.usefixtures("no_courtlistener_token")
def test_a_citation_the_local_store_lacks_is_unchecked_without_courtlistener(fisher: CaselawOpinion) -> None:
    # The local store holds a few opinions: a citation it lacks may be a real case, so it is not "not found"
    answer = "See Fisher v. University of Texas at Austin, 571 U.S. 298 (2013)."

    [checked] = check_case_citations(answer)

    assert checked.status is Status.UNCHECKED
    assert checked.opinion is None
    assert checked.citation == "571 U.S. 298"
    assert "not in the local opinion store, and CourtListener was not asked" in checked.detail


@pytest.mark.usefixtures("no_courtlistener_token")
def test_short_forms_id_and_supra_take_their_antecedents_outcome(fisher: CaselawOpinion) -> None:
    answer = (
        "Fisher v. University of Texas at Austin, 570 U.S. 297 (2013), requires strict scrutiny. "
        "Fisher, 570 U.S., at 310. Id., at 311. Fisher, supra, at 312. "
        "But see Smith v. Jones, 570 U.S. 297 (2013). Id. at 313. Smith, 570 U.S., at 314."
    )

    checked = check_case_citations(answer)

    assert [(c.kind, c.status) for c in checked] == [
        (Kind.FULL, Status.VERIFIED),
        (Kind.SHORT, Status.VERIFIED),
        (Kind.ID, Status.VERIFIED),
        (Kind.SUPRA, Status.VERIFIED),
        (Kind.FULL, Status.NAME_MISMATCH),
        (Kind.ID, Status.NAME_MISMATCH),
        (Kind.SHORT, Status.NAME_MISMATCH),
    ]
    assert all(c.opinion == fisher for c in checked)
    assert all(c.citation == "570 U.S. 297" for c in checked)
    assert checked[1].antecedent == 0
    assert checked[2].antecedent == 1  # id. refers to the citation just before it
    assert checked[5].antecedent == 4
    assert checked[6].antecedent == 4  # the nearest full citation of that case
    assert checked[6].case_name == "Smith"


@pytest.mark.usefixtures("no_courtlistener_token")
def test_a_short_form_under_another_name_is_a_name_mismatch(fisher: CaselawOpinion) -> None:
    answer = "Fisher v. University of Texas at Austin, 570 U.S. 297 (2013). Bakke, 570 U.S., at 310."

    checked = check_case_citations(answer)

    assert [(c.kind, c.status) for c in checked] == [(Kind.FULL, Status.VERIFIED), (Kind.SHORT, Status.NAME_MISMATCH)]


@pytest.mark.usefixtures("no_courtlistener_token", "db")
def test_statutes_slip_citations_and_orphan_short_forms_are_listed_unchecked_with_why() -> None:
    answer = (
        "See 42 U.S.C. § 1983; Fisher v. University of Texas at Austin, 570 U. S. ___ (2013); "
        "Grutter, 539 U.S., at 330; see also Note, Admissions, 100 Harv. L. Rev. 1 (1990)."
    )

    checked = check_case_citations(answer)

    assert [(c.kind, c.status) for c in checked] == [
        (Kind.STATUTE, Status.UNCHECKED),
        (Kind.FULL, Status.UNCHECKED),
        (Kind.SHORT, Status.UNCHECKED),
        (Kind.OTHER, Status.UNCHECKED),
    ]
    assert [c.detail for c in checked] == [
        "statutes and regulations are not checked",
        "no page number (a slip opinion or a case not yet paginated)",
        "refers to no full case citation earlier in the answer",
        "only case citations are checked",
    ]


@pytest.mark.usefixtures("no_courtlistener_token")
def test_the_same_case_stored_twice_is_one_case_and_the_local_copy_wins(fisher: CaselawOpinion) -> None:
    factories.CaselawOpinionFactory.create(
        provider="courtlistener", case_name="Fisher v. University of Texas at Austin", citation="570 U. S. 297"
    )

    [checked] = check_case_citations("Fisher v. Univ. of Tex., 570 U.S. 297 (2013).")

    assert checked.status is Status.VERIFIED
    assert checked.opinion == fisher


@pytest.mark.usefixtures("no_courtlistener_token")
def test_different_cases_stored_under_one_citation_are_ambiguous_with_the_candidates(fisher: CaselawOpinion) -> None:
    other = factories.CaselawOpinionFactory.create(case_name="Doe v. Roe", citation="570 U.S. 297")

    [checked] = check_case_citations("Fisher v. Univ. of Tex., 570 U.S. 297 (2013).")

    assert checked.status is Status.AMBIGUOUS
    assert set(checked.candidates) == {fisher, other}
    assert checked.opinion is None


@pytest.mark.usefixtures("no_courtlistener_token")
def test_a_longer_page_number_is_another_citation(fisher: CaselawOpinion) -> None:
    [checked] = check_case_citations("Fisher v. University of Texas, 570 U.S. 29 (2013).")

    assert checked.status is Status.UNCHECKED
    assert checked.citation == "570 U.S. 29"


@pytest.mark.usefixtures("no_courtlistener_token", "db")
def test_an_answer_without_citations_checks_nothing() -> None:
    assert check_case_citations("Strict scrutiny is a demanding standard.") == []


def test_the_local_lookup_is_one_query_whatever_the_number_of_citations(
    fisher: CaselawOpinion, django_assert_num_queries: Any, no_courtlistener_token: None
) -> None:
    one = "Fisher v. University of Texas at Austin, 570 U.S. 297 (2013)."
    many = " ".join(f"Doe v. Roe, {n} F.3d {n + 100} (1st Cir. 2001)." for n in range(1, 30)) + " " + one

    with django_assert_num_queries(1):
        check_case_citations(one)
    with django_assert_num_queries(1):
        checked = check_case_citations(many)
    assert len(checked) == 30


# --- CourtListener --------------------------------------------------------------------------------------------


@pytest.mark.django_db
def test_courtlistener_200_with_one_cluster_resolves_and_materializes_it(fake_courtlistener: FakeCourtListener) -> None:
    answer = "See Grutter v. Bollinger, 539 U.S. 306, 328 (2003)."

    [checked] = check_case_citations(answer, courtlistener_client=fake_courtlistener.client())

    assert checked.status is Status.VERIFIED
    assert checked.provider == "courtlistener"
    opinion = CaselawOpinion.objects.get(provider="courtlistener", opinion_id="930001")
    assert checked.opinion == opinion
    assert opinion.case_name == "Grutter v. Bollinger"
    assert opinion.cluster_id == "920001"
    assert opinion.citation == "539 U.S. 306"
    assert opinion.text == "Opinion 930001 of the citation-lookup fixtures."
    assert opinion.absolute_url == "https://www.courtlistener.com/opinion/920001/grutter-v-bollinger/"
    assert fake_courtlistener.lookups == ["539 U.S. 306"]
    assert fake_courtlistener.opinion_fetches == ["930001"]


@pytest.mark.django_db
def test_a_materialized_courtlistener_case_is_local_the_next_time(fake_courtlistener: FakeCourtListener) -> None:
    answer = "See Grutter v. Bollinger, 539 U.S. 306 (2003)."
    check_case_citations(answer, courtlistener_client=fake_courtlistener.client())

    [checked] = check_case_citations(answer, courtlistener_client=fake_courtlistener.client())

    assert checked.status is Status.VERIFIED
    assert len(fake_courtlistener.lookups) == 1
    assert CaselawOpinion.objects.filter(opinion_id="930001").count() == 1


@pytest.mark.django_db
def test_a_cited_courtlistener_opinion_looked_up_again_keeps_its_text_and_still_resolves(
    fake_courtlistener: FakeCourtListener,
) -> None:
    # Given CourtListener's opinion 930001, saved by the caselaw search under no citation the local store can
    # match, whose stored text a turn quoted, and whose text at CourtListener has since changed
    stored = factories.CaselawOpinionFactory.create(
        provider="courtlistener", opinion_id="930001", citation="", case_name="Grutter v. Bollinger"
    )
    factories.OpinionQuoteFactory.create(opinion=stored)
    cited_text = stored.text

    # When an answer cites it and the check looks it up at CourtListener
    [checked] = check_case_citations(
        "See Grutter v. Bollinger, 539 U.S. 306 (2003).", courtlistener_client=fake_courtlistener.client()
    )

    # Then it resolves to the stored opinion, whose quoted text is kept (the lookup used to overwrite the text,
    # which the cited-text guard refused: the case came out unchecked), and so is the citation its quote is
    # shown with (chats.0031); the rest of its metadata is refreshed
    assert checked.status is Status.VERIFIED
    assert checked.opinion == stored
    stored.refresh_from_db()
    assert stored.text == cited_text
    assert stored.citation == ""
    assert stored.absolute_url.startswith("https://www.courtlistener.com/")
    assert fake_courtlistener.opinion_fetches == ["930001"]


@pytest.mark.django_db
def test_a_wrong_name_on_a_courtlistener_case_is_a_name_mismatch(fake_courtlistener: FakeCourtListener) -> None:
    [checked] = check_case_citations(
        "See Gratz v. Bollinger, 539 U.S. 306 (2003).", courtlistener_client=fake_courtlistener.client()
    )

    assert checked.status is Status.NAME_MISMATCH
    assert checked.opinion is not None
    assert checked.opinion.case_name == "Grutter v. Bollinger"


@pytest.mark.django_db
def test_courtlistener_200_with_several_clusters_is_ambiguous(fake_courtlistener: FakeCourtListener) -> None:
    [checked] = check_case_citations(
        "Hopwood v. Texas, 78 F. 3d 932 (5th Cir. 1996).", courtlistener_client=fake_courtlistener.client()
    )

    assert checked.status is Status.AMBIGUOUS
    assert [c.case_name for c in checked.candidates] == ["Hopwood v. Texas", "Thurgood Marshall Legal Society v. Texas"]
    assert checked.opinion is None
    assert "CourtListener has 2 cases at this citation" in checked.detail


@pytest.mark.django_db
def test_courtlistener_300_is_ambiguous(fake_courtlistener: FakeCourtListener) -> None:
    [checked] = check_case_citations(
        "Fisher v. University of Texas at Austin, 631 F.3d 213 (5th Cir. 2011).",
        courtlistener_client=fake_courtlistener.client(),
    )

    assert checked.status is Status.AMBIGUOUS
    assert len(checked.candidates) == 2


@pytest.mark.django_db
def test_courtlistener_404_is_not_found(fake_courtlistener: FakeCourtListener) -> None:
    [checked] = check_case_citations(
        "Smith v. Jones, 999 U.S. 999 (2020).", courtlistener_client=fake_courtlistener.client()
    )

    assert checked.status is Status.NOT_FOUND
    assert checked.provider == "courtlistener"
    assert "Citation not found: '999 U.S. 999'" in checked.detail


@pytest.mark.django_db
def test_courtlistener_400_leaves_the_citation_unchecked_as_invalid(fake_courtlistener: FakeCourtListener) -> None:
    [checked] = check_case_citations(
        "Smith v. Jones, 1 U.S. 99999 (1790).", courtlistener_client=fake_courtlistener.client()
    )

    assert checked.status is Status.UNCHECKED
    assert checked.detail == "invalid citation: Unable to find reporter page 99999 in volume 1 of U.S."


@pytest.mark.django_db
def test_a_courtlistener_result_in_an_unexpected_shape_leaves_only_its_citation_unchecked(
    fake_courtlistener: FakeCourtListener, caplog: pytest.LogCaptureFixture
) -> None:
    # Given an answer per citation that is not one of the documented ones: an unknown status, a cluster
    # without an id, and a second result for a citation already answered (ignored)
    def unexpected(results: list[dict[str, Any]]) -> list[dict[str, Any]]:
        grutter, smith = results
        return [grutter | {"status": 500}, smith | {"status": 200, "clusters": [{"case_name": "No id"}]}, grutter]

    fake_courtlistener.rewrite = unexpected

    checked = check_case_citations(
        "Grutter v. Bollinger, 539 U.S. 306 (2003); Smith v. Jones, 999 U.S. 999 (2020).",
        courtlistener_client=fake_courtlistener.client(),
    )

    assert [(c.status, c.detail) for c in checked] == [
        (Status.UNCHECKED, "unexpected CourtListener status 500"),
        (Status.UNCHECKED, "CourtListener's answer could not be read"),
    ]
    assert "unexpected CourtListener result for 999 U.S. 999" in caplog.text
    assert not CaselawOpinion.objects.filter(provider="courtlistener").exists()


@pytest.mark.django_db
def test_a_citation_courtlistener_throttles_is_unchecked(fake_courtlistener: FakeCourtListener) -> None:
    [checked] = check_case_citations(
        "Richmond v. J. A. Croson Co., 488 U.S. 469 (1989).", courtlistener_client=fake_courtlistener.client()
    )

    assert checked.status is Status.UNCHECKED
    assert "too many citations" in checked.detail


@pytest.mark.django_db
def test_courtlistener_429_leaves_every_citation_unchecked_with_its_wait_until(
    fake_courtlistener: FakeCourtListener, caplog: pytest.LogCaptureFixture
) -> None:
    fake_courtlistener.mode = "throttled"

    checked = check_case_citations(
        "Grutter v. Bollinger, 539 U.S. 306 (2003); Smith v. Jones, 999 U.S. 999 (2020).",
        courtlistener_client=fake_courtlistener.client(),
    )

    assert [c.status for c in checked] == [Status.UNCHECKED, Status.UNCHECKED]
    assert all(
        c.detail == "CourtListener is rate-limiting this account until 2026-12-01T09:15:00+00:00" for c in checked
    )
    assert "rate-limiting" in caplog.text


@pytest.mark.django_db
def test_a_courtlistener_server_error_leaves_the_citations_unchecked(fake_courtlistener: FakeCourtListener) -> None:
    fake_courtlistener.mode = "error"

    [checked] = check_case_citations(
        "Grutter v. Bollinger, 539 U.S. 306 (2003).", courtlistener_client=fake_courtlistener.client()
    )

    assert checked.status is Status.UNCHECKED
    assert checked.detail == "CourtListener answered HTTP 500"


@pytest.mark.django_db
def test_courtlistener_unreachable_leaves_the_citations_unchecked(unreachable_base_url: str) -> None:
    client = courtlistener.build_client(TOKEN, base_url=unreachable_base_url)

    [checked] = check_case_citations("Grutter v. Bollinger, 539 U.S. 306 (2003).", courtlistener_client=client)

    assert checked.status is Status.UNCHECKED
    assert checked.detail == "CourtListener could not be reached (ConnectError)"


def test_courtlistener_is_asked_once_and_only_about_citations_the_store_lacks(
    fisher: CaselawOpinion, fake_courtlistener: FakeCourtListener
) -> None:
    answer = (
        "Fisher v. University of Texas at Austin, 570 U.S. 297 (2013); Grutter v. Bollinger, 539 U.S. 306 (2003); "
        "Smith v. Jones, 999 U.S. 999 (2020); Grutter, 539 U.S., at 330."
    )

    checked = check_case_citations(answer, courtlistener_client=fake_courtlistener.client())

    assert [(c.status, c.provider) for c in checked] == [
        (Status.VERIFIED, "local"),
        (Status.VERIFIED, "courtlistener"),
        (Status.NOT_FOUND, "courtlistener"),
        (Status.VERIFIED, "courtlistener"),
    ]
    assert fake_courtlistener.lookups == ["539 U.S. 306\n999 U.S. 999"]


@pytest.mark.django_db
def test_an_opinion_text_courtlistener_cannot_serve_still_resolves_the_citation(
    fake_courtlistener: FakeCourtListener, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(f"{__name__}.FIXTURES", _without(tmp_path, "opinion_930001.json"))

    [checked] = check_case_citations(
        "Grutter v. Bollinger, 539 U.S. 306 (2003).", courtlistener_client=fake_courtlistener.client()
    )

    assert checked.status is Status.VERIFIED
    assert checked.opinion is not None
    assert checked.opinion.text == ""


def _without(directory: Path, name: str) -> Path:
    for recorded in FIXTURES.glob("*.json"):
        if recorded.name != name:
            (directory / recorded.name).write_text(recorded.read_text(encoding="utf-8"), encoding="utf-8")
    return directory


@pytest.mark.django_db
def test_use_courtlistener_false_checks_the_local_store_only(fake_courtlistener: FakeCourtListener) -> None:
    [checked] = check_case_citations(
        "Smith v. Jones, 999 U.S. 999 (2020).",
        courtlistener_client=fake_courtlistener.client(),
        use_courtlistener=False,
    )

    assert checked.status is Status.UNCHECKED
    assert checked.provider == "local"
    assert fake_courtlistener.lookups == []


def test_without_a_token_courtlistener_is_never_asked(
    fisher: CaselawOpinion, settings: LazySettings, monkeypatch: pytest.MonkeyPatch
) -> None:
    settings.COURTLISTENER_API_TOKEN = ""
    monkeypatch.setattr(courtlistener, "build_client", _refuse)

    [checked] = check_case_citations("Smith v. Jones, 999 U.S. 999 (2020).")

    assert checked.status is Status.UNCHECKED


def test_with_a_token_the_settings_client_is_asked(
    fisher: CaselawOpinion,
    settings: LazySettings,
    monkeypatch: pytest.MonkeyPatch,
    fake_courtlistener: FakeCourtListener,
) -> None:
    settings.COURTLISTENER_API_TOKEN = TOKEN
    built: list[str] = []
    real_build = courtlistener.build_client

    def build(token: str, **kwargs: Any) -> Any:
        built.append(token)
        return real_build(token, base_url=fake_courtlistener.base_url)

    monkeypatch.setattr(courtlistener, "build_client", build)

    [checked] = check_case_citations("Smith v. Jones, 999 U.S. 999 (2020).")

    assert built == [TOKEN]
    assert checked.status is Status.NOT_FOUND
    assert checked.provider == "courtlistener"


def _refuse(*args: Any, **kwargs: Any) -> Any:
    raise AssertionError("no CourtListener client may be built")
