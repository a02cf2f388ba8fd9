"""Deployment intent and term claims on the retained-state Lease (ADR-0033), as pure decisions.

The retained-state Lease (owned by the HAProxyTemplateConfig) carries two annotations:
the term's claim `{holder, epoch}` and the deployment intent `{planID, checksum, holder,
epoch, templateUID}`. The leader-election Lease carries the fencing epoch. Writers compare
and swap on resourceVersion; these functions decide what to write, or why not to.

Ordering that makes it safe (seed, "Deployment intent storage"): a new term bumps the epoch
on the leader-election Lease before it claims the retained-state Lease; a record requires this
term's claim and reads the leader-election Lease before and after the write.
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass, replace
from typing import Any

from contract import (
    ADOPTED_COPY_ANNOTATION,
    CLAIM_ANNOTATION,
    EPOCH_ANNOTATION,
    INTENT_ANNOTATION,
    MIRRORED_INTENT_ANNOTATION,
    InvalidEpoch,
    parse_epoch,
)

__all__ = [
    "ADOPTED_COPY_ANNOTATION",
    "CLAIM_ANNOTATION",
    "EPOCH_ANNOTATION",
    "INTENT_ANNOTATION",
    "MIRRORED_INTENT_ANNOTATION",
]


@dataclass(frozen=True)
class Term:
    """A leadership term: who leads, under which fencing epoch. The one (holder, epoch)
    value of the retained state: a claim is the term recorded on the retained-state Lease."""

    holder: str
    epoch: int


# The claim on the retained-state Lease: the term that holds the writer identity.
Claim = Term


@dataclass(frozen=True)
class DeploymentIntent:
    plan_id: str
    checksum: str
    holder: str
    epoch: int
    template_uid: str

    def names(self, plan_id: str, checksum: str) -> bool:
        return self.plan_id == plan_id and self.checksum == checksum


@dataclass(frozen=True)
class RetainedState:
    """What the retained-state Lease holds (parsed from its annotations)."""

    claim: Claim | None = None
    intent: DeploymentIntent | None = None
    adopted_copy: str | None = None  # digest of the legacy copy adopted last
    mirrored_intent: DeploymentIntent | None = None  # the Active's, not yet adopted


@dataclass(frozen=True)
class LeaderView:
    """The leader-election Lease as read: holder and fencing epoch."""

    holder: str | None
    epoch: int | None
    released: bool = False


@dataclass(frozen=True)
class Refusal:
    reason: str


# -- parsing and formatting -------------------------------------------------------------


def parse_claim(raw: str | None) -> Claim | None:
    data = _json_object(raw)
    if data is None:
        return None
    try:
        return Claim(holder=str(data["holder"]), epoch=int(data["epoch"]))
    except (KeyError, TypeError, ValueError):
        return None


def parse_intent(raw: str | None) -> DeploymentIntent | None:
    """Parse an intent annotation; None when absent or unreadable (an unreadable intent
    adopts no plan)."""
    data = _json_object(raw)
    if data is None:
        return None
    try:
        intent = DeploymentIntent(
            plan_id=str(data["planID"]),
            checksum=str(data["checksum"]),
            holder=str(data.get("holder", "")),
            epoch=int(data.get("epoch", 0)),
            template_uid=str(data.get("templateUID", "")),
        )
    except (KeyError, TypeError, ValueError):
        return None
    return intent if intent.plan_id and intent.checksum else None


def retained_state_from_annotations(annotations: dict[str, str] | None) -> RetainedState:
    annotations = annotations or {}
    return RetainedState(
        claim=parse_claim(annotations.get(CLAIM_ANNOTATION)),
        intent=parse_intent(annotations.get(INTENT_ANNOTATION)),
        adopted_copy=annotations.get(ADOPTED_COPY_ANNOTATION) or None,
        mirrored_intent=parse_intent(annotations.get(MIRRORED_INTENT_ANNOTATION)),
    )


def legacy_copy_digest(raw: str) -> str:
    return "sha256:" + hashlib.sha256(raw.encode()).hexdigest()


def claim_annotation(claim: Claim) -> str:
    return json.dumps({"holder": claim.holder, "epoch": claim.epoch}, sort_keys=True)


def intent_annotation(intent: DeploymentIntent, recorded_at: str) -> str:
    return json.dumps(
        {
            "planID": intent.plan_id,
            "checksum": intent.checksum,
            "holder": intent.holder,
            "epoch": intent.epoch,
            "templateUID": intent.template_uid,
            "recordedAt": recorded_at,
        },
        sort_keys=True,
    )


def leader_view_from_lease(lease: dict[str, Any] | None) -> LeaderView:
    """Holder and epoch of a leader-election Lease given as a plain dict."""
    if not lease:
        return LeaderView(holder=None, epoch=None, released=True)
    metadata = lease.get("metadata") or {}
    spec = lease.get("spec") or {}
    raw_epoch = (metadata.get("annotations") or {}).get(EPOCH_ANNOTATION)
    try:
        epoch = parse_epoch(raw_epoch) if raw_epoch is not None else None
    except InvalidEpoch:
        epoch = None  # unknown: no term is confirmed against it
    holder = spec.get("holderIdentity") or spec.get("holder_identity") or None
    return LeaderView(holder=holder, epoch=epoch, released=holder is None)


def _json_object(raw: str | None) -> dict[str, Any] | None:
    if not raw:
        return None
    try:
        data = json.loads(raw)
    except (TypeError, ValueError):
        return None
    return data if isinstance(data, dict) else None


# -- decisions -------------------------------------------------------------------------


def leader_names_term(view: LeaderView, term: Term) -> bool:
    """The leader-election Lease still names this holder at this epoch."""
    return not view.released and view.holder == term.holder and view.epoch == term.epoch


def claim_outranks(claim: Claim | None, term: Term) -> bool:
    """Does a stored claim stand at or above `term` without being `term` itself?

    The elector raises the epoch once per term, atomically with the acquisition, so two
    holders never share an epoch on one leader Lease. A stored claim above the term's epoch,
    or another holder's claim at the same epoch, therefore means the leader-election Lease
    was recreated and its counter regressed (docs/design/retained-checkpoints.md, Reclaim).
    """
    if claim is None:
        return False
    return claim.epoch > term.epoch or (claim.epoch == term.epoch and claim.holder != term.holder)


def decide_claim(stored: RetainedState, term: Term) -> RetainedState | Refusal:
    """A new term claims the writer identity, preserving the last deployment intent.

    A stored claim that outranks the term (`claim_outranks`) means the leader-election Lease
    was recreated and its counter regressed: the caller must Reclaim (lift the epoch) first.
    """
    if claim_outranks(stored.claim, term):
        assert stored.claim is not None
        return Refusal(
            f"stored claim {stored.claim.holder}@{stored.claim.epoch} outranks term "
            f"{term.holder}@{term.epoch}: reclaim"
        )
    if stored.claim == term:
        return stored
    return replace(stored, claim=term)


def reclaim_epoch(stored: RetainedState, term: Term, leader: LeaderView) -> int | Refusal:
    """The epoch to lift the leader-election Lease to after its counter regressed.

    Only while the leader-election Lease names this holder at the epoch it claimed, as for
    an outranking pod; the new epoch is one above the stored one.
    """
    if not leader_names_term(leader, term):
        return Refusal("leader-election Lease no longer names this term")
    if stored.claim is None or not claim_outranks(stored.claim, term):
        return Refusal("no outranking stored claim: nothing to reclaim")
    return stored.claim.epoch + 1


def decide_record(
    stored: RetainedState,
    term: Term,
    plan_id: str,
    checksum: str,
    template_uid: str,
    leader_before: LeaderView,
    only_if_named: bool = False,
) -> RetainedState | Refusal:
    """Record the intent to deploy (plan_id, checksum) before the first agent apply.

    Requires this term's claim on the retained-state Lease and the leader-election Lease
    naming this holder and epoch (read before the write; the caller reads it again after
    and refuses the apply if it changed). `only_if_named` (recovery) re-stamps an intent
    that already names this output and never replaces one a newer render recorded.
    """
    if not leader_names_term(leader_before, term):
        return Refusal("leader-election Lease does not name this term before the write")
    if stored.claim != term:
        return Refusal("retained-state Lease is claimed by another term")
    if only_if_named and (stored.intent is None or not stored.intent.names(plan_id, checksum)):
        return Refusal("the intent names another output: a newer record stands")
    intent = DeploymentIntent(plan_id, checksum, term.holder, term.epoch, template_uid)
    if stored.intent == intent:
        return stored
    return replace(stored, intent=intent)


def confirm_after_write(leader_after: LeaderView, term: Term) -> Refusal | None:
    """The second leadership read: a takeover or epoch increment since the write refuses the
    apply (the successor preserves the intent; it can only delay recovery)."""
    if not leader_names_term(leader_after, term):
        return Refusal("leader-election Lease changed during the intent write")
    return None


@dataclass(frozen=True)
class LegacyAdoption:
    """What a claim does with a copy an earlier release left on the leader-election Lease."""

    state: RetainedState  # what the claim writes to the retained-state Lease
    remove_copy: bool
    adopted: bool

    @property
    def intent(self) -> DeploymentIntent | None:
        return self.state.intent


def adopt_legacy_copy(
    stored: RetainedState, copy_raw: str | None, template_uid: str
) -> LegacyAdoption:
    """Upgrade path (seed, "Upgrade"): every claim removes the copy; a present copy was
    written after the last claim by an older leader. A valid copy with a plan for the same
    template supersedes the retained intent; a copy with no plan preserves it; an unreadable
    copy adopts no plan.

    The seed's premise fails when a removal fails (a renewal raced it): the copy then
    outlives its claim. The adopting claim records the copy's digest in the same write, so
    the copy a claim adopted is never adopted again over a newer intent, only removed."""
    if copy_raw is None:
        return LegacyAdoption(stored, remove_copy=False, adopted=False)
    digest = legacy_copy_digest(copy_raw)
    copy = parse_intent(copy_raw)
    if (
        copy is None
        or (copy.template_uid and copy.template_uid != template_uid)
        or stored.adopted_copy == digest
    ):
        return LegacyAdoption(stored, remove_copy=True, adopted=False)
    adopted = replace(copy, template_uid=copy.template_uid or template_uid)
    return LegacyAdoption(
        replace(stored, intent=adopted, adopted_copy=digest), remove_copy=True, adopted=True
    )


def adopt_mirrored_intent(stored: RetainedState, template_uid: str) -> RetainedState:
    """Cross-cluster promotion (seed 004 with ADR-0033): the Active's last intent, mirrored
    here, is a floor the claim adopts, so the promoted side never recovers a checkpoint
    older than what the Active last promised. The claim consumes it (the annotation goes in
    the same write). An intent of this side's own, recorded at a higher epoch, is newer and
    is kept: this side records only after a promotion, and its epochs are then above every
    epoch of the Active. A floor for another template adopts nothing."""
    floor = stored.mirrored_intent
    if floor is None:
        return stored
    consumed = replace(stored, mirrored_intent=None)
    if floor.template_uid != template_uid:
        return consumed
    if stored.intent is not None and stored.intent.epoch > floor.epoch:
        return consumed
    return replace(consumed, intent=floor)
