"""Assistant backends: the interface, the default extractive backend, the scripted one for tests,
the events they yield and the turn runner that ends every turn in ``finalize_turn``.

``settings.LQAI_ASSISTANT_BACKEND`` names the backend class by dotted path, e.g.
``chats.assistant.ExtractiveBackend`` (the default), ``chats.assistant.OpenAICompatibleBackend``
(a model behind any OpenAI-compatible server) or ``chats.assistant.ScriptedBackend``.
"""

from chats.assistant.backends import (
    AssistantBackend,
    BackendError,
    BackendInterrupted,
    Script,
    ScriptedBackend,
    load_backend,
)
from chats.assistant.events import AssistantEvent, FinalAnswer, HistoryEntry, TextDelta, ToolCall, ToolResult, Turn
from chats.assistant.extractive import ExtractiveBackend
from chats.assistant.openai_compatible import OpenAICompatibleBackend, OpenAICompatibleConfig
from chats.assistant.runner import (
    Heartbeat,
    RunEvent,
    RunSuperseded,
    TurnFailed,
    TurnFinalized,
    TurnRun,
    TurnTimedOut,
)

__all__ = [
    "AssistantBackend",
    "AssistantEvent",
    "BackendError",
    "BackendInterrupted",
    "ExtractiveBackend",
    "FinalAnswer",
    "Heartbeat",
    "HistoryEntry",
    "OpenAICompatibleBackend",
    "OpenAICompatibleConfig",
    "RunEvent",
    "RunSuperseded",
    "Script",
    "ScriptedBackend",
    "TextDelta",
    "ToolCall",
    "ToolResult",
    "Turn",
    "TurnFailed",
    "TurnFinalized",
    "TurnRun",
    "TurnTimedOut",
    "load_backend",
]
