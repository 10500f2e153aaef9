"""URLs of the ledger trace API and of the signed exports, of a matter or of a matter-less chat (mounted under
/api/)."""

from django.urls import path

from citations.views import ChatExportView, ChatLedgerView, MatterExportView

app_name = "citations"

urlpatterns = [
    path("chats/<uuid:chat_id>/ledger/", ChatLedgerView.as_view(), name="chat-ledger"),
    path("projects/<uuid:project_id>/export/", MatterExportView.as_view(), name="project-export"),
    path("chats/<uuid:chat_id>/export/", ChatExportView.as_view(), name="chat-export"),
]
