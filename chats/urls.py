"""URLs of the chat API (mounted under /api/). Ids are UUIDs: anything else is a 404."""

from django.urls import path

from chats import views

app_name = "chats"

urlpatterns = [
    path("chats/", views.ChatListCreateView.as_view(), name="chat-list"),
    path("chats/<uuid:chat_id>/", views.ChatDetailView.as_view(), name="chat-detail"),
    path("chats/<uuid:chat_id>/messages/", views.MessageCreateView.as_view(), name="message-create"),
    path("chats/<uuid:chat_id>/messages/stream/", views.MessageStreamView.as_view(), name="message-stream"),
    path("projects/<uuid:project_id>/legal-hold/", views.LegalHoldView.as_view(), name="project-legal-hold"),
    path(
        "projects/<uuid:project_id>/certificate-wording/",
        views.CertificateWordingView.as_view(),
        name="project-certificate-wording",
    ),
    path(
        "chats/<uuid:chat_id>/messages/<uuid:message_id>/resume/",
        views.MessageResumeView.as_view(),
        name="message-resume",
    ),
]
