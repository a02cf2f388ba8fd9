"""The node's list+watch informer against the real local API server."""

from __future__ import annotations

import threading
from pathlib import Path

from kubernetes import client

from devstack.stack import wait_for
from localcluster.node.kube import Informer, Obj, make_api_client
from localcluster.testing import ApiServer


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
        stop = threading.Event()
        seen: list[tuple[str, str]] = []

        def handler(kind: str, obj: Obj) -> None:
            seen.append((kind, obj["metadata"]["name"]))

        informer = Informer(
            "configmaps",
            node_api,
            "/api/v1/configmaps",
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
        # relist then delivers what was missed and drops what vanished. The informer is kept
        # off the server (a fault) while the changes happen, so it cannot see them as events.
        late: list[tuple[str, str]] = []
        stale = Informer(
            "stale",
            node_api,
            "/api/v1/configmaps",
            lambda kind, obj: late.append((kind, obj["metadata"]["name"])),
            threading.Event(),
            read_timeout=1,
        )
        core.create_namespaced_config_map("default", configmap("gone"))
        stale.start()
        try:
            assert stale.synced.wait(30)
            assert stale.get("default/gone") is not None
            errors = stale.reflector.stats["errors"]
            offline = api.add_fault(path_regex="/configmaps", methods=["GET"], status=500)
            resume_from = stale.reflector.resume_resource_version
            stale.reflector.cut_watch(resume_from=resume_from)
            # Off the server only once a watch has failed: one sent just before the fault may
            # still be answered and would stream the changes below (seen under load).
            wait_for(lambda: stale.reflector.stats["errors"] > errors, what="the informer cut off")
            core.delete_namespaced_config_map("gone", "default")
            for i in range(8):
                core.create_namespaced_config_map("default", configmap(f"m{i}"))
            api.remove_fault(offline)
            wait_for(lambda: stale.reflector.stats["gone"] >= 1, what="410 on the old version")
            wait_for(lambda: ("DELETED", "gone") in late, what="the relist's deletion")
            names = {o["metadata"]["name"] for o in stale.items()}
            assert {f"m{i}" for i in range(8)} <= names and "gone" not in names
            assert ("DELETED", "gone") in late
            assert {("ADDED", f"m{i}") for i in range(8)} <= set(late)
        finally:
            stale.join(5)
        node_api.close()
