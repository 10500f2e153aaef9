"""The assistant backend interface, how the configured one is loaded, and the scripted backend for tests."""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from contextvars import ContextVar
from dataclasses import dataclass, field
from typing import Protocol

from django.conf import settings
from django.utils.module_loading import import_string

from chats.assistant.events import AssistantEvent, Turn


class AssistantBackend(Protocol):
    """Answers one turn: yields text deltas, tool calls and results, then a :class:`FinalAnswer`.

    Tools are called by the backend itself (``turn.tools[name].run(arguments)``), which reports
    each call and its result as events. An exception ends the turn as ``failed``, except
    :class:`BackendInterrupted`, which ends it as ``interrupted`` (resumable). A backend that fails
    after claiming quotes may yield its :class:`FinalAnswer` first: the claims are verified and kept.
    """

    def respond(self, turn: Turn) -> Iterator[AssistantEvent]: ...


class BackendError(Exception):
    """A failure the backend can explain: its message is added to the ``error`` event the user sees,
    so it must name the cause (e.g. the model server's status) and nothing secret. The turn ends ``failed``."""


class BackendInterrupted(Exception):
    """The answer was cut off mid-way (e.g. the model's stream ended before the model finished):
    the turn ends ``interrupted`` with what was produced, and can be resumed."""


def load_backend() -> AssistantBackend:
    """An instance of the class named by ``settings.LQAI_ASSISTANT_BACKEND``."""
    backend_class = import_string(settings.LQAI_ASSISTANT_BACKEND)
    backend: AssistantBackend = backend_class()
    return backend


ScriptStep = AssistantEvent | BaseException
"""An event to replay, or an exception to raise at that point."""


@dataclass(slots=True)
class Script:
    """What :class:`ScriptedBackend` replays, and the turns it was given (for assertions)."""

    steps: Sequence[ScriptStep]
    turns: list[Turn] = field(default_factory=list)


_script: ContextVar[Script | None] = ContextVar("chats_assistant_script", default=None)


class ScriptedBackend:
    """Replays the events of the current :class:`Script` verbatim, whatever the turn: tests use it
    to produce any mix of deltas, tool results, and verified, tolerant, unverified or malformed
    claims, and backend failures (an exception instance in the script is raised there)."""

    def respond(self, turn: Turn) -> Iterator[AssistantEvent]:
        script = _script.get()
        if script is None:
            raise RuntimeError("ScriptedBackend has no script: use ScriptedBackend.scripted(...)")
        script.turns.append(turn)
        for step in script.steps:
            if isinstance(step, BaseException):
                raise step
            yield step

    @staticmethod
    @contextmanager
    def scripted(*steps: ScriptStep) -> Iterator[Script]:
        """Replay ``steps`` for every turn answered inside the block."""
        script = Script(steps=steps)
        token = _script.set(script)
        try:
            yield script
        finally:
            _script.reset(token)

    @staticmethod
    def set_script(*steps: ScriptStep) -> Script:
        """Replace the current script (inside a :meth:`scripted` block), e.g. between a turn and its resume."""
        script = Script(steps=steps)
        _script.set(script)
        return script
