from django.apps import AppConfig


class DraftsConfig(AppConfig):
    name = "drafts"
    verbose_name = "Drafts"
    default_auto_field = "django.db.models.BigAutoField"
