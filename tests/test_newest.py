"""controller.newest.NewestOnly: the newest job only, one at a time, off the caller's thread;
a failing job does not stop the next one."""

from __future__ import annotations

import threading

from controller.newest import NewestOnly
from devstack.stack import wait_for


def test_only_the_newest_waiting_job_runs_and_a_failure_does_not_stop_the_thread() -> None:
    started, release, failed = threading.Event(), threading.Event(), threading.Event()
    done: list[int] = []

    def work(job: int) -> None:
        if job == 1:
            started.set()
            release.wait(10)
        if job == 3:
            failed.set()
            raise RuntimeError("a failing job")
        done.append(job)

    runner: NewestOnly[int] = NewestOnly("test", lambda: True, work)
    runner.submit(1)
    assert started.wait(10)
    for job in (2, 3, 4):  # while 1 runs: 2 and 3 are replaced before they start
        runner.submit(job)
    release.set()
    wait_for(lambda: done == [1, 4], 10, what="jobs 1 and 4")
    runner.submit(3)  # fails
    assert failed.wait(10)
    runner.submit(5)
    wait_for(lambda: done[-1] == 5, 10, what="the job after a failure")


def test_the_thread_ends_with_its_owner() -> None:
    alive = threading.Event()
    alive.set()
    runner: NewestOnly[int] = NewestOnly("test-end", alive.is_set, lambda job: None)
    runner.submit(1)
    alive.clear()
    assert runner.join(5)
