"""The drafts API: check a draft and record it as a turn (POST), read a check back from its record (GET).

Access is the matter's (``chats.selectors``): a matter or a check outside the user's matters is a 404. Authenticated
as the rest of the API (a token, or a session with its CSRF token); a POST counts against the user's turn rate.
"""

from __future__ import annotations

from typing import Any
from uuid import UUID

from django.conf import settings
from django.contrib.auth.base_user import AbstractBaseUser
from django.shortcuts import get_object_or_404
from drf_spectacular.utils import OpenApiResponse, extend_schema
from rest_framework import serializers, status
from rest_framework.parsers import MultiPartParser
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.views import APIView

from chats.api_projects import visible_project
from chats.errors import PayloadTooLarge
from chats.models import Chat
from chats.throttles import TurnRateThrottle
from drafts.errors import UnreadableDraft
from drafts.recording import draft_record, record_draft
from drafts.selectors import draft_checks_visible_to
from drafts.serializers import DraftSerializer, DraftUploadSerializer


class ProjectDraftsView(APIView):
    parser_classes = [MultiPartParser]
    throttle_classes = [TurnRateThrottle]

    @extend_schema(
        summary="Check a draft (DOCX, PDF with a text layer, text, Markdown) and record the check as a turn",
        description="Every case citation, statute citation and quotation of the draft found and checked "
        "(docs/drafts.md); the check recorded as a `draft` turn of the draft's chat in the matter, with its rows, "
        "ledger entries and seal. A revised draft of the same file name is a new turn of the same chat, and "
        "`changes` says what it fixed, added and left open.",
        request={"multipart/form-data": DraftUploadSerializer},
        responses={
            201: DraftSerializer,
            400: OpenApiResponse(
                description="Field errors: no `file`, a file that is not what its name says, has no text, is "
                "encrypted or a zip bomb (`file`); a `chat` that is not a chat of the matter."
            ),
            404: OpenApiResponse(description="No such matter visible to you."),
            413: OpenApiResponse(description="The file is larger than LQAI_MAX_UPLOAD_BYTES."),
            429: OpenApiResponse(description="Over your turn rate (LQAI_THROTTLE_TURNS)."),
        },
    )
    def post(self, request: Request, project_id: UUID) -> Response:
        project = visible_project(request, project_id)
        author: AbstractBaseUser = request.user  # type: ignore[assignment]  # IsAuthenticated: never anonymous here
        upload = DraftUploadSerializer(data=request.data)
        upload.is_valid(raise_exception=True)
        file = upload.validated_data["file"]
        if file.size > settings.LQAI_MAX_UPLOAD_BYTES:
            raise PayloadTooLarge(f"The file is too large: at most {settings.LQAI_MAX_UPLOAD_BYTES} bytes.")
        chat = None
        if "chat" in upload.validated_data:
            chat = Chat.objects.filter(project=project, pk=upload.validated_data["chat"]).first()
            if chat is None:
                raise serializers.ValidationError({"chat": ["No chat of this matter has this id."]})
        try:
            recorded = record_draft(
                matter=project,
                author=author,
                data=file.read(settings.LQAI_MAX_UPLOAD_BYTES + 1),
                name=file.name or "",
                chat=chat,
            )
        except UnreadableDraft as exc:
            raise serializers.ValidationError({"file": [str(exc)]}) from None
        return Response(_serialized(draft_record(recorded.check)), status=status.HTTP_201_CREATED)


class DraftView(APIView):
    @extend_schema(
        summary="A checked draft, read back from its record",
        description="The JSON of docs/drafts.md as the check recorded it (not a re-check), with its turn, its chat "
        "and what changed since the previous check of the draft.",
        responses={200: DraftSerializer, 404: OpenApiResponse(description="No such check visible to you.")},
    )
    def get(self, request: Request, draft_id: UUID) -> Response:
        check = get_object_or_404(draft_checks_visible_to(request.user), pk=draft_id)
        return Response(_serialized(draft_record(check)))


def _serialized(record: dict[str, Any]) -> dict[str, Any]:
    return dict(DraftSerializer(record).data)
