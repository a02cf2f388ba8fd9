"""Kubernetes Events for pod lifecycle (Scheduled, Started, Killing, BackOff, ...), posted by
one background thread so pod workers never wait on them; dropped when the queue is full."""

from __future__ import annotations

import contextlib
import logging
import queue
import threading
from typing import Any

from kubernetes import client

from .kube import raw

log = logging.getLogger(__name__)


class EventRecorder:
    def __init__(self, api: client.ApiClient, node_name: str, stop: threading.Event) -> None:
        self._core = client.CoreV1Api(api)
        self._node = node_name
        self._stop = stop
        self._queue: queue.Queue[dict[str, Any]] = queue.Queue(maxsize=1000)
        self._thread = threading.Thread(target=self._run, name="events", daemon=True)

    def start(self) -> None:
        self._thread.start()

    def join(self, timeout: float) -> None:
        self._thread.join(timeout)

    def pod_event(
        self,
        pod: dict[str, Any],
        reason: str,
        message: str,
        kind: str = "Normal",
        container: str | None = None,
        component: str = "kubelet",
        now: str = "",
    ) -> None:
        meta = pod.get("metadata") or {}
        involved: dict[str, Any] = {
            "apiVersion": "v1",
            "kind": "Pod",
            "namespace": meta.get("namespace", "default"),
            "name": meta.get("name"),
            "uid": meta.get("uid"),
        }
        if container:
            involved["fieldPath"] = f"spec.containers{{{container}}}"
        body = {
            "apiVersion": "v1",
            "kind": "Event",
            "metadata": {
                "generateName": f"{meta.get('name')}.",
                "namespace": meta.get("namespace", "default"),
            },
            "involvedObject": involved,
            "reason": reason,
            "message": message,
            "type": kind,
            "source": {"component": component, "host": self._node},
            "reportingComponent": component,
            "reportingInstance": self._node,
            "count": 1,
        }
        if now:
            body["firstTimestamp"] = body["lastTimestamp"] = now
        with contextlib.suppress(queue.Full):  # events are best effort
            self._queue.put_nowait(body)

    def _run(self) -> None:
        while not self._stop.is_set():
            try:
                body = self._queue.get(timeout=0.5)
            except queue.Empty:
                continue
            try:
                raw(
                    self._core.create_namespaced_event,
                    body["metadata"]["namespace"],
                    body,
                    _request_timeout=5,
                )
            except Exception as exc:
                log.debug("event %s dropped: %s", body["reason"], exc)
