"""A checked draft is a turn of its own kind (issue 51, item 4): recorded through the finalize service, so that its
rows, ledger entries, seal and export are every turn's; a revised draft is a new turn in the same chat, and what
changed since the previous check is fixed, new or still open. The drafts API records and reads them back."""

from __future__ import annotations

import io
import json
from pathlib import Path
from typing import Any

import pytest
from django.core.exceptions import ValidationError
from django.core.files.uploadedfile import SimpleUploadedFile
from django.core.management import CommandError, call_command
from django.db import IntegrityError, transaction
from rest_framework.test import APIClient

from chats.models import CaseCitation, Chat, DocumentQuote, Message, OpinionQuote, Project
from chats.services import start_turn
from citations.models import CitationLedgerEntry, TurnSeal
from citations.purge import purge_matter
from drafts.errors import UnreadableDraft
from drafts.models import DraftCheck
from drafts.recording import NotInMatter, draft_changes, draft_record, record_draft
from lqai_verify.bundle import verify_bundle
from tests import factories
from tests.conftest import FISHER, corpus_text
from tests.docx_fixture import make_docx
from tests.pdf_fixture import make_pdf
from tests.test_export import export, fingerprint
from tests.test_seals import verify as verify_ledger

FISHER_CASE = "Fisher v. University of Texas at Austin, 570 U.S. 297"
SCRUTINY = "Strict scrutiny is a searching examination"
DOCUMENT_QUOTE = "shall deliver the reports within thirty days"


@pytest.fixture
def matter(user: Any) -> Project:
    """Alice's matter, holding a services agreement, with the Fisher opinion stored (provider ``local``)."""
    project = factories.ProjectFactory.create(owner=user, name="Admissions matter")
    factories.DocumentFactory.create(
        project=project,
        title="Services Agreement",
        content="4. Term. The Provider shall deliver the reports within thirty days of each quarter's end.",
    )
    factories.CaselawOpinionFactory.create(
        provider="local",
        opinion_id="fisher",
        case_name="Fisher v. University of Texas at Austin",
        citation="570 U.S. 297",
        court="Supreme Court of the United States",
        text=corpus_text(FISHER),
    )
    return project


def first_draft() -> bytes:
    return "\n\n".join(
        [
            f'The standard is demanding: "{SCRUTINY}." {FISHER_CASE}, 310 (2013).',
            f'Courts have said it is "a lenient examination." {FISHER_CASE}, 310 (2013).',
            f'The Services Agreement says the Provider "{DOCUMENT_QUOTE}."',
            '"Quoted from nowhere at all."',
        ]
    ).encode()


def revised_draft() -> bytes:
    # The misquote is fixed (gone), the uncited quotation stays, a new misquote comes in; everything moves.
    return "\n\n".join(
        [
            "A new opening paragraph moves every offset of the draft.",
            f'The standard is demanding: "{SCRUTINY}." {FISHER_CASE}, 310 (2013).',
            f'The Services Agreement says the Provider "{DOCUMENT_QUOTE}."',
            '"Quoted from nowhere at all."',
            f'Fisher also said "strict scrutiny is a formality." {FISHER_CASE}, 310 (2013).',
        ]
    ).encode()


def record(matter: Project, user: Any, data: bytes, name: str = "brief.txt", **options: Any) -> DraftCheck:
    return record_draft(matter=matter, author=user, data=data, name=name, **options).check


def test_a_recorded_draft_is_a_turn_with_rows_ledger_entries_and_a_seal(
    matter: Project, user: Any, tmp_path: Path
) -> None:
    # Given a draft quoting Fisher (once right, once wrong), the matter's agreement, and nothing
    # When it is recorded
    recorded = record_draft(matter=matter, author=user, data=first_draft(), name="brief.txt")
    check, answer = recorded.check, recorded.message

    # then it is a draft turn of the user's in a chat of the matter named for the file, its text the answer
    answer.refresh_from_db()
    question = answer.reply_to
    assert question is not None
    assert (answer.kind, question.kind, answer.role, answer.status) == ("draft", "draft", "assistant", "complete")
    assert answer.author_id == question.author_id == user.pk
    assert answer.content == first_draft().decode()
    assert check.chat.project_id == matter.pk
    assert check.chat.title == "Draft: brief.txt"
    assert question.content.startswith("Check the draft brief.txt (text, no page numbers, SHA-256 ")
    assert check.file_sha256 in question.content
    # its quotations of the opinion and the document are quote rows at the draft's offsets; the uncited one an
    # unchecked row saying why
    quotes = {row.quote: row for row in OpinionQuote.objects.filter(message=answer)}
    assert set(quotes) == {SCRUTINY, "a lenient examination"}
    assert quotes[SCRUTINY].verification_method == "exact_match"
    assert quotes["a lenient examination"].verification_method == "unverified"
    start = answer.content.index(SCRUTINY)
    assert (quotes[SCRUTINY].answer_offset_start, quotes[SCRUTINY].answer_offset_end) == (
        start,
        start + len(SCRUTINY),
    )
    document_row = DocumentQuote.objects.get(message=answer, verification_method="exact_match")
    assert document_row.quote == DOCUMENT_QUOTE
    uncited = DocumentQuote.objects.get(message=answer, verification_method="unchecked")
    assert (uncited.quote, uncited.unverified_reason) == (
        "Quoted from nowhere at all",
        "no citation supports this quotation",
    )
    assert uncited.answer_offset_start == answer.content.index("Quoted from nowhere at all")
    # its case citations are the turn's case-citation rows
    assert CaseCitation.objects.filter(message=answer, citation__contains="570 U.S. 297").count() == 2
    # the verdict is the turn's, and the draft's is no better (a misquote fails both)
    assert answer.verdict == "fail"
    assert draft_record(check)["verdict"] == "fail"
    # every row has its ledger entry, the turn is sealed, and the record verifies in place and exported, offline
    rows = OpinionQuote.objects.filter(message=answer).count() + 2 + CaseCitation.objects.filter(message=answer).count()
    assert CitationLedgerEntry.objects.filter(message_id=answer.pk).count() == rows
    assert TurnSeal.objects.filter(message_id=answer.pk).exists()
    status, output = verify_ledger()
    assert status == 0, output
    agreement = io.StringIO()
    call_command("backfill_ledger", "--check", stdout=agreement, stderr=io.StringIO())  # exits 1 on a disagreement
    assert "every source row in scope has its ledger entry" in agreement.getvalue()
    verification = verify_bundle(export(check.chat, tmp_path / "matter.zip"), public_key=fingerprint())
    assert verification.problems == []
    assert (verification.turns, verification.seals, verification.entries) == (1, 1, rows)


def test_a_quotation_nothing_could_check_makes_the_turn_itself_read_review(matter: Project, user: Any) -> None:
    # Given a draft whose only quotation of a source verifies and whose other quotation cites nothing
    data = f'"{SCRUTINY}." {FISHER_CASE} (2013).\n\n"Quoted from nowhere at all."'.encode()

    check = record(matter, user, data)

    # then the turn itself reads review (an unchecked row), and the draft's verdict is the turn's: one rule
    assert check.message.verdict == "review"
    body = draft_record(check)
    assert body["verdict"] == body["turn_verdict"] == "review"
    assert DocumentQuote.objects.get(message=check.message).verification_method == "unchecked"


def test_a_revised_draft_is_a_new_turn_in_the_same_chat_and_says_what_changed(matter: Project, user: Any) -> None:
    # Given a draft checked, then revised: one misquote gone, one uncited quotation kept, one new misquote
    first = record(matter, user, first_draft())
    second = record(matter, user, revised_draft())

    # then the revision is a second draft turn in the first's chat
    assert second.chat_id == first.chat_id
    assert Message.objects.filter(chat=first.chat, role="assistant", kind="draft").count() == 2
    assert draft_changes(first) is None
    changes = draft_changes(second)
    assert changes is not None
    assert changes.previous.pk == first.pk

    def texts(findings: list[dict[str, Any]]) -> set[tuple[str, str]]:
        return {(f["kind"], f["text"]) for f in findings}

    # the misquote is fixed, the new misquote is new, the uncited quotation still open (matched despite offsets)
    assert ("quote", "a lenient examination.") in texts(changes.fixed)
    assert ("quote", "strict scrutiny is a formality.") in texts(changes.new)
    assert ("quote", "Quoted from nowhere at all.") in texts(changes.still_open)
    assert not texts(changes.fixed) & texts(changes.still_open)
    assert not texts(changes.new) & texts(changes.still_open)
    # a draft of another name goes to a chat of its own
    other = record(matter, user, first_draft(), name="reply.txt")
    assert other.chat_id != first.chat_id


def test_a_chat_of_another_matter_is_refused_and_nothing_is_written(matter: Project, user: Any) -> None:
    elsewhere = factories.ChatFactory.create(owner=user, project=factories.ProjectFactory.create(owner=user))
    before = Message.objects.count()

    with pytest.raises(NotInMatter):
        record(matter, user, first_draft(), chat=elsewhere)

    assert Message.objects.count() == before


def test_a_bad_file_writes_nothing(matter: Project, user: Any) -> None:
    counted = (Chat, Message, OpinionQuote, DocumentQuote, CaseCitation, DraftCheck, CitationLedgerEntry, TurnSeal)
    before = [model.objects.count() for model in counted]

    with pytest.raises(UnreadableDraft, match="it is a PDF"):
        record(matter, user, b"%PDF-1.4\n", name="brief.docx")
    with pytest.raises(UnreadableDraft, match="no text"):
        record(matter, user, b"  \n", name="brief.txt")

    assert [model.objects.count() for model in counted] == before


def test_a_draft_check_holds_a_known_format_and_a_hex_digest(matter: Project, user: Any) -> None:
    check = record(matter, user, first_draft())
    check.format = "rtf"
    with pytest.raises(ValidationError, match="Format must be"):
        check.validate_constraints()
    check.refresh_from_db()
    check.file_sha256 = "not a digest"
    with pytest.raises(ValidationError, match="64 lowercase hex"):
        check.validate_constraints()
    message = check.message
    message.kind = "memo"
    with pytest.raises(ValidationError, match="Kind must be"):
        message.validate_constraints()
    # a direct insert of a bad row is refused by the database (a turn of its own, as each check has)
    _, answer = start_turn(chat=check.chat, content="A question?", author=user)
    good = {"message": answer, "chat": check.chat, "project": matter, "file_name": "b.txt", "format": "text"}
    with transaction.atomic(), pytest.raises(IntegrityError):
        DraftCheck.objects.create(**(good | {"format": "rtf"}), file_sha256="a" * 64)
    with transaction.atomic(), pytest.raises(IntegrityError):
        DraftCheck.objects.create(**good, file_sha256="A" * 64)
    with transaction.atomic(), pytest.raises(IntegrityError):
        Message.objects.filter(pk=check.message_id).update(kind="memo")


def test_a_draft_check_never_changes_and_goes_with_its_matters_purge(matter: Project, user: Any) -> None:
    check = record(matter, user, first_draft())

    with transaction.atomic(), pytest.raises(IntegrityError, match="draft check"):
        DraftCheck.objects.filter(pk=check.pk).update(file_name="other.txt")
    with transaction.atomic(), pytest.raises(IntegrityError, match="draft check"):
        DraftCheck.objects.filter(pk=check.pk).update(findings=[])

    purge_matter(project_id=matter.pk, purged_by="test")
    assert not DraftCheck.objects.exists()


def test_a_messages_kind_never_changes(matter: Project, user: Any) -> None:
    # Given a draft turn (finalized) and an answer not finalized yet
    check = record(matter, user, first_draft())
    chat = factories.ChatFactory.create(owner=user, project=matter)
    _, pending = start_turn(chat=chat, content="A question?", author=user)

    # then neither can change kind: the trigger refuses it, whatever the message's state
    for message_id, kind in ((check.message_id, "answer"), (pending.pk, "draft")):
        with transaction.atomic(), pytest.raises(IntegrityError, match="kind"):
            Message.objects.filter(pk=message_id).update(kind=kind)


# --- The API ------------------------------------------------------------------------------------------------------


def upload(client: APIClient, matter: Project, data: bytes, name: str = "brief.txt", **fields: Any) -> Any:
    file = SimpleUploadedFile(name, data)
    return client.post(f"/api/projects/{matter.pk}/drafts/", {"file": file, **fields}, format="multipart")


def test_the_api_records_a_draft_and_reads_it_back(api_client: APIClient, matter: Project) -> None:
    # When Alice uploads a draft to her matter
    response = upload(api_client, matter, first_draft())

    # then it is checked and recorded: the JSON of issue 51 with its turn and chat, no changes the first time
    assert response.status_code == 201, response.content
    body = response.json()
    check = DraftCheck.objects.get()
    assert (body["id"], body["matter"], body["turn"], body["chat"]) == (
        str(check.pk),
        str(matter.pk),
        str(check.message_id),
        str(check.chat_id),
    )
    assert body["verdict"] == "fail"
    assert body["changes"] is None
    misquote = next(f for f in body["findings"] if f["text"] == "a lenient examination.")
    assert (misquote["kind"], misquote["status"], misquote["needs_review"]) == ("quote", "unverified", True)
    assert body["authorities"][misquote["authority"]]["cite"] == "570 U.S. 297"

    # the chat's messages say they are a draft's turn
    messages = api_client.get(f"/api/chats/{body['chat']}/messages/").json()["results"]
    assert [(m["role"], m["kind"]) for m in messages] == [("user", "draft"), ("assistant", "draft")]

    # and read back, it is the same record, from the stored check
    read = api_client.get(f"/api/drafts/{check.pk}/")
    assert read.status_code == 200
    assert read.json() == body

    # a revision is a new turn of the same chat, and says what changed
    revised = upload(api_client, matter, revised_draft())
    assert revised.status_code == 201, revised.content
    changes = revised.json()["changes"]
    assert revised.json()["chat"] == body["chat"]
    assert changes["previous"] == body["id"]
    assert [f["text"] for f in changes["fixed"]] == ["a lenient examination."]
    assert [f["text"] for f in changes["new"]] == ["strict scrutiny is a formality."]
    assert "Quoted from nowhere at all." in [f["text"] for f in changes["still_open"]]


def test_the_api_refuses_bad_files_with_field_errors_and_writes_nothing(api_client: APIClient, matter: Project) -> None:
    elsewhere = factories.ChatFactory.create()
    counted = (Chat, Message, OpinionQuote, DocumentQuote, CaseCitation, DraftCheck, CitationLedgerEntry, TurnSeal)
    before = [model.objects.count() for model in counted]

    pdf_named_docx = upload(api_client, matter, b"%PDF-1.4\n", name="brief.docx")
    wrong_kind = upload(api_client, matter, b"text", name="brief.rtf")
    no_file = api_client.post(f"/api/projects/{matter.pk}/drafts/", {}, format="multipart")
    other_chat = upload(api_client, matter, first_draft(), chat=str(elsewhere.pk))

    assert (pdf_named_docx.status_code, wrong_kind.status_code, no_file.status_code) == (400, 400, 400)
    assert "it is a PDF" in pdf_named_docx.json()["file"][0]
    assert "a draft is read from a Word document" in wrong_kind.json()["file"][0]
    assert "file" in no_file.json()
    assert (other_chat.status_code, list(other_chat.json())) == (400, ["chat"])
    assert [model.objects.count() for model in counted] == before


def test_the_api_answers_404_outside_the_matter(
    api_client: APIClient, matter: Project, other_user: Any, settings: Any
) -> None:
    # Given Alice's recorded draft, and Mallory, who is not a member of her matter
    check_id = upload(api_client, matter, first_draft()).json()["id"]
    mallory = APIClient()
    mallory.force_authenticate(user=other_user)
    before = Message.objects.count()

    # then Mallory can neither record a draft in the matter nor read the check
    assert upload(mallory, matter, first_draft()).status_code == 404
    assert mallory.get(f"/api/drafts/{check_id}/").status_code == 404
    assert Message.objects.count() == before
    # and once she is a member, she reads it
    matter.members.add(other_user)
    assert mallory.get(f"/api/drafts/{check_id}/").status_code == 200


def test_the_api_needs_csrf_with_a_session_and_counts_the_turn_rate(
    matter: Project, user: Any, other_user: Any, settings: Any
) -> None:
    # A session without its CSRF token is refused; with it, or with a bearer token, the draft is recorded
    session = APIClient(enforce_csrf_checks=True)
    session.force_login(user)
    assert upload(session, matter, first_draft()).status_code == 403
    assert not DraftCheck.objects.exists()
    session.get("/")  # the pages set the CSRF cookie
    csrf = session.cookies["csrftoken"].value
    file = SimpleUploadedFile("brief.txt", first_draft())
    with_csrf = session.post(
        f"/api/projects/{matter.pk}/drafts/", {"file": file}, format="multipart", HTTP_X_CSRFTOKEN=csrf
    )
    assert with_csrf.status_code == 201, with_csrf.content
    bearer = APIClient(HTTP_AUTHORIZATION=f"Bearer {factories.api_token(user)}")
    assert upload(bearer, matter, first_draft()).status_code == 201
    assert upload(APIClient(), matter, first_draft()).status_code == 401

    # The turn rate counts draft checks as turns
    settings.LQAI_THROTTLE_TURNS = "1/hour"
    client = APIClient()
    client.force_authenticate(user=other_user)
    matter.members.add(other_user)
    assert upload(client, matter, first_draft()).status_code == 201
    assert upload(client, matter, first_draft()).status_code == 429
    assert DraftCheck.objects.count() == 3


# --- The command ---------------------------------------------------------------------------------------------------


def test_the_command_records_the_check_and_prints_its_turn_and_page(
    matter: Project, user: Any, other_user: Any, tmp_path: Path
) -> None:
    path = tmp_path / "brief.txt"
    path.write_bytes(first_draft())
    out = io.StringIO()

    call_command("check_draft", str(path), "--matter", str(matter.pk), "--json", str(tmp_path / "f.json"), stdout=out)

    check = DraftCheck.objects.get()
    assert check.message.author_id == user.pk  # the matter's owner, by default
    assert (
        f"Recorded as turn {check.message_id} of chat {check.chat_id} (draft check {check.pk}); "
        f"trace page: /chats/{check.chat_id}/"
    ) in out.getvalue()
    written = json.loads((tmp_path / "f.json").read_text(encoding="utf-8"))
    assert (written["id"], written["turn"], written["verdict"]) == (str(check.pk), str(check.message_id), "fail")

    # a revision says what changed; --no-record writes nothing; a user outside the matter is refused
    path.write_bytes(revised_draft())
    again = io.StringIO()
    call_command("check_draft", str(path), "--matter", str(matter.pk), stdout=again)
    assert "Since the previous check: 1 fixed, 1 new, " in again.getvalue()
    before = Message.objects.count()
    call_command("check_draft", str(path), "--matter", str(matter.pk), "--no-record", stdout=io.StringIO())
    assert Message.objects.count() == before
    with pytest.raises(CommandError, match="--user mallory: no such active user is the owner or a member"):
        call_command("check_draft", str(path), "--matter", str(matter.pk), "--user", other_user.username)
    assert Message.objects.count() == before


# --- The trace page and the admin, unchanged -------------------------------------------------------------------------


def test_the_draft_turn_shows_on_its_chats_trace_page_and_in_the_admin(
    matter: Project, user: Any, other_user: Any, client: Any
) -> None:
    check = record(matter, user, first_draft())

    client.force_login(user)
    page = client.get(f"/chats/{check.chat_id}/")
    assert page.status_code == 200
    assert "Check the draft brief.txt" in page.content.decode()
    client.force_login(other_user)
    assert client.get(f"/chats/{check.chat_id}/").status_code == 404

    admin = factories.UserFactory.create(username="root", is_staff=True, is_superuser=True)
    client.force_login(admin)
    listed = client.get("/admin/drafts/draftcheck/")
    assert listed.status_code == 200
    assert "brief.txt" in listed.content.decode()
    assert client.get(f"/admin/drafts/draftcheck/{check.pk}/change/").status_code == 200
    assert client.post(f"/admin/drafts/draftcheck/{check.pk}/delete/").status_code == 403


def test_a_word_draft_keeps_its_pages_and_a_named_chat_takes_the_check(matter: Project, user: Any) -> None:
    # Given a Word draft of two pages, and a chat of the matter the caller names
    data = make_docx([f'"{SCRUTINY}." {FISHER_CASE}, 310 (2013).', "\fId. at 311."])
    chat = factories.ChatFactory.create(owner=user, project=matter, title="Motion to dismiss")

    check = record(matter, user, data, name="motion.docx", chat=chat)

    # then the check is a turn of that chat, with the draft's format and page map, its question naming them
    assert check.chat_id == chat.pk
    assert (check.format, [label for _, label in check.pages]) == ("docx", ["1", "2"])
    question = check.message.reply_to
    assert question is not None
    assert question.content.startswith("Check the draft motion.docx (docx, 2 pages, SHA-256 ")
    assert [f["page"] for f in check.findings if f["kind"] == "case_citation"] == ["1", "2"]
    # and the next check of the same file name goes to the same chat
    assert record(matter, user, data, name="motion.docx").chat_id == chat.pk


def test_the_drafts_page_shows_its_verdict_what_changed_and_its_findings(
    matter: Project, user: Any, other_user: Any, client: Any
) -> None:
    # Given a draft checked twice
    first = record(matter, user, first_draft())
    second = record(matter, user, revised_draft())
    url = f"/drafts/{second.pk}/"
    assert draft_record(second)["page"] == url

    # when its owner opens the second check's page
    client.force_login(user)
    page = client.get(url)

    # then it says the verdict, what the revision fixed, added and left open, and lists every finding
    assert page.status_code == 200
    html = page.content.decode()
    assert (
        'data-verdict="fail"><span class="verdict-symbol" aria-hidden="true">\u2717</span> <strong>Verdict: Fail'
        in html
    )
    fixed = html[html.index("<h3>Fixed (1)</h3>") : html.index("<h3>New (1)</h3>")]
    assert "a lenient examination." in fixed
    new = html[html.index("<h3>New (1)</h3>") : html.index("<h3>Still open")]
    assert "strict scrutiny is a formality." in new
    assert "Quoted from nowhere at all." in html[html.index("<h3>Still open") : html.index('class="turn draft"')]
    assert html.count('<li class="claim-card') == len(second.findings)
    assert html.count('<td class="toa-title">') == len(second.authorities)
    assert "This is the draft's first check." in client.get(f"/drafts/{first.pk}/").content.decode()
    # a non-member gets 404, and anyone signed out the login page
    client.force_login(other_user)
    assert client.get(url).status_code == 404
    client.logout()
    assert client.get(url)["Location"].startswith("/accounts/login/")


def test_a_pdf_draft_is_recorded_with_its_pages_and_its_quote_row_on_them(matter: Project, user: Any) -> None:
    # Given a PDF draft whose second page quotes Fisher
    data = make_pdf([["Introduction."], [f'The standard: "{SCRUTINY}." {FISHER_CASE} (2013).']])

    check = record(matter, user, data, name="brief.pdf")

    # then the check keeps the PDF's pages, the quotation is a verified quote row, on the draft's second page
    assert (check.format, [label for _, label in check.pages]) == ("pdf", ["1", "2"])
    quote = next(f for f in check.findings if f["kind"] == "quote")
    assert (quote["page"], quote["status"]) == ("2", "exact_match")
    row = OpinionQuote.objects.get(message=check.message)
    assert (row.verification_method, row.answer_offset_start) == ("exact_match", quote["start"])
    assert check.message.verdict == "pass"


@pytest.mark.postgres
@pytest.mark.django_db(transaction=True)
@pytest.mark.timeout(120)
def test_two_first_checks_of_one_draft_at_once_share_one_chat() -> None:
    from concurrent.futures import ThreadPoolExecutor
    from threading import Barrier

    from django.db import connections

    # Given a matter and two checks of the same new draft submitted at the same moment
    owner = factories.UserFactory.create(username="alice")
    matter = factories.ProjectFactory.create(owner=owner)
    start = Barrier(2)

    def check(_: int) -> str:
        try:
            start.wait()
            return str(record(matter, owner, first_draft()).chat_id)
        finally:
            connections.close_all()

    with ThreadPoolExecutor(max_workers=2) as pool:
        chats = list(pool.map(check, range(2)))

    # then both are turns of one chat
    assert len(set(chats)) == 1
    assert Chat.objects.filter(project=matter).count() == 1
    assert DraftCheck.objects.filter(project=matter).count() == 2
