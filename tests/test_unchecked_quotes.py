"""A quotation nothing could check is an ``unchecked`` quote row, so that a turn never reads greener than what a
person must still check: the row's shape (model and database), the verdict rule, the finalize, a checked draft's
quotations with no citation or citing a case nothing resolved, the ledger, the seal, the export and its offline
verifier, the trace page and the claims of review; and the SQLite triggers the quote tables' rebuild drops,
written again."""

from __future__ import annotations

import io
import re
from pathlib import Path
from typing import Any

import pytest
from django.core.exceptions import ValidationError
from django.core.management import call_command
from django.db import IntegrityError, connection, transaction
from django.test import Client
from django.urls import reverse

from chats.models import DocumentQuote, Message, OpinionQuote, Project
from chats.services import ClaimedCitation, finalize_turn, start_turn
from citations.claims import claims_of
from citations.models import CitationLedgerEntry, TurnSeal
from drafts.models import DraftCheck
from drafts.recording import draft_record, record_draft
from lqai_verify import verdict
from lqai_verify.bundle import verify_bundle
from lqai_verify.statuses import status_in_words
from tests import factories
from tests.conftest import FISHER, corpus_text
from tests.test_export import export, fingerprint, members
from tests.test_migrations import _migrate, back_to_latest  # noqa: F401  (a fixture)
from tests.test_seals import verify as verify_ledger

FISHER_CASE = "Fisher v. University of Texas at Austin, 570 U.S. 297"
SCRUTINY = "Strict scrutiny is a searching examination"
UNCITED = "Quoted from nowhere at all"
NO_CITATION = "no citation supports this quotation"
UNKNOWN_CASE = "Zyzzyva v. Quokka, 999 U.S. 999"


@pytest.fixture
def matter(user: Any) -> Project:
    """Alice's matter, with the Fisher opinion stored (provider ``local``)."""
    project = factories.ProjectFactory.create(owner=user, name="Admissions matter")
    factories.CaselawOpinionFactory.create(
        provider="local",
        opinion_id="fisher",
        case_name="Fisher v. University of Texas at Austin",
        citation="570 U.S. 297",
        court="Supreme Court of the United States",
        text=corpus_text(FISHER),
    )
    return project


def record(matter: Project, user: Any, text: str) -> DraftCheck:
    return record_draft(matter=matter, author=user, data=text.encode(), name="brief.txt").check


def test_a_draft_with_an_uncited_quotation_is_a_review_turn_recorded_sealed_and_exported(
    matter: Project, user: Any, client: Client, tmp_path: Path
) -> None:
    # Given a draft with one quotation Fisher verifies and one that cites nothing
    text = f'"{SCRUTINY}." {FISHER_CASE} (2013).\n\n"{UNCITED}."'

    # When it is recorded (before this change: no row for the uncited quotation, and the turn read "pass")
    check = record(matter, user, text)
    answer = check.message

    # then the turn reads review, by the one rule over its own rows, and the draft's verdict is the turn's
    assert answer.verdict == "review"
    assert draft_record(check)["verdict"] == "review"
    # the uncited quotation is an unchecked row saying why, placed in the draft, with no source, span or score
    row = DocumentQuote.objects.get(message=answer)
    assert (row.quote, row.verification_method, row.unverified_reason) == (UNCITED, "unchecked", NO_CITATION)
    assert row.document_id is None
    assert (row.source_offset_start, row.verification_confidence, row.passage_sha256) == (None, None, "")
    assert row.answer_offset_start == text.index(UNCITED)
    assert OpinionQuote.objects.get(message=answer).verification_method == "exact_match"
    # its ledger entry says unchecked, without a score; the turn is sealed and the record verifies
    entry = CitationLedgerEntry.objects.get(message_citation=row)
    assert (entry.verification_status, entry.confidence, entry.source_kind) == ("unchecked", None, "kb_document")
    assert TurnSeal.objects.filter(message_id=answer.pk).exists()
    status, output = verify_ledger()
    assert status == 0, output
    agreement = io.StringIO()
    call_command("backfill_ledger", "--check", stdout=agreement, stderr=io.StringIO())
    assert "every source row in scope has its ledger entry" in agreement.getvalue()
    # the export verifies offline, and its report recomputes review from the rows and says why in words
    path = export(check.chat, tmp_path / "matter.zip")
    verification = verify_bundle(path, public_key=fingerprint())
    assert verification.problems == []
    report = members(path)["report.html"].decode()
    assert "Verdict: Review</span>" in report
    assert "under earlier rules" not in report
    assert f"? not checked: {NO_CITATION}</span>" in report
    assert '<span class="status-review">' in report
    # the trace page shows it as a claim to review, amber, its status in words
    client.force_login(user)
    page = client.get(reverse("pages:chat", args=[check.chat_id])).content.decode()
    card = re.search(r'<li class="claim-card tone-review"[^>]*data-status="unchecked".*?</li>', page, re.S)
    assert card is not None
    assert f"not checked: {NO_CITATION}" in card.group(0)
    assert "Why it failed" not in card.group(0)
    assert 'data-verdict="review"' in page
    # the draft's page says the same verdict as the trace page
    draft_page = client.get(draft_record(check)["page"]).content.decode()
    assert 'data-verdict="review"' in draft_page
    # and the claims of review count it as needing a person
    claims = {claim.status: claim.needs_review for claim in claims_of(answer)}
    assert claims["unchecked"] is True


def test_a_quotation_citing_a_case_nothing_resolved_is_an_unchecked_row_naming_the_citation(
    matter: Project, user: Any, settings: Any
) -> None:
    # Given no CourtListener token and a draft quoting a case no local opinion is
    settings.COURTLISTENER_API_TOKEN = ""
    text = f'The court said "the moon is made of cheese." {UNKNOWN_CASE} (2031).'

    check = record(matter, user, text)

    # then the quotation is an unchecked row whose reason names the citation, and the turn does not pass
    row = DocumentQuote.objects.get(message=check.message)
    assert row.verification_method == "unchecked"
    assert row.quote == "the moon is made of cheese"
    assert "the case cited (999 U.S. 999)" in row.unverified_reason
    assert row.unverified_reason.endswith("nothing to check the quotation against")
    assert "COURTLISTENER_API_TOKEN unset" in row.unverified_reason  # why CourtListener could not say
    assert check.message.verdict in ("review", "fail")  # the case citation itself may fail
    assert draft_record(check)["verdict"] == check.message.verdict


@pytest.mark.parametrize(
    "bad",
    [
        {"source_offset_start": 0, "source_offset_end": 4},
        {"verification_confidence": 0.5},
        {"passage_sha256": "a" * 64},
        {"unverified_reason": ""},
        {"with_document": True},
    ],
    ids=["offsets", "confidence", "digest", "no-reason", "a-source"],
)
def test_the_check_refuses_an_unchecked_row_of_the_wrong_shape(bad: dict[str, Any], matter_chat: Any) -> None:
    message = factories.MessageFactory.create(chat=matter_chat)
    fields: dict[str, Any] = {
        "message": message,
        "quote": UNCITED,
        "verification_method": "unchecked",
        "unverified_reason": NO_CITATION,
        "document": None,
    } | bad
    if fields.pop("with_document", False):
        fields["document"] = factories.DocumentFactory.create(project=matter_chat.project)
    # The model says so ...
    with pytest.raises(ValidationError, match="an unchecked one has no source"):
        DocumentQuote(**fields).full_clean()
    # ... and so does the database.
    with pytest.raises(IntegrityError), transaction.atomic():
        DocumentQuote.objects.create(**fields)


def test_an_unchecked_row_of_the_right_shape_is_accepted(matter_chat: Any) -> None:
    message = factories.MessageFactory.create(chat=matter_chat)
    row = DocumentQuote(message=message, quote=UNCITED, verification_method="unchecked", unverified_reason=NO_CITATION)
    row.full_clean()
    row.save()
    assert DocumentQuote.objects.get(pk=row.pk).verification_method == "unchecked"


def test_finalize_records_a_claim_nothing_could_check_and_refuses_one_that_names_a_source(
    matter_chat: Any, user: Any
) -> None:
    _question, answer = start_turn(chat=matter_chat, content="Check this.", author=user)
    document = factories.DocumentFactory.create(project=matter_chat.project)
    # A claim both unchecked and naming a source is a caller's mistake: refused, nothing written.
    with pytest.raises(ValueError, match="names no source"):
        finalize_turn(
            message=answer,
            content=f'"{UNCITED}"',
            status=Message.Status.COMPLETE,
            claimed_citations=[ClaimedCitation(quote=UNCITED, document_id=document.pk, unchecked_reason="x")],
        )
    assert not DocumentQuote.objects.filter(message=answer).exists()

    finalized = finalize_turn(
        message=answer,
        content=f'"{UNCITED}"',
        status=Message.Status.COMPLETE,
        claimed_citations=[ClaimedCitation(quote=UNCITED, unchecked_reason=NO_CITATION)],
    )

    assert finalized.message.verdict == "review"
    assert (finalized.citations, finalized.unverified) == ([], [])
    assert [row.unverified_reason for row in finalized.unchecked] == [NO_CITATION]


def test_a_reason_longer_than_its_column_is_cut_to_fit(matter_chat: Any, user: Any) -> None:
    _question, answer = start_turn(chat=matter_chat, content="Check this.", author=user)
    reason = "the case cited (1 U.S. 1) could not be resolved: " + "why " * 100

    finalize_turn(
        message=answer,
        content=f'"{UNCITED}"',
        status=Message.Status.COMPLETE,
        claimed_citations=[ClaimedCitation(quote=UNCITED, unchecked_reason=reason)],
    )

    assert DocumentQuote.objects.get(message=answer).unverified_reason == reason[:300]


def test_the_verdict_rule_reads_an_unchecked_quote_as_review_never_pass_never_fail() -> None:
    assert verdict.verdict_of(methods=["exact_match", "unchecked"]) == "review"
    assert verdict.verdict_of(methods=["unchecked"]) == "review"
    assert verdict.verdict_of(methods=["unchecked", "unverified"]) == "fail"
    assert verdict.verdict_of(methods=["exact_match", "unchecked"], earlier_rules=True) == "review"
    words = status_in_words("unchecked", reason=NO_CITATION)
    assert (words.words, words.tone, words.needs_review) == (f"not checked: {NO_CITATION}", "review", True)
    assert status_in_words("unchecked").words == "not checked"  # a case citation's, as before


def _quote_triggers_missing() -> set[str]:
    """The quote tables' triggers (as their migrations wrote them) that the database does not have."""
    tables = ("message_citations", "message_caselaw_citations")
    with connection.cursor() as cursor:
        if connection.vendor == "sqlite":
            cursor.execute("SELECT name FROM sqlite_master WHERE type = 'trigger'")
            expected = {f"{table}_added_by_its_finalize" for table in tables}
        else:
            cursor.execute("SELECT tgname FROM pg_trigger WHERE NOT tgisinternal")
            expected = {
                f"{table}_{name}"
                for table in tables
                for name in ("added_by_its_finalize", "append_only", "no_truncate")
            }
        return expected - {name for (name,) in cursor.fetchall()}


@pytest.mark.django_db
def test_the_quote_tables_keep_their_triggers_after_the_migration_rebuilds_them() -> None:
    # The test database was migrated through chats.0044, which (on SQLite) rebuilds both quote tables.
    assert _quote_triggers_missing() == set()


@pytest.mark.django_db(transaction=True)
@pytest.mark.usefixtures("back_to_latest")
def test_the_migration_goes_back_and_forth_keeping_the_triggers() -> None:
    _migrate(("chats", "0043_certificate_wording"), ("citations", "0025_review_chain_heads"))
    assert _quote_triggers_missing() == set()
    assert "unchecked" not in _check_sql("message_citations")

    _migrate(("chats", "0044_unchecked_quotes"), ("citations", "0026_unchecked_quotes_in_the_ledger"))
    assert _quote_triggers_missing() == set()
    assert "unchecked" in _check_sql("message_citations")


def _check_sql(table: str) -> str:
    """The quote table's shape check as the database holds it."""
    with connection.cursor() as cursor:
        if connection.vendor == "sqlite":
            cursor.execute("SELECT sql FROM sqlite_master WHERE type = 'table' AND name = %s", [table])
        else:
            cursor.execute(
                "SELECT pg_get_constraintdef(oid) FROM pg_constraint WHERE conname = %s",
                [f"{table}_verified_or_failed_shape"],
            )
        return str(cursor.fetchone()[0])


@pytest.mark.django_db
def test_a_correction_of_an_unchecked_quotation_says_there_is_nothing_to_check_it_against(
    matter: Project, user: Any
) -> None:
    from citations.reviews import record_decision

    check = record(matter, user, f'"{UNCITED}."')
    [claim] = [c for c in claims_of(check.message) if c.status == "unchecked"]

    decision = record_decision(
        message=check.message, claim_id=claim.id, decision="corrected", by=user, corrected_text="other words"
    )

    # (before: "the quoted source's text is not held", as if a source had been lost)
    assert decision.correction_check == {
        "status": "not_checked",
        "detail": "the quotation names no source the machine holds: nothing to check the correction against",
    }
