"""In-process electors (threads) against the local API server, with recorded callbacks."""

from __future__ import annotations

import threading
import time
from dataclasses import dataclass, field
from typing import Any

from prometheus_client import CollectorRegistry

from controller.election.elector import ElectionCallbacks, LeaderElector
from controller.election.lease_store import KubeLeaseStore
from controller.election.metrics import ElectionMetrics
from controller.election.rounds import ElectionSupervisor
from controller.election.term import Term
from controller.election.timing import ElectionTiming
from tests.election.conftest import NAMESPACE


@dataclass
class Member:
    identity: str
    elector: LeaderElector
    supervisor: ElectionSupervisor
    registry: CollectorRegistry
    started: list[Term] = field(default_factory=list)
    stopped: list[tuple[Term, str, float]] = field(default_factory=list)
    work: list[tuple[float, int]] = field(default_factory=list)  # (when, epoch) ticks

    def on_started(self, term: Term) -> None:
        self.started.append(term)

        def leader_work() -> None:
            # Stand-in leader-only component: acts only while its term is valid.
            while term.is_valid():
                self.work.append((time.monotonic(), term.token.epoch))
                term.wait_ended(0.02)

        threading.Thread(target=leader_work, daemon=True).start()

    def on_stopped(self, term: Term, reason: str) -> None:
        self.stopped.append((term, reason, time.monotonic()))


def member(api_server: Any, lease: str, identity: str, timing: ElectionTiming) -> Member:
    registry = CollectorRegistry()
    store = KubeLeaseStore(api_server.api_client(), NAMESPACE, lease)
    holder: dict[str, Member] = {}
    elector = LeaderElector(
        store,
        identity,
        timing,
        callbacks=ElectionCallbacks(
            on_started_leading=lambda t: holder["m"].on_started(t),
            on_stopped_leading=lambda t, r: holder["m"].on_stopped(t, r),
        ),
        metrics=ElectionMetrics(registry),
    )
    m = Member(identity, elector, ElectionSupervisor(elector), registry)
    holder["m"] = m
    return m
