"""Celery application, configured from Django settings (CELERY_* names).

Controller replicas are workers of this app started with `--leader-election`
(see README, "Process model"): the bootstep runs the elector, the watch caches and, while
leader, the leader-only pipeline whose side effects run as fenced tasks on the leader queue.
Cross-cluster Active/Standby is chosen with `--ha-mode` and the other `--ha-*` options
(each also readable as HAPTIC_HA_<NAME> from the environment).
"""

import os
import sys
from dataclasses import fields

import click
from celery import Celery, signals

from config.env import SETTINGS, export, settings_help

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "haptic_site.settings")

app = Celery("haptic")
app.config_from_object("django.conf:settings", namespace="CELERY")
app.autodiscover_tasks()


def _install_controller() -> None:
    from controller.hub.config import HubConfig
    from controller.replica_runtime import install

    install(app)
    # `celery -A haptic_site worker --help` ends with the settings a replica reads ("\b"
    # keeps click from re-wrapping the list). Only the `celery` command line has loaded its
    # worker command; the web site does not pay for importing it.
    cli = sys.modules.get("celery.bin.worker")
    if cli is not None:
        cli.worker.epilog = "\b\n" + settings_help(table=SETTINGS)
    for f in fields(HubConfig):
        flag = "--ha-" + f.name.replace("_", "-")
        if f.name == "mode":
            option = click.Option(
                [flag],
                default=None,
                type=click.Choice(["standalone", "active", "standby"]),
                help="cross-cluster role (default standalone: inert)",
            )
        else:
            option = click.Option([flag], default=None, help=f"hub setting {f.name}")
        app.user_options["preload"].add(option)


@signals.user_preload_options.connect
def _hub_options(options: dict, **_: object) -> None:
    # Flags become HAPTIC_HA_* so every part reads one source; validate at start-up.
    from controller.hub.config import HubConfig

    for f in fields(HubConfig):
        value = options.get(f"ha_{f.name}")
        if value is not None:
            export(f"HAPTIC_HA_{f.name.upper()}", str(value))
    try:
        HubConfig.from_env()
    except ValueError as exc:
        raise click.UsageError(f"invalid --ha-* setting: {exc}") from exc


@signals.worker_init.connect
def _register_controller_components(**_: object) -> None:
    # Only worker processes build the controller (the web site never does).
    from controller.replica import install

    install()


_install_controller()
