from django.apps import AppConfig


class CitationsConfig(AppConfig):
    name = "citations"
    verbose_name = "Citation ledger"
    default_auto_field = "django.db.models.BigAutoField"

    def ready(self) -> None:
        from chats.models import Message
        from chats.signals import post_finalize
        from citations.receivers import POST_FINALIZE_RECEIVERS

        # In order: receivers run in the order connected, and the seal must be the last write.
        for dispatch_uid, receiver in POST_FINALIZE_RECEIVERS:
            post_finalize.connect(receiver, sender=Message, dispatch_uid=dispatch_uid)
