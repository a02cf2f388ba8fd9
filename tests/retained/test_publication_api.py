"""Ordinary and checkpoint publication against the local API server over HTTP."""

from __future__ import annotations

from collections.abc import Iterator

import kubernetes
import pytest

from controller.publish.checkpoints import CheckpointPublisher, pointers_from_status
from controller.publish.kube import Objects
from controller.publish.ordinary import OrdinaryPublisher
from controller.render import RenderedFile, RenderOutput, build_plan, checksum, plan_id
from controller.retained.checkpoint import TemplateRef, decode_checkpoint, encode_checkpoint
from controller.retained.receipts import PodReceipt
from localcluster.testing import ApiServer, start_cluster

NS = "haptic"


def output(version: int, map_value: str = "be_a") -> RenderOutput:
    config = (
        "global\n    default-path config\ndefaults\n    mode http\nbackend be_a\n"
        f"    server SRV_1 127.0.1.{version}:8080 weight 1\n"
    ).encode()
    files = (
        RenderedFile("haproxy.cfg", "config", config),
        RenderedFile("maps/hosts.map", "map", f"a.example {map_value}\n".encode()),
        RenderedFile("certs/a.pem", "certificate", b"PEM-A\n"),
    )
    plan = build_plan(list(files))
    return RenderOutput(files, plan, plan_id(plan), checksum(files), plan["structure_digest"])


# When the receipt was acknowledged: a real timestamp, as `format: date-time` demands.
AT = "2026-12-01T10:00:00Z"


def receipt_for(out: RenderOutput, pod: str = "haproxy-0") -> PodReceipt:
    return PodReceipt(
        pod, f"uid-{pod}", "rt", out.checksum, out.plan_id, out.plan_id, out.plan_id, "reload"
    )


@pytest.fixture(scope="module")
def api() -> Iterator[ApiServer]:
    with start_cluster() as server:
        client = server.api_client()
        kubernetes.client.CoreV1Api(client).create_namespace({"metadata": {"name": NS}})
        yield server


@pytest.fixture
def setup(api: ApiServer, request: pytest.FixtureRequest):
    client = api.api_client()
    name = f"t{abs(hash(request.node.name)) % 10**8}"
    template = kubernetes.client.CustomObjectsApi(client).create_namespaced_custom_object(
        "haproxy-haptic.org",
        "v1alpha1",
        NS,
        "haproxytemplateconfigs",
        {
            "apiVersion": "haproxy-haptic.org/v1alpha1",
            "kind": "HAProxyTemplateConfig",
            "metadata": {"name": name},
            "spec": {"podSelector": {"matchLabels": {"a": "b"}}},
        },
    )
    ref = TemplateRef(name, NS, template["metadata"]["uid"])
    objects = Objects(client, NS)
    return ref, objects, OrdinaryPublisher(objects, ref), CheckpointPublisher(objects, ref, name)


def read_back(objects: Objects, ref: TemplateRef, pointer):
    selector = f"haproxy-haptic.org/template-uid={ref.uid}"
    children = {}
    for kind, plural in (
        ("HAProxyMapFile", "haproxymapfiles"),
        ("HAProxyGeneralFile", "haproxygeneralfiles"),
        ("HAProxyCRTListFile", "haproxycrtlistfiles"),
    ):
        for obj in objects.list(plural, selector):
            children[(kind, obj["metadata"]["name"])] = obj
    secrets = {s["metadata"]["name"]: s for s in objects.list_secrets(selector)}
    cfg = objects.get("haproxycfgs", pointer.name)
    return decode_checkpoint(ref, pointer, cfg, children, secrets)


def test_publish_verify_promote_and_reuse(setup) -> None:
    ref, objects, ordinary, checkpoints = setup
    out = output(1)
    ordinary.publish_output(out)
    result = checkpoints.publish(out.files, receipt_for(out), "2026-11-30T00:00:00Z")
    assert not result.reused
    cfg = objects.get("haproxycfgs", ref.name)
    assert pointers_from_status(cfg) == [result.pointer]
    decoded = read_back(objects, ref, result.pointer)
    assert decoded.snapshot.integrity_error is None
    assert {f.path: f.content for f in decoded.files} == {f.path: f.content for f in out.files}

    before = objects.get("haproxycfgs", result.pointer.name)["metadata"]["resourceVersion"]
    again = checkpoints.publish(out.files, receipt_for(out), "2026-11-30T00:01:00Z")
    assert again.reused and again.pointer == result.pointer
    after = objects.get("haproxycfgs", result.pointer.name)["metadata"]["resourceVersion"]
    assert before == after  # identical output: no writes


def test_retention_gc_and_shared_children(setup) -> None:
    ref, objects, ordinary, checkpoints = setup
    outs = [output(i) for i in (1, 2, 3)]
    pointers = []
    for out in outs:
        ordinary.publish_output(out)
        pointers.append(checkpoints.publish(out.files, receipt_for(out), AT).pointer)
    cfg = objects.get("haproxycfgs", ref.name)
    assert [p.name for p in pointers_from_status(cfg)] == [pointers[2].name, pointers[1].name]
    assert objects.get("haproxycfgs", pointers[0].name) is None  # collected
    # The map and certificate bytes never changed: one shared child each serves all.
    selector = f"haproxy-haptic.org/template-uid={ref.uid},haproxy-haptic.org/role=shared-child"
    assert len(objects.list("haproxymapfiles", selector)) == 1
    assert len(objects.list_secrets(selector)) == 1
    for pointer in pointers[1:]:
        assert read_back(objects, ref, pointer).snapshot.integrity_error is None


def test_a_checksum_still_reported_by_a_pod_is_retained(setup) -> None:
    ref, objects, ordinary, checkpoints = setup
    first = output(1, "be_first")
    ordinary.publish_output(first)
    kept = checkpoints.publish(first.files, receipt_for(first), AT).pointer
    ordinary.publish_receipts({"haproxy-9": {"checksum": first.checksum, "podUID": "u9"}})
    for i in (2, 3, 4):
        out = output(i, f"be_{i}")
        ordinary.publish_output(out)
        checkpoints.publish(out.files, receipt_for(out), AT)
    names = [p.name for p in pointers_from_status(objects.get("haproxycfgs", ref.name))]
    assert kept.name in names and len(names) == 3
    # Its exclusive map child survived the collection of the others.
    assert read_back(objects, ref, kept).snapshot.integrity_error is None


def test_interrupted_publication_leaves_the_previous_pointer_usable(setup) -> None:
    ref, objects, ordinary, checkpoints = setup
    first = output(1)
    ordinary.publish_output(first)
    good = checkpoints.publish(first.files, receipt_for(first), AT).pointer
    second = output(2, "be_b")
    # Only the children and the HAProxyCfg are written; the process dies before promotion.
    objs = encode_checkpoint(ref, second.files, receipt_for(second), AT)
    checkpoints._write(objs, None)
    cfg = objects.get("haproxycfgs", ref.name)
    assert pointers_from_status(cfg) == [good]
    assert read_back(objects, ref, good).snapshot.integrity_error is None
    # The next publication completes the interrupted one and promotes it.
    done = checkpoints.publish(second.files, receipt_for(second), AT)
    assert pointers_from_status(objects.get("haproxycfgs", ref.name))[0] == done.pointer


def test_receipts_survive_the_acknowledging_pods_removal(setup) -> None:
    ref, objects, ordinary, checkpoints = setup
    out = output(5)
    ordinary.publish_output(out)
    ordinary.publish_receipts(
        {
            "haproxy-0": receipt_for(out).as_status(),
            "haproxy-1": receipt_for(out, "haproxy-1").as_status(),
        }
    )
    pointer = checkpoints.publish(out.files, receipt_for(out), AT).pointer
    ordinary.publish_receipts({}, present_pods=["haproxy-1"])  # haproxy-0 is gone
    cfg = objects.get("haproxycfgs", ref.name)
    assert [e["podName"] for e in cfg["status"]["deployedToPods"]] == ["haproxy-1"]
    decoded = read_back(objects, ref, pointer)
    assert decoded.snapshot.receipt.pod_name == "haproxy-0"


def test_gc_never_deletes_a_shared_child_that_changed_since_the_verification_list(setup) -> None:
    """The publication's own collection runs; a shared child that became unreferenced but
    changed after the verification list is kept (the delete's resourceVersion precondition
    fails), and the next collection, judging it from a fresh list, removes it."""
    ref, objects, ordinary, checkpoints = setup
    selector = f"haproxy-haptic.org/template-uid={ref.uid},haproxy-haptic.org/role=shared-child"
    first = output(1, "be_first")
    ordinary.publish_output(first)
    oldest = checkpoints.publish(first.files, receipt_for(first), AT).pointer
    maps_before = {m["metadata"]["name"] for m in objects.list("haproxymapfiles", selector)}
    for i in (2, 3):
        out = output(i, f"be_{i}")
        ordinary.publish_output(out)
        if i == 3:
            verify = checkpoints._verify

            def verify_then_touch(pointer, known, verify=verify):
                verification = verify(pointer, known)
                # Between the verification list and the deletion, someone changes the
                # child only the oldest checkpoint references.
                (child,) = [
                    m
                    for m in objects.list("haproxymapfiles", selector)
                    if m["metadata"]["name"] in maps_before
                ]
                child["metadata"]["annotations"] = {"touched": "yes"}
                objects.replace("haproxymapfiles", child)
                return verification

            checkpoints._verify = verify_then_touch
        result = checkpoints.publish(out.files, receipt_for(out), AT)
    checkpoints._verify = verify
    assert result.deleted_checkpoints == (oldest.name,)  # the collection ran
    assert objects.get("haproxycfgs", oldest.name) is None
    (touched,) = maps_before
    assert touched not in result.deleted_children
    assert objects.get("haproxymapfiles", touched) is not None  # changed since: kept

    out = output(4, "be_4")
    ordinary.publish_output(out)
    result = checkpoints.publish(out.files, receipt_for(out), AT)
    assert touched in result.deleted_children
    assert objects.get("haproxymapfiles", touched) is None


def test_a_publication_given_the_plan_id_parses_nothing_recovery_recomputes_it(
    setup, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Issue 19: the publisher passes the plan ID its render computed, so neither encoding
    the checkpoint nor its read-back parses the configuration again (at 800 Ingresses that
    was most of a publication's CPU). Recovery's decode, given no plan ID, still computes it
    from the bytes it reads: a checkpoint whose planID is not its bytes' is refused."""
    from controller.retained import checkpoint

    ref, objects, ordinary, checkpoints = setup
    out = output(7)
    ordinary.publish_output(out)
    parsed: list[int] = []
    real_build_plan = checkpoint.build_plan

    def counted(files):  # type: ignore[no-untyped-def]
        parsed.append(1)
        return real_build_plan(files)

    monkeypatch.setattr(checkpoint, "build_plan", counted)
    result = checkpoints.publish(out.files, receipt_for(out), AT, out.plan_id)
    assert parsed == []
    decoded = read_back(objects, ref, result.pointer)  # recovery's read: no plan ID given
    assert parsed == [1] and decoded.snapshot.integrity_error is None
    assert decoded.snapshot.plan_id == out.plan_id

    # A plan ID that is not these bytes' (with a receipt that agrees with it, so the
    # publisher's own read-back passes) is caught by recovery's decode.
    wrong = output(8)
    plan = out.plan_id
    lying = PodReceipt("haproxy-0", "uid-0", "rt", wrong.checksum, plan, plan, plan, "reload")
    tampered = checkpoints.publish(wrong.files, lying, AT, plan)
    refused = read_back(objects, ref, tampered.pointer)
    assert "plan identity mismatch" in (refused.snapshot.integrity_error or "")


def test_status_rounds_write_on_the_last_answer_and_read_again_after_another_writer(
    setup, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Issue 19: a publication writes every queued receipt in rounds; each round writes on
    the HAProxyCfg the previous round's write answered, with no read first. The write is a
    compare-and-swap: when another writer changed the object since (here a pointer
    promotion), it answers 409, the round reads it again, and both writes stand.

    Failed before: every round read the object first (publish_receipts returned nothing)."""
    ref, objects, ordinary, checkpoints = setup
    out = output(6)
    ordinary.publish_output(out)
    reads: list[str] = []
    real_get = objects.get

    def counted(plural: str, name: str):  # type: ignore[no-untyped-def]
        reads.append(name)
        return real_get(plural, name)

    monkeypatch.setattr(objects, "get", counted)
    cfg = None
    for n in range(3):
        at = f"2026-12-01T10:00:0{n}Z"
        entry = {"haproxy-0": dict(receipt_for(out).as_status(), deployedAt=at)}
        cfg = ordinary.publish_receipts(entry, known=cfg)
    assert reads == [ref.name]  # the first round only
    assert cfg is not None and cfg["status"]["deployedToPods"][0]["deployedAt"] == at

    monkeypatch.setattr(objects, "get", real_get)
    pointer = checkpoints.publish(out.files, receipt_for(out), AT).pointer  # another write
    monkeypatch.setattr(objects, "get", counted)
    reads.clear()
    entry = {"haproxy-1": receipt_for(out, "haproxy-1").as_status()}
    cfg = ordinary.publish_receipts(entry, known=cfg)
    assert reads == [ref.name]  # the stale copy answered 409: read again
    stored = real_get("haproxycfgs", ref.name)
    assert pointers_from_status(stored) == [pointer]
    assert [e["podName"] for e in stored["status"]["deployedToPods"]] == ["haproxy-0", "haproxy-1"]
