"""A recovery apply against a concurrent good render and a foreign writer, over every
interleaving hypothesis explores (ADR-0033, "Recheck intent ... after state conflicts").

The decisions are the real ones: `decide_record` (the intent record, conditional for
recovery) and the agent's `fence` (with the bootstrap expectation). The steps are those of
`Dispatcher.deploy` (controller/term/dispatcher.py): recovery checks that no render
succeeded, re-stamps the intent only while it names the recovered output, and applies
expecting a bootstrap pod; the render sets its output, records its intent, reads the pod and
applies with the plan it read as expected previous. Both record-and-apply sequences hold the
dispatcher's lock; the render sets its output before it takes the lock. A foreign writer (an
older term) configures the pod at any point.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from hypothesis import given, settings
from hypothesis import strategies as st

from agents.decide import Current, fence
from agents.manifest import Manifest, Token, build_manifest, parse_manifest
from controller.retained.intent import (
    Claim,
    DeploymentIntent,
    LeaderView,
    Refusal,
    RetainedState,
    Term,
    decide_record,
)

TERM = Term("replica-b", 2)
UID = "template-uid"
DIGEST = "ab" * 32
RECOVERED, RENDERED, FOREIGN = "plan-recovered", "plan-rendered", "plan-foreign"


def _manifest(plan: str, epoch: int, sequence: int, expected: str | None, boot: bool) -> Manifest:
    raw = build_manifest(
        plan_id=plan,
        files={"haproxy.cfg": ("config", f"global\n# {plan}\n".encode())},
        structure_digest=DIGEST,
        token={"holder": "x", "epoch": epoch, "sequence": sequence},
        expected_previous_plan_id=expected,
        expect_bootstrap=boot,
    )
    return parse_manifest(raw)


@dataclass
class World:
    stored: RetainedState
    applied: str | None = None
    checksum: str | None = None
    token: Token | None = None
    last_good: bool = False
    render_read: str | None = None
    gave: list[tuple[str, DeploymentIntent | None]] = field(default_factory=list)
    recovery_recorded_over: list[DeploymentIntent | None] = field(default_factory=list)
    stopped: set[str] = field(default_factory=set)

    def pod(self) -> Current:
        return Current(
            applied_plan_id=self.applied,
            applied_checksum=self.checksum,
            applied_token=self.token,
            files={},
            running_structure_digest=DIGEST if self.applied else None,
            worker_alive=True,
            pending_reload=False,
            violation=False,
            bootstrap=self.applied is None and self.token is None,
        )

    def apply(self, m: Manifest) -> bool:
        if fence(self.pod(), m) is not None:
            return False
        self.gave.append((m.plan_id, self.stored.intent))
        self.applied, self.checksum, self.token = m.plan_id, m.checksum, m.token
        return True

    def record(self, plan: str, only_if_named: bool) -> bool:
        leader = LeaderView(TERM.holder, TERM.epoch)
        checksum = f"sha256:{plan}"
        decision = decide_record(self.stored, TERM, plan, checksum, UID, leader, only_if_named)
        if isinstance(decision, Refusal):
            return False
        self.stored = decision
        return True


def _check(world: World) -> None:
    if world.last_good:
        world.stopped.add("recovery")


def _recovery_record(world: World) -> None:
    if "recovery" in world.stopped:
        return
    before = world.stored.intent
    if not world.record(RECOVERED, only_if_named=True):
        world.stopped.add("recovery")
        return
    world.recovery_recorded_over.append(before)


def _recovery_apply(world: World) -> None:
    if "recovery" not in world.stopped:
        world.apply(_manifest(RECOVERED, TERM.epoch, 1, None, boot=True))


def _render_set(world: World) -> None:
    world.last_good = True


def _render_record(world: World) -> None:
    world.record(RENDERED, only_if_named=False)


def _render_read(world: World) -> None:
    world.render_read = world.applied


def _render_apply(world: World) -> None:
    world.apply(_manifest(RENDERED, TERM.epoch, 2, world.render_read, boot=False))


def _foreign(world: World) -> None:
    world.apply(_manifest(FOREIGN, 1, 1, None, boot=False))


def _steps(locked: bool) -> dict[str, list[list]]:
    """Each actor's steps in order; a step is a list of actions run without interruption."""
    recovery = [_check, _recovery_record, _recovery_apply]
    render = [_render_record, _render_read, _render_apply]
    if locked:  # Dispatcher.deploy holds its dispatch lock around these
        return {"recovery": [recovery], "render": [[_render_set], render], "foreign": [[_foreign]]}
    return {
        "recovery": [[a] for a in recovery],
        "render": [[_render_set]] + [[a] for a in render],
        "foreign": [[_foreign]],
    }


@given(data=st.data(), locked=st.booleans())
@settings(max_examples=300, deadline=None)
def test_recovery_gives_the_pod_its_output_only_while_bootstrap_and_never_records_over_a_render(
    data: st.DataObject, locked: bool
) -> None:
    stored = RetainedState(
        claim=Claim(TERM.holder, TERM.epoch),
        intent=DeploymentIntent(RECOVERED, f"sha256:{RECOVERED}", "replica-a", 1, UID),
    )
    world = World(stored)
    pending = _steps(locked)
    while any(pending.values()):
        actor = data.draw(st.sampled_from(sorted(a for a, left in pending.items() if left)))
        for action in pending[actor].pop(0):
            action(world)

    recovered = [(plan, intent) for plan, intent in world.gave if plan == RECOVERED]
    # Only a bootstrap pod takes the recovered output: it is the first plan the pod got.
    assert not recovered or world.gave[0][0] == RECOVERED
    # Recovery never re-records over an intent a render wrote, and the render's stands.
    assert all(i is not None and i.plan_id == RECOVERED for i in world.recovery_recorded_over)
    assert world.stored.intent is not None and world.stored.intent.plan_id == RENDERED
    if locked:
        # With the dispatch lock, the pod is given the recovered output only while the intent
        # names it, and it ends on the render (a foreign writer's older epoch is refused, a
        # newer plan it wrote is read before the render applies).
        for _, intent in recovered:
            assert intent is not None and intent.plan_id == RECOVERED
        assert world.applied == RENDERED
