from django.apps import AppConfig


class PagesConfig(AppConfig):
    """The trace pages: server-rendered pages where a matter's members read each answer's claims against their
    sources (on top of ``chats`` and ``citations``; neither imports it)."""

    name = "pages"
    verbose_name = "Trace pages"
