"""ADR-0033 "Deployment intent storage": intent writes live on the retained-state Lease, so they
never fail a renewal of the leader-election Lease. The project's elector runs against the
local API server over HTTP with short timings; a deployment intent is recorded right before
every renewal update. The contrast shows why: the same write onto the leader-election Lease
(where 0.5 and 0.6 kept it) between a renewal's read and its update fails that renewal.
"""

from __future__ import annotations

import json
import threading
import uuid
from collections.abc import Callable, Iterator
from typing import Any

import kubernetes
import pytest

from controller.election import ElectionCallbacks, LeaderElector, Term
from controller.election.elector import GRACEFUL_SHUTDOWN
from controller.election.lease_store import KubeLeaseStore, LeaseConflict, LeaseUnavailable
from controller.election.record import LeaseRecord
from controller.election.timing import ElectionTiming
from controller.retained.checkpoint import TemplateRef
from controller.retained.intent import INTENT_ANNOTATION
from controller.retained.intent import Term as IntentTerm
from controller.retained.store import RetainedStateStore
from localcluster.testing import ApiServer, start_cluster

NS = "haptic"
RENEWALS = 50
# Short, but with room for a loaded machine: a renewal may take up to 3 s.
TIMING = ElectionTiming(lease_duration=4.0, renew_deadline=3.0, retry_period=0.05)


class InterleavingStore:
    """The elector's KubeLeaseStore, running `before_renewal(term)` ahead of every renewal
    update and counting how renewals end."""

    def __init__(self, inner: KubeLeaseStore, before_renewal: Callable[[Term], None]) -> None:
        self.inner = inner
        self.namespace = inner.namespace
        self.name = inner.name
        self.before_renewal = before_renewal
        self.elector: LeaderElector | None = None
        self.renewed = 0
        self.failed: list[str] = []
        self.target = RENEWALS
        self.done = threading.Event()

    def get(self, timeout: float) -> LeaseRecord | None:
        return self.inner.get(timeout)

    def create(self, record: LeaseRecord, timeout: float) -> LeaseRecord:
        return self.inner.create(record, timeout)

    def update(self, record: LeaseRecord, timeout: float) -> LeaseRecord:
        assert self.elector is not None
        term = self.elector.term
        renewal = (
            term is not None
            and record.holder == term.token.holder
            and record.epoch == term.token.epoch
        )
        if renewal:
            assert term is not None
            self.before_renewal(term)
        try:
            written = self.inner.update(record, timeout)
        except (LeaseConflict, LeaseUnavailable) as exc:
            if renewal:
                self.failed.append(f"{type(exc).__name__}: {exc}")
            raise
        if renewal:
            self.renewed += 1
            if self.renewed >= self.target:
                self.done.set()
        return written


@pytest.fixture(scope="module")
def api() -> Iterator[ApiServer]:
    with start_cluster() as server:
        kubernetes.client.CoreV1Api(server.api_client()).create_namespace(
            {"metadata": {"name": NS}}
        )
        yield server


@pytest.fixture
def template(api: ApiServer) -> TemplateRef:
    name = f"t{uuid.uuid4().hex[:8]}"
    obj = kubernetes.client.CustomObjectsApi(api.api_client()).create_namespaced_custom_object(
        "haproxy-haptic.org",
        "v1alpha1",
        NS,
        "haproxytemplateconfigs",
        {
            "apiVersion": "haproxy-haptic.org/v1alpha1",
            "kind": "HAProxyTemplateConfig",
            "metadata": {"name": name},
            "spec": {"podSelector": {"matchLabels": {"app": name}}},
        },
    )
    return TemplateRef(name, NS, obj["metadata"]["uid"])


def run_elector(
    api: ApiServer,
    lease: str,
    before_renewal: Callable[[Term], None],
    on_started: Callable[[Term], None] = lambda term: None,
    target: int = RENEWALS,
) -> tuple[InterleavingStore, str, list[str]]:
    """Lead until `target` renewals succeeded (or 60 s passed); returns the store, why the
    round ended, and every term end reported to the callbacks."""
    store = InterleavingStore(KubeLeaseStore(api.api_client(), NS, lease), before_renewal)
    store.target = target
    ended: list[str] = []
    elector = LeaderElector(
        store,  # type: ignore[arg-type]  # the LeaseStore protocol, wrapped
        "replica-a",
        TIMING,
        callbacks=ElectionCallbacks(
            on_started_leading=on_started,
            on_stopped_leading=lambda term, reason: ended.append(reason),
        ),
    )
    store.elector = elector
    stop = threading.Event()
    result: dict[str, Any] = {}
    thread = threading.Thread(target=lambda: result.update(reason=elector.run(stop)))
    thread.start()
    try:
        store.done.wait(60)
    finally:
        stop.set()
        thread.join(15)
    assert not thread.is_alive()
    return store, result.get("reason", ""), ended


def test_deployment_intent_writes_never_fail_a_lease_renewal(
    api: ApiServer, template: TemplateRef
) -> None:
    lease = f"{template.name}-leader"
    retained = RetainedStateStore(api.api_client(), template, lease, NS)
    recorded: list[str] = []
    refused: list[str] = []

    def claim(term: Term) -> None:
        retained.claim(IntentTerm(term.token.holder, term.token.epoch))

    def record_intent(term: Term) -> None:
        # A new output per renewal, so every one is a real write to the retained-state Lease.
        n = len(recorded) + len(refused)
        try:
            intent = retained.record_intent(
                IntentTerm(term.token.holder, term.token.epoch), f"plan-{n}", f"sha256:{n:064x}"
            )
            recorded.append(intent.plan_id)
        except Exception as exc:
            refused.append(repr(exc))

    store, reason, ended = run_elector(api, lease, record_intent, on_started=claim)

    assert store.renewed >= RENEWALS, f"only {store.renewed} renewals"
    assert store.failed == [], store.failed
    assert refused == []
    assert len(recorded) >= RENEWALS
    # The term was never lost: it ended only when we stopped it.
    assert reason == GRACEFUL_SHUTDOWN and ended == [GRACEFUL_SHUTDOWN]
    intent = retained.read_intent()
    assert intent is not None and intent.plan_id == recorded[-1]
    # The leader-election Lease never carried an intent.
    lease_obj = kubernetes.client.CoordinationV1Api(api.api_client()).read_namespaced_lease(
        lease, NS
    )
    assert INTENT_ANNOTATION not in (lease_obj.metadata.annotations or {})


def test_an_intent_written_on_the_leader_election_lease_fails_renewals(
    api: ApiServer, template: TemplateRef
) -> None:
    """Why the retained-state Lease exists (issue #413): as 0.5 and 0.6 did, record the
    intent on the Lease the elector renews, between a renewal's read and its update."""
    lease = f"{template.name}-leader"
    leases = kubernetes.client.CoordinationV1Api(api.api_client())
    writes: list[int] = []
    attempts: list[int] = []

    def legacy_record(term: Term) -> None:
        attempts.append(1)
        # Every other renewal attempt, for ten of them: the elector recovers in between.
        if len(attempts) % 2 == 0 or len(writes) >= 10:
            return
        body = leases.read_namespaced_lease(lease, NS)
        annotations = dict(body.metadata.annotations or {})
        annotations[INTENT_ANNOTATION] = json.dumps(
            {
                "planID": f"plan-{len(writes)}",
                "checksum": f"sha256:{len(writes):064x}",
                "holder": term.token.holder,
                "epoch": term.token.epoch,
                "templateUID": template.uid,
            }
        )
        body.metadata.annotations = annotations
        leases.replace_namespaced_lease(lease, NS, body)
        writes.append(1)

    store, _reason, _ended = run_elector(api, lease, legacy_record, target=15)

    assert writes, "no intent was written"
    assert len(store.failed) >= 1
    # Each intent write cost exactly one renewal attempt.
    assert len(store.failed) == len(writes), store.failed
    assert all("LeaseConflict" in f for f in store.failed), store.failed
