from django.apps import AppConfig


class DemoConfig(AppConfig):
    """The demo a newcomer runs (``manage.py demo``, ``manage.py serve_info``), built on top of ``chats`` and
    ``citations``; nothing else depends on it."""

    name = "demo"
    verbose_name = "Demo"
    default_auto_field = "django.db.models.BigAutoField"
