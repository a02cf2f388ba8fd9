"""Celery application, configured from Django settings (CELERY_* names).

Controller replicas are workers of this app started with `--leader-election`
(see README, "Process model"): the bootstep runs the elector, the watch caches and, while
leader, the leader-only pipeline whose side effects run as fenced tasks on the leader queue.
"""

import os

from celery import Celery, signals

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "haptic_site.settings")

app = Celery("haptic")
app.config_from_object("django.conf:settings", namespace="CELERY")
app.autodiscover_tasks()


def _install_controller() -> None:
    from controller.worker import install

    install(app)


@signals.worker_init.connect
def _register_controller_components(**_: object) -> None:
    # Only worker processes build the controller (the web site never does).
    from controller.runtime import install

    install()


_install_controller()
