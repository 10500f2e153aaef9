"""``manage.py demo`` runs end to end, through the real API, signal and backfill, and can run twice."""

from __future__ import annotations

import io
import json
import zipfile
from html import escape as html_escape
from pathlib import Path

import pytest
from django.conf import LazySettings
from django.contrib.auth.models import User
from django.core.management import call_command
from django.core.management.base import CommandError
from django.db.models import ProtectedError
from django.test import Client
from rest_framework.test import APIClient

from chats.models import (
    CaseCitation,
    CaselawOpinion,
    Chat,
    Document,
    DocumentQuote,
    Message,
    MessageToolSource,
    OpinionQuote,
    Project,
    StatuteCitation,
)
from chats.serializers import quote_pin_cite
from citations import keys
from citations.models import CitationLedgerEntry, MatterPurge
from demo import seed as demo_seed
from lqai_verify import record
from lqai_verify.verification.page_cites import cited_with_pin


@pytest.fixture(autouse=True)
def _exports_in_tmp(settings: LazySettings, tmp_path: Path) -> Path:
    """The demo writes its matter's export in ``VAR_DIR``: here, a test's own directory."""
    settings.VAR_DIR = tmp_path
    return tmp_path


def _run_demo() -> str:
    out = io.StringIO()
    call_command("demo", stdout=out)
    return out.getvalue()


def _entries_match_rows() -> None:
    """Every source row of the demo matter has exactly one ledger entry."""
    project = Project.objects.get(name="Election law research (demo)")
    messages = Message.objects.filter(chat__project=project)
    rows = (
        DocumentQuote.objects.filter(message__in=messages).count()
        + OpinionQuote.objects.filter(message__in=messages).count()
        + MessageToolSource.objects.filter(message__in=messages).count()
        + CaseCitation.objects.filter(message__in=messages).count()
        + StatuteCitation.objects.filter(message__in=messages).count()
    )
    assert rows > 0
    assert CitationLedgerEntry.objects.filter(project=project).count() == rows


def _the_altered_turn_reads_review_and_its_report_spells_out_omissions(export: Path) -> None:
    """The demo's turn whose only claim is altered reads ``review`` on its page (amber, its claim counted, no
    green banner), and the signed report of the demo's export spells out what each ellipsis omits and
    locates each quote by its page, never by character offsets, where the source has pages."""
    altered = Message.objects.get(role=Message.Role.ASSISTANT, reply_to__content__startswith="When is there a vacancy")
    assert altered.verdict == "review"
    client = Client()
    client.force_login(User.objects.get(username="demo"))
    html = client.get(f"/chats/{altered.chat_id}/").content.decode()
    banner = html[html.index(f'id="turn-{altered.pk}"') :]
    banner = banner[banner.index('<div class="verdict') : banner.index("</div>", banner.index('<div class="verdict'))]
    assert 'data-verdict="review"' in banner
    assert "tone-review" in banner
    assert "tone-ok" not in banner
    assert "\u2713" not in banner
    assert "1 claim to review" in banner

    with zipfile.ZipFile(export) as bundle:
        report = bundle.read("report.html").decode()
        rows = [json.loads(line) for line in bundle.read("rows.jsonl").decode().splitlines()]
        passages = {p["row"]: p for p in map(json.loads, bundle.read("passages.jsonl").decode().splitlines())}
    ellipses = [a for row in rows for a in row.get("alterations") or [] if a["kind"] == "ellipsis"]
    assert ellipses
    omitted = [
        passages[key]["excerpt"][
            a["source_start"] - passages[key]["excerpt_start"] : a["source_end"] - passages[key]["excerpt_start"]
        ]
        for row in rows
        if (key := record.row_key(row)) in passages
        for a in row.get("alterations") or []
        if a["kind"] == "ellipsis"
    ]
    assert "only if the candidate is legally qualified for the office" in " ".join(omitted)
    for words in omitted:
        assert f"omits \u201c{html_escape(words)}\u201d" in report
    # (a statute quote's passage is its section's text: it names the section and release, not pages)
    rows = [row for row in rows if row["table"] in record.QUOTE_TABLES]
    paged = [row for row in rows if record.row_key(row) in passages and passages[record.row_key(row)]["pin_cite"]]
    assert paged
    for row in paged:
        passage = passages[record.row_key(row)]
        # a case's pin after the first page of its citation ("590 F. Supp. 3d 850, 857 (M.D.N.C. 2022)")
        assert html_escape(cited_with_pin(passage["source_title"], passage["pin_cite"])) in report
        assert f"{row['offset_start']}\u2013{row['offset_end']}" not in report
    unpaged = [row for row in rows if record.row_key(row) in passages and not passages[record.row_key(row)]["pin_cite"]]
    assert all(
        f"characters {row['offset_start']}\u2013{row['offset_end']} (no page of the source is known)" in report
        for row in unpaged
    )
    assert "(no question recorded)" not in report


# transaction=True: every turn commits for real, as in production.
@pytest.mark.django_db(transaction=True)
def test_the_demo_runs_twice_without_duplicating_anything(settings: LazySettings, tmp_path: Path) -> None:
    settings.DEBUG = True
    first = _run_demo()

    assert "Turn: single-shot" in first
    assert "Turn: streamed, caselaw tool" in first
    assert "Turn: streamed, a statute looked up" in first
    assert (
        "statute      provenance              -           OLRC      statute_lookup: 9 U.S.C. § 2 (Online@117-80)"
        in first
    )
    # the answer's statute citation and its quote, checked against the loaded title, on the record
    assert "statute      statute_quote_verified  1.000       -         quote: 9 U.S.C. § 2 (Online@117-80)" in first
    assert "statute      statute_verified        -           -         citation: 9 U.S.C. § 2 (Online@117-80)" in first
    assert (
        '- 9 U.S.C. § 2 ("A written provision in any maritime transaction'
        in Message.objects.get(role=Message.Role.ASSISTANT, reply_to__content__contains="9 U.S.C. § 2").content
    )
    assert "Turn: streamed, disconnected (interrupted), then resumed" in first
    assert "backfill_ledger: created 9 entries (kb_document=3 caselaw=3 mcp=3 statute=0) for 3 messages" in first
    assert "tolerant_match" in first
    assert "provenance" in first
    assert "verdict=pass" in first
    # The answer citing a real case under a wrong name: the mismatch is shown and the turn fails the gate
    assert "Turn: single-shot, a scripted answer citing a real case under a wrong name" in first
    assert (
        "case citation '570 U.S. 297' written as 'Grutter v. Bollinger': name_mismatch (the answer names "
        "'Grutter v. Bollinger', but 570 U.S. 297 is 'Fisher v. University of Texas at Austin')"
    ) in first
    assert "verdict=fail" in first
    assert "name_mismatch  -           local     cited: Grutter v. Bollinger, 570 U.S. 297" in first
    # A quote of an opinion that carries its reporter's pages, with a pin cite on the quoted page: it passes,
    # cited as a court cites it, never by a count of form feeds
    assert "Turn: single-shot, a scripted answer quoting an opinion with a pin cite" in first
    pinned = Message.objects.get(role=Message.Role.ASSISTANT, reply_to__content=demo_seed.PIN_CITE_QUESTION)
    assert pinned.verdict == "pass"
    assert [(c.pin, c.pin_status) for c in pinned.case_citations.all()] == [("870", "within")]
    assert [quote_pin_cite(q) for q in pinned.caselaw_citations.all()] == ["590 F. Supp. 3d at 870"]
    # A quote that drops its limiting "only if ...": altered, with the omitted text, and the turn to review
    assert "Turn: single-shot, a scripted answer whose quote drops a limiting clause" in first
    assert (
        "altered quote 'a vacancy in the nomination can occur . . . .': '....' omits 'only if the candidate is "
        "legally qualified for the office.' (a trailing omission drops a limiting continuation)"
    ) in first
    assert "verdict=review" in first
    _entries_match_rows()
    _the_altered_turn_reads_review_and_its_report_spells_out_omissions(tmp_path / "demo-matter.zip")
    # ... and the address of the demo chat's trace page, to read it in a browser
    api_chat = Chat.objects.get(title="Demo: ballots and candidates")
    assert f"  http://127.0.0.1:8000/chats/{api_chat.pk}/\n" in first
    turns = Message.objects.filter(role=Message.Role.ASSISTANT, chat__project__name__contains="demo")
    assert set(turns.values_list("status", flat=True)) == {Message.Status.COMPLETE}
    # The record proves itself: the older turns sealed late, the chain intact, the export verified offline
    # (the older turns' quotes were stored before passage digests: re-verified, each with its warning).
    assert "seal_turns: sealed 3 turn(s) late; 0 unsealed" in first
    assert "verify_ledger: intact: 11 seals in 1 chain(s), 10 turns" in first
    assert "export_matter: " in first
    assert "10 turns (0 unsealed, 3 sealed late)" in first
    assert "lqai_verify: OK: matter " in first
    assert "DEVELOPMENT key" not in first  # the tests sign with a key of their own
    assert first.count("no passage digest was recorded") == 2  # the first two of the six quotes' warnings
    assert "... and 4 more warning(s)" in first
    export = tmp_path / "demo-matter.zip"
    assert (
        "a recipient runs, after `pip install ./lqai_verify`: "
        f"python -m lqai_verify {export} --public-key {keys.current_fingerprint()}"
    ) in first

    second = _run_demo()

    assert "replaced the previous run's demo chats" in second
    assert User.objects.filter(username="demo").count() == 1
    assert Project.objects.filter(name="Election law research (demo)").count() == 1
    assert Document.objects.count() == 2
    assert CaselawOpinion.objects.count() == 3
    assert Chat.objects.count() == 2  # this run's API chat and its older-turns chat
    _entries_match_rows()
    # The output is the same but for ids and times.
    assert second.count("\n") == first.count("\n") + 1  # the "replaced" line only in the second
    # The previous run's matter went through the purge, which left its tombstone
    assert MatterPurge.objects.filter(project_name="Election law research (demo)", purged_by="demo").count() == 1

    # Deleting the demo user removes no matter, chat, message or ledger entry: it is refused (deactivate instead)
    record = (
        Project.objects.count(),
        Chat.objects.count(),
        Message.objects.count(),
        CitationLedgerEntry.objects.count(),
    )
    with pytest.raises(ProtectedError):
        User.objects.get(username="demo").delete()
    assert (
        Project.objects.count(),
        Chat.objects.count(),
        Message.objects.count(),
        CitationLedgerEntry.objects.count(),
    ) == record
    assert record[3] > 0


def test_the_demo_refuses_to_run_without_debug_and_creates_nothing(settings: LazySettings, db: None) -> None:
    settings.DEBUG = False

    with pytest.raises(CommandError, match="runs only with DEBUG on"):
        call_command("demo", stdout=io.StringIO())

    assert not User.objects.exists()
    assert not Project.objects.exists()


def test_serve_info_prints_the_admin_url_and_login(db: None) -> None:
    out = io.StringIO()
    call_command("serve_info", stdout=out)
    assert "http://127.0.0.1:8000/admin/" in out.getvalue()
    assert "run `make demo` first" in out.getvalue()
    User.objects.create_user("demo", password="x")
    out = io.StringIO()
    call_command("serve_info", "--base-url", "http://localhost:9000/", stdout=out)
    assert "http://localhost:9000/admin/" in out.getvalue()
    assert "demo / demo-password" in out.getvalue()


@pytest.mark.django_db(transaction=True)
def test_the_demo_prints_a_working_token_and_a_curl_line(settings: LazySettings) -> None:
    settings.DEBUG = True
    out = _run_demo()

    [token_line] = [line for line in out.splitlines() if "API token" in line]
    token = token_line.rsplit(" ", 1)[1]
    assert f'curl -H "Authorization: Bearer {token}" http://127.0.0.1:8000/api/projects/' in out
    client = APIClient()
    client.credentials(HTTP_AUTHORIZATION=f"Bearer {token}")
    assert [p["name"] for p in client.get("/api/projects/").json()["results"]] == ["Election law research (demo)"]


@pytest.mark.django_db(transaction=True)
def test_a_rerun_keeps_a_demo_matter_where_chats_were_made_by_hand(settings: LazySettings) -> None:
    settings.DEBUG = True
    _run_demo()
    demo_user = User.objects.get(username="demo")
    project = Project.objects.get(name="Election law research (demo)")
    # Given a chat a person made in the demo matter, with a question
    by_hand = Chat.objects.create(project=project, owner=demo_user, title="My own research")
    Message.objects.create(chat=by_hand, role=Message.Role.USER, content="my question")

    second = _run_demo()

    # Then that chat and its matter are kept whole (renamed), and the demo seeded a fresh matter
    assert Chat.objects.filter(pk=by_hand.pk, project=project).exists()
    assert by_hand.messages.count() == 1
    kept = Project.objects.get(pk=project.pk)
    assert kept.name.startswith("Election law research (demo), kept ")
    assert kept.chats.count() == 3
    fresh = Project.objects.get(name="Election law research (demo)")
    assert fresh.pk != project.pk
    assert fresh.chats.count() == 2
    assert "Demo done" in second


@pytest.mark.django_db(transaction=True)
def test_a_turn_asked_by_hand_in_a_demo_chat_survives_two_reruns(settings: LazySettings) -> None:
    settings.DEBUG = True
    _run_demo()
    demo_user = User.objects.get(username="demo")
    project = Project.objects.get(name="Election law research (demo)")
    demo_chat = Chat.objects.get(project=project, title="Demo: ballots and candidates")
    demo_messages = demo_chat.messages.count()
    # Given a question asked by hand in the demo's own chat, through the API, as the README's tour invites
    client = APIClient()
    client.force_authenticate(demo_user)
    asked = client.post(
        f"/api/chats/{demo_chat.pk}/messages/", {"content": "Who certifies write-in candidates?"}, format="json"
    )
    assert asked.status_code == 201, asked.content
    by_hand = set(demo_chat.messages.values_list("pk", flat=True))
    assert len(by_hand) == demo_messages + 2  # the question and its answer

    second = _run_demo()
    third = _run_demo()

    # Then the turn, its chat and its matter are all still there, whole, under a name that says why
    kept = Project.objects.get(pk=project.pk)
    assert kept.name.startswith("Election law research (demo), kept ")
    assert set(Chat.objects.get(pk=demo_chat.pk).messages.values_list("pk", flat=True)) == by_hand
    assert Chat.objects.get(pk=demo_chat.pk).project_id == project.pk
    assert kept.chats.count() == 2
    # ... the first rerun said what it kept, where, and where its fresh demo went
    assert f"kept the previous demo matter {project.pk} whole" in second
    assert "chat Demo: ballots and candidates: 2 message(s): " in second
    assert f"/chats/{demo_chat.pk}/" in second
    fresh = MatterPurge.objects.get().project_id  # the second rerun purged the first rerun's matter, all the demo's
    assert f"this run's demo is in a fresh matter, Election law research (demo) ({fresh})" in second
    assert f"matter {fresh} purged with its 2 chats" in third
    assert "kept the previous demo matter" not in third
    # ... and the third run's demo matter is one of its own
    assert Project.objects.filter(name="Election law research (demo)").count() == 1
    assert Project.objects.count() == 2


@pytest.mark.django_db(transaction=True)
def test_a_run_that_stops_half_way_is_replaced_by_the_next_not_kept(
    settings: LazySettings, monkeypatch: pytest.MonkeyPatch
) -> None:
    settings.DEBUG = True
    # Given a run that stops after its turns through the API (an error, ^C, a closed pipe)
    monkeypatch.setattr(demo_seed, "create_turns_without_ledger", _stops)
    with pytest.raises(RuntimeError, match="stopped"):
        _run_demo()
    stopped = Project.objects.get(name="Election law research (demo)")
    assert stopped.chats.count() == 1
    monkeypatch.undo()

    again = _run_demo()

    # Then what it made is known as the demo's: its matter is purged, not kept as if someone's work
    assert MatterPurge.objects.get().project_id == stopped.pk
    assert "kept the previous demo matter" not in again
    assert Project.objects.get().name == "Election law research (demo)"


def _stops(matter: demo_seed.DemoMatter, *, count: int = 3) -> Chat:
    raise RuntimeError("stopped")
