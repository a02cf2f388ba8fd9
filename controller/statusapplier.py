"""ADR-0034 status applier: the deployed variant of the readiness gate condition.

Once every HAProxy pod runs a render (the leader pipeline's `on_converged`), each backend pod
the render listed in `RenderOutput.gate_ready_pods` gets the condition
`haproxy-haptic.org/load-balancer-ready`=True, written with server-side apply under the field
manager `haptic-deployed`. Pod status.conditions is a list map keyed by `type`, so the apply
owns only that one entry: the kubelet's conditions and anyone else's stay untouched.

`pods_to_write` is the pure decision (which pods need a write); `StatusApplier` is the thin
I/O around it: one instance per leadership term, acting only while the term is valid.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterable, Mapping
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

from kubernetes import client
from kubernetes.client.exceptions import ApiException

from contract import GATE_CONDITION
from controller.watch.store import rv_compare

log = logging.getLogger(__name__)

FIELD_MANAGER = "haptic-deployed"
APPLY_CONTENT_TYPE = "application/apply-patch+yaml"
REASON = "DeployedToAllHAProxyPods"
WRITE_TIMEOUT = 5.0
MAX_PARALLEL_WRITES = 4

PodLookup = Callable[[str, str], Mapping[str, Any] | None]


@dataclass(frozen=True)
class PodView:
    """What the decision needs to know about one backend pod (from the watch cache)."""

    namespace: str
    name: str
    uid: str
    holds_gate: bool
    gate_status: str | None  # status of our condition on the pod, None when absent
    terminating: bool
    resource_version: str | None

    @property
    def key(self) -> str:
        return f"{self.namespace}/{self.name}"


def view_of(pod: Mapping[str, Any] | None) -> PodView | None:
    """A PodView of a pod object (dict as the API returns it); None for a missing pod."""
    if not isinstance(pod, Mapping):
        return None
    meta = pod.get("metadata") or {}
    spec = pod.get("spec") or {}
    status = pod.get("status") or {}
    gates = spec.get("readinessGates") or []
    holds = any(isinstance(g, Mapping) and g.get("conditionType") == GATE_CONDITION for g in gates)
    gate_status = None
    for cond in status.get("conditions") or []:
        if isinstance(cond, Mapping) and cond.get("type") == GATE_CONDITION:
            gate_status = str(cond.get("status"))
    return PodView(
        namespace=str(meta.get("namespace") or ""),
        name=str(meta.get("name") or ""),
        uid=str(meta.get("uid") or ""),
        holds_gate=holds,
        gate_status=gate_status,
        terminating=bool(meta.get("deletionTimestamp")),
        resource_version=meta.get("resourceVersion"),
    )


def pods_to_write(
    gate_ready: Iterable[str],
    views: Mapping[str, PodView | None],
    written: Mapping[str, str | None],
) -> list[PodView]:
    """Which pods get the condition now (pure).

    gate_ready: "namespace/name" of pods the converged render enables through the gate.
    views: the current view of each of them (None: the pod is gone).
    written: uid -> resourceVersion our own write returned, this term.

    A pod is written when it still exists, still holds the gate, is not terminating, does
    not show the condition True, and we have not written it this term -- unless the view is
    newer than our write and still not True (someone reset it after us). A view that has not
    caught up with our write (older or unordered resourceVersion) is not a reason to rewrite.
    """
    out: list[PodView] = []
    seen: set[str] = set()
    for key in sorted(set(gate_ready)):
        view = views.get(key)
        if view is None or not view.holds_gate or view.terminating or not view.uid:
            continue  # never touch a pod that does not hold the gate (or is gone/going)
        if view.gate_status == "True" or view.uid in seen:
            continue
        if view.uid in written:
            newer = rv_compare(view.resource_version, written[view.uid])
            if newer is None or newer <= 0:
                continue
        seen.add(view.uid)
        out.append(view)
    return out


def apply_body(name: str, uid: str, now: str, message: str) -> dict[str, Any]:
    """The applied configuration: exactly one condition of status.conditions. The uid is a
    precondition: the API server refuses the apply (422, uid immutable) on a pod recreated
    under the same name, which has not earned the condition."""
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": name, "uid": uid},
        "status": {
            "conditions": [
                {
                    "type": GATE_CONDITION,
                    "status": "True",
                    "reason": REASON,
                    "message": message,
                    "lastTransitionTime": now,
                }
            ]
        },
    }


def cache_lookup(informer: Callable[[str], Any], kind: str = "pods") -> PodLookup:
    """A PodLookup over the watch caches' backend-pod informer (controller.watch)."""

    def lookup(namespace: str, name: str) -> Mapping[str, Any] | None:
        inf = informer(kind)
        return inf.store.get(namespace, name) if inf is not None else None

    return lookup


class StatusApplier:
    """Writes the gate condition for one term. `apply(output)` is the pipeline's on_converged."""

    def __init__(
        self,
        api_client: client.ApiClient,
        lookup: PodLookup,
        term_valid: Callable[[], bool],
        check_term: Callable[[], Any],
        timeout: float = WRITE_TIMEOUT,
    ) -> None:
        self.core = client.CoreV1Api(api_client)
        self.lookup = lookup
        self.term_valid = term_valid
        self.check_term = check_term
        self.timeout = timeout
        # uid -> resourceVersion of our write, this term only (a new term starts empty).
        self.written: dict[str, str | None] = {}
        self.writes = 0  # successful writes, for tests and logs

    def apply(self, output: Any) -> list[str]:
        """Write the condition on the pods of a converged output; returns the pods written."""
        gate_ready = tuple(getattr(output, "gate_ready_pods", ()) or ())
        if not gate_ready or not self.term_valid():
            return []
        views = {}
        for key in gate_ready:
            namespace, _, name = key.partition("/")
            views[key] = view_of(self.lookup(namespace, name))
        todo = pods_to_write(gate_ready, views, self.written)
        if not todo:
            return []
        # Proof against the Lease once per batch, right before the side effects.
        self.check_term()
        plan = str(getattr(output, "plan_id", ""))[:12]
        message = f"plan {plan} runs on every HAProxy pod"
        if len(todo) == 1:
            results = [self._write(todo[0], message)]
        else:
            with ThreadPoolExecutor(min(MAX_PARALLEL_WRITES, len(todo))) as pool:
                results = list(pool.map(lambda v: self._write(v, message), todo))
        return [v.key for v, ok in zip(todo, results, strict=True) if ok]

    def _write(self, view: PodView, message: str) -> bool:
        if not self.term_valid():
            return False
        now = datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")
        try:
            pod = self.core.patch_namespaced_pod_status(
                view.name,
                view.namespace,
                apply_body(view.name, view.uid, now, message),
                field_manager=FIELD_MANAGER,
                force=True,
                _content_type=APPLY_CONTENT_TYPE,
                _request_timeout=self.timeout,
            )
        except ApiException as exc:
            if exc.status == 404:
                log.info("gate: pod %s is gone", view.key)
            elif exc.status in (409, 422):
                log.info("gate: %s was recreated; the next convergence decides", view.key)
            else:
                log.warning("gate: condition on %s not written: HTTP %s", view.key, exc.status)
            return False
        except Exception as exc:  # connection errors: retried on the next convergence
            log.warning("gate: condition on %s not written: %s", view.key, exc)
            return False
        self.written[view.uid] = pod.metadata.resource_version
        self.writes += 1
        log.info("gate: %s=True on %s", GATE_CONDITION, view.key)
        return True
