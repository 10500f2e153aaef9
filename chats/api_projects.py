"""The matters API: matters (``Project``), their members and their knowledge-base documents.

Access is the chat API's: a matter is visible to its current owner and members only
(:func:`chats.selectors.projects_visible_to`); any other id is a 404. Only the owner adds and removes members
(403 for a member), and gives each her role: ``reviewer`` (records review decisions, as the owner does) or
``member`` (reads and asks), the default. Any member adds documents: JSON ``{"title", "content"}`` for a text,
or a multipart upload (``title``, ``file``) of a text or PDF file, whose pages are kept so that every quote
from it reports its pages.
A file over ``LQAI_MAX_UPLOAD_BYTES``, a text over ``LQAI_MAX_DOCUMENT_CHARS`` or a file over the bounds of
``chats.documents`` (a PDF's pages and reading time, a zip's files) is a 413; a PDF without extractable text a 400.
"""

from __future__ import annotations

from typing import Any
from uuid import UUID

from django.contrib.auth.base_user import AbstractBaseUser
from django.contrib.auth.models import User
from django.db.models import Prefetch, QuerySet
from django.db.models.functions import Length
from django.http import Http404
from django.shortcuts import get_object_or_404
from django.urls import reverse
from drf_spectacular.utils import OpenApiResponse, extend_schema, extend_schema_field, extend_schema_view
from rest_framework import generics, serializers, status
from rest_framework.exceptions import PermissionDenied
from rest_framework.parsers import FormParser, MultiPartParser
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.views import APIView

from chats.api_fields import StrictCharField
from chats.documents import DocumentTooLarge, UnreadableDocument, add_document, upload_document
from chats.errors import PayloadTooLarge
from chats.matters import (
    NoSuchMember,
    NotAMemberRole,
    NotTheOwner,
    RoleChange,
    create_project,
    remove_member,
    set_member_role,
)
from chats.models import Document, Project, ProjectMembership, Role
from chats.pagination import LIST_BAD_INPUT, ApiPagination
from chats.parsers import JSONParser
from chats.selectors import documents_of, projects_visible_to

NOT_FOUND = OpenApiResponse(description="No such matter visible to you.")
DOCUMENT_NOT_FOUND = OpenApiResponse(description="No such matter visible to you, or no such document in it.")
NOT_OWNER = OpenApiResponse(description="You are a member, not the owner: only the owner changes the members.")


class MemberRoleSerializer(serializers.Serializer[dict[str, Any]]):
    username = serializers.CharField()
    role = serializers.ChoiceField(choices=Role.choices)


class ProjectSerializer(serializers.ModelSerializer[Project]):
    """A matter: its owner and current members (usernames)."""

    name = StrictCharField(max_length=200, help_text="The matter's name.")
    owner = serializers.CharField(source="owner.username", read_only=True)
    members = serializers.SerializerMethodField()
    roles = serializers.SerializerMethodField(
        help_text="Each person of the matter (the owner first, then the members by username) with her role: "
        "`owner`, `reviewer` (records review decisions) or `member` (reads and asks)."
    )
    documents_url = serializers.SerializerMethodField()

    class Meta:
        model = Project
        fields = ["id", "name", "owner", "members", "roles", "created_at", "documents_url"]
        read_only_fields = ["id", "owner", "members", "roles", "created_at", "documents_url"]

    def get_members(self, project: Project) -> list[str]:
        return sorted(membership.user.username for membership in project.projectmembership_set.all())

    @extend_schema_field(MemberRoleSerializer(many=True))
    def get_roles(self, project: Project) -> list[dict[str, str]]:
        members = sorted(
            ({"username": m.user.username, "role": m.role} for m in project.projectmembership_set.all()),
            key=lambda person: person["username"],
        )
        return [{"username": project.owner.username, "role": Role.OWNER}, *members]

    def get_documents_url(self, project: Project) -> str:
        path = reverse("api:project-documents", kwargs={"project_id": project.pk})
        request = self.context.get("request")
        return request.build_absolute_uri(path) if request is not None else path

    def validate_name(self, value: str) -> str:
        if not value.strip():
            raise serializers.ValidationError("A matter needs a name.")
        return value.strip()


MEMBERSHIP_ROLES = [(Role.REVIEWER.value, "reviewer"), (Role.MEMBER.value, "member")]


class MemberSerializer(serializers.Serializer[dict[str, Any]]):
    username = StrictCharField(max_length=150)
    role = serializers.ChoiceField(
        choices=MEMBERSHIP_ROLES,
        required=False,
        help_text="`reviewer` or `member`. Omitted: `member` for a new member, her role kept for one already in.",
    )

    def validate_username(self, value: str) -> User:
        user = User.objects.filter(username=value, is_active=True).first()
        if user is None:
            raise serializers.ValidationError("No active user has this username.")
        return user


class DocumentPageSerializer(serializers.Serializer[dict[str, Any]]):
    # A field named "label", as the API names it (DRF takes declared fields off the class: no clash at run time).
    label = serializers.CharField(  # type: ignore[assignment]
        help_text="The page's label: a PDF's page number (\"3\")."
    )
    start = serializers.IntegerField(help_text="Where the page begins in the document's `content`.")


class DocumentSerializer(serializers.ModelSerializer[Document]):
    """A KB document, without its text: ``length`` characters, ``page_count`` pages (0: no pages)."""

    length = serializers.SerializerMethodField()
    page_count = serializers.SerializerMethodField()

    class Meta:
        model = Document
        fields = ["id", "title", "length", "page_count", "created_at"]
        read_only_fields = fields

    def get_length(self, document: Document) -> int:
        return int(getattr(document, "content_length", None) or len(document.content))

    def get_page_count(self, document: Document) -> int:
        return len(document.pages)


class DocumentDetailSerializer(DocumentSerializer):
    """A KB document with its text, its pages (where each begins in ``content``) and whether answers cite it."""

    content = serializers.CharField(read_only=True, help_text="The text quotes are verified against.")
    pages = serializers.SerializerMethodField(
        help_text="Each page's `label` and the offset in `content` where it begins (`start`), in order; empty "
        "for a text without pages. A quote at `start`..`end` of this text is on the pages it spans."
    )
    cited = serializers.SerializerMethodField(
        help_text="Whether a verified quote of an answer cites it (then its text, title and pages never change)."
    )
    citation_count = serializers.IntegerField(read_only=True, help_text="How many verified quotes cite it.")

    class Meta(DocumentSerializer.Meta):
        fields = [*DocumentSerializer.Meta.fields, "cited", "citation_count", "pages", "content"]
        read_only_fields = fields

    @extend_schema_field(DocumentPageSerializer(many=True))
    def get_pages(self, document: Document) -> list[dict[str, Any]]:
        return [{"label": str(label), "start": start} for start, label in document.pages]

    def get_cited(self, document: Document) -> bool:
        return bool(document.citation_count)  # type: ignore[attr-defined]  # annotated by documents_of()


class TextDocumentSerializer(serializers.Serializer[dict[str, Any]]):
    title = StrictCharField(max_length=300)
    content = StrictCharField(trim_whitespace=False, help_text="At most LQAI_MAX_DOCUMENT_CHARS characters.")


class UploadedDocumentSerializer(serializers.Serializer[dict[str, Any]]):
    title = StrictCharField(max_length=300)
    file = serializers.FileField(help_text="A PDF with a text layer, or UTF-8 text; at most LQAI_MAX_UPLOAD_BYTES.")


class ByName(ApiPagination):
    ordering = ("name", "id")


class ByTitle(ApiPagination):
    ordering = ("title", "id")


def visible_project(request: Request, project_id: UUID) -> Project:
    return get_object_or_404(projects_visible_to(request.user), pk=project_id)


def _user(request: Request) -> AbstractBaseUser:
    user: AbstractBaseUser = request.user  # type: ignore[assignment]  # IsAuthenticated: never anonymous here
    return user


class RoleSerializer(serializers.Serializer[dict[str, Any]]):
    role = serializers.ChoiceField(choices=MEMBERSHIP_ROLES, help_text="`reviewer` or `member`.")


def _with_people(projects: QuerySet[Project]) -> QuerySet[Project]:
    memberships = ProjectMembership.objects.select_related("user")
    return projects.select_related("owner").prefetch_related(Prefetch("projectmembership_set", queryset=memberships))


@extend_schema_view(
    get=extend_schema(
        summary="List the matters you own or are a member of, by name",
        responses={200: ProjectSerializer(many=True), 400: OpenApiResponse(description=LIST_BAD_INPUT)},
    ),
    post=extend_schema(
        summary="Create a matter (you are its owner)",
        responses={
            201: ProjectSerializer,
            400: OpenApiResponse(description="Field errors: a `name` that is empty, not a string or too long."),
        },
    ),
)
class ProjectListCreateView(generics.ListCreateAPIView[Project]):
    serializer_class = ProjectSerializer
    pagination_class = ByName

    def get_queryset(self) -> QuerySet[Project]:
        return _with_people(projects_visible_to(self.request.user)).order_by("name", "id")

    def perform_create(self, serializer: serializers.BaseSerializer[Project]) -> None:
        owner: User = self.request.user  # type: ignore[assignment]  # IsAuthenticated: never anonymous here
        serializer.instance = create_project(owner=owner, name=serializer.validated_data["name"])


@extend_schema_view(get=extend_schema(summary="A matter", responses={200: ProjectSerializer, 404: NOT_FOUND}))
class ProjectDetailView(generics.RetrieveAPIView[Project]):
    serializer_class = ProjectSerializer
    lookup_url_kwarg = "project_id"

    def get_queryset(self) -> QuerySet[Project]:
        return _with_people(projects_visible_to(self.request.user))


class ProjectMembersView(APIView):
    @extend_schema(
        summary="Add a member to a matter you own, with her role (or change the role of one already in)",
        request=MemberSerializer,
        responses={
            201: ProjectSerializer,
            200: OpenApiResponse(ProjectSerializer, description="She was a member already (her role as given)."),
            400: OpenApiResponse(
                description="Field errors: no active user has this `username`, or it is not a string; a `role` "
                "that is not `reviewer` or `member`; the owner named (her role is owner)."
            ),
            403: NOT_OWNER,
            404: NOT_FOUND,
        },
    )
    def post(self, request: Request, project_id: UUID) -> Response:
        project = visible_project(request, project_id)
        serializer = MemberSerializer(data=request.data)
        serializer.is_valid(raise_exception=True)
        user, role = serializer.validated_data["username"], serializer.validated_data.get("role")
        if user.pk == project.owner_id and project.owner_id == request.user.pk:
            # The owner naming herself: she is in the matter already, as its owner (no role to set).
            if role is not None:
                raise serializers.ValidationError(
                    {"role": ["The matter's owner is its owner: her role does not change."]}
                )
            return Response(_project_body(request, project), status=status.HTTP_200_OK)
        change = _set_role(request, project=project, user=user, role=role)
        return Response(_project_body(request, project), status=status.HTTP_201_CREATED if change.added else 200)


def _project_body(request: Request, project: Project) -> dict[str, Any]:
    project = _with_people(Project.objects.filter(pk=project.pk)).get()
    return dict(ProjectSerializer(project, context={"request": request}).data)


def _set_role(request: Request, *, project: Project, user: User, role: str | None) -> RoleChange:
    """:func:`chats.matters.set_member_role`, its refusals as the API answers them (403, 400)."""
    try:
        return set_member_role(project=project, user=user, role=role, by=_user(request))
    except NotTheOwner as exc:
        raise PermissionDenied(str(exc)) from None
    except NotAMemberRole as exc:
        raise serializers.ValidationError({"role": [str(exc)]}) from None


class ProjectMemberView(APIView):
    @extend_schema(
        summary="Change the role of a member of a matter you own: `reviewer` or `member`",
        request=RoleSerializer,
        responses={
            200: ProjectSerializer,
            400: OpenApiResponse(description="Field errors: a `role` that is not `reviewer` or `member`."),
            403: NOT_OWNER,
            404: OpenApiResponse(description="No such matter visible to you, or she is not a member."),
        },
    )
    def patch(self, request: Request, project_id: UUID, username: str) -> Response:
        project = visible_project(request, project_id)
        serializer = RoleSerializer(data=request.data)
        serializer.is_valid(raise_exception=True)
        membership = ProjectMembership.objects.select_related("user").filter(project=project, user__username=username)
        found = membership.first()
        if found is None:
            if project.owner_id != request.user.pk:
                raise PermissionDenied(str(NotTheOwner("Only the matter's owner can change its members.")))
            raise Http404
        _set_role(request, project=project, user=found.user, role=serializer.validated_data["role"])
        return Response(_project_body(request, project))

    @extend_schema(
        summary="Remove a member from a matter you own (her access ends with her next request)",
        request=None,
        responses={
            204: None,
            403: NOT_OWNER,
            404: OpenApiResponse(description="No such matter visible to you, or she is not a member."),
        },
    )
    def delete(self, request: Request, project_id: UUID, username: str) -> Response:
        project = visible_project(request, project_id)
        try:
            remove_member(project=project, username=username, by=_user(request))
        except NotTheOwner as exc:
            raise PermissionDenied(str(exc)) from None
        except NoSuchMember:
            raise Http404 from None
        return Response(status=status.HTTP_204_NO_CONTENT)


@extend_schema_view(
    get=extend_schema(
        summary="List a matter's KB documents, by title (without their text: GET .../documents/{id}/ gives it)",
        description="A matter's documents, page by page.",
        responses={
            200: DocumentSerializer(many=True),
            400: OpenApiResponse(description=LIST_BAD_INPUT),
            404: NOT_FOUND,
        },
    )
)
class ProjectDocumentsView(generics.ListAPIView[Document]):
    """A matter's documents, page by page (GET); add one (POST)."""

    serializer_class = DocumentSerializer
    parser_classes = [JSONParser, MultiPartParser, FormParser]
    pagination_class = ByTitle

    def get_queryset(self) -> QuerySet[Document]:
        project = visible_project(self.request, self.kwargs["project_id"])
        documents = Document.objects.filter(project=project).defer("content").order_by("title", "id")
        return documents.annotate(content_length=Length("content"))

    @extend_schema(
        summary="Add a KB document: JSON {title, content}, or a multipart upload {title, file} of a PDF or text",
        description="Add a document to a matter you belong to; its text is what quotes of it are verified against.",
        request={
            "application/json": TextDocumentSerializer,
            "multipart/form-data": UploadedDocumentSerializer,
        },
        responses={
            201: DocumentSerializer,
            400: OpenApiResponse(
                description="Field errors (a `title` or `content` that is not a string), or a file that is not "
                "readable text or PDF."
            ),
            404: NOT_FOUND,
            413: OpenApiResponse(
                description="Over a limit, named in the detail: the file's bytes, its text, a PDF's pages or reading "
                "time, a zip's files."
            ),
        },
    )
    def post(self, request: Request, project_id: UUID) -> Response:
        project = visible_project(request, project_id)
        try:
            if request.content_type.startswith("multipart/"):
                upload = UploadedDocumentSerializer(data=request.data)
                upload.is_valid(raise_exception=True)
                file = upload.validated_data["file"]
                document = upload_document(
                    project=project,
                    title=upload.validated_data["title"],
                    file=file,
                    size=file.size,
                    content_type=file.content_type or "",
                )
            else:
                typed = TextDocumentSerializer(data=request.data)
                typed.is_valid(raise_exception=True)
                document = add_document(
                    project=project, title=typed.validated_data["title"], text=typed.validated_data["content"]
                )
        except UnreadableDocument as exc:
            field = "file" if request.content_type.startswith("multipart/") else "content"
            raise serializers.ValidationError({field: [str(exc)]}) from None
        except DocumentTooLarge as exc:
            raise PayloadTooLarge(str(exc)) from None
        return Response(DocumentSerializer(document).data, status=status.HTTP_201_CREATED)


@extend_schema_view(
    get=extend_schema(
        summary="A KB document of a matter: its text, its pages and whether answers cite it",
        responses={200: DocumentDetailSerializer, 404: DOCUMENT_NOT_FOUND},
    )
)
class ProjectDocumentView(generics.RetrieveAPIView[Document]):
    """One document of a matter you belong to; another matter's document, or one of a matter you are not a
    member of, is a 404."""

    serializer_class = DocumentDetailSerializer
    lookup_url_kwarg = "document_id"

    def get_queryset(self) -> QuerySet[Document]:
        if getattr(self, "swagger_fake_view", False):  # schema generation: no request user, no matter
            return Document.objects.none()
        return documents_of(visible_project(self.request, self.kwargs["project_id"]))
