"""The ledger trace API: what a chat's turns brought into context, resolved to their sources."""

from __future__ import annotations

import tempfile
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

from chats.selectors import chats_visible_to, projects_visible_to
from citations import export, selectors
from citations.models import CitationLedgerEntry
from citations.serializers import ChatLedgerQuerySerializer, LedgerEntrySerializer


class ChatLedgerView(generics.ListAPIView[CitationLedgerEntry]):
    """``GET /api/chats/{chat_id}/ledger/[?message={id}]``: the chat's ledger entries, paginated."""

    serializer_class = LedgerEntrySerializer

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
            400: OpenApiResponse(description="`message` is not a UUID."),
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


# An export takes from under a second to about a minute (docs/scale.md): a client refused one asks again after this.
EXPORT_RETRY_AFTER_SECONDS = 10


class MatterExportView(APIView):
    """``GET /api/projects/{project_id}/export/``: the matter's signed export, as a zip download."""

    @extend_schema(
        operation_id="project_export",
        summary="Export a matter's signed record",
        description=(
            "A zip of the matter's finalized turns, their quotes, case citations and consulted sources, ledger "
            "entries and seals (JSON Lines), the quoted passages, a printable HTML report, a manifest of SHA-256 "
            "digests and its Ed25519 signature by the ledger key. Check it offline with `python -m lqai_verify`. "
            "Members of the matter only: anyone else gets 404."
        ),
        responses={
            (200, "application/zip"): OpenApiResponse(description="The signed bundle."),
            404: OpenApiResponse(description="No such matter, or the caller is not one of its members."),
            429: OpenApiResponse(
                description=(
                    "An export of the caller's is already being prepared (`code` `export_in_progress`), or the "
                    "server is preparing `LQAI_MAX_CONCURRENT_EXPORTS` already (`exports_busy`); `Retry-After` "
                    "says when to ask again."
                )
            ),
        },
        tags=["ledger"],
    )
    def get(self, request: Request, project_id: UUID) -> FileResponse | Response:
        project = get_object_or_404(projects_visible_to(request.user), pk=project_id)
        # A temporary file, not memory: a matter's export can be large. FileResponse streams it and closes it.
        bundle = tempfile.TemporaryFile()  # noqa: SIM115 - closed by the FileResponse
        try:
            with export.export_slot(user_id=_user_id(request)):
                export.export_matter(project=project, out=bundle)
        except export.ExportBusy as busy:
            bundle.close()
            return Response(
                {"detail": str(busy), "code": busy.code},
                status=status.HTTP_429_TOO_MANY_REQUESTS,
                headers={"Retry-After": str(EXPORT_RETRY_AFTER_SECONDS)},
            )
        except BaseException:
            bundle.close()
            raise
        bundle.seek(0)
        return FileResponse(
            bundle, as_attachment=True, filename=export.default_filename(project), content_type="application/zip"
        )
