"""The review API (issue 52): a turn's claims with their current decisions, a person's decision on one, and the
turn's certificate of verification.

``GET /api/messages/{id}/claims/``, ``POST /api/messages/{id}/reviews/``, ``POST /api/messages/{id}/certificate/``
and ``GET /api/certificates/{id}/``. Access is the matter's: the turn is
looked up through ``chats.selectors.chats_visible_to`` (404 to anyone outside the matter); recording a decision
takes the owner's or a reviewer's role (403 for a member). The writing is ``citations.reviews.record_decision``'s.
"""

from __future__ import annotations

from typing import Any
from uuid import UUID

from django.contrib.auth.base_user import AbstractBaseUser
from django.shortcuts import get_object_or_404
from drf_spectacular.utils import OpenApiResponse, extend_schema
from rest_framework import serializers, status
from rest_framework.exceptions import NotFound, PermissionDenied
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.views import APIView

from chats.api_fields import StrictCharField
from chats.models import Message
from chats.selectors import chats_visible_to
from citations.certificates import ClaimsOpen, OpenClaim, issue_certificate
from citations.claims import Claim, claims_of
from citations.models import Certificate, Decision, ReviewDecision
from citations.reviews import DecisionInvalid, NoSuchClaim, NotAReviewer, may_decide, record_decision

NOT_A_REVIEWER = "Only the matter's owner and its reviewers record decisions on its claims."
NOT_FOUND = OpenApiResponse(description="No such turn, or not in a matter (or chat) you belong to.")


class DecisionSerializer(serializers.ModelSerializer[ReviewDecision]):
    """A decision as recorded and sealed."""

    claim = serializers.UUIDField(source="claim_id", read_only=True)
    decided_by = serializers.CharField(source="reviewer", read_only=True, help_text="Her username when she decided.")
    role = serializers.CharField(read_only=True, help_text="`owner` or `reviewer`, when she decided.")
    correction_check = serializers.JSONField(
        read_only=True,
        help_text="The machine's check of a correction: a corrected quote re-verified against the claim's source "
        "(`status`: its method, or `unverified` with `detail`); a corrected case citation checked as an answer's "
        "(`status`: `verified`, `name_mismatch`, ...; `citation`, `detail`); a corrected statute citation resolved "
        "in the authority library (`statute_verified`, `statute_not_found`, `statute_unchecked`); `not_checked` "
        "when the correction holds no citation the machine can read. Empty otherwise.",
    )
    sequence = serializers.IntegerField(read_only=True, help_text="Its place in the matter's decisions chain.")

    class Meta:
        model = ReviewDecision
        fields = [
            "id",
            "claim",
            "decision",
            "source",
            "corrected_text",
            "correction_check",
            "note",
            "decided_by",
            "role",
            "decided_at",
            "sequence",
            "seal_sha256",
        ]
        read_only_fields = fields


class ClaimSerializer(serializers.Serializer[Claim]):
    id = serializers.UUIDField(read_only=True)
    kind = serializers.CharField(
        source="kind.name",
        read_only=True,
        help_text="`kb_quote`, `caselaw_quote`, `case_citation` or `statute` (a statute or regulation citation, or "
        "a quote of one).",
    )
    text = serializers.CharField(read_only=True, help_text="The quote, or the case or section as cited.")
    status = serializers.CharField(read_only=True, help_text="The machine's check: a quote's method, a case's status.")
    needs_review = serializers.BooleanField(
        read_only=True, help_text="Whether the machine's check alone does not pass it: a person must look."
    )
    decision = DecisionSerializer(read_only=True, allow_null=True, help_text="Its current decision, if any.")


class ReviewInputSerializer(serializers.Serializer[dict[str, Any]]):
    claim = serializers.UUIDField(help_text="The claim's id (from `GET .../claims/`).")
    decision = serializers.ChoiceField(choices=Decision.choices)
    # A field named "source", as the API names it (DRF takes declared fields off the class: no clash at run time).
    source = StrictCharField(  # type: ignore[assignment]
        required=False,
        allow_blank=True,
        default="",
        help_text="Where the claim was checked (required to confirm): the reporter, database or document.",
    )
    corrected_text = StrictCharField(
        required=False,
        allow_blank=True,
        default="",
        trim_whitespace=False,
        help_text="The corrected quote or citation (required to correct).",
    )
    note = StrictCharField(required=False, allow_blank=True, default="", trim_whitespace=False)


def _visible_turn(request: Request, message_id: UUID) -> Message:
    chats = chats_visible_to(request.user)
    turns = Message.objects.select_related("chat__project").filter(role=Message.Role.ASSISTANT, chat__in=chats)
    return get_object_or_404(turns, pk=message_id)


class MessageClaimsView(APIView):
    @extend_schema(
        summary="A turn's claims, each with its status, whether it needs review and its current decision",
        responses={200: ClaimSerializer(many=True), 404: NOT_FOUND},
        tags=["reviews"],
    )
    def get(self, request: Request, message_id: UUID) -> Response:
        message = _visible_turn(request, message_id)
        claims = ClaimSerializer(claims_of(message), many=True)  # type: ignore[arg-type]  # many=True takes a list
        return Response(claims.data)


class MessageReviewsView(APIView):
    @extend_schema(
        summary="Record a decision on a claim of a turn (owner or reviewer): confirmed, corrected or removed",
        description=(
            "Sealed into the matter's record in the same transaction; a later decision on the same claim "
            "supersedes it and both stay. `confirmed` needs `source`; `corrected` needs `corrected_text` (a "
            "corrected quote is re-verified against the claim's source, a corrected case or statute citation checked "
            "as an answer's are)."
        ),
        request=ReviewInputSerializer,
        responses={
            201: DecisionSerializer,
            400: OpenApiResponse(
                description="Field errors: an unknown `decision` or `claim`, a confirmation without `source`, a "
                "correction without `corrected_text`."
            ),
            403: OpenApiResponse(description="You are a member of the matter, not its owner or a reviewer."),
            404: NOT_FOUND,
        },
        tags=["reviews"],
    )
    def post(self, request: Request, message_id: UUID) -> Response:
        message = _visible_turn(request, message_id)
        user: AbstractBaseUser = request.user  # type: ignore[assignment]  # IsAuthenticated: never anonymous here
        if not may_decide(user=user, chat=message.chat):  # a member learns nothing more of the input than 403
            raise PermissionDenied(NOT_A_REVIEWER)
        serializer = ReviewInputSerializer(data=request.data)
        serializer.is_valid(raise_exception=True)
        data = serializer.validated_data
        try:
            decision = record_decision(
                message=message,
                claim_id=data["claim"],
                decision=data["decision"],
                by=user,
                source=data["source"],
                corrected_text=data["corrected_text"],
                note=data["note"],
            )
        except NotAReviewer as exc:
            raise PermissionDenied(str(exc)) from None
        except DecisionInvalid as exc:
            raise serializers.ValidationError({name: [error] for name, error in exc.errors.items()}) from None
        except NoSuchClaim as exc:
            raise serializers.ValidationError({"claim": [str(exc)]}) from None
        return Response(DecisionSerializer(decision).data, status=status.HTTP_201_CREATED)


class CertificateSerializer(serializers.ModelSerializer[Certificate]):
    """A certificate of verification as issued and sealed."""

    turn = serializers.UUIDField(source="message_id", read_only=True)
    issued_by = serializers.CharField(source="issuer", read_only=True, help_text="Her username when she issued it.")
    role = serializers.CharField(read_only=True, help_text="`owner` or `reviewer`, when she issued it.")
    statement = serializers.JSONField(
        read_only=True,
        help_text="What the text says, as data: the turn and its seal, each claim with the machine's check and "
        "the sealed decision it names (id and digest), what nobody checked, the court's and judge's wording.",
    )
    text = serializers.CharField(read_only=True, help_text="The certificate in plain words, as sealed.")
    sequence = serializers.IntegerField(read_only=True, help_text="Its place in the matter's certificates chain.")
    page = serializers.SerializerMethodField(help_text="The printable page of the certificate.")

    class Meta:
        model = Certificate
        fields = [
            "id",
            "turn",
            "issued_by",
            "role",
            "issued_at",
            "turn_seal_sha256",
            "statement",
            "text",
            "sequence",
            "key_fingerprint",
            "seal_sha256",
            "signature",
            "page",
        ]
        read_only_fields = fields

    def get_page(self, certificate: Certificate) -> str:
        return f"/certificates/{certificate.pk}/"


class OpenClaimSerializer(serializers.Serializer[OpenClaim]):
    claim = serializers.UUIDField(source="claim.id", read_only=True, allow_null=True, default=None)
    kind = serializers.CharField(source="claim.kind.name", read_only=True, allow_null=True, default=None)
    text = serializers.CharField(source="claim.text", read_only=True, allow_null=True, default=None)
    why = serializers.CharField(read_only=True)


class OpenClaimsSerializer(serializers.Serializer[dict[str, Any]]):
    detail = serializers.CharField()
    open_claims = OpenClaimSerializer(many=True)


class MessageCertificateView(APIView):
    @extend_schema(
        summary="Issue the certificate of verification of a turn (owner or reviewer)",
        description=(
            "Issued only when every claim that needs review has a current decision and no failed claim stands "
            "unremoved and uncorrected; else 409 listing the open claims. Sealed into the matter's record in the "
            "same transaction; a later certificate of the same turn supersedes it and both stay."
        ),
        request=None,
        responses={
            201: CertificateSerializer,
            403: OpenApiResponse(description="You are a member of the matter, not its owner or a reviewer."),
            404: NOT_FOUND,
            409: OpenApiResponse(OpenClaimsSerializer, description="Claims are open: each with why."),
        },
        tags=["reviews"],
    )
    def post(self, request: Request, message_id: UUID) -> Response:
        message = _visible_turn(request, message_id)
        user: AbstractBaseUser = request.user  # type: ignore[assignment]  # IsAuthenticated: never anonymous here
        if message.finalized_at is None:
            raise NotFound("This turn is not finished: there is nothing to certify yet.")
        try:
            certificate = issue_certificate(message=message, by=user)
        except NotAReviewer as exc:
            raise PermissionDenied(str(exc)) from None
        except ClaimsOpen as exc:
            body = {
                "detail": "The certificate cannot be issued while claims are open: decide on each of them first.",
                "open_claims": OpenClaimSerializer(exc.open, many=True).data,  # type: ignore[arg-type]  # many=True
            }
            return Response(body, status=status.HTTP_409_CONFLICT)
        return Response(CertificateSerializer(certificate).data, status=status.HTTP_201_CREATED)


class CertificateView(APIView):
    @extend_schema(
        summary="A certificate of verification, as sealed",
        responses={
            200: CertificateSerializer,
            404: OpenApiResponse(description="No such certificate, or not in a matter (or chat) you belong to."),
        },
        tags=["reviews"],
    )
    def get(self, request: Request, certificate_id: UUID) -> Response:
        return Response(CertificateSerializer(visible_certificate(request, certificate_id)).data)


def visible_certificate(request: Request | Any, certificate_id: UUID) -> Certificate:
    """The certificate ``certificate_id`` of a turn in a chat the user sees (``chats_visible_to``), or 404."""
    turns = Message.objects.filter(chat__in=chats_visible_to(request.user))
    return get_object_or_404(Certificate.objects.filter(message__in=turns), pk=certificate_id)
