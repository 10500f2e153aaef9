"""URL configuration: the admin, the chat, token and matters APIs, the ledger trace API, the OpenAPI schema with
its interactive docs (Swagger UI, served from this server), the health checks, the login and the trace pages.

The schema and the docs require a login like the rest of the API (``SPECTACULAR_SETTINGS["SERVE_PERMISSIONS"]``):
the schema answers a token or a signed-in session, and the docs page, which a browser opens, sends anyone not
signed in to the login page and back."""

from django.contrib import admin
from django.contrib.auth.decorators import login_required
from django.urls import include, path
from drf_spectacular.views import SpectacularAPIView, SpectacularSwaggerSplitView

from lqai import health
from pages.urls import auth_urlpatterns

urlpatterns = [
    path("admin/", admin.site.urls),
    path("api/", include("chats.urls")),
    path("api/", include("chats.api_urls")),
    path("api/", include("citations.urls")),
    path("api/", include("drafts.urls")),
    path("api/schema/", SpectacularAPIView.as_view(), name="schema"),
    # The split view loads its start-up script as a file: no inline script, so the CSP needs no exception.
    path("api/docs/", login_required(SpectacularSwaggerSplitView.as_view(url_name="schema")), name="api-docs"),
    path("healthz", health.healthz, name="healthz"),
    path("readyz", health.readyz, name="readyz"),
    *auth_urlpatterns,
    path("drafts/", include("drafts.page_urls")),
    path("", include("pages.urls")),
]

# Django's own errors answer JSON under /api/ (and its usual pages elsewhere): see chats/errors.py.
handler400 = "chats.errors.bad_request"
handler403 = "chats.errors.permission_denied"
handler404 = "chats.errors.page_not_found"
handler500 = "chats.errors.server_error"
