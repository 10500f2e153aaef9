"""URL configuration: the admin, the chat API, the ledger trace API, the OpenAPI schema, the login and the trace
pages."""

from django.contrib import admin
from django.urls import include, path
from drf_spectacular.views import SpectacularAPIView

from pages.urls import auth_urlpatterns

urlpatterns = [
    path("admin/", admin.site.urls),
    path("api/", include("chats.urls")),
    path("api/", include("citations.urls")),
    path("api/schema/", SpectacularAPIView.as_view(), name="schema"),
    *auth_urlpatterns,
    path("", include("pages.urls")),
]

# Django's own errors answer JSON under /api/ (and its usual pages elsewhere): see chats/errors.py.
handler400 = "chats.errors.bad_request"
handler403 = "chats.errors.permission_denied"
handler404 = "chats.errors.page_not_found"
handler500 = "chats.errors.server_error"
