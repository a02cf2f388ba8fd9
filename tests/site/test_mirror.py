"""The mirror against the local Kubernetes API server: list + watch into PostgreSQL.

Objects are created, updated, deleted and garbage-collected through the real API server
while the mirror runs, and while it is stopped; nothing may be lost or duplicated.
"""

from __future__ import annotations

import copy
import os
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from django.db import connection
from django.utils import timezone
from kubernetes import client

from checkpoints import mirror as mirror_module
from checkpoints.models import (
    AuxiliaryObject,
    Checkpoint,
    CheckpointFile,
    DeploymentIntent,
    HubStatus,
    KubeEvent,
    LeadershipTerm,
    MirrorState,
    PodReceipt,
)
from localcluster.testing import ApiServer
from tests.conftest import REPO_ROOT
from tests.site import factories as f

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.timeout(180)]

GROUP, VERSION, NS = "haproxy-haptic.org", "v1alpha1", f.NS


def eventually(check: Callable[[], Any], timeout: float = 30.0, what: str = "") -> Any:
    """Wait until check() is truthy (the mirror is asynchronous by design)."""
    deadline = time.monotonic() + timeout
    while True:
        value = check()
        if value:
            return value
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out waiting for {what or check}")
        time.sleep(0.1)


class Cluster:
    """Thin helpers over the official client, shaped like the controller's writes."""

    def __init__(self, api: ApiServer) -> None:
        self.api = api
        self.client = api.api_client()
        self.custom = client.CustomObjectsApi(self.client)
        self.core = client.CoreV1Api(self.client)
        self.leases = client.CoordinationV1Api(self.client)
        self.core.create_namespace({"metadata": {"name": NS}})
        self.template = self.custom.create_namespaced_custom_object(
            GROUP,
            VERSION,
            NS,
            "haproxytemplateconfigs",
            {
                "apiVersion": f"{GROUP}/{VERSION}",
                "kind": "HAProxyTemplateConfig",
                "metadata": {"name": "haptic"},
                "spec": {"podSelector": {"matchLabels": {"app": "haproxy"}}},
            },
        )
        self.template_uid = self.template["metadata"]["uid"]

    def _owned(self, obj: dict[str, Any]) -> dict[str, Any]:
        obj = copy.deepcopy(obj)
        meta = obj["metadata"]
        for key in ("uid", "resourceVersion", "creationTimestamp", "namespace"):
            meta.pop(key, None)
        meta["ownerReferences"] = [
            {
                "apiVersion": f"{GROUP}/{VERSION}",
                "kind": "HAProxyTemplateConfig",
                "name": "haptic",
                "uid": self.template_uid,
            }
        ]
        meta.get("labels", {})[f"{GROUP}/template-uid"] = self.template_uid
        if "templateUID" in obj.get("spec", {}):
            obj["spec"]["templateUID"] = self.template_uid
        return obj

    def create(self, plural: str, obj: dict[str, Any]) -> dict[str, Any]:
        obj = self._owned(obj)
        obj.pop("status", None)
        return self.custom.create_namespaced_custom_object(GROUP, VERSION, NS, plural, obj)

    def delete(self, plural: str, name: str) -> None:
        self.custom.delete_namespaced_custom_object(GROUP, VERSION, NS, plural, name)

    def checkpoint(self, config: str, maps: list[dict[str, Any]], created: str) -> dict[str, Any]:
        stored = [self.create("haproxymapfiles", m) for m in maps]
        return self.create("haproxycfgs", f.checkpoint(config, stored, created=created))

    def publish(self, receipts: list[dict[str, Any]], retained: list[dict[str, Any]]) -> None:
        try:
            current = self.custom.get_namespaced_custom_object(
                GROUP, VERSION, NS, "haproxycfgs", "haptic"
            )
        except client.ApiException:
            current = self.create("haproxycfgs", f.published([]))
        current["status"] = f.published(receipts, retained)["status"]
        self.custom.replace_namespaced_custom_object_status(
            GROUP, VERSION, NS, "haproxycfgs", "haptic", current
        )

    def put_lease(self, body: dict[str, Any]) -> None:
        body = copy.deepcopy(body)
        name = body["metadata"]["name"]
        for key in ("uid", "resourceVersion", "namespace"):
            body["metadata"].pop(key, None)
        if "ownerReferences" in body["metadata"]:
            body["metadata"]["ownerReferences"][0]["uid"] = self.template_uid
        try:
            current = self.leases.read_namespaced_lease(name, NS)
        except client.ApiException:
            self.leases.create_namespaced_lease(NS, body)
            return
        body["metadata"]["resourceVersion"] = current.metadata.resource_version
        self.leases.replace_namespaced_lease(name, NS, body)


@pytest.fixture
def cluster(tmp_path: Path) -> Iterator[Cluster]:
    api = ApiServer.start(tmp_path / "cluster")
    try:
        yield Cluster(api)
    finally:
        api.stop()


@pytest.fixture
def mirrors() -> Iterator[Callable[[Cluster], mirror_module.Mirror]]:
    """Start mirrors (short watch timeouts so the test sees reconnects); stop them all."""
    started: list[mirror_module.Mirror] = []

    def start(c: Cluster) -> mirror_module.Mirror:
        m = mirror_module.Mirror(c.api.api_client(), NS, watch_timeout=5)
        m.start()
        started.append(m)
        return m

    yield start
    for m in started:
        m.stop()


def state(kind: str) -> MirrorState:
    return MirrorState.objects.get(kind=f"{NS}/{kind}")


def test_create_update_stop_restart_and_garbage_collection(
    cluster: Cluster, mirrors: Callable[[Cluster], mirror_module.Mirror]
) -> None:
    m = mirrors(cluster)
    assert m.wait_synced(timeout=30)

    # Created while running.
    map_v1 = f.map_file("maps/hosts.map", "a.example backend_a\n")
    cp_a = cluster.checkpoint("global\n  maxconn 100\n", [map_v1], "2026-11-30T08:00:00Z")
    plan_a, sum_a = cp_a["spec"]["planID"], cp_a["spec"]["checksum"]
    cluster.publish([f.receipt("haproxy-0", plan_a, sum_a, "2026-11-30T08:00:05Z")], [cp_a])
    cluster.put_lease(f.leader_lease("ctrl-a", 1, "2026-11-30T07:59:00Z", "2026-11-30T08:00:00Z"))
    cluster.put_lease(f.retained_lease(plan_a, sum_a, 1, holder="ctrl-a"))
    event = cluster.core.create_namespaced_event(
        NS,
        {
            "metadata": {"name": "haptic.retained"},
            "involvedObject": {"kind": "HAProxyTemplateConfig", "name": "haptic", "namespace": NS},
            "reason": "RetainedConfigActive",
            "message": "checksum " + sum_a,
            "type": "Warning",
            "count": 1,
        },
    )

    a = eventually(
        lambda: Checkpoint.objects.filter(uid=cp_a["metadata"]["uid"], promoted=True).first(),
        what="checkpoint A",
    )
    assert a.template_uid == cluster.template_uid and a.plan_id == plan_a
    eventually(
        lambda: CheckpointFile.objects.filter(
            checkpoint=a, path="maps/hosts.map", content="a.example backend_a\n"
        ).exists(),
        what="map bytes",
    )
    eventually(lambda: DeploymentIntent.objects.filter(plan_id=plan_a).exists(), what="intent")
    eventually(lambda: LeadershipTerm.objects.filter(holder="ctrl-a", epoch=1).exists())
    eventually(lambda: PodReceipt.objects.filter(pod_name="haproxy-0", current=True).exists())
    eventually(lambda: KubeEvent.objects.filter(uid=event.metadata.uid).exists(), what="event")
    assert HubStatus.objects.get().template_uid == cluster.template_uid

    # Updated while running: a second checkpoint, a new intent, the event repeats.
    map_v2 = f.map_file("maps/hosts.map", "a.example backend_a\nb.example backend_b\n")
    cp_b = cluster.checkpoint("global\n  maxconn 200\n", [map_v2], "2026-11-30T08:05:00Z")
    plan_b, sum_b = cp_b["spec"]["planID"], cp_b["spec"]["checksum"]
    cluster.put_lease(f.retained_lease(plan_b, sum_b, 1, holder="ctrl-a"))
    event.count = 4
    event.message = "again"
    cluster.core.replace_namespaced_event(event.metadata.name, NS, event)
    eventually(lambda: KubeEvent.objects.filter(uid=event.metadata.uid, count=4).exists())
    eventually(lambda: DeploymentIntent.objects.filter(plan_id=plan_b).exists())

    # Stopped: meanwhile A is deleted, C published, and another replica takes the lease.
    eventually(lambda: Checkpoint.objects.filter(uid=cp_b["metadata"]["uid"]).exists())
    m.stop()
    relists_before = state("haproxycfgs").relists_total
    cluster.delete("haproxycfgs", cp_a["metadata"]["name"])
    cp_c = cluster.checkpoint("global\n  maxconn 300\n", [], "2026-11-30T08:10:00Z")
    cluster.put_lease(f.leader_lease("ctrl-b", 2, "2026-11-30T08:09:00Z", "2026-11-30T08:09:00Z"))
    assert not Checkpoint.objects.filter(uid=cp_c["metadata"]["uid"]).exists()

    # Restarted: it resumes its watches from the stored resourceVersions.
    m2 = mirrors(cluster)
    eventually(
        lambda: Checkpoint.objects.filter(uid=cp_a["metadata"]["uid"], collected=True).exists(),
        what="A marked collected after restart",
    )
    eventually(lambda: Checkpoint.objects.filter(uid=cp_c["metadata"]["uid"]).exists())
    eventually(lambda: LeadershipTerm.objects.filter(holder="ctrl-b", epoch=2).exists())
    assert state("haproxycfgs").relists_total == relists_before  # resumed, not relisted
    assert LeadershipTerm.objects.get(holder="ctrl-a").ended_at is not None

    # Garbage collection: deleting the template makes the API server remove every object it
    # owns; the mirror keeps them all, marked collected.
    cluster.custom.delete_namespaced_custom_object(
        GROUP, VERSION, NS, "haproxytemplateconfigs", "haptic"
    )
    eventually(
        lambda: (
            Checkpoint.objects.filter(collected=False).count() == 0
            and AuxiliaryObject.objects.filter(collected=False).count() == 0
        ),
        timeout=40,
        what="garbage-collected checkpoints and children marked collected",
    )
    eventually(lambda: PodReceipt.objects.filter(current=True).count() == 0)
    m2.stop()

    # Nothing lost, nothing duplicated.
    assert Checkpoint.objects.count() == 3
    assert set(Checkpoint.objects.values_list("uid", flat=True)) == {
        cp_a["metadata"]["uid"],
        cp_b["metadata"]["uid"],
        cp_c["metadata"]["uid"],
    }
    assert all(c.collected_at is not None for c in Checkpoint.objects.all())
    assert CheckpointFile.objects.count() == 5  # A: cfg+map, B: cfg+map, C: cfg
    assert CheckpointFile.objects.filter(kind="map", content__isnull=True).count() == 0
    assert AuxiliaryObject.objects.count() == 2
    assert DeploymentIntent.objects.count() == 2
    assert LeadershipTerm.objects.count() == 2
    assert KubeEvent.objects.count() == 1
    assert PodReceipt.objects.count() == 1
    cfg_state = state("haproxycfgs")
    assert cfg_state.events_total >= 4 and cfg_state.last_synced_at is not None
    assert cfg_state.lag_seconds >= 0


def test_relists_when_the_watch_history_is_gone(
    tmp_path: Path, mirrors: Callable[[Cluster], mirror_module.Mirror]
) -> None:
    """The API server keeps only a short watch history here: a mirror that was down longer
    gets 410 on resume, relists, and finds deletions it never saw as events by absence."""
    api = ApiServer.start(tmp_path / "cluster", extra_args=["--watch-history", "5"])
    try:
        cluster = Cluster(api)
        keep = cluster.checkpoint("global\n  # keep\n", [], "2026-11-30T08:00:00Z")
        drop = cluster.checkpoint("global\n  # drop\n", [], "2026-11-30T08:01:00Z")
        m = mirrors(cluster)
        eventually(lambda: Checkpoint.objects.count() == 2, what="both checkpoints")
        eventually(lambda: state("haproxycfgs").relists_total == 1)
        m.stop()
        # Really gone: a watcher still reading would see the deletion as an event.
        assert not any(t.is_alive() for t in m.threads)
        cluster.delete("haproxycfgs", drop["metadata"]["name"])
        for i in range(8):  # push the deletion out of the watch history
            cluster.core.create_namespaced_event(
                NS,
                {
                    "metadata": {"name": f"filler-{i}"},
                    "involvedObject": {
                        "kind": "HAProxyTemplateConfig",
                        "name": "haptic",
                        "namespace": NS,
                    },
                    "reason": "Filler",
                },
            )
        since = timezone.now()
        mirrors(cluster)
        eventually(
            lambda: Checkpoint.objects.filter(uid=drop["metadata"]["uid"], collected=True).exists(),
            what="deleted checkpoint found by relist",
        )
        # At least the relist on resume (a slow machine may see a later watch expire too);
        # its MirrorState row is written just after the rows it collected, so wait for it.
        cfg = eventually(
            lambda: (c := state("haproxycfgs")).relists_total >= 2 and c, what="relist recorded"
        )
        assert cfg.last_relist_at >= since
        assert Checkpoint.objects.get(uid=keep["metadata"]["uid"]).collected is False
        assert Checkpoint.objects.count() == 2
        eventually(lambda: KubeEvent.objects.filter(reason="Filler").count() == 8)
    finally:
        api.stop()


def test_two_mirrors_at_once_write_each_row_once(
    cluster: Cluster, mirrors: Callable[[Cluster], mirror_module.Mirror]
) -> None:
    """Every replica may run the mirror: concurrent upserts must not duplicate anything."""
    first, second = mirrors(cluster), mirrors(cluster)
    # Intermediate states exist only in the watch stream: start writing once both watch.
    assert first.wait_synced(timeout=30) and second.wait_synced(timeout=30)
    created = []
    for i in range(6):
        m = f.map_file(f"maps/m{i}.map", f"host{i} backend{i}\n")
        created.append(cluster.checkpoint(f"global\n  # {i}\n", [m], f"2026-11-30T08:0{i}:00Z"))
        cluster.put_lease(f.retained_lease(f"plan-{i}", f"sum-{i}", i + 1, rv=str(i)))
        cluster.put_lease(
            f.leader_lease(f"ctrl-{i}", i + 1, f"2026-11-30T08:0{i}:00Z", "2026-11-30T08:09:00Z")
        )
    eventually(
        lambda: CheckpointFile.objects.filter(kind="map", content__isnull=False).count() == 6,
        what="every checkpoint with its map bytes",
    )
    eventually(lambda: DeploymentIntent.objects.count() == 6)
    eventually(
        lambda: (
            LeadershipTerm.objects.count() == 6
            and LeadershipTerm.objects.filter(ended_at__isnull=True).count() == 1
        ),
        what="six terms, one open",
    )
    assert Checkpoint.objects.count() == 6
    assert CheckpointFile.objects.count() == 12
    assert AuxiliaryObject.objects.count() == 6
    assert LeadershipTerm.objects.get(ended_at__isnull=True).holder == "ctrl-5"


def test_run_mirror_command_and_celery_task(cluster: Cluster, tmp_path: Path) -> None:
    """`manage.py run_mirror` in its own process writes the same rows the task does."""
    cp = cluster.checkpoint("global\n", [], "2026-11-30T08:00:00Z")
    env = dict(
        os.environ,
        DATABASE_URL=_database_url(),
        DJANGO_SETTINGS_MODULE="haptic_site.settings",
    )
    connection.close()  # let the subprocess see committed rows only
    result = subprocess.run(
        [
            sys.executable,
            "manage.py",
            "run_mirror",
            "--kubeconfig",
            str(cluster.api.kubeconfig),
            "--namespace",
            NS,
            "--duration",
            "4",
        ],
        cwd=REPO_ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=90,
    )
    assert result.returncode == 0, result.stderr[-2000:]
    assert Checkpoint.objects.filter(uid=cp["metadata"]["uid"]).exists()
    assert MirrorState.objects.filter(kind=f"{NS}/haproxycfgs").exists()

    from checkpoints.tasks import run_mirror

    cp2 = cluster.checkpoint("global\n  # two\n", [], "2026-11-30T08:01:00Z")
    outcome = run_mirror.apply(
        kwargs={"namespace": NS, "kubeconfig": str(cluster.api.kubeconfig), "duration": 3}
    )
    assert outcome.get() == "stopped"
    assert Checkpoint.objects.filter(uid=cp2["metadata"]["uid"]).exists()
    assert Checkpoint.objects.count() == 2


def _database_url() -> str:
    s = connection.settings_dict
    return f"postgres://{s['USER']}@{s['HOST']}:{s['PORT']}/{s['NAME']}"


def test_mirror_task_ends_when_the_worker_shuts_down(cluster: Cluster) -> None:
    """A warm Celery shutdown must not wait forever for the never-ending mirror task."""
    import threading

    from celery.signals import worker_shutting_down

    finished = threading.Event()

    def run() -> None:
        try:
            mirror_module.run_forever(str(cluster.api.kubeconfig), NS, duration=None)
        finally:
            finished.set()

    thread = threading.Thread(target=run, daemon=True)
    thread.start()
    try:
        eventually(
            lambda: MirrorState.objects.filter(kind=f"{NS}/haproxycfgs").exists(),
            what="the mirror running",
        )
        assert not finished.wait(0.5)
        worker_shutting_down.send(sender="test", sig="TERM", how="Warm", exitcode=0)
        assert finished.wait(20), "run_forever did not return after the shutdown signal"
    finally:
        mirror_module.shutdown.set()
        thread.join(20)
        mirror_module.shutdown.clear()


def test_an_error_is_recorded_with_its_time_and_cleared_once_the_retry_succeeds(
    cluster: Cluster, mirrors: Callable[[Cluster], mirror_module.Mirror]
) -> None:
    """The Mirror table once showed "database is locked" long after the retries had worked:
    the error must be there while it is current, with when it happened, and only then."""
    m = mirrors(cluster)
    assert m.wait_synced(timeout=30)
    # The next two watch requests for Leases fail (the open watch ends within 5 s).
    cluster.api.add_fault(path_regex="/leases", methods=["GET"], status=500, times=2)
    failed = eventually(
        lambda: MirrorState.objects.filter(kind=f"{NS}/leases").exclude(last_error="").first(),
        what="the failed watch recorded",
    )
    assert "500" in failed.last_error and failed.last_error_at is not None
    assert failed.last_error_at <= timezone.now()
    # The retry succeeds and no relist is needed (the resourceVersion is still served).
    eventually(lambda: state("leases").last_error == "", what="the error cleared on recovery")
    assert state("leases").last_error_at is None
    assert state("leases").relists_total == 1
    cluster.put_lease(
        f.leader_lease("ctrl-after", 2, "2026-11-30T08:00:00Z", "2026-11-30T08:01:00Z")
    )
    eventually(lambda: LeadershipTerm.objects.filter(holder="ctrl-after").exists())
    assert state("leases").last_error == ""


def test_render_warning_events_in_any_namespace_reach_the_warnings_rows(
    cluster: Cluster, mirrors: Callable[[Cluster], mirror_module.Mirror]
) -> None:
    """The controller writes a render warning's Event in the namespace of the object it is
    about; the mirror must find it there (cluster-wide, only the controller's own Events) so
    the dashboard's warnings rows show an Ingress in any namespace (issue 18)."""
    from checkpoints import queries
    from controller.render.model import RenderWarning
    from controller.render.warnings import event_body, warnings_summary

    cluster.core.create_namespace({"metadata": {"name": "shop"}})
    warning = RenderWarning("Ingress", "shop", "web", "SecretNotFound", "tls secret gone")
    ours = cluster.core.create_namespaced_event("shop", event_body(warning, "ctrl-a"))
    theirs = cluster.core.create_namespaced_event(
        "shop",
        {
            "metadata": {"name": "kubelet.pulled"},
            "involvedObject": {"kind": "Pod", "name": "web-0", "namespace": "shop"},
            "reason": "Pulled",
            "message": "not ours",
            "type": "Normal",
            "source": {"component": "kubelet"},
        },
    )
    template = cluster.template
    template["status"] = {"renderWarnings": warnings_summary([warning])}
    cluster.custom.replace_namespaced_custom_object_status(
        GROUP, VERSION, NS, "haproxytemplateconfigs", "haptic", template
    )
    m = mirrors(cluster)
    assert m.wait_synced(timeout=30)
    rows = eventually(lambda: list(queries.current_render_warnings()), what="warning row")
    assert [(r.namespace, r.involved_kind, r.involved_name, r.reason) for r in rows] == [
        ("shop", "Ingress", "web", "SecretNotFound")
    ]
    assert rows[0].uid == ours.metadata.uid
    assert not KubeEvent.objects.filter(uid=theirs.metadata.uid).exists()
    # One that appears while the mirror runs arrives through the watch.
    later = RenderWarning("Ingress", "shop", "api", "InvalidAnnotation", "bad")
    event = cluster.core.create_namespaced_event("shop", event_body(later, "ctrl-a"))
    eventually(lambda: KubeEvent.objects.filter(uid=event.metadata.uid).exists(), what="watch")


def test_a_checkpoint_listed_after_the_published_config_is_promoted_at_the_first_list(
    cluster: Cluster, mirrors: Callable[[Cluster], mirror_module.Mirror]
) -> None:
    """The list comes in name order, so the published config ("haptic") is applied before
    the checkpoint ("haptic-cp-...") its pointers name; with nothing changing afterwards,
    the checkpoint must still be promoted (the real tier found it never was: a quiet fleet
    sends no later event)."""
    body = f.checkpoint("global\n  maxconn 7\n", [], created="2026-11-30T08:00:00Z")
    body["metadata"]["name"] = "haptic-cp-" + body["metadata"]["name"].split("-")[-1]
    cp = cluster.create("haproxycfgs", body)  # named as the publisher names checkpoints
    plan, checksum = cp["spec"]["planID"], cp["spec"]["checksum"]
    cluster.publish([f.receipt("haproxy-0", plan, checksum, "2026-11-30T08:00:05Z")], [cp])
    names = [
        o["metadata"]["name"]
        for o in cluster.custom.list_namespaced_custom_object(GROUP, VERSION, NS, "haproxycfgs")[
            "items"
        ]
    ]
    assert names.index("haptic") < names.index(cp["metadata"]["name"]), "premise: list order"
    m = mirrors(cluster)
    assert m.wait_synced(timeout=30)
    eventually(
        lambda: Checkpoint.objects.filter(uid=cp["metadata"]["uid"], promoted=True).exists(),
        timeout=10,
        what="the checkpoint promoted by the first list",
    )


def test_the_mirror_says_who_it_is_to_the_api_server(tmp_path: Path) -> None:
    """Its requests carry haptic-mirror, so the API server's log (and the fidelity check of
    recorded request shapes, tests/fidelity/coverage.py) can tell them from a test's."""
    record = tmp_path / "shapes.jsonl"
    with ApiServer.start(extra_args=["--request-shapes", str(record)]) as api:
        api_client = mirror_module.load_api_client(str(api.kubeconfig))
        assert api_client.user_agent == mirror_module.MIRROR_USER_AGENT
        client.CoreV1Api(api_client).list_namespaced_secret("default")
    assert '"userAgent":"haptic-mirror"' in record.read_text()
