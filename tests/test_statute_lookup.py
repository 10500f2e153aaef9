"""The assistant's ``statute_lookup`` tool on the publishers' own files (authorities/data/uslm): what it
returns, what it records as consulted (``message_tool_sources`` rows of kind ``statute`` and their ledger
entries, as ``caselaw_search`` records opinions), and its use by both backends: the offline one when a question
cites a statute, and a model through the OpenAI-compatible backend (tests/fake_openai.py)."""

from __future__ import annotations

import json
import zipfile
from io import StringIO
from pathlib import Path
from typing import Any

import pytest
from django.core.management import call_command
from rest_framework.test import APIClient

from authorities.loading import load_uslm
from authorities.selectors import check_statutes
from chats.models import Chat, Message, MessageToolSource
from chats.tools import StatuteLookupTool, default_tools
from citations import keys
from citations.models import CitationLedgerEntry
from lqai_verify.bundle import verify_bundle
from tests.fake_openai import FakeOpenAIServer, answer, tool_round
from tests.test_streaming import names, sse_events, stream

pytestmark = pytest.mark.django_db

FIXTURES = Path(__file__).resolve().parent.parent / "authorities" / "data" / "uslm"
TITLES = ("usc01.xml", "usc09.xml", "usc35.xml", "CFR-2018-title27-vol3-uslm.xml")
SECTION_2_OPENING = "A written provision in any maritime transaction or a contract evidencing a transaction"
QUESTION = "Is an agreement to arbitrate in a contract enforceable under 9 U.S.C. § 2?"


@pytest.fixture
def library(db: None) -> None:
    for name in TITLES:
        load_uslm(path=FIXTURES / name)


def _lookup(citation: str, query: str = "") -> tuple[list[dict[str, Any]], list[MessageToolSource]]:
    output = StatuteLookupTool().run({"citation": citation, "query": query})
    return output.payload["results"], list(output.sources)  # type: ignore[arg-type]


@pytest.mark.parametrize(
    ("citation", "cited", "heading", "opening"),
    [
        ("9 U.S.C. § 2", "9 U.S.C. § 2 (Online@117-80)", "Validity, irrevocability", SECTION_2_OPENING),
        ("1 U.S.C. § 1", "1 U.S.C. § 1 (Online@117-80)", "Words denoting number", "In determining the meaning"),
        ("35 U.S.C. 112(a)", "35 U.S.C. § 112(a) (Online@117-80)", "Specification", "(a) In General.—The specif"),
        ("27 CFR 478.11", "27 C.F.R. § 478.11 (2017)", "Meaning of terms", "When used in this part"),
    ],
)
def test_a_section_or_subsection_is_returned_with_its_words_and_recorded_as_a_statute_consulted(
    library: None, citation: str, cited: str, heading: str, opening: str
) -> None:
    # When the tool looks a citation up (as a model writes it, with or without §)
    [result], [source] = _lookup(citation)

    # Then it is verified in the latest release, with the words of the section (or the pinned subsection)
    assert (result["status"], result["citation"]) == ("verified", cited)
    assert result["heading"].startswith(heading)
    assert result["text"].startswith(opening)
    # and it is a consulted source named the way a lawyer cites it, with the release
    assert source.source_kind == "statute"
    assert (source.tool, source.label) == ("statute_lookup", cited)
    assert source.external_ref.startswith(f"{result['identifier']}@")


def test_a_subsection_returns_only_its_own_words(library: None) -> None:
    [whole], _ = _lookup("35 U.S.C. § 112")
    [subsection], _ = _lookup("35 U.S.C. § 112(a)")

    assert subsection["text"].startswith("(a)")
    assert subsection["text"] in whole["text"]
    assert "(b) Conclusion." not in subsection["text"]
    assert "(b) Conclusion." in whole["text"]


def test_the_passage_answering_the_query_is_verbatim_from_the_text(library: None) -> None:
    [result], _ = _lookup("35 U.S.C. § 112", query="claims particularly pointing out")

    passage = result["passage"]
    assert result["text"][passage["start"] : passage["end"]] == passage["text"]
    assert "particularly pointing out" in passage["text"]


def test_a_long_section_is_cut_and_says_so_and_its_passage_is_found_past_the_cut(library: None) -> None:
    tool = StatuteLookupTool()
    tool.max_text = 100

    [result] = tool.run({"citation": "35 U.S.C. § 112", "query": "claims particularly pointing out"}).payload["results"]
    [whole] = StatuteLookupTool().run({"citation": "35 U.S.C. § 112"}).payload["results"]

    assert result["text"] == whole["text"][:100]
    assert result["truncated"] is True
    passage = result["passage"]
    assert passage["start"] > 100
    assert whole["text"][passage["start"] : passage["end"]] == passage["text"]


def test_the_release_and_the_edition_are_said(library: None) -> None:
    [usc], [usc_source] = _lookup("9 U.S.C. § 2")
    [cfr], [cfr_source] = _lookup("27 C.F.R. § 478.11")

    assert (usc["release"], usc["official"], usc_source.provider) == ("Online@117-80", False, "OLRC")
    assert usc_source.subtitle.endswith("not the official edition")
    assert (cfr["release"], cfr["official"]) == ("2017-04-01", True)
    assert cfr_source.subtitle.endswith("· official edition")


def test_a_part_lists_its_sections(library: None) -> None:
    [result], [source] = _lookup("27 C.F.R. pt. 478")

    assert result["status"] == "verified"
    assert "27 C.F.R. § 478.11 Meaning of terms" in result["contents"]
    assert source.label == "27 C.F.R. pt. 478 (2017)"


def test_a_section_the_title_lacks_is_not_found_and_nothing_is_consulted(library: None) -> None:
    [result], sources = _lookup("35 U.S.C. § 1011")

    assert result["status"] == "not_found"
    assert "may be fabricated" in result["reason"]
    assert "text" not in result
    assert sources == []


def test_a_title_not_loaded_is_unchecked_naming_the_file_to_load(library: None) -> None:
    [result], sources = _lookup("42 U.S.C. § 1983")

    assert result["status"] == "unchecked"
    assert "usc42.xml" in result["reason"]
    assert sources == []


@pytest.mark.parametrize("citation", ["", "the arbitration statute", 42])
def test_no_citation_is_an_error_the_model_can_read(library: None, citation: object) -> None:
    output = StatuteLookupTool().run({"citation": citation})

    assert output.payload["results"] == []
    assert "no U.S. Code or C.F.R. section" in output.payload["error"]
    assert output.sources == ()


def test_a_range_looks_up_each_section(library: None) -> None:
    results, sources = _lookup("9 U.S.C. §§ 3\u20134")

    assert [r["citation"] for r in results] == ["9 U.S.C. § 3 (Online@117-80)", "9 U.S.C. § 4 (Online@117-80)"]
    assert len(sources) == 2


def test_the_tool_is_offered_once_the_library_holds_a_title(db: None) -> None:
    assert "statute_lookup" not in default_tools()

    load_uslm(path=FIXTURES / "usc09.xml")

    assert "statute_lookup" in default_tools()


# --- In a turn ---------------------------------------------------------------------------------------------------


def _done(events: list[tuple[str, dict[str, Any]]]) -> Message:
    assert names(events)[-1] == "done", names(events)
    return Message.objects.get(pk=events[-1][1]["message_id"])


def _statute_entries(message: Message) -> list[tuple[str, str, str | None]]:
    """The ledger entries of the statutes the turn's tools consulted (the answer's statute rows have entries of
    kind ``statute`` too)."""
    return list(
        CitationLedgerEntry.objects.filter(
            message=message, source_kind="statute", message_tool_source__isnull=False
        ).values_list("verification_status", "message_tool_source__label", "provider")
    )


def test_the_offline_assistant_looks_up_a_cited_statute_quotes_it_and_records_it(
    library: None, api_client: APIClient, matter_chat: Chat
) -> None:
    # When a question cites 9 U.S.C. § 2 in a streamed turn of the offline assistant
    events = list(sse_events(stream(api_client, matter_chat, QUESTION).streaming_content))  # type: ignore[arg-type]

    # Then it looks the section up
    calls = [data for name, data in events if name == "tool_call"]
    assert {"tool": "statute_lookup", "arguments": {"citation": QUESTION, "query": QUESTION}}.items() <= next(
        c for c in calls if c["tool"] == "statute_lookup"
    ).items()
    message = _done(events)
    # and quotes it right after its citation, verbatim from the section
    [line] = [line for line in message.content.splitlines() if line.startswith("- 9 U.S.C. § 2 (")]
    quoted = line.split('("', 1)[1].rsplit('")', 1)[0]
    [result] = next(data for name, data in events if name == "tool_result" and data["tool"] == "statute_lookup")[
        "result"
    ]["results"]
    assert " ".join(quoted.split()) in " ".join(result["text"].split())
    # so that the answer's statute check verifies the quote against the section
    [quote] = [q for q in check_statutes(text=message.content).quotes if q.check.citation.section == "2"]
    assert (quote.status, quote.check.cited) == ("verified", "9 U.S.C. § 2 (Online@117-80)")
    # and records the section as a source consulted, with its ledger entry
    [row] = message.tool_sources.filter(source_kind="statute")
    assert (row.tool, row.label, row.provider) == ("statute_lookup", "9 U.S.C. § 2 (Online@117-80)", "OLRC")
    assert _statute_entries(message) == [("provenance", "9 U.S.C. § 2 (Online@117-80)", "OLRC")]
    # and the answer's citation and quote are on the record, checked
    assert set(message.statute_citations.values_list("kind", "status", "cited")) >= {
        ("citation", "verified", "9 U.S.C. § 2 (Online@117-80)"),
        ("quote", "verified", "9 U.S.C. § 2 (Online@117-80)"),
    }


def test_the_offline_assistant_looks_nothing_up_for_a_question_citing_no_statute(
    library: None, api_client: APIClient, matter_chat: Chat
) -> None:
    events = list(sse_events(stream(api_client, matter_chat, "Is arbitration favoured?").streaming_content))  # type: ignore[arg-type]

    assert all(data["tool"] != "statute_lookup" for name, data in events if name == "tool_call")
    assert not _done(events).tool_sources.filter(source_kind="statute").exists()


def test_a_model_looks_up_a_statute_reads_its_words_and_the_lookup_is_recorded(
    library: None, api_client: APIClient, matter_chat: Chat, fake_openai: FakeOpenAIServer
) -> None:
    # Given a model that looks up 9 U.S.C. § 2 and a fabricated section, then answers quoting the first
    fake_openai.respond(
        tool_round(
            ("call_1", "statute_lookup", json.dumps({"citation": "9 U.S.C. § 2"})),
            ("call_2", "statute_lookup", json.dumps({"citation": "35 U.S.C. § 1011"})),
        ),
        answer(f'Under 9 U.S.C. § 2, "{SECTION_2_OPENING}" is enforceable.'),
    )

    events = list(sse_events(stream(api_client, matter_chat, QUESTION).streaming_content))  # type: ignore[arg-type]

    # Then the tool was offered and run, and the model read the section's words and the other's status
    assert "statute_lookup" in [t["function"]["name"] for t in fake_openai.requests[0]["tools"]]
    assert "quote it right after its citation" in fake_openai.requests[0]["messages"][0]["content"]
    assert [data["tool"] for name, data in events if name == "tool_call"] == ["statute_lookup", "statute_lookup"]
    read = [json.loads(m["content"]) for m in fake_openai.requests[1]["messages"] if m["role"] == "tool"]
    assert read[0]["results"][0]["text"].startswith(SECTION_2_OPENING)
    assert read[1]["results"][0]["status"] == "not_found"
    # and the section found is recorded as consulted, once, with its ledger entry; the one not found is not
    message = _done(events)
    assert message.status == "complete"
    assert list(message.tool_sources.values_list("source_kind", "label")) == [
        ("statute", "9 U.S.C. § 2 (Online@117-80)")
    ]
    assert _statute_entries(message) == [("provenance", "9 U.S.C. § 2 (Online@117-80)", "OLRC")]


def test_a_statute_looked_up_is_sealed_exported_and_checked_offline(
    library: None, api_client: APIClient, matter_chat: Chat, tmp_path: Path
) -> None:
    # Given a turn of the offline assistant that looked up 9 U.S.C. § 2
    message = _done(list(sse_events(stream(api_client, matter_chat, QUESTION).streaming_content)))  # type: ignore[arg-type]
    assert message.tool_sources.filter(source_kind="statute").exists()

    # When its matter is exported and checked offline
    bundle = tmp_path / "matter.zip"
    call_command("export_matter", str(matter_chat.project_id), "--out", str(bundle), stdout=StringIO())
    result = verify_bundle(bundle, public_key=keys.current_fingerprint())

    # Then the bundle verifies, the statute among the sealed rows with its entry, named in the report
    assert result.problems == []
    assert result.entries == result.rows
    with zipfile.ZipFile(bundle) as files:
        assert "9 U.S.C. § 2 (Online@117-80)" in files.read("report.html").decode()
