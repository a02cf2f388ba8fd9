"""What an apply did to one HAProxy pod, as one set of names.

The agent reports NOOP, RUNTIME, FILE_ONLY, RELOAD or RELOAD_SCHEDULED as the `result` of an apply;
the controller's deployer adds SKIPPED (nothing to send), REFUSED (a 409: the agent wrote
nothing) and FAILED. A deployment's per-pod summary is the action's value, followed by
`: <reason>` for REFUSED and FAILED (`PodAction.of_summary` reads one back).
"""

from __future__ import annotations

import enum


class PodAction(enum.StrEnum):
    SKIPPED = "skipped"
    NOOP = "noop"
    RUNTIME = "runtime"
    FILE_ONLY = "file-only"
    RELOAD = "reload"
    RELOAD_SCHEDULED = "reload_scheduled"
    REFUSED = "refused"
    FAILED = "failed"

    @property
    def is_error(self) -> bool:
        return self in (PodAction.REFUSED, PodAction.FAILED)

    @property
    def is_reload(self) -> bool:
        return self in (PodAction.RELOAD, PodAction.RELOAD_SCHEDULED)

    @property
    def deployed(self) -> bool:
        """The pod took the output (a scheduled reload has its files in place and checked)."""
        return self in (
            PodAction.RUNTIME,
            PodAction.FILE_ONLY,
            PodAction.RELOAD,
            PodAction.RELOAD_SCHEDULED,
        )

    @classmethod
    def of_summary(cls, summary: str) -> PodAction | None:
        """The action a per-pod summary names; None for another text (`stopped: ...`)."""
        head = summary.split(":", 1)[0].strip()
        try:
            return cls(head)
        except ValueError:
            return None
