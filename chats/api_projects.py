"""The matters API: matters (``Project``), their members and their knowledge-base documents.

Access is the chat API's: a matter is visible to its current owner and members only
(:func:`chats.selectors.projects_visible_to`); any other id is a 404. Only the owner adds and removes members
(403 for a member). Any member adds documents: JSON ``{"title", "content"}`` for a text, or a multipart upload
(``title``, ``file``) of a text or PDF file, whose pages are kept so that every quote from it reports its pages.
A file over ``LQAI_MAX_UPLOAD_BYTES``, a text over ``LQAI_MAX_DOCUMENT_CHARS`` or a file over the bounds of
``chats.documents`` (a PDF's pages and reading time, a zip's files) is a 413; a PDF without extractable text a 400.
"""

from __future__ import annotations

from typing import Any
from uuid import UUID

from django.contrib.auth.base_user import AbstractBaseUser
from django.contrib.auth.models import User
from django.db.models import QuerySet
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
from chats.matters import NoSuchMember, NotTheOwner, add_member, create_project, remove_member
from chats.models import Document, Project
from chats.pagination import LIST_BAD_INPUT, ApiPagination
from chats.parsers import JSONParser
from chats.selectors import documents_of, projects_visible_to

NOT_FOUND = OpenApiResponse(description="No such matter visible to you.")
DOCUMENT_NOT_FOUND = OpenApiResponse(description="No such matter visible to you, or no such document in it.")
NOT_OWNER = OpenApiResponse(description="You are a member, not the owner: only the owner changes the members.")


class ProjectSerializer(serializers.ModelSerializer[Project]):
    """A matter: its owner and current members (usernames)."""

    name = StrictCharField(max_length=200, help_text="The matter's name.")
    owner = serializers.CharField(source="owner.username", read_only=True)
    members = serializers.SerializerMethodField()
    documents_url = serializers.SerializerMethodField()

    class Meta:
        model = Project
        fields = ["id", "name", "owner", "members", "created_at", "documents_url"]
        read_only_fields = ["id", "owner", "members", "created_at", "documents_url"]

    def get_members(self, project: Project) -> list[str]:
        return sorted(member.username for member in project.members.all())

    def get_documents_url(self, project: Project) -> str:
        path = reverse("api:project-documents", kwargs={"project_id": project.pk})
        request = self.context.get("request")
        return request.build_absolute_uri(path) if request is not None else path

    def validate_name(self, value: str) -> str:
        if not value.strip():
            raise serializers.ValidationError("A matter needs a name.")
        return value.strip()


class MemberSerializer(serializers.Serializer[dict[str, Any]]):
    username = StrictCharField(max_length=150)

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


def _with_people(projects: QuerySet[Project]) -> QuerySet[Project]:
    return projects.select_related("owner").prefetch_related("members")


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
        summary="Add a member to a matter you own",
        request=MemberSerializer,
        responses={
            201: ProjectSerializer,
            200: OpenApiResponse(ProjectSerializer, description="She was a member already."),
            400: OpenApiResponse(
                description="Field errors: no active user has this `username`, or it is not a string."
            ),
            403: NOT_OWNER,
            404: NOT_FOUND,
        },
    )
    def post(self, request: Request, project_id: UUID) -> Response:
        project = visible_project(request, project_id)
        serializer = MemberSerializer(data=request.data)
        serializer.is_valid(raise_exception=True)
        try:
            added = add_member(project=project, user=serializer.validated_data["username"], by=_user(request))
        except NotTheOwner as exc:
            raise PermissionDenied(str(exc)) from None
        project = _with_people(Project.objects.filter(pk=project.pk)).get()
        body = ProjectSerializer(project, context={"request": request}).data
        return Response(body, status=status.HTTP_201_CREATED if added else status.HTTP_200_OK)


class ProjectMemberView(APIView):
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
