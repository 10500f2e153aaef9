"""The authority library in the admin, read-only: releases, their files and sections are written by
``manage.py load_authorities`` only, so what a check names is what was loaded."""

from __future__ import annotations

from django.contrib import admin

from authorities.models import AuthorityFile, AuthorityRelease, StatuteSection
from lqai.admin_mixins import ReadOnlyAdminMixin


class ReadOnly(ReadOnlyAdminMixin, admin.ModelAdmin):
    pass


@admin.register(AuthorityRelease)
class AuthorityReleaseAdmin(ReadOnly):
    list_display = ["code", "title", "label", "official", "released_on", "legal_status", "loaded_at"]
    list_filter = ["code", "official"]


@admin.register(AuthorityFile)
class AuthorityFileAdmin(ReadOnly):
    list_display = ["name", "release", "first_part", "last_part", "sections", "completed_at"]
    list_select_related = ["release"]


@admin.register(StatuteSection)
class StatuteSectionAdmin(ReadOnly):
    list_display = ["identifier", "heading", "release"]
    list_select_related = ["release"]
    list_filter = ["release"]
    # Searched by identifier prefix (`/us/usc/t9/`): the unique (release, identifier) index serves it per release.
    search_fields = ["identifier__startswith", "heading"]
    show_full_result_count = False
