"""Election settings from the HAProxyTemplateConfig: read at start, followed while running.

An invalid `spec.controller.leaderElection` block is refused, never replaced by defaults:
electing with timings the operator did not ask for could break the failover they planned.
A refusal is reported on the template config (status condition `LeaderElectionConfigValid`
and a Warning Event `InvalidLeaderElectionConfig`); a replica that has not started electing
waits for a valid block, one that runs keeps its current timings. A valid change of the
timings is followed without a restart (`LeaderElector.set_timing`); a new `leaseName` is a
different lock, so it takes effect only at the next start and is reported until then.

`judge_election_config` and `follow` are the pure decisions; `ElectionConfigReporter` and
`ElectionConfigFollower` the I/O around them.
"""

from __future__ import annotations

import enum
import logging
import re
import threading
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

from kubernetes import client
from kubernetes.client.exceptions import ApiException

from contract import API_VERSION, GROUP, TEMPLATE_KIND, TEMPLATE_PLURAL, VERSION
from controller.election.events import EventRecorder
from controller.election.timing import ElectionSettings, settings_from_spec
from controller.watch.informer import Informer
from controller.watch.resources import template_config_ref
from controller.watch.store import DELETED

log = logging.getLogger(__name__)


CONDITION = "LeaderElectionConfigValid"
INVALID_REASON = "InvalidLeaderElectionConfig"
RESTART_REASON = "LeaseNameChangeNeedsRestart"
VALID_REASON = "Valid"
FIELD_MANAGER = "haptic-election"
APPLY_CONTENT_TYPE = "application/apply-patch+yaml"

# A Lease name is a DNS subdomain (RFC 1123), at most 253 characters.
_DNS_SUBDOMAIN = re.compile(r"[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*\Z")

ENABLED_FALSE = (
    "spec.controller.leaderElection.enabled=false is not supported: every deployment is "
    "fenced on the epoch of the leader-election Lease, and the deployment intent is fenced "
    "by it too; keep leader election enabled (a single replica acquires the Lease at once)"
)


class ElectionConfigError(ValueError):
    """The leaderElection block is refused; the message says why, for the operator."""


@dataclass(frozen=True)
class ElectionConfigVerdict:
    settings: ElectionSettings | None  # None: refused
    error: str | None = None


def judge_election_config(spec: Mapping[str, Any] | None) -> ElectionConfigVerdict:
    """Accept the block (missing keys take the defaults) or refuse it with a clear reason."""
    try:
        settings = settings_from_spec(spec)
    except ValueError as exc:
        return ElectionConfigVerdict(None, f"invalid spec.controller.leaderElection: {exc}")
    if not settings.enabled:
        return ElectionConfigVerdict(None, ENABLED_FALSE)
    name = settings.lease_name
    if len(name) > 253 or not _DNS_SUBDOMAIN.match(name):
        return ElectionConfigVerdict(
            None,
            f"invalid spec.controller.leaderElection.leaseName {name!r}: not a DNS subdomain",
        )
    return ElectionConfigVerdict(settings)


class Follow(enum.Enum):
    START = "start"  # not electing yet: start with these settings
    RETIME = "retime"  # electing: follow the new timings
    KEEP = "keep"  # nothing changes (refused, same settings, or a restart is needed)


@dataclass(frozen=True)
class FollowDecision:
    action: Follow
    settings: ElectionSettings | None
    condition: tuple[str, str, str]  # status, reason, message of the condition


def follow(running: ElectionSettings | None, verdict: ElectionConfigVerdict) -> FollowDecision:
    """What a replica does with a verdict, given the settings it elects with (None: not
    electing yet)."""
    if verdict.settings is None:
        keep = "not electing until it is fixed" if running is None else "timings unchanged"
        return FollowDecision(
            Follow.KEEP, None, ("False", INVALID_REASON, f"{verdict.error}; {keep}")
        )
    wanted = verdict.settings
    if running is None:
        return FollowDecision(Follow.START, wanted, ("True", VALID_REASON, _describe(wanted)))
    if wanted.lease_name != running.lease_name:
        message = (
            f"leaseName {wanted.lease_name!r} takes effect at the next restart; electing on "
            f"{running.lease_name!r} until then"
        )
        return FollowDecision(Follow.KEEP, None, ("False", RESTART_REASON, message))
    action = Follow.RETIME if wanted.timing != running.timing else Follow.KEEP
    return FollowDecision(action, wanted, ("True", VALID_REASON, _describe(wanted)))


def _describe(settings: ElectionSettings) -> str:
    t = settings.timing
    return (
        f"electing on Lease {settings.lease_name} with leaseDuration {t.lease_duration:g}s, "
        f"renewDeadline {t.renew_deadline:g}s, retryPeriod {t.retry_period:g}s"
    )


def load_election_settings(
    api_client: client.ApiClient, namespace: str, name: str, timeout: float = 10.0
) -> ElectionSettings:
    """`spec.controller.leaderElection` of the named template config.

    A missing config means defaults; an invalid block raises ElectionConfigError."""
    obj = read_template_config(api_client, namespace, name, timeout)
    verdict = judge_election_config((obj or {}).get("spec"))
    if verdict.settings is None:
        raise ElectionConfigError(verdict.error)
    return verdict.settings


def read_template_config(
    api_client: client.ApiClient, namespace: str, name: str, timeout: float = 10.0
) -> dict[str, Any] | None:
    api = client.CustomObjectsApi(api_client)
    try:
        obj = api.get_namespaced_custom_object(
            GROUP, VERSION, namespace, TEMPLATE_PLURAL, name, _request_timeout=timeout
        )
    except ApiException as exc:
        if exc.status == 404:
            log.info("no HAProxyTemplateConfig %s/%s: default election timings", namespace, name)
            return None
        raise
    return obj if isinstance(obj, dict) else None


class ElectionConfigReporter:
    """The condition (server-side apply of its one entry of status.conditions) and, on a
    refusal, a Warning Event on the template config. Reports only changes: a follower sees
    its own status write come back through the watch."""

    def __init__(
        self, api_client: client.ApiClient, namespace: str, name: str, identity: str
    ) -> None:
        self.api = client.CustomObjectsApi(api_client)
        self.namespace = namespace
        self.name = name
        self._uid: str | None = None
        self.events = EventRecorder(
            api_client,
            namespace,
            name,
            identity,
            lambda: self._uid,
            kind=TEMPLATE_KIND,
            api_version=API_VERSION,
        )
        self._last: tuple[str | None, tuple[str, str, str]] | None = None
        self._lock = threading.Lock()

    def report(self, obj: Mapping[str, Any], condition: tuple[str, str, str]) -> None:
        uid = str((obj.get("metadata") or {}).get("uid") or "")
        with self._lock:
            if self._last == (uid, condition) and _shows(obj, condition):
                return
            first_time = self._last is None or self._last[1] != condition
            self._last = (uid, condition)
            self._uid = uid or None
        status, reason, message = condition
        if status == "False" and first_time:
            log.error("leader election config refused: %s", message)
            self.events.record(reason, message, "Warning")
        self._apply_condition(obj, uid, status, reason, message)

    def close(self) -> None:
        self.events.close()

    def _apply_condition(
        self, obj: Mapping[str, Any], uid: str, status: str, reason: str, message: str
    ) -> None:
        now = _transition_time(obj, status) or datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")
        body = {
            "apiVersion": API_VERSION,
            "kind": TEMPLATE_KIND,
            "metadata": {"name": self.name, **({"uid": uid} if uid else {})},
            "status": {
                "conditions": [
                    {
                        "type": CONDITION,
                        "status": status,
                        "reason": reason,
                        "message": message[:1024],
                        "lastTransitionTime": now,
                    }
                ]
            },
        }
        try:
            self.api.patch_namespaced_custom_object_status(
                GROUP,
                VERSION,
                self.namespace,
                TEMPLATE_PLURAL,
                self.name,
                body,
                field_manager=FIELD_MANAGER,
                force=True,
                _content_type=APPLY_CONTENT_TYPE,
                _request_timeout=5.0,
            )
        except Exception as exc:  # a report: the next change of the config retries it
            log.warning("condition %s not written: %s", CONDITION, exc)
            with self._lock:
                self._last = None


def _current(obj: Mapping[str, Any]) -> Mapping[str, Any] | None:
    for cond in (obj.get("status") or {}).get("conditions") or []:
        if isinstance(cond, Mapping) and cond.get("type") == CONDITION:
            return cond
    return None


def _shows(obj: Mapping[str, Any], condition: tuple[str, str, str]) -> bool:
    cond = _current(obj)
    status, reason, message = condition
    return cond is not None and (cond.get("status"), cond.get("reason"), cond.get("message")) == (
        status,
        reason,
        message[:1024],
    )


def _transition_time(obj: Mapping[str, Any], status: str) -> str | None:
    """Keep lastTransitionTime while the status stays (a condition's convention)."""
    cond = _current(obj)
    if cond is not None and cond.get("status") == status:
        return cond.get("lastTransitionTime")
    return None


class ElectionConfigFollower:
    """Watches the one template config and hands each decision to `on_decision`."""

    def __init__(
        self,
        api_client: client.ApiClient,
        namespace: str,
        name: str,
        identity: str,
        running: Callable[[], ElectionSettings | None],
        on_decision: Callable[[FollowDecision], None],
    ) -> None:
        self.reporter = ElectionConfigReporter(api_client, namespace, name, identity)
        self._running = running
        self._on_decision = on_decision
        self.informer = Informer(
            api_client, template_config_ref(namespace, name), handlers=[self._on_event]
        )

    def start(self) -> ElectionConfigFollower:
        self.informer.start()
        return self

    def stop(self, timeout: float = 5.0) -> None:
        self.informer.stop(timeout)
        self.reporter.close()

    def _on_event(self, _kind: str, etype: str, obj: dict | None) -> None:
        if etype == DELETED or not isinstance(obj, dict):
            return  # a deleted config changes nothing; it may come back
        decision = follow(self._running(), judge_election_config(obj.get("spec")))
        self._on_decision(decision)
        self.reporter.report(obj, decision.condition)
