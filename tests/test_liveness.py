"""A live run never looks stale, and its backend's thread never outlives it: the start-up check of
``LQAI_STALE_TURN_SECONDS`` against the model backend's worst-case request (chats/checks.py), progress
recorded while a single-shot run waits on its backend and before finalize, and :class:`BackendPump`
joining its thread within a bound."""

from __future__ import annotations

import datetime
import threading
import time
from collections.abc import Callable, Iterator
from typing import Any

import pytest
from django.conf import LazySettings
from django.core.management import call_command
from django.core.management.base import SystemCheckError
from django.utils import timezone

from chats.assistant import AssistantEvent, FinalAnswer, Script, ScriptedBackend, TextDelta, Turn, TurnRun
from chats.assistant import runner as runner_module
from chats.assistant.runner import BackendPump
from chats.checks import STALE_WINDOW_ERROR, check_stale_turn_window, check_turn_limits
from chats.models import Chat, Message
from chats.services import reopen_interrupted_turn, start_turn

pytestmark = pytest.mark.django_db


@pytest.fixture
def openai_settings(settings: LazySettings) -> LazySettings:
    """The OpenAI-compatible backend selected: a 60 s timeout and 2 retries (the defaults)."""
    settings.LQAI_ASSISTANT_BACKEND = "chats.assistant.OpenAICompatibleBackend"
    settings.LQAI_OPENAI_BASE_URL = "http://127.0.0.1:11434/v1"
    settings.LQAI_OPENAI_MODEL = "llama3.1:8b"
    settings.LQAI_OPENAI_TIMEOUT = 60.0
    settings.LQAI_OPENAI_MAX_RETRIES = 2
    return settings


# --- the start-up check ------------------------------------------------------------------------------------------


def test_a_stale_window_a_live_run_could_outlast_is_refused_at_start_up(openai_settings: LazySettings) -> None:
    # 3 attempts of 60 s and 2 waits of up to 120 s: 420 s a request may take
    openai_settings.LQAI_STALE_TURN_SECONDS = 120

    (error,) = check_stale_turn_window()

    assert error.id == STALE_WINDOW_ERROR
    assert "LQAI_STALE_TURN_SECONDS=120" in error.msg
    assert "420 s" in error.msg
    assert "above 560" in str(error.hint)
    with pytest.raises(SystemCheckError, match=r"chats\.E001"):
        call_command("check")


def test_the_default_stale_window_fits_the_default_model_backend(openai_settings: LazySettings) -> None:
    from django.conf import settings as django_settings

    assert django_settings.LQAI_STALE_TURN_SECONDS == 600
    assert check_stale_turn_window() == []


def test_a_shorter_timeout_and_fewer_retries_allow_a_shorter_window(openai_settings: LazySettings) -> None:
    openai_settings.LQAI_OPENAI_TIMEOUT = 20.0
    openai_settings.LQAI_OPENAI_MAX_RETRIES = 0
    openai_settings.LQAI_STALE_TURN_SECONDS = 30

    assert check_stale_turn_window() == []
    openai_settings.LQAI_STALE_TURN_SECONDS = 26
    assert [e.id for e in check_stale_turn_window()] == [STALE_WINDOW_ERROR]


def test_a_backend_that_waits_on_nothing_needs_no_window(settings: LazySettings) -> None:
    settings.LQAI_ASSISTANT_BACKEND = "chats.assistant.ExtractiveBackend"
    settings.LQAI_STALE_TURN_SECONDS = 1

    assert check_stale_turn_window() == []


# --- progress while a single-shot run waits ----------------------------------------------------------------------


def _stale() -> Any:
    return timezone.now() - datetime.timedelta(days=1)


class WaitingBackend:
    """Waits on its "model" without an event (calling ``turn.progress`` as a model backend does at each attempt of
    a request), and meanwhile a resume is tried; then answers."""

    resume_results: list[bool] = []

    def respond(self, turn: Turn) -> Iterator[AssistantEvent]:
        message = Message.objects.get(chat=turn.chat, role=Message.Role.ASSISTANT)
        Message.objects.filter(pk=message.pk).update(updated_at=_stale())  # as if it had waited a long time
        turn.progress()  # the next attempt of the request
        WaitingBackend.resume_results.append(reopen_interrupted_turn(message=message))
        yield TextDelta("Answered.")
        yield FinalAnswer()


def test_a_single_shot_run_waiting_on_its_backend_records_progress_so_a_resume_cannot_take_it_over(
    matter_chat: Chat, settings: LazySettings
) -> None:
    WaitingBackend.resume_results = []
    _, message = start_turn(chat=matter_chat, content="q")

    result = TurnRun(message=message, backend=WaitingBackend(), tools={}).run_to_end()

    assert WaitingBackend.resume_results == [False]
    assert (result.message.status, result.message.content) == (Message.Status.COMPLETE, "Answered.")


def test_finalize_records_progress_before_it_starts(
    matter_chat: Chat, monkeypatch: pytest.MonkeyPatch, scripted_backend: Callable[..., Script]
) -> None:
    # Given a run whose last progress is old when its finalize starts (e.g. after a long last event)
    scripted_backend(TextDelta("Answered."), FinalAnswer())
    _, message = start_turn(chat=matter_chat, content="q")
    real = runner_module.finalize_turn
    seen: list[Any] = []

    def finalize(**kwargs: Any) -> Any:
        seen.append(Message.objects.get(pk=message.pk).updated_at)
        return real(**kwargs)

    monkeypatch.setattr(runner_module, "finalize_turn", finalize)
    run = TurnRun(message=message, backend=ScriptedBackend(), tools={})
    Message.objects.filter(pk=message.pk).update(updated_at=_stale())
    started = timezone.now()

    run.run_to_end()

    # Then finalize began with fresh progress: a resume during a slow finalize finds it live
    assert seen
    assert seen[0] >= started


# --- the backend's thread ends with the run --------------------------------------------------------------------


def _blocking(release: threading.Event) -> Iterator[object]:
    yield "first"
    release.wait(timeout=10)
    yield "second"


def test_the_pump_cancels_its_backend_and_joins_its_thread() -> None:
    release = threading.Event()
    pump = BackendPump(_blocking(release), cancel=release.set)
    assert pump.next_within(5) == "first"

    started = time.monotonic()
    ended = pump.close(join_seconds=5)

    assert ended
    assert time.monotonic() - started < 2
    assert not pump.thread.is_alive()


def test_a_backend_that_cannot_be_cancelled_is_waited_for_at_most_the_bound(
    caplog: pytest.LogCaptureFixture,
) -> None:
    release = threading.Event()
    pump = BackendPump(_blocking(release))
    assert pump.next_within(5) == "first"

    started = time.monotonic()
    ended = pump.close(join_seconds=0.2)
    waited = time.monotonic() - started
    release.set()
    pump.thread.join(timeout=5)

    assert not ended
    assert 0.2 <= waited < 2
    assert "did not stop within 0.2 s" in caplog.text


@pytest.mark.parametrize(
    ("name", "value"),
    [("LQAI_HISTORY_MAX_CHARS", 0), ("LQAI_MAX_ANSWER_CHARS", -5), ("LQAI_BACKEND_STOP_SECONDS", 0)],
)
def test_a_turn_limit_that_leaves_no_room_is_refused_at_start_up(settings: LazySettings, name: str, value: int) -> None:
    setattr(settings, name, value)

    (error,) = check_turn_limits()

    assert error.id == "chats.E002"
    assert f"{name}={value}" in error.msg


def test_the_default_turn_limits_pass() -> None:
    assert check_turn_limits() == []
