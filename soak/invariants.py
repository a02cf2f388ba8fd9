"""The soak's invariants as pure functions over what it recorded (no I/O, unit-tested).

Times are wall-clock seconds (time.time()) so they line up with controller log lines.
Each check returns a Result: how many things it checked and every violation found.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any


@dataclass(frozen=True)
class RequestRecord:
    """One HTTP request the load generator sent through an HAProxy pod."""

    t: float
    pod: str
    host: str
    ok: bool
    status: int | None
    latency_ms: float
    error: str = ""

    @property
    def end(self) -> float:
        return self.t + self.latency_ms / 1000


@dataclass(frozen=True)
class Window:
    """A fault, from injection until the system was seen healthy again.

    failure_pods: pods whose requests may fail in this window (the pod being deleted, the
    one whose worker was killed); None means any pod, an empty set means none.
    """

    kind: str
    start: float
    end: float
    failure_pods: frozenset[str] | None = frozenset()
    leader_change: bool = False
    rendering_broken: bool = False

    def covers(self, t: float, grace: float, until: float | None = None) -> bool:
        """Whether [t, until] (a point when until is None) overlaps the window plus grace."""
        return self.start <= (until if until is not None else t) and t <= self.end + grace

    def allows_failure(self, pod: str) -> bool:
        return self.failure_pods is None or pod in self.failure_pods


@dataclass(frozen=True)
class PodObservation:
    applied_checksum: str | None
    apply_count: int | None
    worker_pid: int | None = None
    runtime_id: str | None = None


@dataclass(frozen=True)
class Sample:
    """One round of the sampler: the intent read first, then every agent."""

    t: float
    intent: str | None  # checksum named by the deployment intent (None: unreadable)
    leader: str | None = None
    epoch: int | None = None
    pods: dict[str, PodObservation] = field(default_factory=dict)


@dataclass
class Result:
    name: str
    checked: int = 0
    violations: list[str] = field(default_factory=list)
    notes: dict = field(default_factory=dict)
    ran: bool = True

    @property
    def ok(self) -> bool:
        return not self.violations

    def as_dict(self) -> dict:
        status = "not run" if not self.ran else ("pass" if self.ok else "FAIL")
        return {
            "name": self.name,
            "status": status,
            "checked": self.checked,
            "violation_count": len(self.violations),
            "violations": self.violations[:50],
            **({"notes": self.notes} if self.notes else {}),
        }


# -- requests fail only in the windows the seeds allow --------------------------------------


def check_request_failures(
    requests: Iterable[RequestRecord], windows: Sequence[Window], grace: float
) -> Result:
    """A failed request is allowed only inside a window that lets its pod fail (plus
    `grace`: ADR-0034 allows fast failures within one single-change convergence budget).
    A request counts as inside when its lifetime overlaps the window (one in flight when a
    worker is killed fails with it). Everything else, steady state included, must answer
    200 from the right backend."""
    result = Result("requests fail only in allowed windows")
    allowed_by_kind: dict[str, int] = {}
    failed = 0
    for req in requests:
        result.checked += 1
        if req.ok:
            continue
        failed += 1
        window = next(
            (w for w in windows if w.covers(req.t, grace, req.end) and w.allows_failure(req.pod)),
            None,
        )
        if window is not None:
            allowed_by_kind[window.kind] = allowed_by_kind.get(window.kind, 0) + 1
            continue
        during = [w.kind for w in windows if w.covers(req.t, grace, req.end)]
        where = f"during {','.join(during)}" if during else "in steady state"
        result.violations.append(
            f"t={req.t:.3f} {req.pod} Host {req.host}: {req.status or req.error} {where}"
        )
    result.notes = {"failed": failed, "allowed_by_fault": allowed_by_kind}
    return result


# -- no pod ever ran a checkpoint older than the current intent ------------------------------


def check_intent_order(samples: Sequence[Sample]) -> Result:
    """A pod whose applied checksum changes may change only to the checksum the intent named
    at that time or a later one.

    The sampler reads the intent before the agents, so an apply seen at sample k happened
    after the intent read of sample k-1: the plan it installed must appear in the intent
    history at or after the position read then. The history is completed over the whole run
    before judging, so an intent observed only after the apply still counts as later.
    """
    result = Result("no pod ran a checkpoint older than the intent")
    history: list[str] = []
    position: list[int] = []  # history index current at each sample (-1: none yet)
    pending: list[tuple[float, str, str, int]] = []  # (t, pod, checksum, floor)
    last: dict[str, str | None] = {}
    for k, sample in enumerate(samples):
        if sample.intent is not None and (not history or history[-1] != sample.intent):
            history.append(sample.intent)
        position.append(len(history) - 1)
        for pod, obs in sample.pods.items():
            applied = obs.applied_checksum
            if k == 0:  # the baseline: pods configured before the soak began
                last[pod] = applied
                continue
            previous = last.get(pod)
            last[pod] = applied
            if applied is None or applied == previous:
                continue
            result.checked += 1
            pending.append((sample.t, pod, applied, max(position[k - 1], 0)))
    unnamed = 0
    for t, pod, applied, floor in pending:
        if applied in history[floor:]:
            continue
        if applied in history[:floor]:
            result.violations.append(
                f"t={t:.3f} {pod} changed to {applied[:19]} older than the intent then "
                f"({history[floor][:19]})"
            )
        else:
            unnamed += 1
            result.violations.append(f"t={t:.3f} {pod} changed to {applied[:19]} no intent named")
    result.notes = {"intents_observed": len(history), "plan_changes": result.checked}
    if unnamed:
        result.notes["unnamed"] = unnamed
    return result


# -- no configured pod received a recovery apply --------------------------------------------


def check_no_recovery_apply(
    samples: Sequence[Sample], windows: Sequence[Window], settle: float = 2.0
) -> Result:
    """While rendering is broken, a pod that already had a plan must see no apply at all:
    its apply_count stays and its applied checksum stays (recovery is only for bootstrap
    pods). `settle` skips a deployment already in flight when the template broke.
    An agent restart (runtime id changes, count drops) starts a fresh baseline."""
    result = Result("no configured pod received a recovery apply")
    for window in windows:
        if not window.rendering_broken:
            continue
        baseline: dict[str, PodObservation] = {}
        for sample in samples:
            if sample.t < window.start + settle or sample.t > window.end:
                continue
            for pod, obs in sample.pods.items():
                before = baseline.get(pod)
                if before is None or before.applied_checksum is None:
                    baseline[pod] = obs  # first sight, or still a bootstrap pod
                    continue
                restarted = (
                    obs.apply_count is not None
                    and before.apply_count is not None
                    and obs.apply_count < before.apply_count
                ) or (obs.runtime_id and before.runtime_id and obs.runtime_id != before.runtime_id)
                if restarted:
                    baseline[pod] = obs
                    continue
                result.checked += 1
                grew = (obs.apply_count or 0) > (before.apply_count or 0)
                if grew or obs.applied_checksum != before.applied_checksum:
                    result.violations.append(
                        f"t={sample.t:.3f} {pod} configured pod got an apply while rendering "
                        f"was broken (count {before.apply_count}->{obs.apply_count})"
                    )
                    baseline[pod] = obs  # report each apply once
    return result


# -- leader changes and lease renewals ------------------------------------------------------


def check_leader_changes(
    samples: Sequence[Sample], windows: Sequence[Window], grace: float
) -> Result:
    """Every change of leader (holder or epoch) must fall in a window that may move the
    Lease (a killed or stopped leader, an API server fault, a broker restart)."""
    result = Result("leadership changes only under leader faults")
    previous: tuple[str | None, int | None] | None = None
    expected = 0
    for sample in samples:
        if sample.leader is None or sample.epoch is None:
            continue
        current = (sample.leader, sample.epoch)
        if previous is not None and current != previous:
            result.checked += 1
            if any(w.leader_change and w.covers(sample.t, grace) for w in windows):
                expected += 1
            else:
                result.violations.append(
                    f"t={sample.t:.3f} leader {previous[0]}@{previous[1]} -> "
                    f"{current[0]}@{current[1]} outside any leader fault"
                )
        previous = current
    result.notes = {"transitions": result.checked, "expected": expected}
    return result


_CELERY_TIME = re.compile(r"^\[(\d{4}-\d\d-\d\d \d\d:\d\d:\d\d),(\d{3}):")
RENEWAL_PATTERNS = {
    "lost_race": re.compile(r"lost the race to write the lease"),
    "write_failed": re.compile(r"cannot write lease"),
    "term_ended": re.compile(r"leadership ended"),
}


def parse_lease_log(lines: Iterable[str], utc_offset: float = 0.0) -> list[tuple[float, str, str]]:
    """(time, kind, line) for each elector line about a failed Lease write or an ended term.
    Celery stamps lines in local time; utc_offset converts it to epoch seconds."""
    out = []
    for line in lines:
        for kind, pattern in RENEWAL_PATTERNS.items():
            if pattern.search(line):
                match = _CELERY_TIME.match(line)
                if not match:
                    continue
                stamp = datetime.strptime(match.group(1), "%Y-%m-%d %H:%M:%S")
                t = stamp.timestamp() + int(match.group(2)) / 1000 - utc_offset
                out.append((t, kind, line.strip()))
    return out


def check_lease_renewals(
    entries: Sequence[tuple[float, str, str, str]],
    windows: Sequence[Window],
    grace: float,
) -> Result:
    """No Lease write failed and no term ended outside a leader fault: an intent write that
    raced a renewal would show up here as a conflict or a lost term in steady state.
    entries are (time, replica, kind, line)."""
    result = Result("no lease renewal failed (intent writes never touch the leader Lease)")
    by_kind: dict[str, int] = {}
    for t, replica, kind, line in entries:
        result.checked += 1
        by_kind[kind] = by_kind.get(kind, 0) + 1
        if any(w.leader_change and w.covers(t, grace) for w in windows):
            continue
        result.violations.append(f"t={t:.3f} {replica}: {line[-160:]}")
    result.notes = {"by_kind": by_kind}
    return result


# -- nothing mirrored is lost ---------------------------------------------------------------


def check_mirror(observed: dict[str, set[str]], mirrored: dict[str, set[str]]) -> Result:
    """Everything the soak saw in Kubernetes (checkpoint uids, event uids, receipts) is in
    the mirror's database."""
    result = Result("no mirrored checkpoint, receipt or event lost")
    for kind, seen in observed.items():
        have = mirrored.get(kind, set())
        result.checked += len(seen)
        missing = sorted(seen - have)
        result.notes[kind] = {"observed": len(seen), "mirrored": len(have), "missing": len(missing)}
        for item in missing[:20]:
            result.violations.append(f"{kind} {item} not in the mirror")
    return result


# -- when the fleet is steady -------------------------------------------------------------


def _signature(sample: Sample) -> tuple[Any, ...]:
    return sample.intent, tuple(sorted((p, o.applied_checksum) for p, o in sample.pods.items()))


def steady_start(samples: Sequence[Sample], seconds: float) -> int | None:
    """The index of the first sample of the trailing stretch over which the intent and every
    pod's applied checksum stayed the same, when that stretch spans `seconds`; else None.
    At start-up renders follow each other faster than the sampler reads (seed 3: three
    intents within 1.5 s, each fleet consistent when looked at), so "healthy" alone is not
    "at rest"."""
    if not samples:
        return None
    last = _signature(samples[-1])
    k = len(samples) - 1
    while k > 0 and _signature(samples[k - 1]) == last:
        k -= 1
    return k if samples[-1].t - samples[k].t >= seconds else None


# -- at rest the intent names what every pod runs --------------------------------------------


def check_intent_at_rest(
    samples: Sequence[Sample], windows: Sequence[Window], grace: float
) -> Result:
    """Outside every fault window (plus `grace`), each configured pod's applied checksum is
    the one the intent names: the durable promise describes the fleet. A mismatch is
    reported once per pod and checksum pair, at its first sample. A pod already on the
    output the next round's intent names is not judged against this round's: the intent is
    recorded before its apply, so the round saw that deployment begin."""
    result = Result("at rest the intent names what every pod runs")
    reported: set[tuple[str, str | None, str | None]] = set()
    for k, sample in enumerate(samples):
        # A round reads the intent first and the agents after, until at most the next round
        # began: it is at rest only if no window touches any of that span.
        until = samples[k + 1].t if k + 1 < len(samples) else sample.t
        next_intent = samples[k + 1].intent if k + 1 < len(samples) else sample.intent
        if sample.intent is None or any(w.covers(sample.t, grace, until) for w in windows):
            continue
        for pod, obs in sample.pods.items():
            if obs.applied_checksum is None:
                continue
            result.checked += 1
            if obs.applied_checksum in (sample.intent, next_intent):
                continue
            key = (pod, obs.applied_checksum, sample.intent)
            if key not in reported:
                reported.add(key)
                result.violations.append(
                    f"t={sample.t:.3f} {pod} runs {obs.applied_checksum[:19]} at rest while "
                    f"the intent names {sample.intent[:19]}"
                )
    return result


# -- the render gate refuses after dispatch, and says so -------------------------------------


def check_gate_refusals(refusals: Iterable[tuple[float, float | None]]) -> Result:
    """Each template the gate refuses went out optimistically and was refused after the
    dispatch (seed 003), which the leader's /healthz reports while the fault lasts; the
    reverted fleet is judged by the at-rest check once the fault is over."""
    result = Result("the render gate's refusal after dispatch is reported")
    for t, reported_after in refusals:
        result.checked += 1
        if reported_after is None:
            result.violations.append(f"t={t:.3f} no /healthz reported a refusal after dispatch")
    return result


# -- the retained-config gauge is 0 after convergence ----------------------------------------


def check_gauge_after_convergence(readings: Iterable[tuple[float, str, float | None]]) -> Result:
    """haptic_retained_config_active read from every controller once the fleet converged on
    a current render after a fault: 0 (recovery is over); a missing reading is not judged."""
    return _all_zero(
        "the gauge haptic_retained_config_active is 0 after convergence",
        readings,
        lambda value: f"gauge {value:g} after convergence",
    )


def _all_zero(
    title: str, readings: Iterable[tuple[float, str, float | None]], says: Callable[[float], str]
) -> Result:
    """A metric read from every controller must be 0; a missing reading is only counted."""
    result = Result(title)
    unread = 0
    for t, controller, value in readings:
        if value is None:
            unread += 1
            continue
        result.checked += 1
        if value != 0:
            result.violations.append(f"t={t:.3f} {controller}: {says(value)}")
    result.notes = {"unread": unread} if unread else {}
    return result


# -- the incremental path agrees with the full render --------------------------------------


def check_incremental_agrees(readings: Iterable[tuple[float, str, float | None]]) -> Result:
    """haptic_incremental_mismatch_total read from every controller after each fault: 0
    (every consistency check found the incremental output byte for byte the full render's;
    docs/design/incremental.md); a missing reading is not judged."""
    return _all_zero(
        "the incremental path gives the full render's bytes",
        readings,
        lambda value: f"{value:g} mismatches",
    )


# -- no HAProxyCfg write after the writer's Lease was released -------------------------------


@dataclass(frozen=True)
class ApiWrite:
    """One mutating request from the API server's audit log (localcluster/audit.py)."""

    t: float  # when it arrived (wall clock)
    verb: str
    path: str
    writer: str | None  # the replica identity in its User-Agent (None: not a replica)
    code: int
    holder: str | None = None  # a Lease write's holder afterwards ("" released or deleted)
    lease: str | None = None  # the name of the Lease that write changed


# The published configuration: HAProxyCfg and its children (everything of the group but the
# template config, which every replica's status reporter writes).
_PUBLISHED = re.compile(r"^/apis/haproxy-haptic\.org/[^/]+/namespaces/[^/]+/(haproxy[a-z]+)")


def parse_audit(lines: Iterable[str]) -> list[ApiWrite]:
    """The audit log's JSON lines as ApiWrites, in arrival order (unreadable lines skipped)."""
    import json

    from controller.election.identity import identity_from_user_agent

    writes = []
    for line in lines:
        try:
            entry = json.loads(line)
            write = ApiWrite(
                t=float(entry["t"]),
                verb=str(entry["verb"]),
                path=str(entry["path"]),
                writer=identity_from_user_agent(str(entry.get("userAgent") or "")),
                code=int(entry.get("code") or 0),
                holder=entry.get("holder"),
                lease=entry.get("lease"),
            )
        except (ValueError, KeyError, TypeError):
            continue
        writes.append(write)
    return sorted(writes, key=lambda w: w.t)


def is_published_write(path: str) -> bool:
    match = _PUBLISHED.match(path)
    return match is not None and match.group(1) != "haproxytemplateconfigs"


def check_no_write_after_release(writes: Sequence[ApiWrite], lease_name: str) -> Result:
    """No replica sends an HAProxyCfg write (the config or a child, any outcome) while the
    leader Lease does not name it: after it released the Lease, after another replica took
    it, or before it ever held it. The Lease's history comes from the same log (each
    successful Lease write's holder afterwards), so both sides share one clock and order.

    A deleted Lease (the lease-recreate fault) is only counted in the notes: its last holder
    learns of the deletion at its next term check, so a write whose check came just before
    the deletion may arrive just after; that is the fencing epoch's to refuse, not a release.
    """
    result = Result("no HAProxyCfg write after the writer's Lease was released")
    holder: str | None = None  # who the Lease names now
    lost: dict[str, str] = {}  # replica -> how it last lost the Lease
    after_delete = 0
    for w in writes:
        if w.lease == lease_name and w.holder is not None:
            holder, lost = _lease_changed(holder, lost, w)
            continue
        if not is_published_write(w.path):
            continue
        result.checked += 1
        if w.writer is not None and w.writer == holder:
            continue
        how = lost.get(w.writer or "", "never held")
        if how == "deleted":
            after_delete += 1
            continue
        who = w.writer or "a client without a replica identity"
        result.violations.append(
            f"t={w.t:.3f} {who} sent {w.verb} {w.path} ({w.code}); its Lease: {how}"
        )
    result.notes = {"after_lease_deleted": after_delete}
    return result


def _lease_changed(
    holder: str | None, lost: dict[str, str], w: ApiWrite
) -> tuple[str | None, dict[str, str]]:
    """The Lease's holder and the replicas that lost it, after the Lease write `w`."""
    lost = dict(lost)
    new = w.holder or None
    if holder and new != holder:
        if w.verb == "DELETE":
            lost[holder] = "deleted"
        else:
            lost[holder] = "released" if new is None else f"taken by {new}"
    if new:
        lost.pop(new, None)
        # A deleted Lease now held by another: its old holder's term is certainly over.
        lost = {r: f"taken by {new}" if how == "deleted" else how for r, how in lost.items()}
    return new, lost


# -- a promoted Standby recovers from the Active's checkpoints -------------------------------


@dataclass(frozen=True)
class PromotionRound:
    """One "promote the Standby while rendering is broken" round (soak/hub.py): what each
    HAProxy pod ran (checksum, writer's identity) before the Active died and after the
    promoted side settled, and what the replacement pod ran once Ready (None: never)."""

    t: float
    intent: str  # the checksum the Active's intent named when it died
    promoted: str  # the Standby's identity
    before: dict[str, tuple[str | None, str | None]]
    after: dict[str, tuple[str | None, str | None]]
    replacement: tuple[str | None, str | None] | None


def check_promoted_recovery(rounds: Sequence[PromotionRound]) -> list[Result]:
    """A replacement pod recovers the Active's last intent through the promoted Standby
    (never an older checkpoint, never nothing), and the pods that ran it are given
    nothing (recovery is only for bootstrap pods)."""
    recovered = Result("a promoted Standby recovers a replacement pod to the Active's intent")
    untouched = Result("a promoted Standby's recovery leaves configured pods alone")
    for r in rounds:
        recovered.checked += 1
        if r.replacement is None:
            recovered.violations.append(f"t={r.t:.3f} the replacement pod never became Ready")
        elif r.replacement != (r.intent, r.promoted):
            recovered.violations.append(
                f"t={r.t:.3f} the replacement pod runs {r.replacement[0]} written by "
                f"{r.replacement[1]}; the Active's intent named {r.intent}"
            )
        for pod, ran in r.before.items():
            untouched.checked += 1
            if r.after.get(pod) != ran:
                untouched.violations.append(
                    f"t={r.t:.3f} {pod} ran {ran} before the promotion, {r.after.get(pod)} after"
                )
    return [recovered, untouched]
