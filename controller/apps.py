from django.apps import AppConfig


class ControllerConfig(AppConfig):
    default_auto_field = "django.db.models.BigAutoField"
    name = "controller"
    verbose_name = "Controller"
