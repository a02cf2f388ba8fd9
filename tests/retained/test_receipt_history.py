"""Every deployment outcome a pod had reaches the history (issue 15's "receipts are never
dropped", issue 20's per-pod timeline), through the real parts: a `LeaderPipeline` in this
process, the local API server over HTTP, real agents running real haproxy, and the mirror
writing into PostgreSQL what it watches, read back as the timeline draws it.

What the make run timeline test met (a pod's first mark a runtime change, not the reload
before it): a paced reload is confirmed by a follow-up state read, and that receipt went
out without `deployedAt`, so the timeline, which places receipts by it, never drew it.
"""

from __future__ import annotations

import time
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest

from checkpoints.mirror import Mirror
from checkpoints.models import PodReceipt
from dashboard import marks
from dashboard import timeline as tl
from devstack.stack import wait_for
from tests.retained.test_drain import Harness

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.timeout(240)]


def _render(harness: Harness, pipeline: Any, hosts: list[str], agents: list) -> Any:
    before = pipeline.state.last_good
    harness.hosts = list(hosts)
    pipeline.request_render()
    wait_for(lambda: pipeline.state.last_good is not before, 30, what=f"the render of {hosts}")
    return harness.wait_acknowledged(pipeline, agents)


def _lanes(since: datetime) -> dict[str, list[tuple[str, str]]]:
    """pod -> (kind, plan label) of each deployment mark the timeline draws since `since`."""
    now = datetime.now(UTC)
    found, _, _ = marks.collect(tl.Window(since, now + timedelta(seconds=5)), now)
    lanes: dict[str, list[tuple[datetime, str, str]]] = {}
    for mark in found:
        if mark.lane.startswith(tl.POD_LANE_PREFIX) and mark.kind != "error":
            # "<pod> <at>: reload, plan <id>, by <holder> at epoch <n>": who deployed it too.
            plan = mark.label.split("plan ")[1].removesuffix(", by replica-a at epoch 1")
            lanes.setdefault(mark.lane.removeprefix(tl.POD_LANE_PREFIX), []).append(
                (mark.at, mark.kind, plan)
            )
    return {pod: [(k, p) for _, k, p in sorted(v)] for pod, v in lanes.items()}


def test_a_paced_reload_and_the_change_after_it_are_both_on_each_pods_lane(
    harness: Harness,
) -> None:
    """A reloads at once; B (a new backend) lands inside the agents' 3 s pacing, so its
    reload is scheduled and a follow-up read confirms it; C follows within the same
    publication. One publication, then the mirror: each pod's lane shows A, B and C,
    each a reload at its own instant.

    Bug (controller/term/dispatcher.py, absorb_reports): the follow-up's receipt carried
    no deployedAt, so B was never drawn; and status held only each pod's newest entry,
    so outcomes between two publications never reached the history."""
    since = datetime.now(UTC).replace(microsecond=0)
    agents, pipeline, _ = harness.lead(2, "3")
    mirror = Mirror(harness.client, "haptic", watch_timeout=5)
    mirror.start()
    try:
        assert mirror.wait_synced(timeout=30)
        plan_a = _render(harness, pipeline, ["a"], agents)
        plan_b = _render(harness, pipeline, ["a", "b"], agents)
        time.sleep(1.1)  # deployedAt has whole seconds: C's instant is after B's
        plan_c = _render(harness, pipeline, ["a", "b", "c"], agents)
        pipeline.publish()
        wanted = [("reload", p.plan_id[:16]) for p in (plan_a, plan_b, plan_c)]

        def drawn() -> dict[str, list[tuple[str, str]]]:
            lanes = _lanes(since)
            rows = list(PodReceipt.objects.values_list("pod_name", "mode", "deployed_at"))
            assert set(lanes) == {p.name for p in harness.pods}, (lanes, rows)
            assert all(lane == wanted for lane in lanes.values()), (lanes, wanted, rows)
            return lanes

        _eventually(drawn, 30)
    finally:
        mirror.stop()


def _eventually(check: Any, timeout: float) -> Any:
    """check()'s value once it stops failing; its last failure after `timeout` seconds."""
    deadline = time.monotonic() + timeout
    while True:
        try:
            return check()
        except AssertionError:
            if time.monotonic() > deadline:
                raise
            time.sleep(0.5)


def test_a_hand_over_with_nothing_changed_records_no_deployment(harness: Harness) -> None:
    """Term 1 deploys and publishes; term 2 (another replica, epoch 2) renders the same
    output: no pod is sent anything and the published receipts stay as they were, so the
    history shows no deployment at the hand-over.

    Bug (controller/term/state.py, TermState.acknowledged): the new term's first
    deployment re-acknowledged every pod (its apply skipped, nothing changed) with a new
    deployedAt, so the mirror drew a fresh deployment per pod, named by the receipt's mode
    (`runtime` after a runtime change), at every hand-over."""
    agents, first, _ = harness.lead(2)
    _render(harness, first, ["a"], agents)
    first.publish()
    before = (harness.published() or {})["status"]["deployedToPods"]
    applies = [s.apply_count for s in harness.states(agents)]
    first.stop(drain=False)
    time.sleep(1.1)  # a new deployedAt would differ from the published one

    harness.set_leader("replica-b", 2)
    second = harness.pipeline("replica-b", 2)
    harness.start_term(second)
    second.request_render()
    output = harness.wait_acknowledged(second, agents)
    assert output.checksum == before[0]["checksum"]
    second.publish()

    assert [s.apply_count for s in harness.states(agents)] == applies
    assert (harness.published() or {})["status"]["deployedToPods"] == before


def test_drift_prevention_on_an_unchanged_fleet_records_no_deployment(harness: Harness) -> None:
    """Drift prevention deploys the current output again (verify=1); pods that still run
    it are left alone, and the published receipts stay as they were: the history shows no
    deployment for it.

    Bug (controller/term/state.py, TermState.acknowledged): every skipped apply queued the
    pod's unchanged receipt with a new deployedAt, so each drift pass drew a deployment per
    pod, named by the pod's last mode. In the make run timeline test the template config's
    shorter drift interval starts a pass at once when the fleet was quiet for 30 s (the
    module's earlier tests): a `runtime` mark on every lane before the test's reload."""
    agents, pipeline, _ = harness.lead(2)
    output = _render(harness, pipeline, ["a"], agents)
    pipeline.publish()
    before = (harness.published() or {})["status"]["deployedToPods"]
    applies = [s.apply_count for s in harness.states(agents)]
    time.sleep(1.1)  # a new deployedAt would differ from the published one

    outcomes = pipeline.deploy(output, verify=True)  # what a drift pass runs
    assert {o.action for o in outcomes} <= {"skipped", "noop"}, [o.summary for o in outcomes]
    pipeline.publish()

    assert [s.apply_count for s in harness.states(agents)] == applies
    assert (harness.published() or {})["status"]["deployedToPods"] == before


def test_each_receipt_says_where_its_pods_agent_answers(harness: Harness) -> None:
    """The pod page reads a pod's /healthz live (dashboard/live.py): the leader publishes
    each pod's IP and agent port with its receipt, and the mirror keeps them."""
    agents, pipeline, _ = harness.lead(2)
    mirror = Mirror(harness.client, "haptic", watch_timeout=5)
    mirror.start()
    try:
        assert mirror.wait_synced(timeout=30)
        _render(harness, pipeline, ["a"], agents)
        pipeline.publish()
        wanted = {pod.name: (pod.pod_ip, agents[0].port) for pod in harness.pods}
        # This harness's pods only: the API server may still hold an earlier test's output.
        uids = [pod.uid for pod in harness.pods]

        def addressed() -> None:
            rows = PodReceipt.objects.filter(pod_uid__in=uids).values_list(
                "pod_name", "pod_ip", "agent_port"
            )
            assert {name: (ip, port) for name, ip, port in rows} == wanted

        _eventually(addressed, 30)
    finally:
        mirror.stop()
