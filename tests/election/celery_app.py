"""The project's Celery app for the election tests' worker subprocesses
(`celery -A tests.election.celery_app worker --leader-election`).

haptic_site/celery.py installs the elector bootstep and, at worker_init, registers the
controller's own components; these tests are about the election and the leader queue only,
so the other components (tested in their own suites) are unregistered after that.
"""

from celery import signals

from controller.worker import LeaderComponents, ReplicaComponents, install
from haptic_site.celery import app

install(app)  # idempotent; haptic_site.celery already did it


@signals.worker_init.connect
def _only_the_election(**_: object) -> None:
    LeaderComponents.clear()
    ReplicaComponents.clear()


__all__ = ["app"]
