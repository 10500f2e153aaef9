"""URLs of the trace pages and of the login (Django's auth views with the pages' own template)."""

from django.contrib.auth import views as auth_views
from django.urls import path

from pages import views, workspace

app_name = "pages"

urlpatterns = [
    path("", views.home, name="home"),
    path("chats/<uuid:chat_id>/", views.chat_page, name="chat"),
    path("chats/<uuid:chat_id>/turns/<uuid:message_id>/", views.turn_fragment, name="turn"),
    path("matters/<uuid:project_id>/record/", views.matter_record, name="matter-record"),
    # The workspace (pages/workspace.py): matters, their chats, documents, members and invitations.
    path("matters/new/", workspace.matter_create, name="matter-create"),
    path("matters/<uuid:project_id>/", workspace.matter_page, name="matter"),
    path("matters/<uuid:project_id>/chats/", workspace.chat_create, name="chat-create"),
    path("matters/<uuid:project_id>/documents/", workspace.document_upload, name="document-upload"),
    path("matters/<uuid:project_id>/documents/<uuid:document_id>/", workspace.document_page, name="document"),
    path(
        "matters/<uuid:project_id>/documents/<uuid:document_id>/delete/",
        workspace.document_delete,
        name="document-delete",
    ),
    path("matters/<uuid:project_id>/members/", workspace.member_add, name="member-add"),
    path("matters/<uuid:project_id>/members/<str:username>/remove/", workspace.member_remove, name="member-remove"),
    path("matters/<uuid:project_id>/invitations/", workspace.invitation_create, name="invitation-create"),
    path(
        "matters/<uuid:project_id>/invitations/<uuid:invitation_id>/revoke/",
        workspace.invitation_revoke,
        name="invitation-revoke",
    ),
    path("invitations/join/", workspace.invitation_join, name="invitation-join"),
    path("invitations/<str:token>/", workspace.invitation_link, name="invitation"),
    path("chats/<uuid:chat_id>/record/", views.chat_record, name="chat-record"),
]

# Outside the namespace: LOGIN_URL is /accounts/login/, Django's default.
auth_urlpatterns = [
    path("accounts/login/", auth_views.LoginView.as_view(next_page="/"), name="login"),
    path("accounts/logout/", auth_views.LogoutView.as_view(next_page="/accounts/login/"), name="logout"),
]
