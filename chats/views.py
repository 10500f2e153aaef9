"""The chat API: chats, and the three ways a turn runs (single-shot, streamed tool loop, resume).

Every turn ends in :func:`chats.services.finalize_turn` through :class:`chats.assistant.TurnRun`, so the
ledger sees each one. Every object is looked up through :func:`chats.selectors.chats_visible_to`: anything
else is a 404. The streamed views answer with server-sent events (``start``, ``delta``, ``tool_call``,
``tool_result``, ``error``, ``citation``, ``done``, and ``: keepalive`` comments); turns are bounded per user
(:class:`chats.throttles.TurnRateThrottle`, ``LQAI_MAX_CONCURRENT_STREAMS``: 429). The events and their
order: docs/api.md.
"""

from __future__ import annotations

import json
from collections.abc import Iterator, Mapping
from dataclasses import asdict
from typing import Any
from uuid import UUID

from django.conf import settings
from django.contrib.auth.base_user import AbstractBaseUser
from django.db.models import Prefetch, QuerySet
from django.http import StreamingHttpResponse
from django.shortcuts import get_object_or_404
from drf_spectacular.types import OpenApiTypes
from drf_spectacular.utils import OpenApiResponse, extend_schema, extend_schema_view
from rest_framework import generics, serializers, status
from rest_framework.exceptions import PermissionDenied
from rest_framework.renderers import BaseRenderer, JSONRenderer
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.serializers import BaseSerializer
from rest_framework.utils.encoders import JSONEncoder
from rest_framework.views import APIView

from chats.assistant import (
    AssistantBackend,
    Heartbeat,
    RunSuperseded,
    TextDelta,
    ToolCall,
    ToolResult,
    TurnFailed,
    TurnFinalized,
    TurnRun,
    TurnTimedOut,
    load_backend,
)
from chats.assistant.runner import RunEvent, TurnNotSaved
from chats.matters import WordingInvalid, set_certificate_wording
from chats.models import UNVERIFIED, CaseCitation, Chat, DocumentQuote, Message, OpinionQuote
from chats.pagination import LIST_BAD_INPUT, ApiPagination
from chats.selectors import chats_visible_to, projects_visible_to
from chats.serializers import (
    CaselawCitationSerializer,
    CertificateWordingSerializer,
    ChatDetailSerializer,
    ChatListQuerySerializer,
    ChatSerializer,
    KBCitationSerializer,
    LegalHoldSerializer,
    MessageCreateSerializer,
    MessageSerializer,
    ResumeConflictSerializer,
    TurnDoneSerializer,
    TurnErrorSerializer,
    TurnSerializer,
    failed_claims_of,
)
from chats.services import (
    TooManyStreams,
    TurnSuperseded,
    create_chat,
    reopen_interrupted_turn,
    set_legal_hold,
    start_turn,
    statute_claim_statuses,
)
from chats.throttles import TurnRateThrottle
from chats.tools import Tool, default_tools
from lqai_verify.statuses import review_count
from lqai_verify.verdict import case_claim_status

STREAM_DESCRIPTION = (
    "A `text/event-stream` of server-sent events, each `event: <name>` and `data: <json>`: "
    "`start` {message_id}, `delta` {text}, `tool_call` {call_id, tool, arguments}, "
    "`tool_result` {call_id, tool, result, sources}, `error` {code, detail} if the assistant fails "
    "(or `turn_superseded` if a resume took the turn over meanwhile: nothing of this stream was saved), "
    "then one `citation` per verified quote (a KB or caselaw quote, with its span in the answer: "
    "`answer_start`, `answer_end`) and `done` "
    "{message_id, status, verdict, review_count, case_citations, citation_count, unverified_citations} (the claims "
    "that did not verify, as a message lists them). "
    "If the client disconnects, "
    "the turn is saved as `interrupted` with what was produced so far; resume it with `.../resume/`. "
    "While the assistant is silent, a `: keepalive` comment line every LQAI_SSE_HEARTBEAT_SECONDS; a stream "
    "still running after LQAI_MAX_STREAM_SECONDS sends `error` {code: stream_timeout} and ends `interrupted`."
)
THROTTLED = OpenApiResponse(
    description="Too many turns (then `Retry-After` says when to try again), or too many streams open at once."
)
KEEPALIVE = b": keepalive\n\n"
NOT_FOUND = OpenApiResponse(description="No such chat or message visible to you.")
CHAT_NOT_FOUND = OpenApiResponse(description="No such chat visible to you.")
MATTER_NOT_FOUND = OpenApiResponse(description="No such matter visible to you.")
BAD_INPUT = OpenApiResponse(description="Invalid input: field errors keyed by field name.")


def _message_rows() -> tuple[Any, ...]:  # Prefetch | str (of querysets of several models)
    """A message's citations (with their sources), tool sources, checked case citations and statute rows: one
    query each."""
    return (
        Prefetch("citations", queryset=DocumentQuote.objects.select_related("document")),
        Prefetch("caselaw_citations", queryset=OpinionQuote.objects.select_related("opinion")),
        "tool_sources",
        Prefetch("case_citations", queryset=CaseCitation.objects.select_related("opinion").defer("opinion__text")),
        "statute_citations",
    )


def _message_with_rows(message: Message) -> Message:
    return Message.objects.prefetch_related(*_message_rows()).get(pk=message.pk)


def sse_frame(event: str, data: Any) -> bytes:
    """One server-sent event; the JSON holds no raw line break, so one ``data:`` line suffices."""
    return f"event: {event}\ndata: {json.dumps(data, cls=JSONEncoder, ensure_ascii=False)}\n\n".encode()


def _frames(event: RunEvent) -> Iterator[bytes]:
    if isinstance(event, Heartbeat):
        yield KEEPALIVE
    elif isinstance(event, TurnTimedOut):
        yield sse_frame("error", {"code": "stream_timeout", "detail": event.detail})
    elif isinstance(event, TextDelta):
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
    elif isinstance(event, RunSuperseded):
        yield sse_frame("error", {"code": "turn_superseded", "detail": event.detail})
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
            "review_count": review_count(
                [
                    *(row.verification_method for row in [*result.citations, *result.caselaw_citations]),
                    *(UNVERIFIED for _ in result.unverified),
                    *(row.verification_method for row in result.unchecked),
                    *(case_claim_status(case.status, case.pin_status) for case in result.case_citations),
                    *statute_claim_statuses(result.statute_citations),
                ]
            ),
            "case_citations": result.case_citations,
            "statute_citations": result.statute_citations,
            "citation_count": len(result.citations) + len(result.caselaw_citations),
            "unverified_citations": failed_claims_of(result.message),
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


def paced_run(*, message: Message, backend: AssistantBackend, tools: Mapping[str, Tool]) -> TurnRun:
    """A run paced by heartbeats (a stream's keep-alives; the run's clock either way) and bounded by
    ``LQAI_MAX_STREAM_SECONDS``, streamed or single-shot: a model server that keeps its connection alive
    without finishing cannot hold a turn longer."""
    return TurnRun(
        message=message,
        backend=backend,
        tools=tools,
        heartbeat_seconds=settings.LQAI_SSE_HEARTBEAT_SECONDS,
        max_seconds=settings.LQAI_MAX_STREAM_SECONDS,
    )


def too_many_streams(exc: TooManyStreams) -> Response:
    return Response({"detail": str(exc), "code": "too_many_streams"}, status=status.HTTP_429_TOO_MANY_REQUESTS)


def visible_chat(request: Request, chat_id: UUID) -> Chat:
    return get_object_or_404(chats_visible_to(request.user), pk=chat_id)


def _author(request: Request) -> AbstractBaseUser:
    user: AbstractBaseUser = request.user  # type: ignore[assignment]  # IsAuthenticated: never anonymous here
    return user


def _validated_content(request: Request) -> str:
    serializer = MessageCreateSerializer(data=request.data)
    serializer.is_valid(raise_exception=True)
    content: str = serializer.validated_data["content"]
    return content


@extend_schema_view(
    get=extend_schema(
        summary="List the chats you can see (yours, and your matters'), newest first; `project` keeps one matter's",
        parameters=[ChatListQuerySerializer],
        responses={
            200: ChatSerializer(many=True),
            400: OpenApiResponse(description=f"`project` is not a UUID. {LIST_BAD_INPUT}"),
        },
    ),
    post=extend_schema(
        summary="Create a chat, optionally in a matter you belong to",
        responses={
            201: ChatSerializer,
            400: OpenApiResponse(
                description="Field errors: a `title` that is not a string or too long, or `project` a matter you "
                'do not belong to ("unknown project", whether or not it exists).'
            ),
        },
    ),
)
class ChatListCreateView(generics.ListCreateAPIView[Chat]):
    serializer_class = ChatSerializer

    def get_queryset(self) -> QuerySet[Chat]:
        chats = chats_visible_to(self.request.user).order_by("-created_at", "-id")
        if self.request.method != "GET":
            return chats
        query = ChatListQuerySerializer(data=self.request.query_params)
        query.is_valid(raise_exception=True)
        project = query.validated_data.get("project")
        return chats if project is None else chats.filter(project_id=project)

    def perform_create(self, serializer: BaseSerializer[Chat]) -> None:
        data = serializer.validated_data
        serializer.instance = create_chat(
            owner=self.request.user,  # type: ignore[arg-type]  # IsAuthenticated: never anonymous here
            project=data.get("project"),
            title=data.get("title", ""),
        )


@extend_schema_view(
    get=extend_schema(
        summary="A chat (its messages: GET /api/chats/{id}/messages/, paginated)",
        responses={200: ChatDetailSerializer, 404: CHAT_NOT_FOUND},
    )
)
class ChatDetailView(generics.RetrieveAPIView[Chat]):
    serializer_class = ChatDetailSerializer
    lookup_url_kwarg = "chat_id"

    def get_queryset(self) -> QuerySet[Chat]:
        return chats_visible_to(self.request.user)


class MessagePagination(ApiPagination):
    """A chat's messages oldest first (chats/pagination.py): pages stay put while new turns are added."""

    ordering = ("created_at", "id")


@extend_schema_view(
    get=extend_schema(
        summary="A chat's messages, oldest first, each with its citations and tool sources (paginated)",
        description="A chat's messages, page by page; an answer lists its claims that did not verify once, in "
        "`unverified_citations`.",
        responses={
            200: MessageSerializer(many=True),
            400: OpenApiResponse(description=LIST_BAD_INPUT),
            404: CHAT_NOT_FOUND,
        },
    )
)
class MessageCreateView(generics.ListAPIView[Message]):
    """A chat's messages, page by page (GET); single-shot turns: the whole turn, without tools, in one
    response (POST)."""

    serializer_class = MessageSerializer
    pagination_class = MessagePagination
    throttle_classes = [TurnRateThrottle]

    def get_queryset(self) -> QuerySet[Message]:
        chat = visible_chat(self.request, self.kwargs["chat_id"])
        return Message.objects.filter(chat=chat).prefetch_related(*_message_rows())

    @extend_schema(
        summary="Ask a question and get the whole answer (no tools)",
        description="A single-shot turn: the whole answer, without tools, in one response.",
        request=MessageCreateSerializer,
        responses={
            201: TurnSerializer,
            400: BAD_INPUT,
            404: CHAT_NOT_FOUND,
            429: THROTTLED,
            409: OpenApiResponse(
                TurnErrorSerializer,
                description="The turn was taken over by a resume while this request ran; nothing of it was saved.",
            ),
            502: OpenApiResponse(TurnErrorSerializer, description="The assistant failed; the turn is saved as failed."),
            503: OpenApiResponse(
                TurnErrorSerializer, description="The turn could not be saved (the database is unavailable)."
            ),
            504: OpenApiResponse(
                TurnErrorSerializer,
                description="The answer took longer than LQAI_MAX_STREAM_SECONDS; the turn is saved as interrupted "
                "(resume it to go on).",
            ),
        },
    )
    def post(self, request: Request, chat_id: UUID) -> Response:
        chat = visible_chat(request, chat_id)
        content = _validated_content(request)
        backend = load_backend()
        user_message, assistant_message = start_turn(chat=chat, content=content, author=_author(request))
        run = paced_run(message=assistant_message, backend=backend, tools={})
        try:
            run.run_to_end()
        except TurnNotSaved as exc:
            error = {"detail": str(exc), "code": "not_saved", "message_id": assistant_message.pk}
            return Response(TurnErrorSerializer(error).data, status=status.HTTP_503_SERVICE_UNAVAILABLE)
        except TurnSuperseded as exc:
            # A resume took the turn over while this request ran: its answer is the turn's, not this one.
            superseded = {"detail": str(exc), "code": "turn_superseded", "message_id": assistant_message.pk}
            return Response(TurnErrorSerializer(superseded).data, status=status.HTTP_409_CONFLICT)
        if run.failure is not None:
            error = {"detail": run.failure, "code": "backend_error", "message_id": assistant_message.pk}
            return Response(TurnErrorSerializer(error).data, status=status.HTTP_502_BAD_GATEWAY)
        if run.timed_out:
            timeout = {"detail": run.timeout_detail, "code": "turn_timeout", "message_id": assistant_message.pk}
            return Response(TurnErrorSerializer(timeout).data, status=status.HTTP_504_GATEWAY_TIMEOUT)
        body = {"message": _message_with_rows(assistant_message), "user_message_id": user_message.pk}
        return Response(TurnSerializer(body).data, status=status.HTTP_201_CREATED)


STREAM_RESPONSE = OpenApiResponse(OpenApiTypes.STR, description=STREAM_DESCRIPTION)


class MessageStreamView(APIView):
    """The streamed tool loop: the assistant may call tools; events are sent as they happen."""

    renderer_classes = [JSONRenderer, EventStreamRenderer]
    throttle_classes = [TurnRateThrottle]

    @extend_schema(
        summary="Ask a question and stream the answer, with tools (server-sent events)",
        request=MessageCreateSerializer,
        responses={(200, "text/event-stream"): STREAM_RESPONSE, 400: BAD_INPUT, 404: CHAT_NOT_FOUND, 429: THROTTLED},
    )
    def post(self, request: Request, chat_id: UUID) -> StreamingHttpResponse | Response:
        chat = visible_chat(request, chat_id)
        content = _validated_content(request)
        backend, tools = load_backend(), default_tools()
        # Created as `streaming` before the first byte: even an immediate disconnect leaves a record.
        try:
            _, assistant_message = start_turn(
                chat=chat,
                content=content,
                author=_author(request),
                assistant_status=Message.Status.STREAMING,
            )
        except TooManyStreams as exc:
            return too_many_streams(exc)
        return stream_response(paced_run(message=assistant_message, backend=backend, tools=tools))


class MessageResumeView(APIView):
    """Continue an interrupted turn, or one stuck without progress for ``LQAI_STALE_TURN_SECONDS`` (its
    worker died): streamed like the tool loop, ending in the same finalize."""

    renderer_classes = [JSONRenderer, EventStreamRenderer]
    throttle_classes = [TurnRateThrottle]

    @extend_schema(
        summary="Resume an interrupted answer, or one stuck without progress (server-sent events)",
        request=None,
        responses={
            (200, "text/event-stream"): STREAM_RESPONSE,
            404: NOT_FOUND,
            409: OpenApiResponse(
                ResumeConflictSerializer,
                description="Only an interrupted turn, or one without progress for LQAI_STALE_TURN_SECONDS, "
                "can be resumed.",
            ),
            429: THROTTLED,
        },
    )
    def post(self, request: Request, chat_id: UUID, message_id: UUID) -> StreamingHttpResponse | Response:
        chat = visible_chat(request, chat_id)
        message = get_object_or_404(
            Message.objects.select_related("chat"), pk=message_id, chat=chat, role=Message.Role.ASSISTANT
        )
        backend, tools = load_backend(), default_tools()
        try:
            reopened = reopen_interrupted_turn(message=message, resumed_by=_author(request))
        except TooManyStreams as exc:
            return too_many_streams(exc)
        if not reopened:
            message.refresh_from_db(fields=["status"])
            conflict = {
                "detail": f"Only an interrupted turn, or one stuck without progress, can be resumed; "
                f"this one is {message.status}.",
                "status": message.status,
            }
            return Response(ResumeConflictSerializer(conflict).data, status=status.HTTP_409_CONFLICT)
        return stream_response(paced_run(message=message, backend=backend, tools=tools))


class CertificateWordingView(APIView):
    """The wording of a matter's certificates of verification: any member reads it; only its owner sets it
    (``chats.matters.set_certificate_wording``). A certificate keeps the words it was issued with."""

    def _body(self, project: Any) -> dict[str, Any]:
        wording = {"court": project.certificate_court, "judge_wording": project.judge_wording}
        return CertificateWordingSerializer({"project_id": project.pk, **wording}).data

    @extend_schema(
        summary="The wording of a matter's certificates of verification",
        responses={200: CertificateWordingSerializer, 404: MATTER_NOT_FOUND},
    )
    def get(self, request: Request, project_id: UUID) -> Response:
        return Response(self._body(get_object_or_404(projects_visible_to(request.user), pk=project_id)))

    @extend_schema(
        summary="Set the wording of a matter's certificates of verification (its owner only)",
        request=CertificateWordingSerializer,
        responses={
            200: CertificateWordingSerializer,
            400: BAD_INPUT,
            403: OpenApiResponse(description="Only the matter's owner words its certificates."),
            404: MATTER_NOT_FOUND,
        },
    )
    def put(self, request: Request, project_id: UUID) -> Response:
        project = get_object_or_404(projects_visible_to(request.user), pk=project_id)
        if project.owner_id != request.user.pk:  # a member learns nothing more of her input than 403
            raise PermissionDenied("Only the matter's owner words its certificates.")
        serializer = CertificateWordingSerializer(data=request.data)
        serializer.is_valid(raise_exception=True)
        try:
            set_certificate_wording(project=project, by=_author(request), **serializer.validated_data)
        except WordingInvalid as exc:
            raise serializers.ValidationError({"court": [str(exc)]}) from None
        return Response(self._body(project))

    @extend_schema(exclude=True)  # the same as PUT: the whole wording, each time
    def patch(self, request: Request, project_id: UUID) -> Response:
        return self.put(request, project_id)


# PUT and PATCH of a matter's legal hold take the same body and answer the same.
SET_LEGAL_HOLD_SCHEMA = extend_schema(
    summary="Put a matter on legal hold, or lift it (its owner only)",
    request=LegalHoldSerializer,
    responses={
        200: LegalHoldSerializer,
        400: BAD_INPUT,
        403: OpenApiResponse(description="Only the matter's owner sets or lifts its hold."),
        404: MATTER_NOT_FOUND,
    },
)


class LegalHoldView(APIView):
    """A matter's legal hold: any member reads it; only the matter's owner sets or lifts it."""

    def _project(self, request: Request, project_id: UUID) -> Any:
        return get_object_or_404(projects_visible_to(request.user), pk=project_id)

    @extend_schema(
        summary="Whether a matter is on legal hold", responses={200: LegalHoldSerializer, 404: MATTER_NOT_FOUND}
    )
    def get(self, request: Request, project_id: UUID) -> Response:
        project = self._project(request, project_id)
        return Response(LegalHoldSerializer({"project_id": project.pk, "legal_hold": project.legal_hold}).data)

    @SET_LEGAL_HOLD_SCHEMA
    def put(self, request: Request, project_id: UUID) -> Response:
        project = self._project(request, project_id)
        if project.owner_id != request.user.pk:
            return Response(
                {"detail": "Only the matter's owner can set or lift its legal hold.", "code": "not_owner"},
                status=status.HTTP_403_FORBIDDEN,
            )
        serializer = LegalHoldSerializer(data=request.data)
        serializer.is_valid(raise_exception=True)
        set_legal_hold(project=project, held=serializer.validated_data["legal_hold"], by=_author(request))
        return Response(LegalHoldSerializer({"project_id": project.pk, "legal_hold": project.legal_hold}).data)

    @SET_LEGAL_HOLD_SCHEMA
    def patch(self, request: Request, project_id: UUID) -> Response:
        return self.put(request, project_id)
