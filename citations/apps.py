from django.apps import AppConfig


class CitationsConfig(AppConfig):
    name = "citations"
    verbose_name = "Citation ledger"
    default_auto_field = "django.db.models.BigAutoField"

    def ready(self) -> None:
        from chats.models import Message
        from chats.signals import post_finalize
        from citations.receivers import assemble_ledger_on_finalize, seal_turn_on_finalize

        post_finalize.connect(
            assemble_ledger_on_finalize, sender=Message, dispatch_uid="citations.assemble_ledger_on_finalize"
        )
        # After the ledger's: receivers run in the order connected, and the seal must be the last write.
        post_finalize.connect(seal_turn_on_finalize, sender=Message, dispatch_uid="citations.seal_turn_on_finalize")
