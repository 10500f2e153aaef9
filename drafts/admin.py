"""The checks of drafts in the admin: read-only (each is written once, with its turn), scoped to the staff user's
matters as the chat domain's admin is."""

from __future__ import annotations

from typing import Any

from django.contrib import admin
from django.db.models import QuerySet
from django.http import HttpRequest

from chats.admin import MatterScopedAdmin, UUIDSearchAdmin
from drafts.models import DraftCheck
from lqai.admin_mixins import ReadOnlyAdminMixin


@admin.register(DraftCheck)
class DraftCheckAdmin(MatterScopedAdmin, ReadOnlyAdminMixin, UUIDSearchAdmin):
    """A draft check beside its turn (``message``): the file, its pages and its findings as checked."""

    matter_scope = ("chat", "chat")
    list_display = ("__str__", "file_name", "format", "chat", "message", "created_at")
    list_select_related = ("chat", "message")
    list_filter = ("format",)
    search_fields = ("id", "chat_id", "message_id")
    search_help_text = "An exact draft check, chat or message id (UUID)."
    raw_id_fields = ("message", "chat", "project")
    show_full_result_count = False
    show_facets = admin.ShowFacets.NEVER

    def get_queryset(self, request: HttpRequest) -> QuerySet[Any]:
        # The list never shows the draft's text (the message's content) nor the findings.
        return super().get_queryset(request).defer("message__content", "findings", "authorities")
