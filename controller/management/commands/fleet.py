"""python manage.py fleet: the HAProxy pods and what each agent runs, live."""

from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor
from typing import Any

import kubernetes

from agents.client import AgentClient, AgentError
from contract import pod_ready

from ._ops import KubeCommand, short, table

DEFAULT_SELECTOR = {"app.kubernetes.io/name": "haproxy"}


class Command(KubeCommand):
    help = (
        "Show the HAProxy pods (selected by the template config's podSelector) with IP, "
        "Ready, and what each agent reports right now: applied and running plan IDs, the "
        "HAProxy worker pid and any pending reload. Reads the pods from Kubernetes (the "
        "workload cluster with --workload-kubeconfig) and asks every agent (GET /v1/state "
        "with the agent token)."
    )

    def add_arguments(self, parser: Any) -> None:
        super().add_arguments(parser)
        parser.add_argument(
            "--wide", action="store_true", help="full plan IDs instead of 12-digit prefixes"
        )
        parser.add_argument(
            "--timeout", type=float, default=5.0, help="seconds per agent request (default 5)"
        )

    def handle(self, *args: Any, **options: Any) -> None:
        self.setup(options)
        template = self.template_config()
        spec = (template or {}).get("spec") or {}
        labels = (spec.get("podSelector") or {}).get("matchLabels") or DEFAULT_SELECTOR
        port = int((spec.get("agent") or {}).get("port") or 8405)
        selector = ",".join(f"{k}={v}" for k, v in sorted(labels.items()))
        pods = kubernetes.client.CoreV1Api(self.workload_api).list_namespaced_pod(
            self.namespace, label_selector=selector, _request_timeout=10
        )
        pods = sorted(pods.items, key=lambda p: p.metadata.name)
        token = self.agent_token(template) if pods else ""

        def ask(pod: Any) -> dict[str, Any]:
            return _pod_row(pod, port, token, options["timeout"])

        # One slow agent must not serialize the others.
        with ThreadPoolExecutor(max_workers=max(1, min(16, len(pods)))) as pool:
            rows = list(pool.map(ask, pods))
        if self.as_json:
            self.emit_json(rows)
            return
        if not rows:
            self.stdout.write(f"no HAProxy pods match {selector} in namespace {self.namespace}")
            return
        width = 64 if options["wide"] else 12
        self.stdout.write(
            table(
                ["POD", "IP", "READY", "APPLIED", "RUNNING", "EPOCH", "WORKER", "PENDING", "NOTE"],
                [_table_line(r, width) for r in rows],
            )
        )
        plans = {r.get("running_plan_id") for r in rows if "error" not in r}
        if len(plans) == 1 and None not in plans:
            self.stdout.write(f"\nall {len(rows)} pods run plan {short(plans.pop(), width)}")
        elif plans:
            self.stdout.write(f"\npods disagree: {len(plans)} distinct running plans")


def _pod_row(pod: Any, port: int, token: str, timeout: float) -> dict[str, Any]:
    """What Kubernetes says of the pod, and what its agent reports (or why it did not)."""
    row: dict[str, Any] = {
        "pod": pod.metadata.name,
        "ip": pod.status.pod_ip,
        "ready": pod_ready(pod),
        "phase": pod.status.phase,
        "terminating": pod.metadata.deletion_timestamp is not None,
    }
    if not pod.status.pod_ip:
        row["error"] = "no pod IP yet"
        return row
    try:
        with AgentClient(f"http://{pod.status.pod_ip}:{port}", token, timeout=timeout) as agent:
            state = agent.state()
    except (AgentError, OSError) as exc:
        row["error"] = f"agent: {exc}"
        return row
    worker = state.worker or {}
    row.update(
        bootstrap=state.bootstrap,
        applied_plan_id=state.applied_plan_id,
        running_plan_id=state.running_plan_id,
        last_known_good_plan_id=state.last_known_good_plan_id,
        applied_token=state.applied_token,
        worker_pid=worker.get("pid"),
        pending_reload=state.pending_reload,
        reload_count=state.reload_count,
        invariant_violation=state.invariant_violation,
    )
    return row


def _table_line(r: dict[str, Any], width: int) -> list[Any]:
    token_info = r.get("applied_token") or {}
    return [
        r["pod"],
        r["ip"],
        "yes" if r["ready"] else ("terminating" if r["terminating"] else "no"),
        "bootstrap" if r.get("bootstrap") else short(r.get("applied_plan_id"), width),
        short(r.get("running_plan_id"), width),
        token_info.get("epoch", "-") if token_info else "-",
        r.get("worker_pid"),
        _pending(r.get("pending_reload")),
        r.get("error") or r.get("invariant_violation") or "",
    ]


def _pending(pending: Any) -> str:
    if not pending:
        return "no"
    if isinstance(pending, dict):
        plan = pending.get("plan_id") or pending.get("planID")
        return f"yes ({short(plan)})" if plan else "yes"
    return "yes"
