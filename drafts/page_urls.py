"""URLs of the drafts' pages (mounted at /drafts/). Ids are UUIDs: anything else is a 404."""

from django.urls import path

from drafts import pages

app_name = "draft_pages"

urlpatterns = [
    path("<uuid:draft_id>/", pages.draft_page, name="draft"),
    path("new/<uuid:project_id>/", pages.draft_upload_form, name="upload-form"),
    path("new/<uuid:project_id>/check/", pages.draft_upload, name="upload"),
]
