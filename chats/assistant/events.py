"""What an assistant backend sees and says during one turn, as small frozen dataclasses.

A backend receives a :class:`Turn` (the chat, its history, the tools it may call and, on a
resume, the partial answer already given) and yields :data:`AssistantEvent` values: text deltas,
tool calls and their results, and one :class:`FinalAnswer` carrying the quotes it claims.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from chats.services import ClaimedCitation, ConsultedSource, TurnUsage

if TYPE_CHECKING:
    from chats.models import Chat
    from chats.tools import Tool


@dataclass(frozen=True, slots=True)
class HistoryEntry:
    """One earlier message of the chat, as the backend sees it."""

    role: str
    content: str


@dataclass(frozen=True, slots=True)
class Turn:
    """The input of one backend run."""

    chat: Chat
    history: tuple[HistoryEntry, ...]
    tools: Mapping[str, Tool] = field(default_factory=dict)
    # On a resume: the content already produced; the backend continues after it.
    partial: str = ""
    # Tells the run that it is alive: a backend calls it while it waits (e.g. at each attempt of a request).
    progress: Callable[[], None] = field(default=lambda: None, compare=False, repr=False)

    @property
    def question(self) -> str:
        """What this turn answers: the last user message of ``history``, which the runner ends with
        the turn's own question (``Message.reply_to``), never with a later one."""
        for entry in reversed(self.history):
            if entry.role == "user":
                return entry.content
        return ""


@dataclass(frozen=True, slots=True)
class TextDelta:
    """A piece of the answer's text, in order."""

    text: str


@dataclass(frozen=True, slots=True)
class ToolCall:
    """The backend calls a tool (``call_id`` pairs it with its :class:`ToolResult`)."""

    call_id: str
    tool: str
    arguments: Mapping[str, Any]


@dataclass(frozen=True, slots=True)
class ToolResult:
    """What a tool returned: a JSON-able payload, and the sources it consulted (provenance)."""

    call_id: str
    tool: str
    payload: Mapping[str, Any]
    sources: tuple[ConsultedSource, ...] = ()


@dataclass(frozen=True, slots=True)
class FinalAnswer:
    """The end of the answer: the quotes it claims, each naming the source it claims to quote, and
    (a model-backed backend) what the model spent on the turn."""

    citations: tuple[ClaimedCitation, ...] = ()
    usage: TurnUsage | None = None


AssistantEvent = TextDelta | ToolCall | ToolResult | FinalAnswer

# Code points a stored text cannot hold: NUL (PostgreSQL refuses it) and lone surrogates (not encodable).
_UNSTORABLE = re.compile("[\x00\ud800-\udfff]")


def clean_text(text: str) -> str:
    """``text`` as it can be stored and sent: NUL dropped, each lone surrogate replaced by U+FFFD. The runner
    passes everything a backend yields through it; a backend applies it to what it acts on itself (a
    model's tool arguments)."""
    if not _UNSTORABLE.search(text):
        return text
    return _UNSTORABLE.sub(lambda m: "" if m.group() == "\x00" else "\ufffd", text)


def clean_json(value: Any) -> Any:
    """A JSON-able value with every string in it (keys too) passed through :func:`clean_text`."""
    if isinstance(value, str):
        return clean_text(value)
    if isinstance(value, Mapping):
        return {clean_text(str(key)): clean_json(item) for key, item in value.items()}
    if isinstance(value, list | tuple):
        return [clean_json(item) for item in value]
    return value
