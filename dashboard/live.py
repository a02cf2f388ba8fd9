"""What a pod's agent says right now: its unauthenticated /healthz summary, read when the pod
page renders (docs/dashboard.md). The web process holds no deploy token and needs none.

`observation` and `differs_from_receipt` are pure; `observe` is the one HTTP read.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

import httpx

from checkpoints.models import PodReceipt, term_label
from config import env

NO_ADDRESS = "no address published for this pod yet"


@dataclass(frozen=True)
class LiveAgent:
    """One read of an agent's /healthz: what it says, or why it could not be asked."""

    observed_at: datetime
    address: str
    reachable: bool
    why: str = ""
    applied_plan_id: str | None = None
    checksum: str | None = None
    applied_by: str = "unknown"
    worker_operation_mode: str | None = None
    bootstrap: bool = False
    invariant_violation: str | None = None


def observation(body: Any, address: str, observed_at: datetime, pod_name: str = "") -> LiveAgent:
    """The page's view of a /healthz answer (agents.api.health_summary's fields). An answer
    that is no summary, or one from another pod's agent (pod IPs are reused), is not this
    pod's agent speaking."""
    if not isinstance(body, dict):
        return LiveAgent(observed_at, address, reachable=False, why="not an agent's /healthz")
    answering = body.get("pod_name")
    if pod_name and answering and answering != pod_name:
        why = f"another pod's agent answers at this address ({answering})"
        return LiveAgent(observed_at, address, reachable=False, why=why)
    term = body.get("term") if isinstance(body.get("term"), dict) else {}
    return LiveAgent(
        observed_at=observed_at,
        address=address,
        reachable=True,
        applied_plan_id=body.get("applied_plan_id"),
        checksum=body.get("checksum"),
        applied_by=term_label(term.get("holder", ""), term.get("epoch")),
        worker_operation_mode=body.get("worker_operation_mode"),
        bootstrap=bool(body.get("bootstrap")),
        invariant_violation=body.get("invariant_violation"),
    )


def differs_from_receipt(live: LiveAgent, receipt: PodReceipt | None) -> bool:
    """The agent applied something the last acknowledged receipt does not say (yet)."""
    if not live.reachable or receipt is None:
        return False
    return (live.applied_plan_id, live.checksum) != (receipt.applied_plan_id, receipt.checksum)


def address_of(pod_name: str) -> str:
    """Where the leader last reached the pod's agent, from the newest receipt naming it."""
    receipt = (
        PodReceipt.objects.filter(pod_name=pod_name, agent_port__isnull=False)
        .exclude(pod_ip="")
        .order_by("-last_seen_at", "-id")
        .first()
    )
    if receipt is None:
        return ""
    host = f"[{receipt.pod_ip}]" if ":" in receipt.pod_ip else receipt.pod_ip
    return f"{host}:{receipt.agent_port}"


def observe(pod_name: str) -> LiveAgent:
    """Ask the pod's agent, within HAPTIC_AGENT_HEALTH_TIMEOUT; never raises."""
    address = address_of(pod_name)
    now = datetime.now(UTC)
    if not address:
        return LiveAgent(observed_at=now, address="", reachable=False, why=NO_ADDRESS)
    try:
        # trust_env=False: a pod IP is never reached through a configured HTTP proxy.
        response = httpx.get(
            f"http://{address}/healthz", timeout=env.agent_health_timeout(), trust_env=False
        )
        response.raise_for_status()
        body = response.json()
    except (httpx.HTTPError, ValueError) as exc:
        why = f"{type(exc).__name__}: {exc}" if str(exc) else type(exc).__name__
        return LiveAgent(observed_at=now, address=address, reachable=False, why=why)
    return observation(body, address, datetime.now(UTC), pod_name)
