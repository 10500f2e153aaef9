"""Admin of the chat domain.

The record of a turn (messages and the four per-turn tables) is read-only for everyone; matters, chats,
documents and opinions are editable by staff, except what a citation fixed (``chats.models.CitedTextGuard``);
a document is saved through its service (``chats.documents.save_document``). A staff user who is not a
superuser sees only their own matters (:class:`MatterScopedAdmin`). The building blocks shared with
``citations.admin`` (:class:`ReadOnlyAdminMixin`, :class:`UUIDSearchAdmin`, :func:`admin_link`) live here so
that ``chats`` never imports ``citations``. Big tables get no full count, no facets and exact-id search.
What each page allows and why: docs/architecture.md and docs/security.md.
"""

from __future__ import annotations

import uuid
from collections.abc import Sequence
from typing import Any, ClassVar

from django.contrib import admin, messages
from django.contrib.admin import widgets
from django.contrib.admin.options import BaseModelAdmin
from django.contrib.auth.admin import UserAdmin
from django.contrib.auth.models import User
from django.core.exceptions import PermissionDenied, ValidationError
from django.db.models import ForeignKey, Model, Q, QuerySet, URLField
from django.forms import ModelChoiceField
from django.http import HttpRequest, HttpResponse
from django.urls import reverse
from django.utils.html import format_html
from django.utils.safestring import SafeString

from chats.documents import save_document
from chats.models import (
    CaseCitation,
    CaselawOpinion,
    Chat,
    Document,
    DocumentPassage,
    DocumentQuote,
    Invitation,
    MatterTerm,
    Message,
    MessageToolSource,
    OpinionQuote,
    Project,
    ProjectMembership,
    StatuteCitation,
    TurnRateCount,
)
from chats.selectors import chats_visible_to, projects_visible_to, users_visible_to
from lqai.admin_mixins import ReadOnlyAdminMixin


def admin_link(model: type[Model], pk: object, label: object) -> SafeString:
    """An ``<a href>`` to the admin change page of ``model`` row ``pk``. Built from the id: no query."""
    url = reverse(f"admin:{model._meta.app_label}_{model._meta.model_name}_change", args=[pk])
    return format_html('<a href="{}">{}</a>', url, label)


class UUIDSearchAdmin(admin.ModelAdmin):
    """Search by exact id. A term that parses as a UUID matches any of ``search_fields`` (UUID
    columns, each indexed) with ``=``, OR-ed; any other term matches nothing and says why."""

    search_help_text = "An exact id (UUID)."

    def get_search_results(
        self, request: HttpRequest, queryset: QuerySet[Any], search_term: str
    ) -> tuple[QuerySet[Any], bool]:
        term = search_term.strip()
        if not term:
            return queryset, False
        fields = self.get_search_fields(request)
        try:
            value = uuid.UUID(term)
        except ValueError:
            self.message_user(
                request,
                f"Search takes an exact id (a UUID) of: {', '.join(fields)}. {term!r} is not a UUID.",
                level=messages.WARNING,
            )
            return queryset.none(), False
        condition = Q()
        for field in fields:
            condition |= Q(**{field: value})
        return queryset.filter(condition), False


class MatterScopedAdmin(BaseModelAdmin):
    """Shows a staff user who is not a superuser only the rows of the matters they belong to now, through
    the API's selectors (``chats.selectors``): ``matter_scope`` is how a row reaches them, ``("project",
    path)`` through :func:`projects_visible_to` or ``("chat", path)`` through :func:`chats_visible_to`
    (``path`` is the lookup from the row, ``pk`` for the model itself). Anything else is not listed and
    its page answers as if it did not exist. The matter and chat pickers of its forms offer only theirs."""

    matter_scope: ClassVar[tuple[str, str]]

    def get_queryset(self, request: HttpRequest) -> QuerySet[Any]:
        queryset = super().get_queryset(request)
        if request.user.is_superuser:
            return queryset
        kind, path = self.matter_scope
        visible = projects_visible_to(request.user) if kind == "project" else chats_visible_to(request.user)
        return queryset.filter(**{f"{path}__in": visible.values("pk")})

    def formfield_for_foreignkey(
        self, db_field: ForeignKey[Any, Any], request: HttpRequest, **kwargs: Any
    ) -> ModelChoiceField[Any] | None:
        """A matter, chat or user picker offers only the staff user's own (what the API shows them); a raw-id
        picker names only those too (another id is shown bare, as if no such row existed)."""
        visible = None if request.user.is_superuser else _visible_of(db_field.remote_field.model, request)
        if visible is not None:
            kwargs["queryset"] = visible
            if db_field.name in self.raw_id_fields:
                kwargs["widget"] = ScopedRawIdWidget(
                    db_field.remote_field, self.admin_site, visible=visible, using=kwargs.get("using")
                )
        return super().formfield_for_foreignkey(db_field, request, **kwargs)


def _visible_of(model: Any, request: HttpRequest) -> QuerySet[Any] | None:
    """The rows of ``model`` the API shows ``request.user`` (matters, chats, users), ``None`` for other models."""
    if model is Project:
        return projects_visible_to(request.user)
    if model is Chat:
        return chats_visible_to(request.user)
    if model is User:
        return users_visible_to(request.user)
    return None


class ScopedRawIdWidget(widgets.ForeignKeyRawIdWidget):
    """Django's raw-id picker, naming (and linking) the chosen row only if it is one of ``visible``: the stock
    widget looks the id up in the whole table, so any id typed in, or passed as ``?field=`` to an add form,
    would print that row's name."""

    def __init__(self, rel: Any, admin_site: admin.AdminSite, *, visible: QuerySet[Any], **kwargs: Any) -> None:
        super().__init__(rel, admin_site, **kwargs)
        self.visible = visible

    def label_and_url_for_value(self, value: Any) -> tuple[str, str]:
        key = self.rel.get_related_field().name
        try:
            shown = self.visible.filter(**{key: value}).exists()
        except (ValueError, ValidationError):
            shown = False
        return super().label_and_url_for_value(value) if shown else ("", "")


class PermanentRecordDeleteAdmin(admin.ModelAdmin):
    """The delete page (and the bulk delete action) of matters and chats: what is on legal hold or holds
    turns is listed as protected, with why, and nothing is deleted (the models refuse it anyway)."""

    def deletion_refusals(self, objs: Sequence[Any]) -> list[str]:
        raise NotImplementedError

    def get_deleted_objects(
        self, objs: Sequence[Any] | QuerySet[Any], request: HttpRequest
    ) -> tuple[Any, Any, Any, Any]:
        to_delete, model_count, perms_needed, protected = super().get_deleted_objects(objs, request)
        refusals = self.deletion_refusals(list(objs))
        if refusals:
            # Said instead of "no permission to delete messages" (the record is read-only): the reason itself.
            return to_delete, model_count, set(), [*protected, *refusals]
        return to_delete, model_count, perms_needed, protected


@admin.register(ProjectMembership)
class ProjectMembershipAdmin(MatterScopedAdmin, ReadOnlyAdminMixin, admin.ModelAdmin):
    """Who is in which matter, in which role: read-only (the owner changes roles through
    ``chats.matters.set_member_role``); a staff user who is not a superuser sees those of their matters only."""

    matter_scope = ("project", "project")
    list_display = ("project", "user", "role")
    list_filter = ("role",)
    list_select_related = ("project", "user")


@admin.register(Project)
class ProjectAdmin(MatterScopedAdmin, PermanentRecordDeleteAdmin):
    matter_scope = ("project", "pk")
    list_display = ("name", "owner", "legal_hold", "created_at")
    list_filter = ("legal_hold",)
    list_select_related = ("owner",)
    search_fields = ("name",)
    # The members and their roles are listed read-only by ProjectMembershipAdmin: only the owner changes them,
    # through chats.matters.set_member_role (the API, the pages).
    raw_id_fields = ("owner",)
    # The certificates' wording is the owner's, set on the matter's page (chats.matters.set_certificate_wording).
    readonly_fields = ("id", "created_at", "certificate_court", "judge_wording")

    def deletion_refusals(self, objs: Sequence[Any]) -> list[str]:
        refusals = []
        for project in objs:
            if project.legal_hold:
                refusals.append(f"Matter {project}: on legal hold (lift the hold first).")
            elif Message.objects.filter(chat__project=project).exists():
                refusals.append(
                    f"Matter {project}: its chat turns are a permanent record; a matter is removed only with "
                    f"`manage.py purge_matter {project.pk} --confirm`, which leaves a tombstone."
                )
        return refusals


@admin.register(Chat)
class ChatAdmin(MatterScopedAdmin, PermanentRecordDeleteAdmin, UUIDSearchAdmin):
    matter_scope = ("chat", "pk")
    list_display = ("__str__", "project", "owner", "created_at")
    list_select_related = ("project", "owner")
    search_fields = ("id", "project_id")
    search_help_text = "An exact chat or project id (UUID)."
    raw_id_fields = ("project", "owner")
    readonly_fields = ("id", "created_at")
    show_full_result_count = False
    show_facets = admin.ShowFacets.NEVER

    def get_readonly_fields(self, request: HttpRequest, obj: Any = None) -> tuple[str, ...]:
        """A chat holding turns keeps its matter (its turns are sealed with it: ``chats.0028``)."""
        fixed = ("project",) if obj is not None and obj.messages.exists() else ()
        return (*self.readonly_fields, *fixed)

    def deletion_refusals(self, objs: Sequence[Any]) -> list[str]:
        refusals = []
        for chat in objs:
            if chat.project_id is not None and Project.objects.filter(pk=chat.project_id, legal_hold=True).exists():
                refusals.append(f"{chat}: its matter is on legal hold.")
            elif chat.messages.exists():
                refusals.append(f"{chat}: its turns are a permanent record (only a matter purge removes them).")
        return refusals


@admin.register(Message)
class MessageAdmin(MatterScopedAdmin, ReadOnlyAdminMixin, UUIDSearchAdmin):
    """A message is the record of what was asked and answered: read-only for everyone."""

    matter_scope = ("chat", "chat")
    list_display = (
        "__str__",
        "chat",
        "role",
        "kind",
        "status",
        "verdict",
        "model_name",
        "created_at",
        "finalized_at",
    )
    list_select_related = ("chat",)
    # These fields have choices: the filters list them without querying the table.
    list_filter = ("role", "kind", "status", "verdict")
    search_fields = ("id", "chat_id")
    search_help_text = "An exact message or chat id (UUID)."
    # Raw ids: a <select> would list every message of the table.
    raw_id_fields = ("chat", "reply_to")
    # Usage is what the model reported for the turn: a record, not an input.
    readonly_fields = ("id", "created_at", "model_name", "prompt_tokens", "completion_tokens", "latency_ms")
    show_full_result_count = False
    show_facets = admin.ShowFacets.NEVER


class CitedTextAdmin(admin.ModelAdmin):
    """Shows a source's text (and a document's matter) read-only once it is cited: a revised text is added
    as a new source."""

    def get_readonly_fields(self, request: HttpRequest, obj: Any = None) -> list[str]:
        fields = [str(name) for name in super().get_readonly_fields(request, obj)]
        if obj is not None and obj.is_cited():
            fields += [obj.cited_text_field, *obj.cited_fixed_fields]
        return fields


@admin.register(Document)
class DocumentAdmin(MatterScopedAdmin, CitedTextAdmin):
    matter_scope = ("project", "project")
    list_display = ("title", "project", "created_at")
    list_select_related = ("project",)
    search_fields = ("title",)
    raw_id_fields = ("project",)
    # pages: where the uploaded PDF's pages start in the content (chats.pages); set by the upload, not by hand.
    readonly_fields = ("id", "created_at", "pages")

    def save_model(self, request: HttpRequest, obj: Document, form: Any, change: bool) -> None:
        save_document(document=obj)

    def get_queryset(self, request: HttpRequest) -> QuerySet[Document]:
        # A document can be 100KB: the changelist never shows it, and the change page loads it on demand.
        return super().get_queryset(request).defer("content")


@admin.register(CaselawOpinion)
class CaselawOpinionAdmin(CitedTextAdmin):
    list_display = ("case_name", "citation", "court", "date_filed", "provider", "retrieved_at")
    search_fields = ("case_name", "citation", "opinion_id")
    # pages: computed from the text's star paging when it is saved (CaselawOpinion.save).
    readonly_fields = ("id", "pages")
    # A scheme-less url typed here is an https one (Django 6's default, chosen now).
    formfield_overrides = {URLField: {"assume_scheme": "https"}}

    def get_queryset(self, request: HttpRequest) -> QuerySet[CaselawOpinion]:
        # Opinion texts are long: the changelist never shows them, and the change page loads one on demand.
        return super().get_queryset(request).defer("text")


class _ArtifactAdmin(MatterScopedAdmin, ReadOnlyAdminMixin, UUIDSearchAdmin):
    """The per-turn artifact tables: read-only, big, searched by exact id, scoped to the staff user's matters."""

    matter_scope = ("chat", "message__chat")
    show_full_result_count = False
    show_facets = admin.ShowFacets.NEVER
    # The rows a page names (the source and the message), joined in; their long text columns never read.
    joined: ClassVar[tuple[str, ...]] = ("message",)
    _TEXT_COLUMNS: ClassVar[dict[str, str]] = {
        "message": "message__content",
        "document": "document__content",
        "opinion": "opinion__text",
    }

    def get_queryset(self, request: HttpRequest) -> QuerySet[Any]:
        deferred = [self._TEXT_COLUMNS[relation] for relation in self.joined]
        return super().get_queryset(request).select_related(*self.joined).defer(*deferred)


@admin.register(DocumentQuote)
class DocumentQuoteAdmin(_ArtifactAdmin):
    list_display = (
        "__str__",
        "document",
        "verification_method",
        "verification_confidence",
        "unverified_reason",
        "message",
        "created_at",
    )
    # verification_method has choices: the filter lists them (unverified included) without querying the table.
    list_filter = ("verification_method",)
    joined = ("document", "message")
    search_fields = ("id", "message_id", "document_id")
    search_help_text = "An exact citation, message or document id (UUID)."


@admin.register(OpinionQuote)
class OpinionQuoteAdmin(_ArtifactAdmin):
    list_display = (
        "__str__",
        "opinion",
        "verification_method",
        "verification_confidence",
        "unverified_reason",
        "message",
        "created_at",
    )
    list_filter = ("verification_method",)
    joined = ("opinion", "message")
    search_fields = ("id", "message_id", "opinion_id")
    search_help_text = "An exact citation, message or opinion id (UUID)."


@admin.register(MessageToolSource)
class MessageToolSourceAdmin(_ArtifactAdmin):
    list_display = ("label", "source_kind", "tool", "provider", "message", "created_at")
    joined = ("message",)
    search_fields = ("id", "message_id")
    search_help_text = "An exact tool-source or message id (UUID)."


@admin.register(CaseCitation)
class CaseCitationAdmin(_ArtifactAdmin):
    list_display = ("citation", "case_name", "kind", "status", "opinion", "provider", "message", "created_at")
    list_filter = ("status", "kind")
    joined = ("opinion", "message")
    search_fields = ("id", "message_id", "opinion_id")
    search_help_text = "An exact case-citation, message or opinion id (UUID)."


@admin.register(StatuteCitation)
class StatuteCitationAdmin(_ArtifactAdmin):
    list_display = ("citation", "cited", "kind", "status", "release_point", "message", "created_at")
    list_filter = ("status", "kind")
    joined = ("message",)
    search_fields = ("id", "message_id")
    search_help_text = "An exact statute-row or message id (UUID)."


# Derived search data (chats.passages): made from the documents, never edited by hand.
@admin.register(DocumentPassage)
class DocumentPassageAdmin(MatterScopedAdmin, ReadOnlyAdminMixin, admin.ModelAdmin):
    matter_scope = ("project", "document__project")
    list_display = ("document", "position", "start", "end")
    list_select_related = ("document",)
    show_full_result_count = False
    search_fields = ("=document__id",)
    search_help_text = "An exact document id (UUID)."


@admin.register(MatterTerm)
class MatterTermAdmin(MatterScopedAdmin, ReadOnlyAdminMixin, admin.ModelAdmin):
    matter_scope = ("project", "project")
    list_display = ("lexeme", "passages", "project")
    list_select_related = ("project",)
    show_full_result_count = False
    search_fields = ("=lexeme",)


# Made and withdrawn on the matter's page by its owner (chats.invitations); here only seen, or deleted with the matter.
@admin.register(Invitation)
class InvitationAdmin(MatterScopedAdmin, admin.ModelAdmin):
    matter_scope = ("project", "project")
    list_display = ("project", "created_by", "created_at", "expires_at", "used_by", "used_at", "revoked_at")
    list_select_related = ("project", "created_by", "used_by")
    readonly_fields = ("token_sha256",)

    def has_add_permission(self, request: HttpRequest) -> bool:
        return False

    def has_change_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return False


@admin.register(TurnRateCount)
class TurnRateCountAdmin(ReadOnlyAdminMixin, admin.ModelAdmin):
    """The turn-rate counts (chats.throttles), for an operator asking why a user gets 429: read-only, and
    shown to superusers only (they name users across every matter)."""

    list_display = ["user", "window_start", "turns"]
    list_select_related = ["user"]
    show_full_result_count = False

    def has_view_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return bool(request.user.is_superuser)

    def has_module_permission(self, request: HttpRequest) -> bool:
        return bool(request.user.is_superuser)


# A user who owns a matter or a chat, or asked anything, is protected (never deleted with the record): the
# user's delete page says what to do instead.
admin.site.unregister(User)


@admin.register(User)
class RecordKeepingUserAdmin(UserAdmin):
    """Users, as every staff user may see them: a superuser sees everyone; any other staff user sees only
    themselves and the people of the matters they belong to now (``users_visible_to``; anyone else's page
    answers as if they did not exist), cannot change anyone's staff status, superuser status, groups or
    permissions (their own included), and cannot add users (a new user belongs to no matter of theirs)."""

    ACCESS_FIELDS = ("is_staff", "is_superuser", "groups", "user_permissions")

    def get_queryset(self, request: HttpRequest) -> QuerySet[Any]:
        queryset = super().get_queryset(request)
        if request.user.is_superuser:
            return queryset
        return queryset.filter(pk__in=users_visible_to(request.user).values("pk"))

    def get_readonly_fields(self, request: HttpRequest, obj: Any = None) -> tuple[str, ...]:
        readonly = tuple(super().get_readonly_fields(request, obj))
        return readonly if request.user.is_superuser else (*readonly, *self.ACCESS_FIELDS)

    def has_add_permission(self, request: HttpRequest) -> bool:
        return bool(request.user.is_superuser) and super().has_add_permission(request)

    def user_change_password(self, request: HttpRequest, id: str, form_url: str = "") -> HttpResponse:
        """Only a superuser sets another user's password: anyone else setting a colleague's would take over
        their account (and their matters)."""
        if not request.user.is_superuser and str(id) != str(request.user.pk):
            raise PermissionDenied
        return super().user_change_password(request, id, form_url)

    def get_deleted_objects(
        self, objs: Sequence[Any] | QuerySet[Any], request: HttpRequest
    ) -> tuple[Any, Any, Any, Any]:
        to_delete, model_count, perms_needed, protected = super().get_deleted_objects(objs, request)
        if protected:
            protected = [
                *protected,
                "Deactivate the account instead (untick Active): a user's matters, chats and questions are a "
                "permanent record and never go with the user.",
            ]
        return to_delete, model_count, perms_needed, protected


def unregister_token_admins(site: admin.AdminSite = admin.site) -> None:
    """Take every API token model out of the admin (DRF's ``TokenProxy``, knox's ``AuthToken``, any other):
    a token listed there is a credential shown to every staff user. Called from ``ChatsConfig.ready()``,
    once every app's admin module has registered its models."""
    for model in list(site._registry):
        if model._meta.app_label in {"authtoken", "knox"} or "token" in (model._meta.model_name or ""):
            site.unregister(model)
