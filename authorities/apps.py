from django.apps import AppConfig


class AuthoritiesConfig(AppConfig):
    name = "authorities"
    verbose_name = "Authorities"
    default_auto_field = "django.db.models.BigAutoField"
