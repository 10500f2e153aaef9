"""``message_statute_citations``: an answer's statute and regulation citations, and the quotes attributed to
them, checked against the authority library at finalize and kept on the record (ledger, seal), with the
table's rules (each constraint twice: ``full_clean()`` and a direct insert)."""

from __future__ import annotations

from html import escape
from pathlib import Path
from typing import Any

import pytest
from django.conf import LazySettings
from django.core.exceptions import ValidationError
from django.db import IntegrityError, transaction

from authorities.loading import load_uslm
from authorities.models import StatuteSection
from chats.models import CaseCitation, Message, StatuteCitation, Verdict
from chats.record import purging
from chats.services import finalize_turn, passage_sha256
from citations import keys, seals
from citations.integrity import verify_record
from citations.models import CitationLedgerEntry, TurnSeal
from lqai_verify import record
from lqai_verify.bundle import verify_bundle
from tests import factories

pytestmark = pytest.mark.django_db

FIXTURES = Path(__file__).resolve().parent.parent / "authorities" / "data" / "uslm"

QUOTE_9_USC_2 = (
    "An arbitration clause “shall be valid, irrevocable, and enforceable, save upon such grounds as exist at "
    "law or in equity for the revocation of any contract.” 9 U.S.C. § 2."
)


@pytest.fixture(autouse=True)
def _no_courtlistener(settings: LazySettings) -> None:
    settings.COURTLISTENER_API_TOKEN = ""


@pytest.fixture
def library(db: None) -> None:
    for name in ("usc09.xml", "usc35.xml"):
        load_uslm(path=FIXTURES / name)


def finalize(content: str) -> Message:
    message = factories.MessageFactory.create(status=Message.Status.STREAMING, content="", finalized_at=None)
    finalize_turn(message=message, content=content, status=Message.Status.COMPLETE)
    message.refresh_from_db()
    return message


def rows_of(message: Message) -> list[StatuteCitation]:
    return list(StatuteCitation.objects.filter(message=message).order_by("position"))


def test_a_correct_quote_of_9_usc_2_is_a_verified_citation_and_quote_on_the_record(library: None) -> None:
    message = finalize(QUOTE_9_USC_2)

    citation, quote = rows_of(message)
    section = StatuteSection.objects.get(identifier="/us/usc/t9/s2")
    assert (citation.kind, citation.status, quote.kind, quote.status) == ("citation", "verified", "quote", "verified")
    assert citation.citation == "9 U.S.C. § 2"
    assert QUOTE_9_USC_2[citation.answer_offset_start : citation.answer_offset_end] == "9 U.S.C. § 2"
    assert citation.cited == "9 U.S.C. § 2 (Online@117-80)"
    assert (citation.identifier, citation.section_id) == ("/us/usc/t9/s2", section.pk)
    assert (citation.code, citation.title, citation.release_point) == ("usc", 9, "Online@117-80")
    assert citation.release_official is not None
    # the quote: its passage in the section's text, digested
    assert quote.section_id == section.pk
    assert quote.source_offset_start is not None
    assert quote.source_offset_end is not None
    passage = section.text[quote.source_offset_start : quote.source_offset_end]
    assert passage.startswith("shall be valid, irrevocable, and enforceable")
    assert quote.passage_sha256 == passage_sha256(passage)
    assert message.verdict == Verdict.PASS
    # the statute citation is no longer an unchecked case-citation row
    assert not CaseCitation.objects.filter(message=message).exists()


def test_each_row_gets_one_statute_entry_in_the_ledger(library: None) -> None:
    message = finalize(QUOTE_9_USC_2)

    entries = CitationLedgerEntry.objects.filter(message=message).order_by("verification_status")
    assert [(e.source_kind, e.verification_status) for e in entries] == [
        ("statute", "statute_quote_verified"),
        ("statute", "statute_verified"),
    ]
    assert {e.message_statute_citation_id for e in entries} == {row.pk for row in rows_of(message)}
    quote_entry = entries[0]
    assert quote_entry.confidence is not None


def test_a_word_changed_in_the_quote_fails_the_turn(library: None) -> None:
    message = finalize(QUOTE_9_USC_2.replace("irrevocable", "revocable"))

    citation, quote = rows_of(message)
    assert (citation.status, quote.status) == ("verified", "failed")
    assert quote.source_offset_start is None
    assert quote.passage_sha256 == ""
    assert quote.section_id is None
    assert quote.reason.startswith("not found in 9 U.S.C. § 2 (Online@117-80)")
    assert message.verdict == Verdict.FAIL
    entry = CitationLedgerEntry.objects.get(message_statute_citation=quote)
    assert (entry.verification_status, entry.confidence) == ("statute_quote_failed", None)


def test_a_section_the_title_does_not_have_is_not_found_and_fails(library: None) -> None:
    message = finalize("See 35 U.S.C. § 1011.")

    [citation] = rows_of(message)
    assert citation.status == "not_found"
    assert "may be fabricated" in citation.reason
    assert citation.section_id is None
    assert message.verdict == Verdict.FAIL


def test_a_title_not_loaded_is_unchecked_naming_the_title_and_needs_review(library: None) -> None:
    message = finalize("Suits lie under 42 U.S.C. § 1983.")

    [citation] = rows_of(message)
    assert citation.status == "unchecked"
    assert "title 42 of the U.S. Code is not loaded" in citation.reason
    assert (citation.release_point, citation.title) == ("", None)
    assert message.verdict == Verdict.REVIEW


def test_a_quote_found_in_another_section_fails_naming_where(library: None) -> None:
    text = "9 U.S.C. § 2 (“the court in which such suit is pending, upon being satisfied that the issue involved”)"

    message = finalize(text)

    _, quote = rows_of(message)
    assert (quote.status, quote.found_in, quote.identifier) == ("found_elsewhere", "9 U.S.C. § 3", "/us/usc/t9/s3")
    assert quote.reason == "found in 9 U.S.C. § 3, cited as § 2"
    assert quote.section == StatuteSection.objects.get(identifier="/us/usc/t9/s3")
    assert message.verdict == Verdict.FAIL


def test_when_the_statute_check_fails_the_citations_stay_unchecked_case_citations(
    library: None, monkeypatch: pytest.MonkeyPatch
) -> None:
    def broken(**kwargs: Any) -> None:
        raise RuntimeError("library down")

    monkeypatch.setattr("authorities.selectors.check_statutes", broken)

    message = finalize("Suits lie under 42 U.S.C. § 1983.")

    assert rows_of(message) == []
    [case] = CaseCitation.objects.filter(message=message)
    assert (case.kind, case.status) == ("statute", "unchecked")


def test_the_rows_are_sealed_and_verify_ledger_covers_them(library: None) -> None:
    message = finalize(QUOTE_9_USC_2)

    facts = seals.turn_facts([message.pk])[str(message.pk)]
    statute_rows = [row for row in facts.rows if row["table"] == record.STATUTE]
    assert len(statute_rows) == 2
    assert all(set(row) == set(record.ROW_FIELDS[record.STATUTE]) for row in statute_rows)
    seal = TurnSeal.objects.get(message_id=message.pk)
    assert {f"{record.STATUTE}:{row.pk}" for row in rows_of(message)} <= set(seal.row_digests["rows"])

    result = verify_record()

    assert result.problems == [], result.problems
    assert result.entries >= 2


def test_a_cited_section_cannot_be_deleted_from_under_the_record(library: None) -> None:
    finalize(QUOTE_9_USC_2)

    with pytest.raises(IntegrityError), transaction.atomic():
        StatuteSection.objects.filter(identifier="/us/usc/t9/s2").delete()


# --- the table's rules -----------------------------------------------------------------------------------------


def _row(**overrides: Any) -> StatuteCitation:
    message = factories.MessageFactory.create(status=Message.Status.STREAMING, content="", finalized_at=None)
    fields: dict[str, Any] = {
        "message": message,
        "kind": "citation",
        "citation": "9 U.S.C. § 2",
        "answer_offset_start": 0,
        "answer_offset_end": 12,
        "status": "unchecked",
        "reason": "title 9 of the U.S. Code is not loaded",
    }
    return StatuteCitation(**{**fields, **overrides})


@pytest.mark.parametrize(
    ("overrides", "constraint"),
    [
        ({"status": "failed"}, "message_statute_citations_kind_status_valid"),
        ({"kind": "quote", "status": "not_found", "quote": "x"}, "message_statute_citations_kind_status_valid"),
        ({"answer_offset_end": 0}, "message_statute_citations_written_and_reasoned"),
        ({"status": "verified"}, "message_statute_citations_verified_named"),
        ({"quote": "shall be valid"}, "message_statute_citations_citation_shape"),
        ({"kind": "quote", "status": "verified", "quote": "shall be valid"}, "message_statute_citations_quote_shape"),
        (
            {"kind": "quote", "status": "failed", "quote": "x", "passage_sha256": "0" * 64},
            "message_statute_citations_quote_shape",
        ),
    ],
)
def test_each_rule_is_held_by_the_model_and_the_database(overrides: dict[str, Any], constraint: str) -> None:
    row = _row(**overrides)

    [rule] = [c for c in StatuteCitation._meta.constraints if c.name == constraint]

    with pytest.raises(ValidationError) as invalid:
        row.full_clean()
    assert rule.violation_error_message in invalid.value.messages

    with pytest.raises(IntegrityError, match=constraint), transaction.atomic():
        row.save()


def test_a_well_formed_unchecked_citation_is_accepted() -> None:
    row = _row()

    row.full_clean()
    row.save()

    assert StatuteCitation.objects.filter(pk=row.pk).exists()


def test_a_resumed_turn_adds_only_the_statute_rows_it_had_not_written(library: None) -> None:
    message = factories.MessageFactory.create(status=Message.Status.STREAMING, content="", finalized_at=None)
    first = "See 35 U.S.C. § 1011."
    finalize_turn(message=message, content=first, status=Message.Status.INTERRUPTED)
    message.refresh_from_db()

    turn = finalize_turn(message=message, content=f"{first} {QUOTE_9_USC_2}", status=Message.Status.COMPLETE)

    assert [(r.kind, r.citation, r.position) for r in turn.statute_citations] == [
        ("citation", "9 U.S.C. § 2", 1),
        ("quote", "9 U.S.C. § 2", 2),
    ]
    assert StatuteCitation.objects.filter(message=message).count() == 3
    message.refresh_from_db()
    assert message.verdict == Verdict.FAIL  # the first run's section not found stays


# --- exported and re-checked offline -------------------------------------------------------------------------------


def _exported(tmp_path: Path, content: str) -> tuple[Path, Message]:
    from tests.test_export import export

    project = factories.ProjectFactory.create()
    chat = factories.ChatFactory.create(project=project, owner=project.owner)
    message = factories.MessageFactory.create(chat=chat, status=Message.Status.STREAMING, content="", finalized_at=None)
    finalize_turn(message=message, content=content, status=Message.Status.COMPLETE)
    return export(chat, tmp_path / "matter.zip"), message


def test_the_statute_quote_is_exported_with_its_section_text_and_re_checked_offline(
    tmp_path: Path, library: None
) -> None:
    from tests.test_export import fingerprint, lines, members

    bundle, message = _exported(tmp_path, QUOTE_9_USC_2)

    result = verify_bundle(bundle, public_key=fingerprint())

    assert result.problems == []
    assert (result.statutes, result.quotes) == (2, 1)
    files = members(bundle)
    [passage] = lines(files["passages.jsonl"])
    quote = StatuteCitation.objects.get(message=message, kind="quote")
    section = StatuteSection.objects.get(identifier="/us/usc/t9/s2")
    assert passage["row"] == f"{record.STATUTE}:{quote.pk}"
    assert passage["excerpt"] == section.text
    assert passage["excerpt_start"] == 0
    assert passage["section"] == "/us/usc/t9/s2"
    assert passage["release"]["release_point"] == "Online@117-80"
    report = files["report.html"].decode()
    assert "9 U.S.C. § 2 (Online@117-80)" in report
    assert "\u2713 section verified in the release checked</span>" in report
    assert (
        escape("\u2713 quote verified in the section's text, in the release checked</span>", quote=True).replace(
            "&lt;/span&gt;", "</span>"
        )
        in report
    )


def _tampered(bundle: Path, tmp_path: Path, change: Any) -> Any:
    from tests.test_export import fingerprint, jsonl, lines, members, rewrite

    files = members(bundle)
    passages, rows = lines(files["passages.jsonl"]), lines(files["rows.jsonl"])
    change(passages, rows)
    files["passages.jsonl"], files["rows.jsonl"] = jsonl(passages), jsonl(rows)
    return verify_bundle(rewrite(tmp_path / "tampered.zip", files, resign=keys.signing_key()), public_key=fingerprint())


def test_a_changed_byte_of_the_section_text_fails_offline(tmp_path: Path, library: None) -> None:
    bundle, _ = _exported(tmp_path, QUOTE_9_USC_2)

    def change(passages: list[dict[str, Any]], rows: list[dict[str, Any]]) -> None:
        passages[0]["excerpt"] = passages[0]["excerpt"].replace("irrevocable", "irrevocabl3", 1)

    result = _tampered(bundle, tmp_path, change)

    assert any("statute quote" in p and "digest" in p for p in result.problems), result.problems


def test_a_changed_row_fails_offline(tmp_path: Path, library: None) -> None:
    bundle, _ = _exported(tmp_path, QUOTE_9_USC_2)

    def change(passages: list[dict[str, Any]], rows: list[dict[str, Any]]) -> None:
        [quote] = [r for r in rows if r["table"] == record.STATUTE and r["kind"] == "quote"]
        quote["release_point"] = "Online@118-1"

    result = _tampered(bundle, tmp_path, change)

    assert any("differs from its seal (edited)" in p for p in result.problems), result.problems
    assert any("the row was checked against 'Online@118-1'" in p for p in result.problems), result.problems


# --- the API ---------------------------------------------------------------------------------------------------------


def test_the_api_gives_the_turns_statute_rows_with_their_statuses_in_words(
    library: None, api_client: Any, matter_chat: Any
) -> None:
    from django.urls import reverse

    message = factories.MessageFactory.create(
        chat=matter_chat, status=Message.Status.STREAMING, content="", finalized_at=None
    )
    finalize_turn(message=message, content=QUOTE_9_USC_2, status=Message.Status.COMPLETE)

    response = api_client.get(reverse("chats:message-create", kwargs={"chat_id": matter_chat.pk}))

    assert response.status_code == 200, response.content
    [data] = [m for m in response.json()["results"] if m["id"] == str(message.pk)]
    citation, quote = data["statute_citations"]
    assert (citation["kind"], citation["cited"], citation["status"]) == (
        "citation",
        "9 U.S.C. § 2 (Online@117-80)",
        "verified",
    )
    assert citation["status_words"] == "section verified in the release checked"
    assert (quote["kind"], quote["status"], quote["release_point"]) == ("quote", "verified", "Online@117-80")
    assert quote["source_start"] is not None
    assert data["review_count"] == 0
    assert data["verdict"] == "pass"


def test_another_users_chat_and_its_statute_rows_are_not_found(library: None, matter_chat: Any) -> None:
    from django.urls import reverse
    from rest_framework.test import APIClient

    finalize_turn(
        message=factories.MessageFactory.create(
            chat=matter_chat, status=Message.Status.STREAMING, content="", finalized_at=None
        ),
        content=QUOTE_9_USC_2,
        status=Message.Status.COMPLETE,
    )
    stranger = APIClient()
    stranger.force_authenticate(factories.UserFactory.create())

    response = stranger.get(reverse("chats:message-create", kwargs={"chat_id": matter_chat.pk}))

    assert response.status_code == 404


# --- the trace page and the ledger's trace API ------------------------------------------------------------------------


def test_the_trace_page_cites_the_statute_as_a_lawyer_does_with_its_status_in_words(
    library: None, client: Any, user: Any, matter_chat: Any
) -> None:
    from django.urls import reverse

    message = factories.MessageFactory.create(
        chat=matter_chat, status=Message.Status.STREAMING, content="", finalized_at=None
    )
    finalize_turn(
        message=message,
        content=f"{QUOTE_9_USC_2} Also see 35 U.S.C. § 1011.",
        status=Message.Status.COMPLETE,
    )
    client.force_login(user)

    page = client.get(reverse("pages:chat", args=[matter_chat.pk])).content.decode()

    assert "Statute cited</span> 9 U.S.C. § 2 (Online@117-80)" in page
    assert "section verified in the release checked" in page
    assert "quote verified in the section" in page
    assert "no such section in the release checked: the citation may be fabricated" in page
    assert "35 U.S.C. § 1011" in page
    assert "Verdict: Fail" in page


def test_the_ledgers_trace_api_gives_the_statute_entries_and_the_quotes_passage(
    library: None, api_client: Any, matter_chat: Any
) -> None:
    from django.urls import reverse

    message = factories.MessageFactory.create(
        chat=matter_chat, status=Message.Status.STREAMING, content="", finalized_at=None
    )
    finalize_turn(message=message, content=QUOTE_9_USC_2, status=Message.Status.COMPLETE)

    response = api_client.get(reverse("citations:chat-ledger", kwargs={"chat_id": matter_chat.pk}))

    assert response.status_code == 200, response.content
    entries = [e for e in response.json()["results"] if e["message_id"] == str(message.pk)]
    assert [(e["source_kind"], e["verification_status"]) for e in entries] == [
        ("statute", "statute_verified"),
        ("statute", "statute_quote_verified"),
    ]
    citation, quote = entries
    assert citation["statute_citation"]["cited"] == "9 U.S.C. § 2 (Online@117-80)"
    assert citation["passage"] is None
    assert quote["passage"]["text"].startswith("shall be valid, irrevocable, and enforceable")
    assert quote["passage_intact"] is True
    assert QUOTE_9_USC_2[citation["answer_start"] : citation["answer_end"]] == "9 U.S.C. § 2"


# --- the verdict, the backfill and the agreement check ---------------------------------------------------------------


@pytest.mark.parametrize(
    ("statuses", "verdict"),
    [
        ({"statute_verified", "statute_quote_verified"}, "pass"),
        ({"statute_verified", "statute_quote_altered"}, "review"),
        ({"statute_unchecked"}, "review"),
        ({"statute_verified", "statute_quote_unchecked"}, "review"),
        ({"statute_not_found"}, "fail"),
        ({"statute_verified", "statute_quote_failed"}, "fail"),
        ({"statute_verified", "statute_quote_found_elsewhere"}, "fail"),
    ],
)
def test_the_verdict_rule_reads_statute_rows(statuses: set[str], verdict: str) -> None:
    from lqai_verify.verdict import verdict_of

    assert verdict_of(methods=(), case_statuses=statuses) == verdict


def test_an_altered_statute_quote_needs_review(library: None) -> None:
    # "... enforceable" without the "save upon such grounds ..." that limits it
    message = finalize("9 U.S.C. § 2 (“valid, irrevocable, and enforceable”)")

    _, quote = rows_of(message)
    assert (quote.status, quote.verification_method) == ("altered", "altered")
    assert [f["flag"] for f in quote.context_flags] == ["limited_after"]
    assert message.verdict == Verdict.REVIEW
    entry = CitationLedgerEntry.objects.get(message_statute_citation=quote)
    assert entry.verification_status == "statute_quote_altered"
    assert entry.confidence is not None
    assert entry.confidence <= 0.6


def test_a_backfill_writes_the_statute_entries_a_turn_lacks_and_its_check_agrees(library: None) -> None:
    from citations.backfill import backfill_ledger

    message = finalize(QUOTE_9_USC_2.replace("irrevocable", "revocable"))
    with transaction.atomic(), purging(message.chat.project_id):  # the entries lost, as if the write had failed
        CitationLedgerEntry.objects.filter(message=message).delete()

    result = backfill_ledger()

    assert result.created["statute"] == 2
    checked = backfill_ledger(check=True)  # a dry run that also compares entries and verdicts with the rows
    assert (checked.total_created, checked.disagreements) == (0, [])
    assert {e.verification_status for e in CitationLedgerEntry.objects.filter(message=message)} == {
        "statute_verified",
        "statute_quote_failed",
    }


def test_a_subsection_quote_is_exported_with_the_subsection_and_re_checked_offline(
    tmp_path: Path, library: None
) -> None:
    from tests.test_export import fingerprint, lines, members

    bundle, _message = _exported(
        tmp_path, "35 U.S.C. § 112(a) (“The specification shall contain a written description of the invention”)"
    )

    result = verify_bundle(bundle, public_key=fingerprint())

    assert result.problems == []
    [passage] = lines(members(bundle)["passages.jsonl"])
    section = StatuteSection.objects.get(identifier="/us/usc/t35/s112")
    [a] = [s for s in section.subdivisions if s["path"] == "a"]
    assert (passage["excerpt_start"], passage["excerpt"]) == (a["start"], section.text[a["start"] : a["end"]])


def test_a_statute_row_edited_below_the_application_fails_verify_ledger(library: None) -> None:
    from tests.test_seals import _db_id, _raw

    message = finalize(QUOTE_9_USC_2)
    quote = StatuteCitation.objects.get(message=message, kind="quote")
    assert verify_record().problems == []

    # the release it was checked against rewritten in SQL, with the permanent-record triggers off
    _raw(
        "UPDATE message_statute_citations SET release_point = 'Online@118-1' WHERE id = %(id)s",
        {"id": _db_id(quote.pk)},
    )

    problems = [str(p) for p in verify_record().problems]
    assert any(f"row message_statute_citations:{quote.pk} differs from its seal (edited)" in p for p in problems), (
        problems
    )
