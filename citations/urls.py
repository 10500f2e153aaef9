"""URLs of the ledger trace API, of the review of a turn's claims (issue 52) and of the signed exports, of a
matter or of a matter-less chat (mounted under /api/)."""

from django.urls import path

from citations.review_api import MessageClaimsView, MessageReviewsView
from citations.views import ChatExportView, ChatLedgerView, MatterExportView

app_name = "citations"

urlpatterns = [
    path("chats/<uuid:chat_id>/ledger/", ChatLedgerView.as_view(), name="chat-ledger"),
    path("projects/<uuid:project_id>/export/", MatterExportView.as_view(), name="project-export"),
    path("chats/<uuid:chat_id>/export/", ChatExportView.as_view(), name="chat-export"),
    path("messages/<uuid:message_id>/claims/", MessageClaimsView.as_view(), name="message-claims"),
    path("messages/<uuid:message_id>/reviews/", MessageReviewsView.as_view(), name="message-reviews"),
]
