"""URLs of the chat API (mounted under /api/)."""


app_name = "chats"

urlpatterns: list = []
