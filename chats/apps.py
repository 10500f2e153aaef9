from django.apps import AppConfig
from django.conf import settings
from django.core.exceptions import ImproperlyConfigured
from django.utils.module_loading import import_string


class ChatsConfig(AppConfig):
    name = "chats"
    verbose_name = "Chats"
    default_auto_field = "django.db.models.BigAutoField"

    def ready(self) -> None:
        from django.db.backends.signals import connection_created

        from chats import checks  # noqa: F401  # registers the system checks
        from chats.ids import register_sqlite_functions
        from chats.record import register_sqlite_record_functions

        connection_created.connect(register_sqlite_functions, dispatch_uid="chats.register_sqlite_functions")
        connection_created.connect(
            register_sqlite_record_functions, dispatch_uid="chats.register_sqlite_record_functions"
        )

        check_assistant_backend()
        # After the admin's autodiscovery (django.contrib.admin comes first in INSTALLED_APPS).
        from chats.admin import unregister_token_admins

        unregister_token_admins()


def check_assistant_backend() -> None:
    """Refuse to start with an assistant backend that cannot answer: an unknown class, or one whose
    ``check_configuration()`` finds its settings wrong (e.g. the OpenAI-compatible backend without a model)."""
    try:
        backend = import_string(settings.LQAI_ASSISTANT_BACKEND)
    except ImportError as exc:
        raise ImproperlyConfigured(f"LQAI_ASSISTANT_BACKEND={settings.LQAI_ASSISTANT_BACKEND!r}: {exc}") from None
    check = getattr(backend, "check_configuration", None)
    if check is not None:
        check()
