"""The ledger trace API: what a chat's turns brought into context, resolved to their sources; and the signed
exports of a matter and of a matter-less chat (``citations.export``)."""

from __future__ import annotations

from typing import Any
from uuid import UUID

from django.db.models import QuerySet
from django.http import FileResponse
from django.shortcuts import get_object_or_404
from drf_spectacular.utils import OpenApiResponse, extend_schema
from rest_framework import generics, status
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.views import APIView

from chats.models import Chat, Project
from chats.pagination import LIST_BAD_INPUT, PositionPagination
from chats.selectors import chats_visible_to, projects_visible_to
from citations import export, selectors
from citations.models import CitationLedgerEntry
from citations.serializers import ChatLedgerQuerySerializer, LedgerEntrySerializer


class ChatLedgerView(generics.ListAPIView[CitationLedgerEntry]):
    """``GET /api/chats/{chat_id}/ledger/[?message={id}]``: the chat's ledger entries, paginated."""

    serializer_class = LedgerEntrySerializer
    # The trace's order is computed (citations.selectors.in_turn_order), so its cursors hold positions.
    pagination_class = PositionPagination

    @extend_schema(
        operation_id="chat_ledger_list",
        summary="Trace a chat's sources",
        description=(
            "The citation-ledger entries of every turn of the chat (or of one turn with `message`), turn by "
            "turn; within a turn, its quotes in the order claimed, then its case citations in the order of the "
            "answer, then the sources its tools consulted. Each entry is resolved to its source (KB document, "
            "caselaw opinion, or a source a tool consulted), with the passage a quote points at read from the "
            "source at request time (`source[start:end]`), how it was verified, and its provenance. A chat the "
            "caller cannot see answers 404; a `message` that is not in this chat yields an empty list."
        ),
        parameters=[ChatLedgerQuerySerializer],
        responses={
            200: LedgerEntrySerializer(many=True),
            400: OpenApiResponse(description=f"`message` is not a UUID. {LIST_BAD_INPUT}"),
            404: OpenApiResponse(description="No such chat, or the caller cannot see it."),
        },
        tags=["ledger"],
    )
    def get(self, request: Request, *args: Any, **kwargs: Any) -> Response:
        return super().get(request, *args, **kwargs)

    def list(self, request: Request, *args: Any, **kwargs: Any) -> Response:
        """A page of entries, with the seals of their turns read for that page (one query)."""
        page = self.paginate_queryset(self.filter_queryset(self.get_queryset()))
        assert page is not None, "the trace is always paginated"  # noqa: S101 - pagination_class is set
        seals = selectors.turn_seals(entry.message_id for entry in page)
        serializer = self.get_serializer(
            page, many=True, context={**self.get_serializer_context(), "turn_seals": seals}
        )
        return self.get_paginated_response(serializer.data)

    def get_queryset(self) -> QuerySet[CitationLedgerEntry]:
        if getattr(self, "swagger_fake_view", False):  # schema generation: no request user, no chat
            return CitationLedgerEntry.objects.none()
        # Access first: a chat the caller cannot see is a 404, whatever the query string says.
        chat = get_object_or_404(chats_visible_to(self.request.user), pk=self.kwargs["chat_id"])
        query = ChatLedgerQuerySerializer(data=self.request.query_params)
        query.is_valid(raise_exception=True)
        return selectors.chat_ledger(chat=chat, message_id=query.validated_data.get("message"))


def _user_id(request: Request) -> int:
    user_id = request.user.pk
    assert user_id is not None, "IsAuthenticated: never anonymous here"  # noqa: S101 - the permission holds it
    return int(user_id)


BUNDLE_DESCRIPTION = (
    "turns, their quotes, case citations and consulted sources, ledger entries and seals (JSON Lines), the quoted "
    "passages, a printable HTML report, a manifest of SHA-256 digests and its Ed25519 signature by the ledger key. "
    "Check it offline with `python -m lqai_verify`."
)
EXPORT_RESPONSES: dict[Any, Any] = {
    (200, "application/zip"): OpenApiResponse(description="The signed bundle."),
    429: OpenApiResponse(
        description=(
            "An export of the caller's is already being prepared (`code` `export_in_progress`), or the server is "
            "preparing `LQAI_MAX_CONCURRENT_EXPORTS` already (`exports_busy`); `Retry-After` says when to ask again."
        )
    ),
}


def _download(request: Request, of: Project | Chat) -> FileResponse | Response:
    """The signed export of ``of`` (a matter, or a matter-less chat) as a zip download
    (:func:`citations.export.export_file`); 429 when the caller's or the server's export slots are taken."""
    try:
        bundle = export.export_file(of=of, user_id=_user_id(request))
    except export.ExportBusy as busy:
        return Response(
            {"detail": str(busy), "code": busy.code},
            status=status.HTTP_429_TOO_MANY_REQUESTS,
            headers={"Retry-After": str(export.RETRY_AFTER_SECONDS)},
        )
    return FileResponse(
        bundle, as_attachment=True, filename=export.default_filename(of), content_type="application/zip"
    )


class MatterExportView(APIView):
    """``GET /api/projects/{project_id}/export/``: the matter's signed export, as a zip download."""

    @extend_schema(
        operation_id="project_export",
        summary="Export a matter's signed record",
        description=f"A zip of the matter's {BUNDLE_DESCRIPTION} Members of the matter only: anyone else gets 404.",
        responses={
            **EXPORT_RESPONSES,
            404: OpenApiResponse(description="No such matter, or the caller is not one of its members."),
        },
        tags=["ledger"],
    )
    def get(self, request: Request, project_id: UUID) -> FileResponse | Response:
        return _download(request, get_object_or_404(projects_visible_to(request.user), pk=project_id))


class ChatExportView(APIView):
    """``GET /api/chats/{chat_id}/export/``: a matter-less chat's signed export, as a zip download; a chat of
    a matter answers 409 (its turns are sealed in the matter's chain: the matter's export holds them)."""

    @extend_schema(
        operation_id="chat_export",
        summary="Export a chat's signed record (a chat outside any matter)",
        description=(
            f"A zip of the chat's {BUNDLE_DESCRIPTION} Only for a chat outside any matter, whose turns are sealed "
            "in a chain of their own; a chat of a matter is exported with its matter "
            "(`GET /api/projects/{id}/export/`). Its owner only: anyone else gets 404."
        ),
        responses={
            **EXPORT_RESPONSES,
            404: OpenApiResponse(description="No such chat, or the caller cannot see it."),
            409: OpenApiResponse(
                description="The chat is part of a matter (`code` `export_the_matter`, `project_id` says which)."
            ),
        },
        tags=["ledger"],
    )
    def get(self, request: Request, chat_id: UUID) -> FileResponse | Response:
        chat = get_object_or_404(chats_visible_to(request.user), pk=chat_id)
        if chat.project_id is not None:
            return Response(
                {
                    "detail": f"{export.ChatOfAMatter(chat)} (GET /api/projects/{chat.project_id}/export/)",
                    "code": "export_the_matter",
                    "project_id": str(chat.project_id),
                },
                status=status.HTTP_409_CONFLICT,
            )
        return _download(request, chat)
