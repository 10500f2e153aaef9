"""``manage.py demo`` runs end to end, through the real API, signal and backfill, and can run twice."""

from __future__ import annotations

import io

import pytest
from django.conf import LazySettings
from django.contrib.auth.models import User
from django.core.management import call_command
from django.core.management.base import CommandError

from chats.models import (
    CaselawOpinion,
    Chat,
    Document,
    Message,
    MessageCaseCitation,
    MessageCaselawCitation,
    MessageCitation,
    MessageToolSource,
    Project,
)
from citations.models import CitationLedgerEntry


def _run_demo() -> str:
    out = io.StringIO()
    call_command("demo", stdout=out)
    return out.getvalue()


def _entries_match_rows() -> None:
    """Every source row of the demo matter has exactly one ledger entry."""
    project = Project.objects.get(name="Election law research (demo)")
    messages = Message.objects.filter(chat__project=project)
    rows = (
        MessageCitation.objects.filter(message__in=messages).count()
        + MessageCaselawCitation.objects.filter(message__in=messages).count()
        + MessageToolSource.objects.filter(message__in=messages).count()
        + MessageCaseCitation.objects.filter(message__in=messages).count()
    )
    assert rows > 0
    assert CitationLedgerEntry.objects.filter(project=project).count() == rows


# transaction=True: every turn commits for real, as in production.
@pytest.mark.django_db(transaction=True)
def test_the_demo_runs_twice_without_duplicating_anything(settings: LazySettings) -> None:
    settings.DEBUG = True
    first = _run_demo()

    assert "Turn: single-shot" in first
    assert "Turn: streamed, caselaw tool" in first
    assert "Turn: streamed, disconnected (interrupted), then resumed" in first
    assert "backfill_ledger: created 9 entries (kb_document=3 caselaw=3 mcp=3) for 3 messages" in first
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
    _entries_match_rows()
    # ... and the address of the demo chat's trace page, to read it in a browser
    api_chat = Chat.objects.get(title="Demo: ballots and candidates")
    assert f"  http://127.0.0.1:8000/chats/{api_chat.pk}/\n" in first
    turns = Message.objects.filter(role=Message.Role.ASSISTANT, chat__project__name__contains="demo")
    assert set(turns.values_list("status", flat=True)) == {Message.Status.COMPLETE}

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
