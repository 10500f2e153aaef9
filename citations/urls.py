"""URLs of the ledger trace API (mounted under /api/)."""

from django.urls import path

from citations.views import ChatLedgerView

app_name = "citations"

urlpatterns = [
    path("chats/<uuid:chat_id>/ledger/", ChatLedgerView.as_view(), name="chat-ledger"),
]
