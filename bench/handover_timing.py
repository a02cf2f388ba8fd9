"""How long a graceful leader stop takes until the next leader holds the Lease (issue 15,
section 4): two controller replicas, real HAProxy pods, the local API server; each round
stops the leader with SIGTERM (it drains, then releases), times the moment the other
replica holds the Lease (watched while the old leader is still stopping) and the old
leader's process exit, then starts the stopped replica again.

    python -m bench.handover_timing [ROUNDS] [--default-timings]

`--default-timings` runs with the production timings (lease 30 s, renew 20 s, retry 5 s)
instead of the short test ones (retry 0.5 s): the follower then takes the released Lease
through its Lease watch (controller/election/lease_watch.py), not at its next retry, which
would come up to 6 s later. Prints one line per round and the median; not part of
`make bench` (a diagnostic).
"""

from __future__ import annotations

import statistics
import sys
import threading
import time

from devstack import stack
from devstack.stack import wait_for
from tests.e2e.harness import start_system


def main(rounds: int = 3, default_timings: bool = False) -> None:
    timings = stack.Timings() if default_timings else stack.Timings.short()
    print(f"timings: lease {timings.lease_duration}, retry {timings.retry_period}")
    system = start_system("handover-timing", haproxy_replicas=2, timings=timings)
    try:
        wait_for(lambda: len(system.haproxy_pods()) == 2, 120, what="pods Ready")
        exits, handovers = [], []
        for i in range(rounds):
            leader = wait_for(system.leader, 60, what="a leader")
            wait_for(lambda: system.published() is not None, 60, what="a publication")
            time.sleep(3)  # a term at rest, as in the soak between faults
            proc = system.controllers[leader]
            start = time.monotonic()
            stopping = threading.Thread(target=proc.stop, kwargs={"grace": 30})
            stopping.start()  # SIGTERM; the Lease is watched meanwhile
            wait_for(
                lambda old=leader: (n := system.leader()) not in (None, old) and n,
                60,
                interval=0.02,
                what="the next leader",
            )
            handover = time.monotonic() - start
            stopping.join()
            exited = time.monotonic() - start
            exits.append(exited)
            handovers.append(handover)
            print(
                f"round {i + 1}: next leader after {handover:.2f}s, "
                f"old leader exited after {exited:.2f}s"
            )
            system.start_controller(leader)
            # The next round needs a follower that is up and watching the Lease.
            wait_for(lambda old=leader: system.health(old), 60, what="the replica restarted")
            time.sleep(2)  # its elector observes the Lease
        print(
            f"median: exit {statistics.median(exits):.2f}s, "
            f"hand-over {statistics.median(handovers):.2f}s"
        )
    finally:
        system.stop()


if __name__ == "__main__":
    args = [a for a in sys.argv[1:] if not a.startswith("--")]
    main(int(args[0]) if args else 3, default_timings="--default-timings" in sys.argv)
