"""URLs of the token and matters APIs (mounted under /api/). Matter ids are UUIDs: anything else is a 404."""

from django.urls import path

from chats import api_projects, api_tokens

app_name = "api"

urlpatterns = [
    path("auth/token/", api_tokens.TokenView.as_view(), name="token"),
    path("auth/tokens/", api_tokens.TokenListView.as_view(), name="token-list"),
    path("auth/tokens/<str:token_id>/", api_tokens.TokenDetailView.as_view(), name="token-detail"),
    path("projects/", api_projects.ProjectListCreateView.as_view(), name="project-list"),
    path("projects/<uuid:project_id>/", api_projects.ProjectDetailView.as_view(), name="project-detail"),
    path("projects/<uuid:project_id>/members/", api_projects.ProjectMembersView.as_view(), name="project-members"),
    path(
        "projects/<uuid:project_id>/members/<str:username>/",
        api_projects.ProjectMemberView.as_view(),
        name="project-member",
    ),
    path(
        "projects/<uuid:project_id>/documents/", api_projects.ProjectDocumentsView.as_view(), name="project-documents"
    ),
    path(
        "projects/<uuid:project_id>/documents/<uuid:document_id>/",
        api_projects.ProjectDocumentView.as_view(),
        name="project-document",
    ),
]
