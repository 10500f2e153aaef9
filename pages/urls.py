"""URLs of the trace pages and of the login (Django's auth views with the pages' own template)."""

from django.contrib.auth import views as auth_views
from django.urls import path

from pages import views

app_name = "pages"

urlpatterns = [
    path("", views.home, name="home"),
    path("chats/<uuid:chat_id>/", views.chat_page, name="chat"),
    path("chats/<uuid:chat_id>/turns/<uuid:message_id>/", views.turn_fragment, name="turn"),
    path("matters/<uuid:project_id>/record/", views.matter_record, name="matter-record"),
    path("chats/<uuid:chat_id>/record/", views.chat_record, name="chat-record"),
]

# Outside the namespace: LOGIN_URL is /accounts/login/, Django's default.
auth_urlpatterns = [
    path("accounts/login/", auth_views.LoginView.as_view(next_page="/"), name="login"),
    path("accounts/logout/", auth_views.LogoutView.as_view(next_page="/accounts/login/"), name="logout"),
]
