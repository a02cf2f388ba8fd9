"""One election replica as its own process, for the multi-process tests.

Runs the real elector (KubeLeaseStore over HTTP, supervisor, events) and prints one JSON
line per term start and end with the system-wide monotonic clock, so the test can line up
terms of different processes, and one line per Lease read. SIGTERM is a graceful stop
(the lease is released).

    python -m tests.election.replica --kubeconfig K --namespace N --lease L --identity I \
        --lease-duration 2 --renew-deadline 1.5 --retry-period 0.3
"""

from __future__ import annotations

import argparse
import json
import signal
import sys
import threading
import time

from kubernetes import config

from controller.election.elector import ElectionCallbacks, LeaderElector
from controller.election.events import EventRecorder
from controller.election.lease_store import KubeLeaseStore
from controller.election.lease_watch import LeaseWatch
from controller.election.record import LeaseRecord
from controller.election.rounds import ElectionSupervisor
from controller.election.term import Term
from controller.election.timing import ElectionTiming

_out = threading.Lock()


def emit(**fields: object) -> None:
    with _out:
        sys.stdout.write(json.dumps(fields) + "\n")
        sys.stdout.flush()


class ReportingStore(KubeLeaseStore):
    """Prints a line per Lease read, so a test can tell a read the watch woke from a retry."""

    def get(self, timeout: float) -> LeaseRecord | None:
        t = time.monotonic()
        record = super().get(timeout)
        emit(event="read", t=t, holder=record.holder if record is not None else None)
        return record


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--kubeconfig", required=True)
    parser.add_argument("--namespace", required=True)
    parser.add_argument("--lease", required=True)
    parser.add_argument("--identity", required=True)
    parser.add_argument("--lease-duration", type=float, default=2.0)
    parser.add_argument("--renew-deadline", type=float, default=1.5)
    parser.add_argument("--retry-period", type=float, default=0.3)
    args = parser.parse_args()

    api_client = config.new_client_from_config(config_file=args.kubeconfig)
    store = ReportingStore(api_client, args.namespace, args.lease)
    events = EventRecorder(api_client, args.namespace, args.lease, args.identity, lambda: store.uid)

    def started(term: Term) -> None:
        emit(event="started", identity=args.identity, epoch=term.token.epoch, t=term.started_at)

    def stopped(term: Term, reason: str) -> None:
        emit(
            event="stopped",
            identity=args.identity,
            epoch=term.token.epoch,
            reason=reason,
            t=term.ended_at,
            valid_until=term.valid_until,
        )

    elector = LeaderElector(
        store,
        args.identity,
        ElectionTiming(args.lease_duration, args.renew_deadline, args.retry_period),
        callbacks=ElectionCallbacks(on_started_leading=started, on_stopped_leading=stopped),
        events=events,
    )
    supervisor = ElectionSupervisor(elector, watch=LeaseWatch(api_client, elector)).start()
    done = threading.Event()
    signal.signal(signal.SIGTERM, lambda *_: done.set())
    emit(event="ready", identity=args.identity, t=time.monotonic())
    done.wait()
    supervisor.stop(timeout=10)
    events.close()
    emit(event="exited", identity=args.identity, t=time.monotonic())


if __name__ == "__main__":
    main()
