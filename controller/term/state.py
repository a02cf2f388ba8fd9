"""What one leader term knows, shared by its components (docs/term.md).

Every shared fact changes only through a locked operation that says what it takes and what
it leaves: `take_unsaved(checksum)` removes and returns exactly the receipts it hands out,
`take_status()` the per-pod status entries (every one, oldest first), `refuse(output)`
withdraws an output from every use. A new term starts from nothing (ADR-0033, freshness
across terms) but the receipts published before it (`seed_proven`).
"""

from __future__ import annotations

import threading
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

from controller.render import RenderOutput
from controller.retained.receipts import PodReceipt


@dataclass
class LeaderSettings:
    deployment_min_interval: float = 0.1
    publish_interval: float = 10.0
    drift_interval: float = 60.0


@dataclass
class TermState:
    """In-memory candidates of one term; read freely, change only through the methods."""

    last_good: RenderOutput | None = None  # last output accepted for dispatch this term
    seed: RenderOutput | None = None  # the published output, read at the start of the term
    # (plan ID, checksum) the durable intent names, as the store last answered this term.
    intended: tuple[str, str] | None = None
    unsaved: dict[str, PodReceipt] = field(default_factory=dict)  # pod -> newest receipt
    # pod -> its status entries not published yet, oldest first: every deployment outcome
    # reaches status.deployedToPods, and so the history, not only a pod's newest one
    # (docs/term.md "Every deployment outcome is published").
    pending_status: dict[str, list[dict[str, Any]]] = field(default_factory=dict)
    # pod -> the receipt it last proved (this term, or published when the term began): the
    # same proof again is no new deployment and gets no status entry of its own.
    proven: dict[str, PodReceipt] = field(default_factory=dict)
    publication_latched: bool = False  # a failed reconciliation holds publication
    fleet_checksums: dict[str, str] = field(default_factory=dict)  # pod -> acknowledged
    refused: set[str] = field(default_factory=set)  # checksums the render gate refused
    # Outputs the gate refused after they were dispatched: their pods go back to their
    # last-known-good (the dispatcher takes them).
    reverts: list[RenderOutput] = field(default_factory=list)
    # checksum -> monotonic time of the render request it serves (haptic_convergence_seconds)
    requested_at: dict[str, float] = field(default_factory=dict)
    _previous_good: RenderOutput | None = field(default=None, repr=False)
    lock: threading.RLock = field(default_factory=threading.RLock, repr=False, compare=False)

    # -- renders ------------------------------------------------------------------------

    def seeded(self, published: RenderOutput) -> None:
        """The published output read at the start of the term: the previous plan the first
        render keeps server slots from (docs/term.md)."""
        with self.lock:
            self.seed = published

    def accept(self, output: RenderOutput) -> bool:
        """A render passed (or optimistically skipped) the gate: it becomes the output to
        dispatch and publication resumes. False for an output the gate already refused."""
        with self.lock:
            if output.checksum in self.refused:
                return False
            if self.last_good is not None and self.last_good.checksum != output.checksum:
                self._previous_good = self.last_good
            self.last_good = output
            self.publication_latched = False
            return True

    def latch(self) -> None:
        """Reconciliation failed: hold publication until a render succeeds."""
        with self.lock:
            self.publication_latched = True

    def refuse(self, output: RenderOutput) -> bool:
        """The gate refused `output` after it was accepted: never use it again. The output
        accepted before it (if not refused too) becomes `last_good` again. True when this
        term had accepted it (its pods must be reverted)."""
        with self.lock:
            if output.checksum in self.refused:
                return False
            self.refused.add(output.checksum)
            self.publication_latched = True
            self.unsaved = {p: r for p, r in self.unsaved.items() if r.checksum != output.checksum}
            took = self.last_good is not None and self.last_good.checksum == output.checksum
            if took:
                previous = self._previous_good
                usable = previous is not None and previous.checksum not in self.refused
                self.last_good = previous if usable else None
            self.reverts.append(output)
            return True

    def take_reverts(self) -> list[RenderOutput]:
        with self.lock:
            taken, self.reverts = self.reverts, []
            return taken

    def usable(self, output: RenderOutput | None) -> bool:
        with self.lock:
            return output is not None and output.checksum not in self.refused

    # -- the intent -----------------------------------------------------------------------

    def names(self, output: RenderOutput) -> bool:
        """Whether the durable intent, as this term last recorded it, names `output`."""
        with self.lock:
            return self.intended == (output.plan_id, output.checksum)

    def recorded(self, plan_id: str, checksum: str) -> None:
        with self.lock:
            self.intended = (plan_id, checksum)

    # -- receipts and status ----------------------------------------------------------------

    def acknowledged(self, receipt: PodReceipt, entry: dict[str, Any]) -> bool:
        """A pod proved it runs `receipt`'s output. True when that is news (a deployment
        outcome, queued as a status entry); False when the pod proved exactly what it last
        proved (a follow-up read, a skipped apply): nothing happened to it."""
        with self.lock:
            pod = receipt.pod_name
            self.unsaved[pod] = receipt
            self.fleet_checksums[pod] = receipt.checksum
            if self.proven.get(pod) == receipt:
                return False
            self.proven[pod] = receipt
            self.pending_status.setdefault(pod, []).append(entry)
            return True

    def not_acknowledged(self, pod: str, entry: dict[str, Any]) -> None:
        """A failed or unproven apply. A repeated failure on the same output replaces the
        previous one still queued (its consecutiveErrors counts them)."""
        with self.lock:
            self.fleet_checksums.pop(pod, None)
            self.proven.pop(pod, None)
            queued = self.pending_status.setdefault(pod, [])
            if (
                queued
                and queued[-1].get("lastError")
                and (queued[-1].get("checksum") == entry.get("checksum"))
            ):
                queued.pop()
            queued.append(entry)

    def seed_proven(self, receipts: Iterable[PodReceipt]) -> None:
        """The receipts published when the term began: a pod proving one of them again
        (nothing changed across the hand-over) is no new deployment."""
        with self.lock:
            for receipt in receipts:
                self.proven.setdefault(receipt.pod_name, receipt)

    def consecutive_errors(self, pod: str) -> int:
        with self.lock:
            queued = self.pending_status.get(pod) or [{}]
            return int(queued[-1].get("consecutiveErrors", 0))

    def converging(self, checksum: str, requested_at: float) -> None:
        """A render of `checksum` serving a request made at `requested_at` was dispatched;
        the earliest unconverged request counts."""
        with self.lock:
            self.requested_at.setdefault(checksum, requested_at)

    def converged(self, checksum: str) -> float | None:
        """Every pod acknowledged `checksum`: the request time, once (None after)."""
        with self.lock:
            return self.requested_at.pop(checksum, None)

    def acknowledged_by(self, checksum: str) -> set[str]:
        with self.lock:
            return {pod for pod, c in self.fleet_checksums.items() if c == checksum}

    def take_unsaved(self, checksum: str) -> list[PodReceipt]:
        """Remove and return exactly the unsaved receipts for `checksum`, by pod name."""
        with self.lock:
            taken = sorted(
                (r for r in self.unsaved.values() if r.checksum == checksum),
                key=lambda r: r.pod_name,
            )
            for receipt in taken:
                del self.unsaved[receipt.pod_name]
            return taken

    def unsaved_checksums(self) -> set[str]:
        with self.lock:
            return {r.checksum for r in self.unsaved.values()}

    def put_back_unsaved(self, receipts: Iterable[PodReceipt]) -> None:
        """Return receipts a failed publication took; a pod's newer receipt wins."""
        with self.lock:
            for receipt in receipts:
                self.unsaved.setdefault(receipt.pod_name, receipt)

    def take_status(self) -> dict[str, list[dict[str, Any]]]:
        """Remove and return every pending per-pod status entry, oldest first."""
        with self.lock:
            taken, self.pending_status = self.pending_status, {}
            return taken

    def put_back_status(self, entries: Mapping[str, list[dict[str, Any]]]) -> None:
        """Return entries a failed publication did not write, before any queued since
        (those are newer)."""
        with self.lock:
            for pod, queued in entries.items():
                if queued:
                    self.pending_status[pod] = list(queued) + self.pending_status.get(pod, [])

    def has_unpublished(self) -> bool:
        with self.lock:
            return (
                self.last_good is not None
                and not self.publication_latched
                and bool(self.unsaved or self.pending_status)
            )
