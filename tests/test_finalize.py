"""``chats.services.finalize_turn``: what a turn persists, what it refuses, and the ledger entries written
with it through ``post_finalize`` (sent inside the turn's transaction, so they commit and roll back with it)."""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable
from typing import Any, TypeVar

import pytest
from django.db import connection, transaction

from chats.models import CaselawOpinion, Chat, DocumentQuote, Message, MessageToolSource, OpinionQuote
from chats.services import ClaimedCitation, ConsultedSource, FinalizedTurn, finalize_turn
from citations import ledger
from citations.models import CitationLedgerEntry
from lqai_verify.verification import verify_quote
from tests import factories
from tests.test_ledger import entries_by_source, expected_entry, mirrored

T = TypeVar("T")

KB_QUOTE = "must ultimately be satisfied"
# Extra whitespace: verifies as a tolerant match, so confidence < 1 and the method is not the default one.
TOLERANT_CASELAW_QUOTE = "survive  strict scrutiny"
FABRICATED_QUOTE = "race may never be considered for any reason"
# An omission that joins the first sentence's subject to the second's predicate: altered.
ALTERED_QUOTE = "The Equal Protection Clause . . . must ultimately be satisfied"


def _assistant_message(chat: Chat | None = None) -> Message:
    return factories.MessageFactory.create(
        chat=chat or factories.ChatFactory.create(), status=Message.Status.STREAMING, content="", finalized_at=None
    )


def _finalize(*, message: Message, status: str = Message.Status.COMPLETE, **kwargs: Any) -> FinalizedTurn:
    """finalize_turn with a fixed answer."""
    return finalize_turn(message=message, content="The answer.", status=status, **kwargs)


def _in_another_connection(read: Callable[[], T]) -> T:
    """Run ``read`` in a fresh database connection (another thread): it sees only committed data."""
    results: list[T] = []
    errors: list[BaseException] = []

    def run() -> None:
        try:
            results.append(read())
        except BaseException as exc:
            errors.append(exc)
        finally:
            connection.close()

    thread = threading.Thread(target=run)
    thread.start()
    thread.join(timeout=30)
    assert errors == []
    return results[0]


# --- The entries a turn gets -------------------------------------------------------------------------------------


@pytest.mark.django_db
def test_a_turn_gets_one_mirroring_entry_per_row() -> None:
    # Given a message of a matter with a KB document, and a materialized opinion
    message = _assistant_message()
    document = factories.DocumentFactory.create(project=message.chat.project)
    opinion = factories.CaselawOpinionFactory.create(provider="courtlistener")

    # When the turn ends with a quote from each and one caselaw search result consulted
    turn = _finalize(
        message=message,
        claimed_citations=[
            ClaimedCitation(KB_QUOTE, document_id=document.pk),
            ClaimedCitation(TOLERANT_CASELAW_QUOTE, opinion_id=opinion.pk),
        ],
        tool_sources=[
            ConsultedSource(
                source_kind="caselaw", tool="caselaw_search", label="Fisher v. Univ. of Tex.", provider="courtlistener"
            )
        ],
    )

    # Then each of the three rows has exactly one entry, of the right kind, mirroring it
    assert turn.unverified == []
    (kb,) = turn.citations
    (caselaw,) = turn.caselaw_citations
    (tool,) = turn.tool_sources
    entries = entries_by_source(message)
    assert set(entries) == {kb.pk, caselaw.pk, tool.pk}
    for row in (kb, caselaw, tool):
        assert mirrored(entries[row.pk]) == expected_entry(row)
    assert {e.source_kind for e in entries.values()} == {"kb_document", "caselaw"}
    assert entries[caselaw.pk].provider == "courtlistener"
    # The tolerant quote makes the confidence mirror something other than a default.
    assert 0 < (entries[caselaw.pk].confidence or 0) < 1
    assert entries[caselaw.pk].verification_status != entries[kb.pk].verification_status
    assert {e.project_id for e in entries.values()} == {message.chat.project_id}


@pytest.mark.django_db
def test_an_mcp_source_in_a_matter_less_chat() -> None:
    message = _assistant_message(factories.ChatFactory.create(project=None))
    opinion = factories.CaselawOpinionFactory.create()

    turn = _finalize(
        message=message,
        claimed_citations=[ClaimedCitation(KB_QUOTE, opinion_id=opinion.pk)],
        tool_sources=[ConsultedSource(source_kind="mcp", tool="mcp:westlaw.search", label="Westlaw result")],
    )

    (mcp,) = turn.tool_sources
    (caselaw,) = turn.caselaw_citations
    entries = entries_by_source(message)
    assert set(entries) == {mcp.pk, caselaw.pk}
    assert mirrored(entries[mcp.pk]) == expected_entry(mcp)
    assert entries[mcp.pk].source_kind == "mcp"
    assert entries[mcp.pk].provider is None
    assert {e.project_id for e in entries.values()} == {None}


@pytest.mark.django_db
def test_a_kb_only_turn_gets_exactly_one_kb_entry() -> None:
    message = _assistant_message()
    document = factories.DocumentFactory.create(project=message.chat.project)

    turn = _finalize(
        message=message,
        claimed_citations=[ClaimedCitation(KB_QUOTE, document_id=document.pk)],
    )

    (entry,) = CitationLedgerEntry.objects.filter(message=message)
    assert entry.source_kind == "kb_document"
    assert entry.message_citation_id == turn.citations[0].pk


@pytest.mark.django_db
def test_a_turn_without_rows_gets_no_entry() -> None:
    message = _assistant_message()

    _finalize(message=message)

    message.refresh_from_db()
    assert message.status == Message.Status.COMPLETE
    assert not CitationLedgerEntry.objects.exists()


@pytest.mark.django_db
def test_a_turn_rolled_back_by_its_caller_takes_its_entries_with_it() -> None:
    # The entries are written in the turn's transaction: a caller's rollback takes both.
    message = _assistant_message()
    document = factories.DocumentFactory.create(project=message.chat.project)

    with pytest.raises(RuntimeError), transaction.atomic():  # noqa: PT012 - fails after finalize, inside the block
        finalize_turn(
            message=message,
            content="The answer.",
            status=Message.Status.COMPLETE,
            claimed_citations=[ClaimedCitation(KB_QUOTE, document_id=document.pk)],
        )
        assert CitationLedgerEntry.objects.filter(message=message).count() == 1
        raise RuntimeError("the caller fails after finalizing")

    assert not DocumentQuote.objects.filter(message=message).exists()
    assert not CitationLedgerEntry.objects.exists()


# --- What finalize_turn refuses ----------------------------------------------------------------------------------


@pytest.mark.django_db
def test_failed_claims_are_recorded_as_unverified_rows_with_their_reason_and_entries() -> None:
    message = _assistant_message()
    document = factories.DocumentFactory.create(project=message.chat.project)
    opinion = factories.CaselawOpinionFactory.create()

    turn = _finalize(
        message=message,
        claimed_citations=[
            ClaimedCitation(KB_QUOTE, document_id=document.pk),
            ClaimedCitation(FABRICATED_QUOTE, document_id=document.pk),
            ClaimedCitation(FABRICATED_QUOTE, opinion_id=opinion.pk),
            ClaimedCitation(KB_QUOTE, document_id=document.pk, opinion_id=opinion.pk),  # two sources
            ClaimedCitation(KB_QUOTE),  # no source
        ],
    )

    # The verified quote is a citation; each failed claim is returned with its reason and its row
    assert [c.quote for c in turn.citations] == [KB_QUOTE]
    assert turn.caselaw_citations == []
    assert [(u.quote, u.kind, u.reason) for u in turn.unverified] == [
        (FABRICATED_QUOTE, "kb_document", "not found in the document"),
        (KB_QUOTE, "kb_document", "the claim must name exactly one source"),
        (KB_QUOTE, "kb_document", "the claim must name exactly one source"),
        (FABRICATED_QUOTE, "caselaw", "not found in the opinion"),
    ]
    # Stored: the failed rows have no offsets and no confidence, and name the source the claim named
    failed_kb = DocumentQuote.objects.filter(message=message, verification_method="unverified")
    assert sorted((r.quote, r.document_id) for r in failed_kb) == sorted(
        [(FABRICATED_QUOTE, document.pk), (KB_QUOTE, None), (KB_QUOTE, None)]
    )
    assert all(r.source_offset_start is None and r.verification_confidence is None for r in failed_kb)
    (failed_caselaw,) = OpinionQuote.objects.filter(message=message)
    assert (failed_caselaw.verification_method, failed_caselaw.opinion_id) == ("unverified", opinion.pk)
    # Every claim has its ledger entry: the failed ones "unverified", without confidence
    entries = CitationLedgerEntry.objects.filter(message=message)
    assert sorted((e.source_kind, e.verification_status, e.confidence) for e in entries) == [
        ("caselaw", "unverified", None),
        ("kb_document", "exact_match", 1.0),
        ("kb_document", "unverified", None),
        ("kb_document", "unverified", None),
        ("kb_document", "unverified", None),
    ]
    message.refresh_from_db()
    assert message.verdict == "fail"


@pytest.mark.django_db
def test_a_quote_from_another_matters_document_is_unverified() -> None:
    # Given a document of another matter that does contain the quote
    message = _assistant_message()
    foreign = factories.DocumentFactory.create(project=factories.ProjectFactory.create())
    assert KB_QUOTE in foreign.content

    turn = _finalize(message=message, claimed_citations=[ClaimedCitation(KB_QUOTE, document_id=foreign.pk)])

    # Then the claim failed, and its row does not name the other matter's document
    assert [(u.quote, u.reason) for u in turn.unverified] == [
        (KB_QUOTE, "unknown document: not a document of this chat's matter")
    ]
    assert turn.citations == []
    (row,) = DocumentQuote.objects.all()
    assert (row.verification_method, row.document_id) == ("unverified", None)
    assert CitationLedgerEntry.objects.get().verification_status == "unverified"


@pytest.mark.django_db
def test_a_matter_less_chat_cannot_quote_a_kb_document() -> None:
    message = _assistant_message(factories.ChatFactory.create(project=None))
    document = factories.DocumentFactory.create()

    turn = _finalize(message=message, claimed_citations=[ClaimedCitation(KB_QUOTE, document_id=document.pk)])

    assert [u.quote for u in turn.unverified] == [KB_QUOTE]
    assert not DocumentQuote.objects.exclude(verification_method="unverified").exists()


# --- The verdict of a turn -------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("quotes", "expected"),
    [
        ([], "none"),
        ([KB_QUOTE], "pass"),
        ([KB_QUOTE, "must  ultimately be satisfied"], "pass"),  # extra space: a tolerant match, nothing to review
        (["must  ultimately be satisfied"], "pass"),  # one tolerant match alone
        ([KB_QUOTE, FABRICATED_QUOTE], "fail"),
        ([KB_QUOTE, ALTERED_QUOTE], "review"),  # found, but the verifier cannot vouch for it: a person must check
        ([ALTERED_QUOTE, FABRICATED_QUOTE], "fail"),
    ],
)
@pytest.mark.django_db
def test_each_turn_gets_its_gate_verdict(quotes: list[str], expected: str) -> None:
    message = _assistant_message()
    document = factories.DocumentFactory.create(project=message.chat.project)

    _finalize(message=message, claimed_citations=[ClaimedCitation(q, document_id=document.pk) for q in quotes])

    message.refresh_from_db()
    assert message.verdict == expected


@pytest.mark.parametrize(
    ("first", "then", "expected"),
    [
        ([], [KB_QUOTE], "pass"),
        ([FABRICATED_QUOTE], [KB_QUOTE], "fail"),
        (["must  ultimately be satisfied"], [KB_QUOTE], "pass"),
        ([ALTERED_QUOTE], [KB_QUOTE], "review"),
        ([KB_QUOTE], [], "pass"),
    ],
)
@pytest.mark.django_db
def test_a_resumed_turn_keeps_the_worse_verdict(first: list[str], then: list[str], expected: str) -> None:
    message = _assistant_message()
    document = factories.DocumentFactory.create(project=message.chat.project)
    _finalize(
        message=message,
        status=Message.Status.INTERRUPTED,
        claimed_citations=[ClaimedCitation(q, document_id=document.pk) for q in first],
    )

    _finalize(message=message, claimed_citations=[ClaimedCitation(q, document_id=document.pk) for q in then])

    message.refresh_from_db()
    assert message.verdict == expected


@pytest.mark.django_db
@pytest.mark.parametrize("status", [Message.Status.PENDING, Message.Status.STREAMING, "done"])
def test_a_non_final_status_is_refused(status: str) -> None:
    message = _assistant_message()
    document = factories.DocumentFactory.create(project=message.chat.project)

    with pytest.raises(ValueError, match="final status"):
        finalize_turn(
            message=message,
            content="The answer.",
            status=status,
            claimed_citations=[ClaimedCitation(KB_QUOTE, document_id=document.pk)],
        )

    message.refresh_from_db()
    assert (message.status, message.content) == (Message.Status.STREAMING, "")
    assert not CitationLedgerEntry.objects.exists()
    assert not DocumentQuote.objects.exists()


@pytest.mark.django_db
def test_a_user_message_cannot_end_a_turn() -> None:
    message = factories.UserMessageFactory.create()

    with pytest.raises(ValueError, match="assistant"):
        finalize_turn(message=message, content="x", status=Message.Status.COMPLETE)


# --- Resume ------------------------------------------------------------------------------------------------------


@pytest.mark.django_db
def test_finalizing_an_interrupted_turn_again_adds_only_the_new_entries() -> None:
    # Given a turn interrupted after one quote and one consulted source
    message = _assistant_message()
    document = factories.DocumentFactory.create(project=message.chat.project)
    opinion = factories.CaselawOpinionFactory.create()
    first = _finalize(
        message=message,
        status=Message.Status.INTERRUPTED,
        claimed_citations=[ClaimedCitation(KB_QUOTE, document_id=document.pk)],
        tool_sources=[ConsultedSource(source_kind="caselaw", tool="caselaw_search", label="Doe v. Roe")],
    )
    before = {e.source_row_id: (e.pk, e.created_at) for e in CitationLedgerEntry.objects.filter(message=message)}
    assert set(before) == {first.citations[0].pk, first.tool_sources[0].pk}

    # When the resumed turn completes with a new quote and a new source
    second = _finalize(
        message=message,
        claimed_citations=[ClaimedCitation(TOLERANT_CASELAW_QUOTE, opinion_id=opinion.pk)],
        tool_sources=[ConsultedSource(source_kind="mcp", tool="mcp:search", label="An MCP result")],
    )

    # Then the old entries are untouched and each new row has its own entry
    after = {e.source_row_id: (e.pk, e.created_at) for e in CitationLedgerEntry.objects.filter(message=message)}
    new_rows = {second.caselaw_citations[0].pk, second.tool_sources[0].pk}
    assert set(after) == set(before) | new_rows
    assert {k: after[k] for k in before} == before
    message.refresh_from_db()
    assert message.status == Message.Status.COMPLETE
    assert DocumentQuote.objects.filter(message=message).count() == 1
    assert MessageToolSource.objects.filter(message=message).count() == 2


# --- A ledger failure never breaks a turn (real commits, PostgreSQL) ---------------------------------------------


@pytest.mark.postgres
@pytest.mark.django_db(transaction=True)
@pytest.mark.usefixtures("ledger_refuses_every_row")
def test_a_ledger_failure_leaves_the_turn_committed_and_the_connection_usable(
    caplog: pytest.LogCaptureFixture,
) -> None:
    # Given a turn to finalize, and a ledger that refuses every row
    message = _assistant_message()
    document = factories.DocumentFactory.create(project=message.chat.project)
    opinion = factories.CaselawOpinionFactory.create()

    # When it is finalized for real (the ledger write fails in its savepoint, inside the turn's transaction)
    with caplog.at_level(logging.ERROR, logger="citations.receivers"):
        turn = finalize_turn(
            message=message,
            content="The answer.",
            status=Message.Status.COMPLETE,
            claimed_citations=[
                ClaimedCitation(KB_QUOTE, document_id=document.pk),
                ClaimedCitation(KB_QUOTE, opinion_id=opinion.pk),
            ],
            tool_sources=[ConsultedSource(source_kind="mcp", tool="mcp:search", label="An MCP result")],
        )

    # Then the failure was logged with the message id, and swallowed
    (record,) = [r for r in caplog.records if r.name == "citations.receivers" and r.levelno == logging.ERROR]
    assert str(message.pk) in record.getMessage()
    assert record.exc_text is not None
    assert "test_refuse_all" in record.exc_text
    # and the turn is committed: another connection sees the message and its rows
    assert not connection.in_atomic_block

    def committed_turn() -> tuple[str, int, int, int]:
        return (
            Message.objects.get(pk=message.pk).status,
            DocumentQuote.objects.filter(message_id=message.pk).count(),
            OpinionQuote.objects.filter(message_id=message.pk).count(),
            MessageToolSource.objects.filter(message_id=message.pk).count(),
        )

    assert _in_another_connection(committed_turn) == (Message.Status.COMPLETE, 1, 1, 1)
    # and this connection still works, the ledger is empty, and a later assembly repairs it
    with connection.cursor() as cursor:
        cursor.execute("SELECT 1")
        assert cursor.fetchone() == (1,)
    assert not CitationLedgerEntry.objects.exists()
    with connection.cursor() as cursor:
        cursor.execute("ALTER TABLE citation_ledger_entry DROP CONSTRAINT test_refuse_all")
    assert ledger.assemble(turn.message) == 3


# --- Turns that are already over, receivers that fail, tool metadata that does not fit ---------------------------


@pytest.mark.django_db
@pytest.mark.parametrize("status", [Message.Status.COMPLETE, Message.Status.FAILED])
def test_a_finished_turn_cannot_be_finalized_again(status: str) -> None:
    message = factories.MessageFactory.create(status=status, content="Final words.")
    with pytest.raises(ValueError, match=f"already {status}"):
        finalize_turn(message=message, content="Rewritten.", status=Message.Status.COMPLETE)
    message.refresh_from_db()
    assert message.content == "Final words."


# transaction=True: what is committed is read back from another connection.
@pytest.mark.django_db(transaction=True)
def test_a_failure_after_the_ledger_write_rolls_back_the_turn_and_its_entries() -> None:
    # Given a receiver connected after the ledger's, which fails once the entries are written
    from chats.signals import post_finalize

    written: list[int] = []

    def failing_after_the_ledger(sender: type[Message], message: Message, **kwargs: Any) -> None:
        written.append(CitationLedgerEntry.objects.filter(message=message).count())
        raise RuntimeError("a failure after the ledger write")

    message = _assistant_message()
    document = factories.DocumentFactory.create(project=message.chat.project)
    post_finalize.connect(failing_after_the_ledger, sender=Message, dispatch_uid="tests.failing_after_the_ledger")
    try:
        # When the turn is finalized
        with pytest.raises(RuntimeError, match="after the ledger write"):
            _finalize(
                message=message,
                claimed_citations=[ClaimedCitation(KB_QUOTE, document_id=document.pk)],
                tool_sources=[ConsultedSource(source_kind="mcp", tool="docket_lookup", label="Docket 1")],
            )
    finally:
        post_finalize.disconnect(sender=Message, dispatch_uid="tests.failing_after_the_ledger")

    # Then the entries had been written inside the turn's transaction, and nothing of the turn is committed:
    # neither its status, its rows nor its entries (nothing half-written)
    assert written == [2]

    def committed() -> tuple[str, int, int, int]:
        return (
            Message.objects.get(pk=message.pk).status,
            DocumentQuote.objects.filter(message_id=message.pk).count(),
            MessageToolSource.objects.filter(message_id=message.pk).count(),
            CitationLedgerEntry.objects.filter(message_id=message.pk).count(),
        )

    assert _in_another_connection(committed) == (Message.Status.STREAMING, 0, 0, 0)


@pytest.mark.django_db
def test_tool_metadata_is_fitted_to_its_columns_and_kindless_sources_are_dropped(
    caplog: pytest.LogCaptureFixture,
) -> None:
    message = _assistant_message()
    consulted = [
        ConsultedSource(source_kind="m" * 40, tool="t" * 150, label="l" * 600, provider="p" * 60, url="u" * 600),
        ConsultedSource(source_kind="  ", tool="broken_tool", label="No kind"),
    ]
    with caplog.at_level(logging.WARNING, logger="chats.services"):
        turn = _finalize(message=message, tool_sources=consulted)
    row = MessageToolSource.objects.get(message=message)
    assert (len(row.source_kind), len(row.tool), len(row.label), len(row.provider or ""), len(row.url)) == (
        32,
        100,
        500,
        50,
        500,
    )
    assert len(turn.tool_sources) == 1
    assert "broken_tool" in caplog.text
    assert CitationLedgerEntry.objects.get(message=message).source_kind == "m" * 32


@pytest.mark.django_db
@pytest.mark.parametrize(
    ("quote", "reason"),
    [
        ("ust ultimately be satisfied", "the quote starts or ends inside a word or number of the document"),
        ("must ultimately never be satisfied", "not found in the document"),
    ],
)
def test_a_failed_claim_records_the_verifiers_reason(quote: str, reason: str) -> None:
    message = _assistant_message()
    document = factories.DocumentFactory.create(project=message.chat.project)

    turn = _finalize(message=message, claimed_citations=[ClaimedCitation(quote, document_id=document.pk)])

    assert [u.reason for u in turn.unverified] == [reason]
    assert DocumentQuote.objects.get(message=message).unverified_reason == reason


# A quote of the Fisher opinion with a bracket ("the Court of Appeals", shortened) and an omitted citation.
ALTERED_FISHER_QUOTE = (
    "The Court concludes that [the appeals court] did not hold the University to the demanding burden of strict "
    "scrutiny articulated in Grutter . . . . Because the Court of Appeals did not apply the correct standard"
)


@pytest.mark.django_db
def test_each_quote_row_stores_its_alterations_with_their_source_offsets(local_opinion: CaselawOpinion) -> None:
    # Given a matter's document and the real Fisher opinion
    message = _assistant_message()
    document = factories.DocumentFactory.create(project=message.chat.project)

    # When a turn quotes the opinion with a bracket and an ellipsis, the document exactly, and fails a claim
    _finalize(
        message=message,
        claimed_citations=[
            ClaimedCitation(ALTERED_FISHER_QUOTE, opinion_id=local_opinion.pk),
            ClaimedCitation(KB_QUOTE, document_id=document.pk),
            ClaimedCitation(FABRICATED_QUOTE, document_id=document.pk),
        ],
    )

    # Then the altered quote's row lists both alterations, each with the source span it stands for
    (altered,) = OpinionQuote.objects.filter(message=message)
    assert altered.verification_method == "tolerant_match"
    text = local_opinion.text
    assert [(a["kind"], a["detail"], a["quote_text"]) for a in altered.alterations] == [
        ("bracket", "shortened", "[the appeals court]"),
        ("ellipsis", "", "...."),
    ]
    assert [text[a["source_start"] : a["source_end"]] for a in altered.alterations] == [
        "the Court of Appeals",
        "and Regents of Univ. of Cal. v. Bakke, 438 U. S.\n265, 305 (1978) (opinion of Powell, J.).",
    ]
    assert all(
        altered.source_offset_start <= a["source_start"] <= a["source_end"] <= altered.source_offset_end
        for a in altered.alterations
    )
    # ... the same as the verifier returns
    match = verify_quote(ALTERED_FISHER_QUOTE, text)
    assert match is not None
    assert [(a["source_start"], a["source_end"]) for a in altered.alterations] == [
        (a.source_start, a.source_end) for a in match.alterations
    ]
    # ... and the exact quote and the failed claim have none
    assert sorted((r.verification_method, r.alterations) for r in DocumentQuote.objects.filter(message=message)) == [
        ("exact_match", []),
        ("unverified", []),
    ]


# --- The bound on claims -----------------------------------------------------------------------------------------


@pytest.mark.django_db
def test_claims_past_the_bound_are_one_failed_claim_saying_how_many_were_dropped(settings: Any) -> None:
    # Given a bound of 3 claims per turn and a turn claiming 5 quotes that all verify
    settings.LQAI_MAX_CLAIMS_PER_TURN = 3
    message = _assistant_message()
    document = factories.DocumentFactory.create(project=message.chat.project)
    claims = [ClaimedCitation(KB_QUOTE, document_id=document.pk)] * 3 + [
        ClaimedCitation("strict scrutiny", document_id=document.pk),
        ClaimedCitation("diversity", document_id=document.pk),
    ]

    _finalize(message=message, claimed_citations=claims)

    # Then 3 are verified and the rest is one failed claim (the first dropped quote) that says so
    rows = list(DocumentQuote.objects.filter(message=message).order_by("position"))
    assert [r.verification_method for r in rows] == ["exact_match"] * 3 + ["unverified"]
    assert rows[-1].quote == "strict scrutiny"
    assert rows[-1].unverified_reason.startswith("2 claimed quote(s) from here on were not verified")
    assert "LQAI_MAX_CLAIMS_PER_TURN" in rows[-1].unverified_reason
    assert [r.position for r in rows] == [0, 1, 2, 3]
    message.refresh_from_db()
    assert message.verdict == "fail"


@pytest.mark.django_db
def test_an_altered_quote_is_recorded_with_its_omission_and_why() -> None:
    message = _assistant_message()
    document = factories.DocumentFactory.create(project=message.chat.project)

    _finalize(message=message, claimed_citations=[ClaimedCitation(ALTERED_QUOTE, document_id=document.pk)])

    row = DocumentQuote.objects.get(message=message)
    assert (row.verification_method, row.verification_confidence) == ("altered", 0.6)
    [omission] = row.alterations
    assert document.content[omission["source_start"] : omission["source_end"]].startswith("requires that")
    assert omission["alters"] == "an omission joins parts of different sentences or clauses"
    assert row.context_flags == []
