"""The authority library in the admin. Releases, their files and sections are read-only: they are written only by
loading a publisher's file, with ``manage.py load_authorities`` or, for a staff user holding the permission
``authorities.load_authorities``, the releases' page "Load a file" (:class:`LoadFileForm`), both through
:mod:`authorities.loading`, so what a check names is what was loaded."""

from __future__ import annotations

from typing import Any

from django import forms
from django.conf import settings
from django.contrib import admin, messages
from django.core.exceptions import PermissionDenied
from django.http import HttpRequest, HttpResponse, HttpResponseRedirect
from django.template.response import TemplateResponse
from django.urls import URLPattern, path, reverse

from authorities.loading import CASELAW_SUFFIXES, USLM_SUFFIXES, load_uploaded_file
from authorities.models import AuthorityFile, AuthorityRelease, StatuteSection
from lqai.admin_mixins import ReadOnlyAdminMixin

LOAD_PERMISSION = "authorities.load_authorities"
# Room for the multipart form around the file in the request's declared length.
FORM_OVERHEAD_BYTES = 64 * 1024


class ReadOnly(ReadOnlyAdminMixin, admin.ModelAdmin):
    pass


class LoadFileForm(forms.Form):
    file = forms.FileField(
        help_text="A USLM title or CFR volume (.xml: OLRC's usc09.xml, GPO's CFR-2017-title27-vol3.xml) or case law "
        "(.json, .jsonl: CourtListener clusters, CAP cases)."
    )


def _declared_length(request: HttpRequest) -> int:
    value = request.META.get("CONTENT_LENGTH") or ""
    return int(value) if value.isdigit() else 0


@admin.register(AuthorityRelease)
class AuthorityReleaseAdmin(ReadOnly):
    list_display = ["code", "title", "label", "official", "released_on", "legal_status", "loaded_at"]
    list_filter = ["code", "official"]
    change_list_template = "admin/authorities/authorityrelease/change_list.html"

    def get_urls(self) -> list[URLPattern]:
        load = path("load/", self.admin_site.admin_view(self.load_file_view), name="authorities_load_file")
        return [load, *super().get_urls()]

    def changelist_view(self, request: HttpRequest, extra_context: dict[str, Any] | None = None) -> HttpResponse:
        context = {**(extra_context or {}), "can_load": request.user.has_perm(LOAD_PERMISSION)}
        return super().changelist_view(request, extra_context=context)

    def load_file_view(self, request: HttpRequest) -> HttpResponse:
        """Upload one file and load it (:func:`authorities.loading.load_uploaded_file`); the result, or why the file
        was refused, in words."""
        if not request.user.has_perm(LOAD_PERMISSION):
            raise PermissionDenied
        limit = settings.LQAI_MAX_AUTHORITY_UPLOAD_BYTES
        form, refused = LoadFileForm(), ""
        if request.method == "POST":
            if _declared_length(request) > limit + FORM_OVERHEAD_BYTES:
                # Refused before the body is read: Django would write it to disk first.
                refused = (
                    f"The file is over LQAI_MAX_AUTHORITY_UPLOAD_BYTES ({limit:,} bytes): load it with "
                    "manage.py load_authorities."
                )
            else:
                form = LoadFileForm(request.POST, request.FILES)
                if form.is_valid():
                    upload = form.cleaned_data["file"]
                    try:
                        loaded = load_uploaded_file(name=upload.name, chunks=upload.chunks(), size=upload.size)
                    except ValueError as exc:
                        form.add_error("file", str(exc))
                    else:
                        self.message_user(request, f"File {loaded.line()}", messages.SUCCESS)
                        return HttpResponseRedirect(reverse("admin:authorities_authorityrelease_changelist"))
        context = {
            **self.admin_site.each_context(request),
            "opts": self.model._meta,
            "title": "Load a statute, regulation or case-law file",
            "form": form,
            "refused": refused,
            "limit": limit,
            "suffixes": ", ".join(USLM_SUFFIXES + CASELAW_SUFFIXES),
        }
        return TemplateResponse(request, "admin/authorities/authorityrelease/load_file.html", context)


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
