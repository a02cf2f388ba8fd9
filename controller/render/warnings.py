"""Render warnings leave the render: a Kubernetes Event on each object, a metric, a summary.

`report_warnings` is the leader's edge for RenderOutput.warnings: it sets the gauge
`haptic_render_warnings{reason}` to this render's counts, and emits one Event per warning on
the object it is about, deduplicated (a warning that persists render after render is
reported once; one that goes away and comes back is reported again). `warnings_summary` is
the pure part for the HAProxyTemplateConfig status: the count and the first N warnings.
"""

from __future__ import annotations

import logging
import queue
import threading
import uuid
from collections import Counter
from collections.abc import Callable, Iterable, Sequence
from datetime import UTC, datetime
from typing import Any

from kubernetes import client
from prometheus_client import Gauge

from contract import CONTROLLER_COMPONENT, GROUP, TEMPLATE_PLURAL, VERSION
from controller.metrics import RENDER_WARNINGS_TOTAL
from controller.render.model import REASONS, RenderWarning

log = logging.getLogger(__name__)

RENDER_WARNINGS = Gauge(
    "haptic_render_warnings",
    "Objects the last render skipped or degraded, by reason.",
    ["reason"],
)
COMPONENT = CONTROLLER_COMPONENT
API_VERSIONS = {
    "Ingress": "networking.k8s.io/v1",
    "IngressClass": "networking.k8s.io/v1",
    "Service": "v1",
    "Secret": "v1",
    "Pod": "v1",
    "EndpointSlice": "discovery.k8s.io/v1",
}
SUMMARY_LIMIT = 10
EVENT_BACKLOG = 1000

EmitEvent = Callable[[RenderWarning], None]


def warnings_summary(
    warnings: Sequence[RenderWarning], limit: int = SUMMARY_LIMIT
) -> dict[str, Any]:
    """`status.renderWarnings` of the HAProxyTemplateConfig (pure): the count, the count per
    reason and the first `limit` warnings as text. Lists, not maps, so that a merge patch
    replaces them whole."""
    return {
        "count": len(warnings),
        "reasons": [
            {"reason": reason, "count": count}
            for reason, count in sorted(Counter(w.reason for w in warnings).items())
        ],
        "first": [str(w) for w in warnings[:limit]],
    }


def set_gauge(warnings: Iterable[RenderWarning]) -> None:
    counts = Counter(w.reason for w in warnings)
    for reason in sorted(set(REASONS) | set(counts)):
        RENDER_WARNINGS.labels(reason).set(counts.get(reason, 0))


def report_warnings(
    warnings: Sequence[RenderWarning], reported: set[RenderWarning], emit: EmitEvent
) -> list[RenderWarning]:
    """Set the gauge and emit an Event for each warning not already reported; `reported`
    (the caller's, one per term) is updated to this render's warnings. Returns the new ones.
    """
    set_gauge(warnings)
    current = set(warnings)
    new = [w for w in dict.fromkeys(warnings) if w not in reported]
    reported.intersection_update(current)
    reported.update(new)
    for warning in new:
        RENDER_WARNINGS_TOTAL.labels(warning.reason).inc()
        if warning.kind in API_VERSIONS and warning.namespace:
            emit(warning)
    return new


def event_body(warning: RenderWarning, identity: str) -> dict[str, Any]:
    """A core/v1 Event on the object a warning is about (in that object's namespace)."""
    now = datetime.now(UTC).isoformat()
    return {
        "metadata": {
            "name": f"{warning.name[:200]}.{uuid.uuid4().hex[:12]}",
            "namespace": warning.namespace,
        },
        "involvedObject": {
            "apiVersion": API_VERSIONS[warning.kind],
            "kind": warning.kind,
            "name": warning.name,
            "namespace": warning.namespace,
        },
        "reason": warning.reason,
        "message": warning.message[:1024],
        "type": "Warning",
        "count": 1,
        "firstTimestamp": now,
        "lastTimestamp": now,
        "source": {"component": COMPONENT, "host": identity},
        "reportingComponent": COMPONENT,
        "reportingInstance": identity,
    }


def event_emitter(
    api_client: client.ApiClient, identity: str, backlog: int = EVENT_BACKLOG
) -> EmitEvent:
    """Events written by one background thread: they are reports, and a failing or slow
    write must never hold up leader work. At most `backlog` wait; beyond that they are
    dropped (logged): a cluster full of broken objects must not flood the API server.
    `emit` is called from one thread, the leader's render coordinator."""
    core = client.CoreV1Api(api_client)
    pending: queue.Queue[dict[str, Any]] = queue.Queue(maxsize=backlog)
    started = threading.Event()

    def send_all() -> None:
        while True:
            body = pending.get()
            try:
                core.create_namespaced_event(
                    body["metadata"]["namespace"], body, _request_timeout=5.0
                )
            except Exception as exc:
                log.warning("render warning event %s not recorded: %s", body["reason"], exc)

    def emit(warning: RenderWarning) -> None:
        if not started.is_set():
            started.set()
            threading.Thread(target=send_all, name="render-warning-events", daemon=True).start()
        try:
            pending.put_nowait(event_body(warning, identity))
        except queue.Full:
            log.warning("render warning event dropped (backlog full): %s", warning)

    return emit


def fenced_template_status(
    api_client: client.ApiClient, namespace: str, name: str, check_term: Callable[[], None]
) -> Callable[[dict[str, Any]], None]:
    """Merge-patches a fragment of the HAProxyTemplateConfig's status, fenced: check_term
    raises when this term is over, and then nothing is written (render warnings, the
    template gate's condition)."""
    custom = client.CustomObjectsApi(api_client)

    def patch(status: dict[str, Any]) -> None:
        check_term()
        custom.patch_namespaced_custom_object_status(
            GROUP,
            VERSION,
            namespace,
            TEMPLATE_PLURAL,
            name,
            {"status": status},
            _request_timeout=5.0,
        )

    return patch


def template_status_writer(
    api_client: client.ApiClient, namespace: str, name: str, check_term: Callable[[], None]
) -> Callable[[dict[str, Any]], None]:
    """Writes `status.renderWarnings` of the HAProxyTemplateConfig, fenced."""
    patch = fenced_template_status(api_client, namespace, name, check_term)
    return lambda summary: patch({"renderWarnings": summary})


def render_warning_reporter(
    api_client: client.ApiClient,
    identity: str,
    write_status: Callable[[dict[str, Any]], None] | None = None,
) -> Callable[[Any], None]:
    """The leader pipeline's `report_warnings(output)` for one term: Events deduplicated
    within the term (a new leader reports what is still wrong once more), and the template
    config's status line whenever the summary changes."""
    emit = event_emitter(api_client, identity)
    reported: set[RenderWarning] = set()
    written: list[dict[str, Any]] = []

    def report(output: Any) -> None:
        report_warnings(output.warnings, reported, emit)
        summary = warnings_summary(output.warnings)
        if write_status is None or (written and written[-1] == summary):
            return
        try:
            write_status(summary)
        except Exception as exc:  # a report; never the reason a render does not deploy
            log.warning("render warnings status not written: %s", exc)
            return
        written[:] = [summary]

    return report
