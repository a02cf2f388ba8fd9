"""Shared parts of the operator commands: which cluster, which objects, plain-text tables.

The commands talk to Kubernetes only through the official client, like the controller, so
they work the same against the local cluster and a real one.
"""

from __future__ import annotations

import argparse
import base64
import json
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import kubernetes
from django.conf import settings
from django.core.management.base import BaseCommand, CommandError
from kubernetes.client.exceptions import ApiException

from config import env
from contract import (
    CLAIM_ANNOTATION,
    EPOCH_ANNOTATION,
    GROUP,
    INTENT_ANNOTATION,
    ROLE_LABEL,
    TEMPLATE_PLURAL,
    VERSION,
)
from controller.election.timing import DEFAULT_LEASE_NAME as LEADER_LEASE
from controller.kubeclient import from_kubeconfig

__all__ = [
    "CLAIM_ANNOTATION",
    "EPOCH_ANNOTATION",
    "INTENT_ANNOTATION",
    "LEADER_LEASE",
    "ROLE_LABEL",
]


def var_dir() -> Path:
    return Path(getattr(settings, "VAR_DIR", Path(settings.BASE_DIR) / "var"))


def default_kubeconfig() -> str:
    """HAPTIC_KUBECONFIG, else the local cluster's kubeconfig under var/."""
    return env.kubeconfig() or str(var_dir() / "cluster" / "kubeconfig")


class KubeCommand(BaseCommand):
    """A command that reads one namespace of one cluster."""

    def add_arguments(self, parser: argparse.ArgumentParser) -> None:
        parser.add_argument(
            "--kubeconfig",
            default=None,
            help="kubeconfig of the cluster (default: $HAPTIC_KUBECONFIG, else "
            "var/cluster/kubeconfig written by `make run` or `manage.py localcluster up`)",
        )
        parser.add_argument(
            "--workload-kubeconfig",
            default=None,
            help="kubeconfig of the cluster running the HAProxy pods when it is not the "
            "controller's own (default: $HAPTIC_WORKLOAD_KUBECONFIG, else --kubeconfig)",
        )
        parser.add_argument(
            "--namespace",
            default=None,
            help="controller namespace (default: $HAPTIC_NAMESPACE, else haptic)",
        )
        parser.add_argument(
            "--template",
            default=env.template_config(),
            help="HAProxyTemplateConfig name (default: haptic)",
        )
        parser.add_argument("--json", action="store_true", help="print JSON instead of a table")

    def setup(self, options: dict[str, Any]) -> None:
        path = options["kubeconfig"] or default_kubeconfig()
        if not Path(path).exists():
            raise CommandError(
                f"no kubeconfig at {path}: start the system (`make run` or "
                "`python manage.py localcluster up`) or pass --kubeconfig"
            )
        self.api = from_kubeconfig(path)
        workload = options.get("workload_kubeconfig") or env.workload_kubeconfig()
        if workload and not Path(workload).exists():
            raise CommandError(f"no kubeconfig at {workload} (--workload-kubeconfig)")
        self.workload_api = from_kubeconfig(workload) if workload else self.api
        self.namespace = options["namespace"] or settings.HAPTIC_NAMESPACE or "haptic"
        self.template = options["template"]
        self.as_json = bool(options["json"])

    # -- reads -------------------------------------------------------------------------

    def core(self) -> kubernetes.client.CoreV1Api:
        return kubernetes.client.CoreV1Api(self.api)

    @staticmethod
    def _read(what: str, read: Callable[[], Any]) -> Any | None:
        """`read()`, None on 404; any other failure is the command's error, naming `what`."""
        try:
            return read()
        except ApiException as exc:
            if exc.status == 404:
                return None
            raise CommandError(f"reading {what}: HTTP {exc.status}") from exc
        except OSError as exc:
            raise CommandError(f"cluster not reachable: {exc}") from exc

    def custom_get(self, plural: str, name: str) -> dict[str, Any] | None:
        api = kubernetes.client.CustomObjectsApi(self.api)
        return self._read(
            f"{plural}/{name}",
            lambda: api.get_namespaced_custom_object(
                GROUP, VERSION, self.namespace, plural, name, _request_timeout=10
            ),
        )

    def custom_list(self, plural: str, selector: str = "") -> list[dict[str, Any]]:
        try:
            listing = kubernetes.client.CustomObjectsApi(self.api).list_namespaced_custom_object(
                GROUP, VERSION, self.namespace, plural, label_selector=selector, _request_timeout=10
            )
        except ApiException as exc:
            raise CommandError(f"listing {plural}: HTTP {exc.status}") from exc
        return list(listing.get("items") or [])

    def lease(self, name: str) -> Any | None:
        api = kubernetes.client.CoordinationV1Api(self.api)
        return self._read(
            f"Lease {name}",
            lambda: api.read_namespaced_lease(name, self.namespace, _request_timeout=10),
        )

    def template_config(self) -> dict[str, Any] | None:
        return self.custom_get(TEMPLATE_PLURAL, self.template)

    def agent_token(self, template: dict[str, Any] | None) -> str:
        """The agents' bearer token: HAPTIC_AGENT_TOKEN, else the Secret the template names."""
        if env.agent_token():
            return env.agent_token()
        ref = (((template or {}).get("spec") or {}).get("agent") or {}).get("tokenSecretRef") or {}
        name, key = ref.get("name", "haptic-agent-token"), ref.get("key", "token")
        try:
            secret = self.core().read_namespaced_secret(name, self.namespace, _request_timeout=10)
        except ApiException as exc:
            raise CommandError(f"agent token Secret {name}: HTTP {exc.status}") from exc
        return base64.b64decode((secret.data or {}).get(key, "")).decode().strip()

    # -- output -------------------------------------------------------------------------

    def emit_json(self, data: Any) -> None:
        self.stdout.write(json.dumps(data, indent=2, sort_keys=True, default=str))


def short(value: str | None, width: int = 12) -> str:
    """Plan IDs and checksums are 64 hex digits; a prefix identifies them in a table."""
    if not value:
        return "-"
    text = str(value)
    if text.startswith("sha256:"):
        text = text[len("sha256:") :]
    return text[:width]


def table(headers: Sequence[str], rows: Sequence[Sequence[Any]]) -> str:
    cells = [[str(h) for h in headers]] + [
        ["-" if c in (None, "") else str(c) for c in r] for r in rows
    ]
    widths = [max(len(row[i]) for row in cells) for i in range(len(headers))]
    return "\n".join(
        "  ".join(cell.ljust(widths[i]) for i, cell in enumerate(row)).rstrip() for row in cells
    )


def parse_json_annotation(annotations: dict[str, str] | None, key: str) -> Any:
    raw = (annotations or {}).get(key)
    if raw is None:
        return None
    try:
        return json.loads(raw)
    except ValueError:
        return {"unparseable": raw}
