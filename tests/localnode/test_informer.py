"""The node's list+watch informer against the real local API server."""

from __future__ import annotations

import threading
from pathlib import Path

from kubernetes import client

from localcluster.node.kube import Informer, Obj, make_api_client
from localcluster.testing import ApiServer

from .support import wait_for


def configmap(name: str, value: str = "1") -> dict:
    return {
        "apiVersion": "v1",
        "kind": "ConfigMap",
        "metadata": {"name": name},
        "data": {"v": value},
    }


def test_events_and_recovery_from_410(tmp_path: Path) -> None:
    with ApiServer.start(tmp_path, extra_args=["--watch-history", "3"]) as api:
        core = client.CoreV1Api(api.api_client())
        node_api = make_api_client(None, api.kubeconfig)
        node_core = client.CoreV1Api(node_api)
        stop = threading.Event()
        seen: list[tuple[str, str]] = []

        def handler(kind: str, obj: Obj) -> None:
            seen.append((kind, obj["metadata"]["name"]))

        informer = Informer(
            "configmaps",
            node_core.list_config_map_for_all_namespaces,
            handler,
            stop,
            read_timeout=1,
        )
        informer.start()
        try:
            assert informer.synced.wait(30)
            core.create_namespaced_config_map("default", configmap("a"))
            core.patch_namespaced_config_map("a", "default", {"data": {"v": "2"}})
            core.delete_namespaced_config_map("a", "default")
            wait_for(lambda: ("DELETED", "a") in seen, what="delete event")
            assert [e for e in seen if e[1] == "a"] == [
                ("ADDED", "a"),
                ("MODIFIED", "a"),
                ("DELETED", "a"),
            ]
        finally:
            stop.set()
            informer.join(5)

        # A watch resumed from a version older than the server's history gets 410 Gone; a
        # relist then delivers what was missed and drops what vanished.
        late: list[tuple[str, str]] = []
        stale = Informer(
            "stale",
            node_core.list_config_map_for_all_namespaces,
            lambda kind, obj: late.append((kind, obj["metadata"]["name"])),
            threading.Event(),
            read_timeout=1,
        )
        core.create_namespaced_config_map("default", configmap("gone"))
        stale._relist()
        core.delete_namespaced_config_map("gone", "default")
        for i in range(8):
            core.create_namespaced_config_map("default", configmap(f"m{i}"))
        assert stale._watch_once() is False
        stale._relist()
        names = {o["metadata"]["name"] for o in stale.items()}
        assert {f"m{i}" for i in range(8)} <= names and "gone" not in names
        assert ("DELETED", "gone") in late
        assert {("ADDED", f"m{i}") for i in range(8)} <= set(late)
        node_api.close()
