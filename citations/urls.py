"""URLs of the ledger trace API and of the signed matter export (mounted under /api/)."""

from django.urls import path

from citations.views import ChatLedgerView, MatterExportView

app_name = "citations"

urlpatterns = [
    path("chats/<uuid:chat_id>/ledger/", ChatLedgerView.as_view(), name="chat-ledger"),
    path("projects/<uuid:project_id>/export/", MatterExportView.as_view(), name="project-export"),
]
