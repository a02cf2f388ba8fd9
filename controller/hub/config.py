"""Hub settings: the `--ha-*` flags, their environment twins and validation (seed 004).

`standalone` (the default) must stay completely inert: nothing in this package reads, writes
or publishes anything unless the mode is `active` or `standby`.
"""

from __future__ import annotations

import argparse
import enum
import re
import socket
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, fields

from config.env import environ, pod_name
from controller.election.timing import DEFAULT_LEASE_NAME

# Shipped default of --ha-self-endpoint. The publisher refuses to advertise it: an unreachable
# address advertised as the failover target is worse than advertising nothing.
PLACEHOLDER_ENDPOINT = "https://haptic-hub.invalid:6443/"
DEFAULT_HUB_LEASE = "haptic-hub"
DEFAULT_LEADER_LEASE = DEFAULT_LEASE_NAME
DEFAULT_TEMPLATE = "haptic"
DEFAULT_NAMESPACE = "haptic"
# A Kubernetes label value: it becomes haproxy-haptic.org/mirrored-from on every copy.
_LABEL_VALUE = re.compile(r"^[A-Za-z0-9]([-A-Za-z0-9_.]{0,61}[A-Za-z0-9])?\Z")
DEFAULT_CA_BUNDLE_PATH = "/var/run/secrets/kubernetes.io/serviceaccount/ca.crt"


class HaMode(enum.Enum):
    STANDALONE = "standalone"
    ACTIVE = "active"
    STANDBY = "standby"


def parse_mode(text: str) -> HaMode:
    """The mode named by `text`; a mistyped mode is refused, never defaulted."""
    try:
        return HaMode(text.strip().lower())
    except ValueError:
        choices = ", ".join(m.value for m in HaMode)
        raise ValueError(f"invalid --ha-mode {text!r}: expected one of {choices}") from None


@dataclass(frozen=True)
class HubConfig:
    """Everything the hub layer needs. Durations are seconds."""

    mode: HaMode = HaMode.STANDALONE
    identity: str = ""
    namespace: str = DEFAULT_NAMESPACE
    template_name: str = DEFAULT_TEMPLATE
    hub_lease_name: str = DEFAULT_HUB_LEASE
    leader_lease_name: str = DEFAULT_LEADER_LEASE
    # The Active's cluster, as seen by a Standby.
    active_kubeconfig: str = ""
    active_context: str = ""
    active_namespace: str = ""  # empty: same as `namespace`
    mirror_source: str = "active"  # value of the haproxy-haptic.org/mirrored-from label
    # What this hub advertises about itself while it leads.
    self_endpoint: str = PLACEHOLDER_ENDPOINT
    self_ca_bundle_path: str = DEFAULT_CA_BUNDLE_PATH
    lease_duration: float = 30.0
    renew_deadline: float = 20.0
    retry_period: float = 5.0
    padding_seconds: float = 10.0
    promotion_dial_timeout: float = 5.0
    promotion_grace_period: float = 10.0
    publish_interval: float = 30.0
    mirror_prune_interval: float = 30.0

    def __post_init__(self) -> None:
        if not isinstance(self.mode, HaMode):
            object.__setattr__(self, "mode", parse_mode(str(self.mode)))
        for name in (
            "lease_duration",
            "renew_deadline",
            "retry_period",
            "promotion_dial_timeout",
            "promotion_grace_period",
            "publish_interval",
            "mirror_prune_interval",
        ):
            if not getattr(self, name) > 0:
                raise ValueError(f"{name} must be positive")
        if self.padding_seconds < 0:
            raise ValueError("padding_seconds must not be negative")
        # Same ordering rule as the controller's own elector: the leader gives up before a
        # follower could see the lease expire.
        if not self.lease_duration > self.renew_deadline > self.retry_period:
            raise ValueError("need lease_duration > renew_deadline > retry_period")
        if not _LABEL_VALUE.match(self.mirror_source):
            raise ValueError(f"--ha-mirror-source {self.mirror_source!r} is not a label value")
        if self.mode is HaMode.STANDBY and not self.active_kubeconfig:
            raise ValueError("--ha-mode standby needs --ha-active-kubeconfig")
        if self.mode is not HaMode.STANDALONE and not self.identity:
            object.__setattr__(self, "identity", default_identity())

    @property
    def enabled(self) -> bool:
        return self.mode is not HaMode.STANDALONE

    @property
    def remote_namespace(self) -> str:
        return self.active_namespace or self.namespace

    @property
    def poll_interval(self) -> float:
        """How often a Standby reads the Active's Lease: once per retry period."""
        return self.retry_period

    @property
    def fast_publish_interval(self) -> float:
        """The publisher's wait while this hub does not lead (seed 004: the leadership race)."""
        return min(self.retry_period, self.publish_interval)

    @classmethod
    def from_args(cls, args: argparse.Namespace) -> HubConfig:
        values = {f.name: getattr(args, f"ha_{f.name}") for f in fields(cls)}
        values["mode"] = parse_mode(values["mode"])
        return cls(**values)

    @classmethod
    def from_env(cls, env: Mapping[str, str] | None = None) -> HubConfig:
        """HAPTIC_HA_MODE, HAPTIC_HA_LEASE_DURATION, ... (field name upper-cased)."""
        env = environ() if env is None else env
        values: dict[str, object] = {}
        for f in fields(cls):
            key = f"HAPTIC_HA_{f.name.upper()}"
            if key not in env:
                continue
            raw = env[key]
            if f.name == "mode":
                values["mode"] = parse_mode(raw)
            elif isinstance(f.default, float):
                try:
                    values[f.name] = float(raw)
                except ValueError:
                    raise ValueError(f"{key}={raw!r} is not a number of seconds") from None
            else:
                values[f.name] = raw
        if "namespace" not in values and env.get("HAPTIC_NAMESPACE"):
            values["namespace"] = env["HAPTIC_NAMESPACE"]
        return cls(**values)  # type: ignore[arg-type]


def default_identity() -> str:
    return pod_name() or socket.gethostname()


def _mode_arg(text: str) -> str:
    try:
        return parse_mode(text).value
    except ValueError as exc:
        raise argparse.ArgumentTypeError(str(exc)) from None


def parent_parser() -> argparse.ArgumentParser:
    """An argparse parent (add_help=False) carrying every `--ha-*` flag."""
    d = HubConfig()
    p = argparse.ArgumentParser(add_help=False)
    g = p.add_argument_group("cross-cluster Active/Standby")
    g.add_argument(
        "--ha-mode",
        type=_mode_arg,
        default=d.mode.value,
        help="standalone (default, inert), active or standby",
    )
    g.add_argument("--ha-identity", default="", help="this hub's identity (default: POD_NAME)")
    g.add_argument("--ha-namespace", default=d.namespace)
    g.add_argument("--ha-template-name", default=d.template_name)
    g.add_argument("--ha-hub-lease-name", default=d.hub_lease_name)
    g.add_argument("--ha-leader-lease-name", default=d.leader_lease_name)
    g.add_argument("--ha-active-kubeconfig", default="", help="kubeconfig of the Active's cluster")
    g.add_argument("--ha-active-context", default="")
    g.add_argument("--ha-active-namespace", default="")
    g.add_argument("--ha-mirror-source", default=d.mirror_source)
    g.add_argument("--ha-self-endpoint", default=d.self_endpoint)
    g.add_argument("--ha-self-ca-bundle-path", default=d.self_ca_bundle_path)
    for name, helptext in (
        ("lease-duration", "hub Lease duration"),
        ("renew-deadline", "how long the Active keeps trying to renew before it stops leading"),
        ("retry-period", "renewal cadence, and the Standby's poll of the Active's Lease"),
        ("padding-seconds", "detection threshold added to the Active's lease duration"),
        ("promotion-dial-timeout", "bounds every networked read of the Active's Lease"),
        ("promotion-grace-period", "bounds stopping the mirror and each post-fence step"),
        ("publish-interval", "status.activeController refresh once published"),
        ("mirror-prune-interval", "periodic prune of mirrored objects"),
    ):
        attr = name.replace("-", "_")
        g.add_argument(
            f"--ha-{name}", type=float, default=getattr(d, attr), help=f"{helptext} (seconds)"
        )
    return p


def parse_config(argv: Sequence[str] | None = None) -> HubConfig:
    """Parse only the `--ha-*` flags (helper for tools and tests)."""
    parser = argparse.ArgumentParser(parents=[parent_parser()])
    return HubConfig.from_args(parser.parse_args(argv))
