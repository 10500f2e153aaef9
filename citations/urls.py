"""URLs of the ledger trace API (mounted under /api/)."""


app_name = "citations"

urlpatterns: list = []
