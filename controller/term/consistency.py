"""The incremental path's consistency check, off the coordinator's thread
(docs/design/incremental.md, "The consistency check").

The coordinator hands over an input the incremental path answered and that answer; a
thread of the term renders the same input in full and compares (`incremental.differences`).
A full render of the whole cluster takes a hundred milliseconds and more: on the
coordinator's own thread it held up every endpoint change that arrived meanwhile (issue 19).
Only the newest job is kept; a mismatch is counted, logged and handed back through
`on_mismatch`, after which the coordinator renders in full (and gates) on its own thread.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable

from controller.metrics import INCREMENTAL_CHECKS, INCREMENTAL_MISMATCH
from controller.newest import NewestOnly
from controller.render import RenderError, RenderInput, RenderOutput, incremental, render

log = logging.getLogger(__name__)

Job = tuple[RenderInput, RenderOutput]

# The check may take at most this share of one core: a full render costing `c` seconds of
# CPU is checked every `c / CHECK_SHARE` seconds at the most (docs/design/incremental.md).
CHECK_SHARE = 0.02


def check_interval(minimum: float, render_cpu_seconds: float) -> float:
    """Seconds between consistency checks: `minimum`, or longer when a full render costs so
    much CPU that checking every `minimum` seconds would take more than CHECK_SHARE of a core
    (5,000 Ingresses: about 2 s of CPU per render here, so a check every 100 s, not 30)."""
    return max(minimum, render_cpu_seconds / CHECK_SHARE)


class ConsistencyChecker:
    def __init__(self, alive: Callable[[], bool], on_mismatch: Callable[[], None]) -> None:
        self._alive = alive
        self._on_mismatch = on_mismatch
        self.render_cpu = 0.0  # CPU seconds of the last check's full render (its thread's)
        self._jobs: NewestOnly[Job] = NewestOnly(
            "consistency-check", alive, lambda job: self.check(*job)
        )

    def submit(self, inp: RenderInput, updated: RenderOutput) -> None:
        """Check that `updated`, the incremental path's output for `inp`, is its full
        render's (replaces a job not yet started)."""
        self._jobs.submit((inp, updated))

    def check(self, inp: RenderInput, updated: RenderOutput) -> bool:
        """One comparison; True when the bytes agree."""
        started = time.thread_time()
        try:
            full = render(inp)
        except RenderError as exc:  # the incremental path rendered what cannot render
            log.warning("consistency check: the full render failed: %s", exc)
            differences = ["the full render failed"]
        else:
            differences = incremental.differences(updated, full)
        finally:
            self.render_cpu = time.thread_time() - started
        INCREMENTAL_CHECKS.inc()
        if not differences:
            return True
        INCREMENTAL_MISMATCH.inc()
        log.warning(
            "incremental output %s differs from the full render of the same input (%s); "
            "rendering in full",
            updated.plan_id,
            ", ".join(differences),
        )
        if self._alive():
            self._on_mismatch()
        return False
