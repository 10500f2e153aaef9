"""URLs of the drafts API (mounted under /api/). Ids are UUIDs: anything else is a 404."""

from django.urls import path

from drafts import views

app_name = "drafts"

urlpatterns = [
    path("projects/<uuid:project_id>/drafts/", views.ProjectDraftsView.as_view(), name="project-drafts"),
    path("drafts/<uuid:draft_id>/", views.DraftView.as_view(), name="draft"),
]
