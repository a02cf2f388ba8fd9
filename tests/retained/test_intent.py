"""Deployment intent and claims: unit tests of the seed's cases and interleavings."""

from __future__ import annotations

from dataclasses import dataclass, field, replace

from hypothesis import given
from hypothesis import strategies as st

from controller.retained.intent import (
    CLAIM_ANNOTATION,
    INTENT_ANNOTATION,
    Claim,
    DeploymentIntent,
    LeaderView,
    Refusal,
    RetainedState,
    Term,
    adopt_legacy_copy,
    adopt_mirrored_intent,
    claim_annotation,
    confirm_after_write,
    decide_claim,
    decide_record,
    intent_annotation,
    leader_view_from_lease,
    reclaim_epoch,
    retained_state_from_annotations,
)

OLD = Term("replica-a", 4)
NEW = Term("replica-b", 5)
UID = "template-uid"


def test_claim_preserves_the_last_intent() -> None:
    intent = DeploymentIntent("plan-1", "sha256:1", "replica-a", 4, UID)
    stored = RetainedState(claim=Claim("replica-a", 4), intent=intent)
    claimed = decide_claim(stored, NEW)
    assert isinstance(claimed, RetainedState)
    assert claimed.claim == Claim("replica-b", 5)
    assert claimed.intent == intent


def test_claim_refuses_a_stored_epoch_above_the_term() -> None:
    stored = RetainedState(claim=Claim("replica-a", 9))
    assert isinstance(decide_claim(stored, NEW), Refusal)


def test_record_needs_this_terms_claim_and_leadership() -> None:
    stored = RetainedState(claim=Claim(NEW.holder, NEW.epoch))
    leader = LeaderView(NEW.holder, NEW.epoch)
    recorded = decide_record(stored, NEW, "plan-2", "sha256:2", UID, leader)
    assert isinstance(recorded, RetainedState)
    assert recorded.intent == DeploymentIntent("plan-2", "sha256:2", NEW.holder, 5, UID)
    # Another term's claim refuses.
    assert isinstance(decide_record(stored, OLD, "p", "c", UID, LeaderView(OLD.holder, 4)), Refusal)
    # Leadership moved before the write refuses.
    assert isinstance(
        decide_record(stored, NEW, "p", "c", UID, LeaderView("replica-c", 6)), Refusal
    )
    # A released lease refuses.
    assert isinstance(
        decide_record(stored, NEW, "p", "c", UID, LeaderView(None, 5, released=True)), Refusal
    )


def test_second_leadership_read_refuses_after_a_takeover() -> None:
    assert confirm_after_write(LeaderView(NEW.holder, NEW.epoch), NEW) is None
    assert isinstance(confirm_after_write(LeaderView("replica-c", 6), NEW), Refusal)
    assert isinstance(confirm_after_write(LeaderView(NEW.holder, 6), NEW), Refusal)


def test_reclaim_after_a_recreated_leader_lease() -> None:
    # The leader Lease was recreated: its counter restarted at 1, the retained state says 7.
    term = Term("replica-a", 1)
    stored = RetainedState(claim=Claim("replica-b", 7))
    assert isinstance(decide_claim(stored, term), Refusal)
    lifted = reclaim_epoch(stored, term, LeaderView("replica-a", 1))
    assert lifted == 8
    # Not while another holder or epoch is on the leader Lease.
    assert isinstance(reclaim_epoch(stored, term, LeaderView("replica-b", 1)), Refusal)
    assert isinstance(reclaim_epoch(stored, term, LeaderView("replica-a", 2)), Refusal)
    # Once lifted, the claim goes through and the intent survives.
    assert isinstance(decide_claim(stored, Term("replica-a", 8)), RetainedState)


def test_annotations_round_trip_and_garbage_is_ignored() -> None:
    intent = DeploymentIntent("plan-1", "sha256:1", "replica-a", 4, UID)
    annotations = {
        CLAIM_ANNOTATION: claim_annotation(Claim("replica-a", 4)),
        INTENT_ANNOTATION: intent_annotation(intent, "2026-01-01T00:00:00Z"),
    }
    state = retained_state_from_annotations(annotations)
    assert state == RetainedState(claim=Claim("replica-a", 4), intent=intent)
    broken = retained_state_from_annotations({CLAIM_ANNOTATION: "{", INTENT_ANNOTATION: "[]"})
    assert broken == RetainedState()


def test_leader_view_reads_holder_and_epoch() -> None:
    lease = {
        "metadata": {"annotations": {"haproxy-haptic.org/epoch": "12"}},
        "spec": {"holderIdentity": "replica-a"},
    }
    assert leader_view_from_lease(lease) == LeaderView("replica-a", 12)
    released = {"metadata": {"annotations": {"haproxy-haptic.org/epoch": "12"}}, "spec": {}}
    assert leader_view_from_lease(released).released


# -- upgrade: the copy an earlier release left on the leader-election Lease -----------------


def test_legacy_copy_with_a_plan_supersedes_the_retained_intent() -> None:
    retained = DeploymentIntent("plan-old", "sha256:old", "a", 3, UID)
    copy = intent_annotation(DeploymentIntent("plan-new", "sha256:new", "a", 3, UID), "t")
    result = adopt_legacy_copy(RetainedState(intent=retained), copy, UID)
    assert result.adopted and result.remove_copy
    assert result.intent is not None and result.intent.plan_id == "plan-new"


def test_legacy_copy_without_a_plan_preserves_and_unreadable_adopts_nothing() -> None:
    retained = DeploymentIntent("plan-old", "sha256:old", "a", 3, UID)
    for raw in ('{"holder": "a", "epoch": 3}', "not json"):
        result = adopt_legacy_copy(RetainedState(intent=retained), raw, UID)
        assert result.remove_copy and not result.adopted
        assert result.intent == retained


def test_legacy_copy_of_another_template_is_dropped() -> None:
    copy = intent_annotation(DeploymentIntent("p", "c", "a", 3, "other-uid"), "t")
    result = adopt_legacy_copy(RetainedState(), copy, UID)
    assert result.remove_copy and not result.adopted and result.intent is None


def test_an_adopted_copy_is_never_adopted_again() -> None:
    copy = intent_annotation(DeploymentIntent("plan-legacy", "sha256:l", "a", 3, UID), "t")
    first = adopt_legacy_copy(RetainedState(), copy, UID)
    assert first.adopted and first.state.adopted_copy is not None
    # Its removal failed; the term then recorded a newer intent.
    newer = DeploymentIntent("plan-new", "sha256:n", "b", 4, UID)
    again = adopt_legacy_copy(replace(first.state, intent=newer), copy, UID)
    assert again.remove_copy and not again.adopted and again.intent == newer
    # A different copy (an older release deployed again since) is adopted.
    other = intent_annotation(DeploymentIntent("plan-other", "sha256:o", "a", 5, UID), "t")
    assert adopt_legacy_copy(again.state, other, UID).adopted


def test_a_mirrored_intent_is_a_floor_the_claim_consumes() -> None:
    floor = DeploymentIntent("plan-p", "sha256:p", "active", 7, UID)
    adopted = adopt_mirrored_intent(RetainedState(mirrored_intent=floor), UID)
    assert adopted.intent == floor and adopted.mirrored_intent is None
    older = DeploymentIntent("plan-o", "sha256:o", "active", 5, UID)
    stored = RetainedState(intent=older, mirrored_intent=floor)
    assert adopt_mirrored_intent(stored, UID).intent == floor
    own = DeploymentIntent("plan-q", "sha256:q", "standby", 9, UID)
    kept = adopt_mirrored_intent(RetainedState(intent=own, mirrored_intent=floor), UID)
    assert kept.intent == own and kept.mirrored_intent is None
    foreign = replace(floor, template_uid="other")
    assert adopt_mirrored_intent(RetainedState(mirrored_intent=foreign), UID).intent is None


def test_no_legacy_copy_changes_nothing() -> None:
    result = adopt_legacy_copy(RetainedState(), None, UID)
    assert not result.remove_copy and result.intent is None


# -- interleavings of a deposed term's record with its successor's takeover ---------------


@dataclass
class World:
    """Two objects with resourceVersions, as the API server holds them."""

    leader: LeaderView
    retained: RetainedState
    retained_rv: int = 0
    log: list[str] = field(default_factory=list)


def _old_term_steps(world: World, plan: str) -> list:
    seen: dict[str, object] = {}

    def read_and_decide() -> None:
        seen["rv"] = world.retained_rv
        seen["decision"] = decide_record(
            world.retained, OLD, plan, f"sha256:{plan}", UID, world.leader
        )

    def write() -> None:
        decision = seen["decision"]
        if isinstance(decision, Refusal) or seen["rv"] != world.retained_rv:
            seen["written"] = False
            return
        world.retained = decision
        world.retained_rv += 1
        seen["written"] = True
        world.log.append("old-wrote")

    def second_read() -> None:
        if seen.get("written") and confirm_after_write(world.leader, OLD) is None:
            world.log.append("old-applied")

    return [read_and_decide, write, second_read]


def _successor_steps(world: World) -> list:
    seen: dict[str, object] = {}

    def bump_epoch() -> None:
        world.leader = LeaderView(NEW.holder, NEW.epoch)
        world.log.append("new-bumped")

    def read_and_decide_claim() -> None:
        seen["rv"] = world.retained_rv
        seen["decision"] = decide_claim(world.retained, NEW)

    def write_claim() -> None:
        decision = seen["decision"]
        if isinstance(decision, Refusal) or seen["rv"] != world.retained_rv:
            # Lost the compare-and-swap: re-read and retry once, as the adapter does.
            decision = decide_claim(world.retained, NEW)
            assert isinstance(decision, RetainedState)
        world.retained = decision
        world.retained_rv += 1
        world.log.append("new-claimed")

    return [bump_epoch, read_and_decide_claim, write_claim]


@given(st.lists(st.booleans(), min_size=6, max_size=6))
def test_a_deposed_term_never_applies_after_its_successor_and_never_loses_an_intent(
    order: list[bool],
) -> None:
    previous = DeploymentIntent("plan-1", "sha256:plan-1", OLD.holder, OLD.epoch, UID)
    world = World(
        leader=LeaderView(OLD.holder, OLD.epoch),
        retained=RetainedState(claim=Claim(OLD.holder, OLD.epoch), intent=previous),
    )
    old_steps = _old_term_steps(world, "plan-2")
    new_steps = _successor_steps(world)
    # Merge the two step sequences in the order the booleans choose (True = old term).
    for pick_old in order:
        queue = old_steps if (pick_old and old_steps) or not new_steps else new_steps
        queue.pop(0)()
    for step in old_steps + new_steps:
        step()

    log = world.log
    assert world.retained.claim == Claim(NEW.holder, NEW.epoch)
    if "old-applied" in log:
        # Applying is allowed only when the whole record happened before the takeover began.
        assert log.index("old-applied") < log.index("new-bumped")
    if "old-wrote" in log:
        # A write that landed is never lost: the successor's claim preserves it.
        assert log.index("old-wrote") < log.index("new-claimed")
        assert world.retained.intent is not None
        assert world.retained.intent.plan_id == "plan-2"
    else:
        assert world.retained.intent == previous


def test_delayed_record_after_the_successors_claim_is_refused() -> None:
    stored = RetainedState(claim=Claim(NEW.holder, NEW.epoch))
    # The deposed term still believes the leader Lease names it (a stale read).
    decision = decide_record(stored, OLD, "plan-x", "sha256:x", UID, LeaderView(OLD.holder, 4))
    assert isinstance(decision, Refusal)


def test_delayed_claim_of_an_older_term_is_refused() -> None:
    stored = RetainedState(claim=Claim(NEW.holder, NEW.epoch))
    assert isinstance(decide_claim(stored, OLD), Refusal)


# -- a Standby's floor: the mirror carries, claims adopt, the promoted side records -------

STANDBY = "standby-0"


@given(
    st.lists(
        st.sampled_from(["active_records", "mirror_carries", "claim", "promote", "own_record"]),
        max_size=30,
    )
)
def test_the_floor_is_never_older_than_what_was_carried_and_never_replaces_an_own_intent(
    steps: list[str],
) -> None:
    """Every interleaving of the Active recording, the mirror carrying its latest intent, the
    Standby's claims, the promotion (the mirror stops, epochs rise above the Active's) and
    the promoted side's own records. After a claim the intent is never older than the last
    floor carried; the promoted side's own intent is never replaced by a floor."""
    active_epoch, active_seq = 3, 0
    active_intent: DeploymentIntent | None = None
    state = RetainedState()
    standby_epoch, promoted = 1, False
    carried: DeploymentIntent | None = None
    own: DeploymentIntent | None = None
    for step in steps:
        if step == "active_records" and not promoted:
            active_seq += 1
            active_intent = DeploymentIntent(
                f"plan-a{active_seq}", f"sha256:a{active_seq}", "active", active_epoch, UID
            )
        elif step == "mirror_carries" and not promoted and active_intent is not None:
            if state.intent != active_intent:  # as the mirror: skip what a claim adopted
                state = replace(state, mirrored_intent=active_intent)
                carried = active_intent
        elif step == "promote" and not promoted:
            promoted, standby_epoch = True, max(standby_epoch, active_epoch) + 1
        elif step == "claim":
            standby_epoch += 1
            claimed = decide_claim(state, Term(STANDBY, standby_epoch))
            assert isinstance(claimed, RetainedState)
            state = adopt_mirrored_intent(claimed, UID)
            assert state.mirrored_intent is None
            if own is not None:
                assert state.intent == own, "a floor replaced the promoted side's own intent"
            elif carried is not None:
                assert state.intent is not None and state.intent.epoch >= carried.epoch
                assert state.intent == carried
        elif step == "own_record" and promoted:
            term = Term(STANDBY, standby_epoch)
            leader = LeaderView(STANDBY, standby_epoch)
            plan = f"plan-b{standby_epoch}"
            decision = decide_record(state, term, plan, "sha256:b", UID, leader)
            if isinstance(decision, RetainedState):
                state, own = decision, decision.intent


def test_another_holders_claim_at_the_same_epoch_means_the_counter_regressed() -> None:
    """Found by the term model (tests/term): a leader Lease recreated at the stored claim's
    epoch let a second holder share that epoch; it must Reclaim above it instead."""
    from controller.retained.intent import claim_outranks

    stored = RetainedState(claim=Claim("replica-1", 1), intent=None)
    newcomer = Term("replica-2", 1)
    assert claim_outranks(stored.claim, newcomer)
    assert isinstance(decide_claim(stored, newcomer), Refusal)
    leader = LeaderView(holder="replica-2", epoch=1)
    assert reclaim_epoch(stored, newcomer, leader) == 2
    # The same term claiming again, or a later term, is no regression.
    assert not claim_outranks(stored.claim, Term("replica-1", 1))
    assert not claim_outranks(stored.claim, Term("replica-2", 2))
    assert decide_claim(stored, Term("replica-2", 2)) == RetainedState(
        claim=Claim("replica-2", 2), intent=None
    )
