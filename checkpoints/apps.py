from django.apps import AppConfig


class CheckpointsConfig(AppConfig):
    default_auto_field = "django.db.models.BigAutoField"
    name = "checkpoints"
    verbose_name = "Checkpoints and history"

    def ready(self) -> None:
        # Task history from Celery's signals (connected on import).
        from checkpoints import signals  # noqa: F401
