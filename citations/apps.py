from django.apps import AppConfig


class CitationsConfig(AppConfig):
    name = "citations"
    verbose_name = "Citation ledger"
    default_auto_field = "django.db.models.BigAutoField"

    def ready(self) -> None:
        from chats.models import Message
        from chats.signals import post_finalize
        from citations.receivers import assemble_ledger_on_finalize

        post_finalize.connect(
            assemble_ledger_on_finalize, sender=Message, dispatch_uid="citations.assemble_ledger_on_finalize"
        )
