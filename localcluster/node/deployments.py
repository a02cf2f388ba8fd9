"""Deployment controller: pods are owned by the Deployment directly and labelled with the
template hash; rollout arithmetic lives in rollout.py. One ReplicaSet per template records
its revision and pod counts (revisions.py), for `kubectl rollout history|undo`."""

from __future__ import annotations

import copy
import logging
import threading
import time
from datetime import datetime
from typing import Any

from kubernetes import client
from kubernetes.client.exceptions import ApiException

from contract import pod_ready

from . import revisions, rollout
from .kube import MERGE_PATCH, Informer, Obj, normalized, raw, retry_on_conflict
from .kubelet import now_rfc3339
from .objutil import controller_owner, controller_reference
from .podstatus import ready_since
from .workqueue import WorkLoop

log = logging.getLogger(__name__)


def _epoch(ts: str | None) -> float | None:
    if not ts:
        return None
    return datetime.fromisoformat(ts.replace("Z", "+00:00")).timestamp()


class DeploymentController:
    def __init__(
        self,
        api: client.ApiClient,
        pods: Informer,
        deployments: Informer,
        node_name: str,
        stop: threading.Event,
        replica_sets: Informer | None = None,
    ) -> None:
        self.apps = client.AppsV1Api(api)
        self.core = client.CoreV1Api(api)
        self.pods = pods
        self.deployments = deployments
        self.replica_sets = replica_sets
        self.node_name = node_name
        self.loop = WorkLoop("deployments", self.reconcile, self._all_keys, stop, resync=1.0)

    def _all_keys(self) -> set[str]:
        keys = {
            f"{d['metadata']['namespace']}/{d['metadata']['name']}"
            for d in self.deployments.items()
        }
        for pod in self.pods.items():
            ref = controller_owner(pod)
            if ref and ref.get("kind") == "Deployment":
                keys.add(f"{pod['metadata']['namespace']}/{ref['name']}")
        return keys

    def on_deployment(self, kind: str, dep: Obj) -> None:
        self.loop.add(f"{dep['metadata']['namespace']}/{dep['metadata']['name']}")

    def on_replica_set(self, kind: str, rs: Obj) -> None:
        ref = controller_owner(rs)
        if ref and ref.get("kind") == "Deployment":
            self.loop.add(f"{rs['metadata']['namespace']}/{ref['name']}")

    def on_pod(self, kind: str, pod: Obj) -> None:
        ref = controller_owner(pod)
        if ref and ref.get("kind") == "Deployment":
            self.loop.add(f"{pod['metadata']['namespace']}/{ref['name']}")

    # reconcile ---------------------------------------------------------------------------
    def _owned(self, ns: str, name: str, uid: str | None) -> list[Obj]:
        out = []
        for pod in self.pods.items():
            ref = controller_owner(pod)
            if (
                pod["metadata"].get("namespace") == ns
                and ref
                and ref.get("kind") == "Deployment"
                and ref.get("name") == name
                and (uid is None or ref.get("uid") == uid)
            ):
                out.append(pod)
        return out

    def reconcile(self, key: str) -> None:
        ns, name = key.split("/", 1)
        dep = self.deployments.get(key)
        if dep is None or dep["metadata"].get("deletionTimestamp"):
            # Pods of a deleted Deployment go (garbage collection may also do it).
            for pod in self._owned(ns, name, None):
                if dep is None or controller_owner(pod).get("uid") == dep["metadata"]["uid"]:
                    self._delete_pod(pod)
            return
        uid = dep["metadata"]["uid"]
        # Pods owned by an earlier Deployment of the same name are orphans.
        for pod in self._owned(ns, name, None):
            if controller_owner(pod).get("uid") != uid:
                self._delete_pod(pod)
        spec = dep.get("spec") or {}
        replicas = int(spec.get("replicas", 1))
        template = spec.get("template") or {}
        current = rollout.template_hash(template)
        min_ready = int(spec.get("minReadySeconds", 0) or 0)
        pods = self._owned(ns, name, uid)
        now = time.time()
        summaries = [self._summary(p, min_ready, now) for p in pods]
        strategy = spec.get("strategy") or {}
        ru = strategy.get("rollingUpdate") or {}
        if spec.get("paused"):
            step = rollout.Step()
        elif strategy.get("type") == "Recreate":
            step = rollout.recreate_step(summaries, replicas, current)
        else:
            step = rollout.rolling_update_step(
                summaries, replicas, current, ru.get("maxSurge"), ru.get("maxUnavailable")
            )
        by_name = {p["metadata"]["name"]: p for p in pods}
        for pod_name in step.delete:
            self._delete_pod(by_name[pod_name])
        for _ in range(step.create):
            self._create_pod(dep, template, current)
        if self.replica_sets is not None:
            surge, _ = rollout.resolve_fenceposts(
                ru.get("maxSurge"), ru.get("maxUnavailable"), replicas
            )
            try:
                self._sync_revisions(dep, current, min_ready, surge)
            except ApiException as exc:
                # Revisions are a record: failing to write one never stalls the rollout.
                log.warning("revisions of %s: %s", key, exc)
        self._write_status(dep, current, min_ready)

    # revisions -----------------------------------------------------------------------------
    def _counts(self, dep: Obj, min_ready: int) -> dict[str, revisions.Counts]:
        meta, now = dep["metadata"], time.time()
        counts: dict[str, revisions.Counts] = {}
        for pod in self._owned(meta["namespace"], meta["name"], meta["uid"]):
            s = self._summary(pod, min_ready, now)
            if s.terminating:
                continue
            c = counts.get(s.template_hash, revisions.Counts())
            counts[s.template_hash] = revisions.Counts(
                c.replicas + 1, c.ready + int(s.ready), c.available + int(s.available)
            )
        return counts

    def _sync_revisions(self, dep: Obj, current: str, min_ready: int, surge: int) -> None:
        """Create or update the ReplicaSet of every template with pods (and the current one),
        number the current revision, prune history beyond revisionHistoryLimit."""
        assert self.replica_sets is not None
        meta = dep["metadata"]
        ns, uid = meta["namespace"], meta["uid"]
        sets = [
            rs
            for rs in self.replica_sets.items()
            if rs["metadata"].get("namespace") == ns
            and (controller_owner(rs) or {}).get("uid") == uid
        ]
        by_hash = {
            (rs["metadata"].get("labels") or {}).get(rollout.TEMPLATE_HASH_LABEL, ""): rs
            for rs in sets
        }
        counts = self._counts(dep, min_ready)
        revision, history = revisions.current_revision(sets, by_hash.get(current))
        want = revisions.desired_replica_set(
            dep, current, revision, history, counts.get(current, revisions.Counts()), surge
        )
        self._write_replica_set(by_hash.get(current), want)
        for rs_hash, rs in by_hash.items():
            if rs_hash != current:
                old = copy.deepcopy(rs)
                c = counts.get(rs_hash, revisions.Counts())
                old["spec"] = {**(old.get("spec") or {}), "replicas": c.replicas}
                old["status"] = {**want["status"], "replicas": c.replicas,
                                 "fullyLabeledReplicas": c.replicas, "readyReplicas": c.ready,
                                 "availableReplicas": c.available}  # fmt: skip
                self._write_replica_set(rs, old)
        limit = int((dep.get("spec") or {}).get("revisionHistoryLimit", 10))
        for name in revisions.to_prune(sets, current, counts, limit):
            self._delete_replica_set(ns, name)
        if (meta.get("annotations") or {}).get(revisions.REVISION) != str(revision):
            patch = {"metadata": {"annotations": {revisions.REVISION: str(revision)}}}
            written = raw(
                self.apps.patch_namespaced_deployment,
                meta["name"],
                ns,
                patch,
                _content_type=MERGE_PATCH,
            )
            self.deployments.upsert_local(written)

    def _write_replica_set(self, have: Obj | None, want: Obj) -> None:
        assert self.replica_sets is not None
        meta = want["metadata"]
        name, ns = meta["name"], meta["namespace"]
        if have is None:
            body = {k: v for k, v in want.items() if k != "status"}
            have = raw(self.apps.create_namespaced_replica_set, ns, body)
            self.replica_sets.upsert_local(have)
        elif normalized(
            {"a": have["metadata"].get("annotations"), "s": have.get("spec")}
        ) != normalized({"a": meta.get("annotations"), "s": want.get("spec")}):
            patch = {"metadata": {"annotations": meta.get("annotations")}, "spec": want["spec"]}
            have = raw(
                self.apps.patch_namespaced_replica_set, name, ns, patch, _content_type=MERGE_PATCH
            )
            self.replica_sets.upsert_local(have)
        status = {**want["status"], "observedGeneration": have["metadata"].get("generation", 1)}
        if normalized(have.get("status") or {}) != normalized(status):
            written = raw(
                self.apps.patch_namespaced_replica_set_status,
                name,
                ns,
                {"status": status},
                _content_type=MERGE_PATCH,
            )
            self.replica_sets.upsert_local(written)

    def _delete_replica_set(self, ns: str, name: str) -> None:
        try:
            raw(self.apps.delete_namespaced_replica_set, name, ns)
        except ApiException as exc:
            if exc.status != 404:
                raise

    def _summary(self, pod: Obj, min_ready: int, now: float) -> rollout.PodSummary:
        meta = pod["metadata"]
        ready = pod_ready(pod)
        return rollout.PodSummary(
            name=meta["name"],
            template_hash=(meta.get("labels") or {}).get(rollout.TEMPLATE_HASH_LABEL, ""),
            ready=ready,
            available=ready and rollout.is_available(_epoch(ready_since(pod)), min_ready, now),
            terminating=bool(meta.get("deletionTimestamp")),
            created=meta.get("creationTimestamp", ""),
        )

    def _create_pod(self, dep: Obj, template: Obj, current: str) -> None:
        meta = dep["metadata"]
        tmeta = copy.deepcopy(template.get("metadata") or {})
        labels = dict(tmeta.get("labels") or {})
        labels[rollout.TEMPLATE_HASH_LABEL] = current
        spec = copy.deepcopy(template.get("spec") or {})
        # One node: place the pod directly, as a DaemonSet controller would.
        spec.setdefault("nodeName", self.node_name)
        body = {
            "apiVersion": "v1",
            "kind": "Pod",
            "metadata": {
                "generateName": f"{meta['name']}-{current}-",
                "namespace": meta["namespace"],
                "labels": labels,
                "annotations": tmeta.get("annotations") or {},
                "ownerReferences": [controller_reference(dep, "apps/v1", "Deployment")],
            },
            "spec": spec,
        }
        created = raw(self.core.create_namespaced_pod, meta["namespace"], body)
        self.pods.upsert_local(created)

    def _delete_pod(self, pod: Obj) -> None:
        meta = pod["metadata"]
        if meta.get("deletionTimestamp"):
            return
        try:
            result = raw(
                self.core.delete_namespaced_pod,
                meta["name"],
                meta["namespace"],
                body={"preconditions": {"uid": meta["uid"]}},
            )
        except ApiException as exc:
            if exc.status in (404, 409):
                return
            raise
        if result.get("kind") == "Pod":
            self.pods.upsert_local(result)  # graceful: now terminating
        else:
            self.pods.remove_local(pod)

    def _write_status(self, dep: Obj, current: str, min_ready: int) -> None:
        meta = dep["metadata"]
        spec = dep.get("spec") or {}
        desired = int(spec.get("replicas", 1))
        now = time.time()
        summaries = [
            self._summary(p, min_ready, now)
            for p in self._owned(meta["namespace"], meta["name"], meta["uid"])
        ]
        counts = rollout.count_pods(summaries, current)
        ru = (spec.get("strategy") or {}).get("rollingUpdate") or {}
        _, unavailable = rollout.resolve_fenceposts(
            ru.get("maxSurge"), ru.get("maxUnavailable"), desired
        )
        if (spec.get("strategy") or {}).get("type") == "Recreate":
            unavailable = desired
        complete = (
            counts.updated == desired and counts.replicas == desired and counts.available == desired
        )
        want = rollout.deployment_status(
            int(meta.get("generation", 1) or 1), desired, counts, unavailable, complete
        )

        def merged(old: dict[str, Any]) -> dict[str, Any]:
            new = dict(old)
            new.update({k: v for k, v in want.items() if k != "conditions"})
            old_conds = {c.get("type"): c for c in old.get("conditions") or []}
            stamp = now_rfc3339()
            conds = []
            for cond in want["conditions"]:
                prev = old_conds.get(cond["type"], {})
                same = prev.get("status") == cond["status"] and prev.get("reason") == cond["reason"]
                conds.append(
                    cond
                    | {
                        "lastUpdateTime": prev.get("lastUpdateTime", stamp) if same else stamp,
                        "lastTransitionTime": prev.get("lastTransitionTime", stamp)
                        if prev.get("status") == cond["status"]
                        else stamp,
                    }
                )
            new["conditions"] = conds
            return new

        if normalized(merged(dep.get("status") or {})) == normalized(dep.get("status") or {}):
            return

        def attempt() -> None:
            fresh = raw(self.apps.read_namespaced_deployment, meta["name"], meta["namespace"])
            if fresh["metadata"].get("uid") != meta["uid"]:
                return
            status = merged(fresh.get("status") or {})
            if normalized(status) == normalized(fresh.get("status") or {}):
                return
            fresh["status"] = status
            written = raw(
                self.apps.replace_namespaced_deployment_status,
                meta["name"],
                meta["namespace"],
                fresh,
            )
            self.deployments.upsert_local(written)

        try:
            retry_on_conflict(attempt)
        except ApiException as exc:
            if exc.status != 404:
                raise
