"""``manage.py end_stopped_turns``: a turn whose run died (its worker was killed, or not even a ``failed`` turn
could be written) no longer stays ``pending`` or ``streaming`` until someone resumes it; it is ended
``interrupted``, finalized like any turn (sealed, with its ledger entries), and can still be resumed. The dead
run, if it comes back, writes nothing."""

from __future__ import annotations

import datetime
import threading
from collections.abc import Callable
from io import StringIO
from typing import Any

import pytest
from django.conf import settings as django_settings
from django.contrib.auth.models import User
from django.core.management import CommandError, call_command
from django.utils import timezone
from rest_framework.test import APIClient

from chats import services
from chats.assistant import FinalAnswer, Script, TextDelta
from chats.models import Chat, Message
from chats.services import FinalizedTurn, TurnSuperseded, end_stopped_turn, finalize_turn, reopen_interrupted_turn
from citations.models import TurnSeal
from tests import factories
from tests.test_finalize_once import in_thread, joined
from tests.test_streaming import resume, sse_events


def _stale() -> datetime.datetime:
    return timezone.now() - datetime.timedelta(seconds=django_settings.LQAI_STALE_TURN_SECONDS + 1)


def _stopped(chat: Chat, user: User, *, status: str = Message.Status.STREAMING) -> Message:
    """An answer whose run died: unfinished, its last progress older than LQAI_STALE_TURN_SECONDS, the first
    run's claim (attempt 1) as ``start_turn`` makes it."""
    question = factories.UserMessageFactory.create(chat=chat, content="strict scrutiny?")
    return factories.MessageFactory.create(
        chat=chat,
        author=user,
        reply_to=question,
        content="",
        status=status,
        finalized_at=None,
        updated_at=_stale(),
        attempt=1,
    )


def _end(*args: str) -> str:
    out = StringIO()
    call_command("end_stopped_turns", *args, stdout=out)
    return out.getvalue()


@pytest.mark.parametrize("stuck_status", [Message.Status.STREAMING, Message.Status.PENDING])
def test_a_stopped_turn_is_ended_interrupted_sealed_and_can_still_be_resumed(
    api_client: APIClient, matter_chat: Chat, user: User, stuck_status: str, scripted_backend: Callable[..., Script]
) -> None:
    stuck = _stopped(matter_chat, user, status=stuck_status)

    out = _end()

    assert "ended 1 turn(s) as interrupted" in out
    stuck.refresh_from_db()
    assert stuck.status == Message.Status.INTERRUPTED
    assert stuck.finalized_at is not None
    assert stuck.attempt == 2  # taken from the dead run
    assert TurnSeal.objects.filter(message=stuck).count() == 1

    # Then: a resume answers it, as any interrupted turn.
    scripted_backend(TextDelta("Answer."), FinalAnswer())
    events = list(sse_events(resume(api_client, matter_chat, stuck.pk).streaming_content))
    assert events[-1][0] == "done"
    stuck.refresh_from_db()
    assert (stuck.status, stuck.content) == (Message.Status.COMPLETE, "Answer.")
    assert TurnSeal.objects.filter(message=stuck).count() == 2


def test_live_and_finished_turns_are_left_alone(matter_chat: Chat, user: User) -> None:
    live = factories.MessageFactory.create(
        chat=matter_chat, author=user, content="", status=Message.Status.STREAMING, finalized_at=None
    )
    done = factories.MessageFactory.create(chat=matter_chat, author=user, content="Done.")
    before = {m.pk: (m.status, m.attempt, m.updated_at) for m in Message.objects.filter(pk__in=[live.pk, done.pk])}

    assert "ended 0 turn(s)" in _end()

    after = {m.pk: (m.status, m.attempt, m.updated_at) for m in Message.objects.filter(pk__in=[live.pk, done.pk])}
    assert after == before
    assert not TurnSeal.objects.filter(message__in=[live, done]).exists()


def test_the_dead_run_coming_back_writes_nothing(matter_chat: Chat, user: User) -> None:
    stuck = _stopped(matter_chat, user)
    as_the_dead_run_holds_it = Message.objects.get(pk=stuck.pk)

    _end()

    with pytest.raises(TurnSuperseded):
        finalize_turn(
            message=as_the_dead_run_holds_it, content="A late answer.", status=Message.Status.COMPLETE, attempt=1
        )
    stuck.refresh_from_db()
    assert (stuck.status, stuck.content) == (Message.Status.INTERRUPTED, "")


def test_a_turn_resumed_first_is_not_ended(matter_chat: Chat, user: User) -> None:
    stuck = _stopped(matter_chat, user)
    assert reopen_interrupted_turn(message=Message.objects.get(pk=stuck.pk))

    assert end_stopped_turn(message=Message.objects.get(pk=stuck.pk)) is None

    stuck.refresh_from_db()
    assert (stuck.status, stuck.attempt, stuck.finalized_at) == (Message.Status.STREAMING, 2, None)


def test_dry_run_counts_and_writes_nothing(matter_chat: Chat, user: User) -> None:
    stuck = _stopped(matter_chat, user)

    assert "would end 1 stopped turn(s)" in _end("--dry-run")

    stuck.refresh_from_db()
    assert (stuck.status, stuck.attempt, stuck.finalized_at) == (Message.Status.STREAMING, 1, None)


def test_every_batch_is_read_and_each_turn_ended_once(matter_chat: Chat, user: User) -> None:
    stuck = [_stopped(matter_chat, user) for _ in range(5)]

    assert "ended 5 turn(s)" in _end("--batch-size", "2")

    assert set(Message.objects.filter(pk__in=[m.pk for m in stuck]).values_list("status", "attempt")) == {
        (Message.Status.INTERRUPTED, 2)
    }
    assert TurnSeal.objects.filter(message__in=stuck).count() == 5


def test_a_turn_whose_finalize_fails_is_named_and_the_others_are_ended(
    matter_chat: Chat, user: User, monkeypatch: pytest.MonkeyPatch
) -> None:
    broken, fine = _stopped(matter_chat, user), _stopped(matter_chat, user)
    finalize = services.finalize_turn

    def failing_for_broken(*, message: Message, **kwargs: Any) -> Any:
        if message.pk == broken.pk:
            raise RuntimeError("the database went away")
        return finalize(message=message, **kwargs)

    monkeypatch.setattr(services, "finalize_turn", failing_for_broken)

    with pytest.raises(CommandError, match=f"1 stopped turn.*{broken.pk}"):
        _end()

    assert Message.objects.get(pk=fine.pk).status == Message.Status.INTERRUPTED
    broken.refresh_from_db()
    assert (broken.status, broken.finalized_at) == (Message.Status.STREAMING, None)  # for the next run


def test_a_batch_size_below_one_is_refused() -> None:
    with pytest.raises(CommandError, match="--batch-size must be at least 1"):
        call_command("end_stopped_turns", "--batch-size", "0")


@pytest.mark.postgres
@pytest.mark.django_db(transaction=True)
def test_of_concurrent_enders_exactly_one_ends_the_turn(
    committed_matter_chat: tuple[APIClient, Chat],
) -> None:
    """Two cron runs overlapping, or one beside a resume: the claim is one conditional update."""
    _, chat = committed_matter_chat
    stuck = _stopped(chat, chat.owner)
    barrier = threading.Barrier(6, timeout=20)

    def end() -> FinalizedTurn | None:
        barrier.wait()
        return end_stopped_turn(message=Message.objects.get(pk=stuck.pk))

    enders = [in_thread(end) for _ in range(6)]
    for thread, _ in enders:
        joined(thread, 30)

    assert [outcome.get("error") for _, outcome in enders] == [None] * 6
    assert sum(isinstance(outcome["result"], FinalizedTurn) for _, outcome in enders) == 1
    stuck.refresh_from_db()
    assert (stuck.status, stuck.attempt) == (Message.Status.INTERRUPTED, 2)
    assert TurnSeal.objects.filter(message=stuck).count() == 1
