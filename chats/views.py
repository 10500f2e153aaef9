"""The chat API: chats, and the three ways a turn runs (single-shot, streamed tool loop, resume).

Every turn ends in :func:`chats.services.finalize_turn` through :class:`chats.assistant.TurnRun`,
so the ledger sees each one. Every object is looked up through :func:`chats.selectors.chats_visible_to`:
anything else is a 404.

The streamed views answer with server-sent events (``text/event-stream``), one frame per event::

    event: <name>
    data: <json>

``start`` (the message id), ``delta``, ``tool_call``, ``tool_result``, ``error`` (the backend failed),
then after finalize one ``citation`` per verified quote and ``done`` (status and unverified quotes).
"""

from __future__ import annotations

import json
from collections.abc import Iterator, Mapping
from dataclasses import asdict
from typing import Any
from uuid import UUID

from django.db.models import Prefetch, QuerySet
from django.http import StreamingHttpResponse
from django.shortcuts import get_object_or_404
from drf_spectacular.types import OpenApiTypes
from drf_spectacular.utils import OpenApiResponse, extend_schema, extend_schema_view
from rest_framework import generics, status
from rest_framework.renderers import BaseRenderer, JSONRenderer
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.serializers import BaseSerializer
from rest_framework.utils.encoders import JSONEncoder
from rest_framework.views import APIView

from chats.assistant import TextDelta, ToolCall, ToolResult, TurnFailed, TurnFinalized, TurnRun, load_backend
from chats.assistant.runner import RunEvent
from chats.models import Chat, Message, MessageCaselawCitation, MessageCitation
from chats.selectors import chats_visible_to
from chats.serializers import (
    CaselawCitationSerializer,
    ChatDetailSerializer,
    ChatSerializer,
    KBCitationSerializer,
    MessageCreateSerializer,
    ResumeConflictSerializer,
    TurnDoneSerializer,
    TurnErrorSerializer,
    TurnSerializer,
)
from chats.services import FinalizedTurn, create_chat, reopen_interrupted_turn, start_turn
from chats.tools import default_tools

STREAM_DESCRIPTION = (
    "A `text/event-stream` of server-sent events, each `event: <name>` and `data: <json>`: "
    "`start` {message_id}, `delta` {text}, `tool_call` {call_id, tool, arguments}, "
    "`tool_result` {call_id, tool, result, sources}, `error` {code, detail} if the assistant fails, "
    "then one `citation` per verified quote (a KB or caselaw citation) and `done` "
    "{message_id, status, verdict, citation_count, unverified_count, unverified}. If the client disconnects, "
    "the turn is saved as `interrupted` with what was produced so far; resume it with `.../resume/`."
)
NOT_FOUND = OpenApiResponse(description="No such chat or message visible to you.")
BAD_INPUT = OpenApiResponse(description="Invalid input: field errors keyed by field name.")


def _message_rows() -> tuple[Prefetch | str, ...]:
    """A message's citations (with their sources) and tool sources: one query each."""
    return (
        Prefetch("citations", queryset=MessageCitation.objects.select_related("document")),
        Prefetch("caselaw_citations", queryset=MessageCaselawCitation.objects.select_related("opinion")),
        "tool_sources",
    )


def messages_prefetch() -> Prefetch:
    """A chat's messages in order, with their rows: a constant number of queries whatever the count."""
    return Prefetch(
        "messages", queryset=Message.objects.order_by("created_at", "id").prefetch_related(*_message_rows())
    )


def _message_with_rows(message: Message) -> Message:
    return Message.objects.prefetch_related(*_message_rows()).get(pk=message.pk)


def _unverified(result: FinalizedTurn) -> list[dict[str, Any]]:
    return [asdict(quote) for quote in result.unverified]


def sse_frame(event: str, data: Any) -> bytes:
    """One server-sent event; the JSON holds no raw line break, so one ``data:`` line suffices."""
    return f"event: {event}\ndata: {json.dumps(data, cls=JSONEncoder, ensure_ascii=False)}\n\n".encode()


def _frames(event: RunEvent) -> Iterator[bytes]:
    if isinstance(event, TextDelta):
        yield sse_frame("delta", {"text": event.text})
    elif isinstance(event, ToolCall):
        yield sse_frame("tool_call", {"call_id": event.call_id, "tool": event.tool, "arguments": event.arguments})
    elif isinstance(event, ToolResult):
        sources = [asdict(source) for source in event.sources]
        yield sse_frame(
            "tool_result", {"call_id": event.call_id, "tool": event.tool, "result": event.payload, "sources": sources}
        )
    elif isinstance(event, TurnFailed):
        yield sse_frame("error", {"code": "backend_error", "detail": event.detail})
    elif isinstance(event, TurnFinalized):
        result = event.result
        for citation in result.citations:
            yield sse_frame("citation", KBCitationSerializer(citation).data)
        for caselaw_citation in result.caselaw_citations:
            yield sse_frame("citation", CaselawCitationSerializer(caselaw_citation).data)
        done = {
            "message_id": result.message.pk,
            "status": result.message.status,
            "verdict": result.message.verdict,
            "citation_count": len(result.citations) + len(result.caselaw_citations),
            "unverified_count": len(result.unverified),
            "unverified": _unverified(result),
        }
        yield sse_frame("done", TurnDoneSerializer(done).data)


class EventStream:
    """The body of a streamed turn. Django calls ``close()`` when the response is closed (the WSGI
    server does at the end of the request, also when the client went away mid-stream); closing
    finalizes an unfinished turn as ``interrupted``."""

    def __init__(self, run: TurnRun) -> None:
        self.run = run

    def __iter__(self) -> Iterator[bytes]:
        yield sse_frame("start", {"message_id": self.run.message.pk})
        for event in self.run:
            yield from _frames(event)

    def close(self) -> None:
        self.run.close()


def stream_response(run: TurnRun) -> StreamingHttpResponse:
    response = StreamingHttpResponse(EventStream(run), content_type=EventStreamRenderer.media_type)
    response["Cache-Control"] = "no-cache"
    response["X-Accel-Buffering"] = "no"  # no proxy buffering: events must reach the client as they happen
    return response


class EventStreamRenderer(BaseRenderer):
    """Lets clients ask for ``Accept: text/event-stream``. Streams are written by :class:`EventStream`;
    this renders only the error responses of those views, as one SSE ``error`` frame."""

    media_type = "text/event-stream"
    format = "event-stream"
    charset = None

    def render(
        self, data: Any, accepted_media_type: str | None = None, renderer_context: Mapping[str, Any] | None = None
    ) -> bytes:
        return sse_frame("error", data)


def visible_chat(request: Request, chat_id: UUID) -> Chat:
    return get_object_or_404(chats_visible_to(request.user), pk=chat_id)


def _validated_content(request: Request) -> str:
    serializer = MessageCreateSerializer(data=request.data)
    serializer.is_valid(raise_exception=True)
    content: str = serializer.validated_data["content"]
    return content


@extend_schema_view(
    get=extend_schema(summary="List the chats you can see (yours, and your matters')"),
    post=extend_schema(summary="Create a chat, optionally in a matter you belong to", responses={201: ChatSerializer}),
)
class ChatListCreateView(generics.ListCreateAPIView[Chat]):
    serializer_class = ChatSerializer

    def get_queryset(self) -> QuerySet[Chat]:
        return chats_visible_to(self.request.user).order_by("-created_at", "-id")

    def perform_create(self, serializer: BaseSerializer[Chat]) -> None:
        data = serializer.validated_data
        serializer.instance = create_chat(
            owner=self.request.user,  # type: ignore[arg-type]  # IsAuthenticated: never anonymous here
            project=data.get("project"),
            title=data.get("title", ""),
        )


@extend_schema_view(get=extend_schema(summary="A chat with its messages, citations and tool sources"))
class ChatDetailView(generics.RetrieveAPIView[Chat]):
    serializer_class = ChatDetailSerializer
    lookup_url_kwarg = "chat_id"

    def get_queryset(self) -> QuerySet[Chat]:
        return chats_visible_to(self.request.user).prefetch_related(messages_prefetch())


class MessageCreateView(APIView):
    """Single-shot: the whole turn, without tools, in one response."""

    @extend_schema(
        summary="Ask a question and get the whole answer (no tools)",
        request=MessageCreateSerializer,
        responses={
            201: TurnSerializer,
            400: BAD_INPUT,
            404: NOT_FOUND,
            502: OpenApiResponse(TurnErrorSerializer, description="The assistant failed; the turn is saved as failed."),
        },
    )
    def post(self, request: Request, chat_id: UUID) -> Response:
        chat = visible_chat(request, chat_id)
        content = _validated_content(request)
        backend = load_backend()
        user_message, assistant_message = start_turn(chat=chat, content=content)
        run = TurnRun(message=assistant_message, backend=backend, tools={})
        result = run.run_to_end()
        if run.failure is not None:
            error = {"detail": run.failure, "code": "backend_error", "message_id": assistant_message.pk}
            return Response(TurnErrorSerializer(error).data, status=status.HTTP_502_BAD_GATEWAY)
        body = {
            "message": _message_with_rows(assistant_message),
            "user_message_id": user_message.pk,
            "unverified_count": len(result.unverified),
            "unverified": _unverified(result),
        }
        return Response(TurnSerializer(body).data, status=status.HTTP_201_CREATED)


STREAM_RESPONSE = OpenApiResponse(OpenApiTypes.STR, description=STREAM_DESCRIPTION)


class MessageStreamView(APIView):
    """The streamed tool loop: the assistant may call tools; events are sent as they happen."""

    renderer_classes = [JSONRenderer, EventStreamRenderer]

    @extend_schema(
        summary="Ask a question and stream the answer, with tools (server-sent events)",
        request=MessageCreateSerializer,
        responses={(200, "text/event-stream"): STREAM_RESPONSE, 400: BAD_INPUT, 404: NOT_FOUND},
    )
    def post(self, request: Request, chat_id: UUID) -> StreamingHttpResponse:
        chat = visible_chat(request, chat_id)
        content = _validated_content(request)
        backend, tools = load_backend(), default_tools()
        # Created as `streaming` before the first byte: even an immediate disconnect leaves a record.
        _, assistant_message = start_turn(chat=chat, content=content, assistant_status=Message.Status.STREAMING)
        return stream_response(TurnRun(message=assistant_message, backend=backend, tools=tools))


class MessageResumeView(APIView):
    """Continue an interrupted turn: streamed like the tool loop, ending in the same finalize."""

    renderer_classes = [JSONRenderer, EventStreamRenderer]

    @extend_schema(
        summary="Resume an interrupted answer (server-sent events)",
        request=None,
        responses={
            (200, "text/event-stream"): STREAM_RESPONSE,
            404: NOT_FOUND,
            409: OpenApiResponse(ResumeConflictSerializer, description="Only an interrupted turn can be resumed."),
        },
    )
    def post(self, request: Request, chat_id: UUID, message_id: UUID) -> StreamingHttpResponse | Response:
        chat = visible_chat(request, chat_id)
        message = get_object_or_404(
            Message.objects.select_related("chat"), pk=message_id, chat=chat, role=Message.Role.ASSISTANT
        )
        backend, tools = load_backend(), default_tools()
        if not reopen_interrupted_turn(message=message):
            message.refresh_from_db(fields=["status"])
            conflict = {
                "detail": f"Only an interrupted turn can be resumed; this one is {message.status}.",
                "status": message.status,
            }
            return Response(ResumeConflictSerializer(conflict).data, status=status.HTTP_409_CONFLICT)
        return stream_response(TurnRun(message=message, backend=backend, tools=tools))
