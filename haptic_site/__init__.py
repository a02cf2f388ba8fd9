"""The Django project of haptic; importing it loads the Celery app so @shared_task binds to it."""

from haptic_site.celery import app as celery_app

__all__ = ["celery_app"]
