"""The soak's fault on the hub topology: promote the Standby while rendering is broken.

It needs two control planes beside the workload cluster (tests/hub/planes.py: three local
API servers, a controller for each plane, the fleet's agents and haproxy), so it runs after
the main phase, once that stack is stopped, on a fresh topology per round: a promotion is
once only. Each round: the Active deploys P and its checkpoint of P is mirrored to the
Standby; the Standby's copy of the template stops parsing; the Active is SIGKILLed; the
Standby promotes; the fleet scales up by one pod, which only recovery can configure. What
each pod ran before and after is judged by soak.invariants.check_promoted_recovery.
"""

from __future__ import annotations

import contextlib
import signal
import time
from collections.abc import Callable

from controller.retained.intent import INTENT_ANNOTATION
from devstack.stack import wait_for
from soak.faults import FaultLog
from soak.invariants import PromotionRound
from tests.hub.planes import (
    ACTIVE,
    STANDBY,
    ControlPlanes,
    break_rendering,
    intents,
    mirrored_for_recovery,
    start_control_planes,
)

KIND = "promote_standby_while_rendering_broken"
READY_TIMEOUT = 120.0  # the replacement pod, as the main soak's heal bound


class RoundSkipped(Exception):
    """The topology did not reach the state the fault starts from (a start-up on a loaded
    machine): nothing was injected, so nothing is judged."""


def ran(planes: ControlPlanes) -> dict[str, tuple[str | None, str | None]]:
    """What each HAProxy pod runs: (checksum, identity of the writer)."""
    out = {}
    for pod in planes.fleet.haproxy_pods(ready_only=False):
        state = planes.fleet.agent_state(pod)
        out[pod.metadata.name] = (state.applied_checksum, (state.applied_token or {}).get("holder"))
    return out


def _prepare(planes: ControlPlanes) -> tuple[str, dict[str, tuple[str | None, str | None]]]:
    """The Active serves P everywhere, its intent names P, and P is mirrored for recovery."""
    fleet, a, b = planes.fleet, planes.a, planes.b
    try:
        # Bounds for a start-up on the loaded, shared machine (the e2e test waits 60/90 s).
        wait_for(lambda: len(fleet.haproxy_pods(ready_only=False)) == 2, 240, what="pods")
        wait_for(lambda: fleet.serves("before.example", "echo-"), 240, what="served")
        before = ran(planes)
        checksums = {c for c, _ in before.values()}
        if len(checksums) != 1 or {h for _, h in before.values()} != {ACTIVE}:
            raise RoundSkipped(f"the fleet is not on one plan of the Active: {before}")
        (checksum,) = checksums
        wait_for(
            lambda: intents(a).get(INTENT_ANNOTATION, {}).get("checksum") == checksum,
            60,
            what="the Active's intent names P",
        )
        wait_for(lambda: mirrored_for_recovery(b, checksum), 120, what="P mirrored")
    except TimeoutError as exc:
        raise RoundSkipped(str(exc)) from None
    assert checksum is not None
    return checksum, before


def promotion_round(name: str, log: Callable[[str], None]) -> tuple[PromotionRound, FaultLog]:
    try:
        planes = start_control_planes(name, start_timeout=120.0)  # slow on a loaded machine
    except Exception as exc:  # e.g. an API server slower than its 30 s start-up bound
        raise RoundSkipped(f"the hub topology did not start: {exc}"[:300]) from None
    try:
        checksum, before = _prepare(planes)
        entry = FaultLog(KIND, time.time(), {"intent": checksum[:19]})
        break_rendering(planes.b)
        killed = time.monotonic()
        planes.active.signal(signal.SIGKILL)
        try:
            wait_for(lambda: planes.holder(planes.b, "haptic-hub") == STANDBY, 60, 0.05)
        except TimeoutError:
            entry.error = "the Standby did not promote within 60 s"
        entry.detail["promoted_after_s"] = round(time.monotonic() - killed, 2)
        planes.fleet.scale("haproxy", 3)
        replacement = _replacement(planes, set(before))
        entry.healed_after_s = round(time.time() - entry.started, 2)
        entry.healthy = replacement is not None
        if replacement is None:
            entry.error += f" the replacement pod not Ready {READY_TIMEOUT:.0f}s after scaling"
        after = {pod: state for pod, state in ran(planes).items() if pod in before}
        log(f"  promoted round: intent {checksum[:19]}, replacement {replacement}")
        return PromotionRound(entry.started, checksum, STANDBY, before, after, replacement), entry
    finally:
        planes.stop()


def _replacement(planes: ControlPlanes, old: set[str]) -> tuple[str | None, str | None] | None:
    """What the scaled-up pod runs once Ready (None: not Ready in time)."""
    fleet = planes.fleet
    deadline = time.monotonic() + READY_TIMEOUT
    while time.monotonic() < deadline:
        for pod in fleet.haproxy_pods():  # Ready ones
            if pod.metadata.name not in old:
                with contextlib.suppress(Exception):  # its agent not answering yet
                    state = fleet.agent_state(pod)
                    return state.applied_checksum, (state.applied_token or {}).get("holder")
        time.sleep(0.5)
    return None
