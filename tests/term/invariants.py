"""The invariants of the term model test, as plain functions over what was observed.

Each returns the violations it finds (empty when the invariant holds), so the state machine
asserts on them and the unit tests below the model can check them without any I/O.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass

from controller.deploy.deployer import PodOutcome
from controller.retained.intent import DeploymentIntent
from tests.term.fake_agents import AcceptedApply


@dataclass(frozen=True)
class Write:
    """A request that changed the API server, by the term that sent it."""

    term: tuple[str, int]  # (holder, epoch) of the pipeline's token
    at: int  # the model's clock when it was sent
    method: str
    path: str


def intent_misses_dispatch(
    intent: DeploymentIntent | None, plan_id: str, checksum: str
) -> list[str]:
    """After a deploy that went ahead, the intent names what it dispatched."""
    if intent is None or not intent.names(plan_id, checksum):
        named = f"{intent.plan_id}" if intent else "nothing"
        return [f"deployed {plan_id} but the intent names {named}"]
    return []


def applies_not_named_by_intent(
    applies: Iterable[AcceptedApply], intent: DeploymentIntent | None
) -> list[str]:
    """No pod is given a plan other than the one the intent names when it is given it (the
    intent is recorded before the first apply of an output, so an older plan is refused)."""
    out = []
    for a in applies:
        if intent is None or not intent.names(a.plan_id, a.checksum):
            named = intent.plan_id if intent else "nothing"
            out.append(f"{a.pod} was given {a.plan_id} ({a.result}) while the intent names {named}")
    return out


def recovery_to_configured_pods(applies: Iterable[AcceptedApply]) -> list[str]:
    """A recovery apply lands only on a pod that was bootstrap at the moment of the apply."""
    return [
        f"recovery apply of {a.plan_id} to configured pod {a.pod}"
        for a in applies
        if not a.was_bootstrap
    ]


def publication_not_named_by_intent(
    intent: DeploymentIntent | None, published_checksum: str | None
) -> list[str]:
    """A publication publishes the output the intent named when it began (what the fleet
    was last promised), not a newer render that no pod was given yet."""
    if intent is not None and published_checksum != intent.checksum:
        return [f"published output {published_checksum} while the intent names {intent.checksum}"]
    return []


def intent_without_checkpoint(
    intent: DeploymentIntent | None,
    acknowledged: Mapping[str, str],
    checkpoints: Iterable[str],
) -> list[str]:
    """After a publication: when a pod acknowledged (to this term, before the publication
    started) the output the intent names, a checkpoint of it is pointed at.

    `acknowledged` maps pod -> checksum of its newest receipt the term absorbed;
    `checkpoints` are the checksums of the pointed checkpoints."""
    if intent is None:
        return []
    pods = sorted(p for p, c in acknowledged.items() if c == intent.checksum)
    if pods and intent.checksum not in set(checkpoints):
        return [
            f"intent {intent.plan_id} acknowledged by {pods} has no checkpoint after publication"
        ]
    return []


def current_term_fenced_out(outcomes: Iterable[PodOutcome]) -> list[str]:
    """The term the leader Lease names holds the newest token: no agent may refuse its
    apply as stale (a refusal for an unexpected previous plan is the deployer's to retry)."""
    return [
        f"{o.pod.name} refused the current term's apply: {o.reason}"
        for o in outcomes
        if o.reason in ("stale_epoch", "stale_sequence")
    ]


def writes_after_lease_gone(
    writes: Iterable[Write], gone_at: Mapping[tuple[str, int], int]
) -> list[str]:
    """No term writes anything once its Lease names someone else, was released or deleted."""
    return [
        f"term {w.term[0]}@{w.term[1]} sent {w.method} {w.path} after its Lease was gone"
        for w in writes
        if w.term in gone_at and w.at > gone_at[w.term]
    ]
