"""The retained-state Lease and the reads of the leader-election Lease (ADR-0033 adapter).

Claims and intent records are compare-and-swaps on the retained-state Lease (owned by the
HAProxyTemplateConfig); only the elector writes the leader-election Lease, except Reclaim
after its counter regressed and removal of the copy an earlier release left there.
Every request is bounded by a timeout.
"""

from __future__ import annotations

import json
import logging
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

from kubernetes import client
from kubernetes.client.exceptions import ApiException

from contract import format_epoch
from controller.retained.checkpoint import TemplateRef
from controller.retained.intent import (
    ADOPTED_COPY_ANNOTATION,
    CLAIM_ANNOTATION,
    EPOCH_ANNOTATION,
    INTENT_ANNOTATION,
    MIRRORED_INTENT_ANNOTATION,
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

log = logging.getLogger(__name__)

CAS_ATTEMPTS = 5


class IntentRefused(Exception):
    """The intent could not be recorded for this term: the apply must not happen."""


def retained_lease_name(template_name: str) -> str:
    return f"{template_name}-retained-state"


def _now() -> str:
    return datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%S.%fZ")


@dataclass(frozen=True)
class ClaimResult:
    term: Term  # the epoch may have been lifted by Reclaim
    state: RetainedState
    adopted_legacy_intent: bool
    # An earlier release's copy is still on the leader-election Lease: its removal failed.
    # It is already adopted (state.adopted_copy); a later claim only removes it.
    legacy_copy_pending: bool = False


def _retained_state(lease: dict[str, Any]) -> RetainedState:
    return retained_state_from_annotations((lease.get("metadata") or {}).get("annotations") or {})


class RetainedStateStore:
    def __init__(
        self,
        api_client: client.ApiClient,
        template: TemplateRef,
        leader_lease_name: str,
        leader_namespace: str | None = None,
        timeout: float = 5.0,
    ) -> None:
        self._api = client.CoordinationV1Api(api_client)
        self.template = template
        self.leader_lease_name = leader_lease_name
        self.leader_namespace = leader_namespace or template.namespace
        self.name = retained_lease_name(template.name)
        self.timeout = timeout
        # The retained-state Lease as this store last read or wrote it. An intent record
        # writes on it without reading first: the write is a compare-and-swap on its
        # resourceVersion, so a Lease anyone wrote since answers 409 and is read again
        # (docs/design/retained-checkpoints.md, "Deployment intent").
        self._retained: dict[str, Any] | None = None

    # -- reads ---------------------------------------------------------------------------

    def _read(self, name: str, namespace: str) -> dict[str, Any] | None:
        try:
            # The Lease as the server's JSON: every intent record reads the leader Lease
            # twice, and the client's model round trip cost more than the request (issue 19).
            answer = self._api.read_namespaced_lease(
                name, namespace, _request_timeout=self.timeout, _preload_content=False
            )
        except ApiException as exc:
            if exc.status == 404:
                return None
            raise
        return json.loads(answer.data)

    def read_leader(self) -> tuple[LeaderView, dict[str, Any] | None]:
        lease = self._read(self.leader_lease_name, self.leader_namespace)
        return leader_view_from_lease(lease), lease

    def read_retained(self) -> tuple[RetainedState, dict[str, Any]]:
        """The retained state and its Lease, created (owned by the template) when missing."""
        lease = self._read(self.name, self.template.namespace)
        if lease is None:
            body = {
                "apiVersion": "coordination.k8s.io/v1",
                "kind": "Lease",
                "metadata": {
                    "name": self.name,
                    "namespace": self.template.namespace,
                    "ownerReferences": [self.template.owner_reference()],
                    "annotations": {},
                },
                "spec": {},
            }
            try:
                created = self._api.create_namespaced_lease(
                    self.template.namespace,
                    body,
                    _request_timeout=self.timeout,
                    _preload_content=False,
                )
                lease = json.loads(created.data)
            except ApiException as exc:
                if exc.status != 409:
                    raise
                lease = self._read(self.name, self.template.namespace)
                assert lease is not None
        self._retained = lease
        return _retained_state(lease), lease

    def read_intent(self) -> DeploymentIntent | None:
        """For recovery and the drain check: read the intent before the leader Lease.
        A read only: a missing Lease holds no intent, and only a claim creates it."""
        lease = self._read(self.name, self.template.namespace)
        if lease is None:
            return None
        annotations = (lease.get("metadata") or {}).get("annotations") or {}
        return retained_state_from_annotations(annotations).intent

    # -- writes --------------------------------------------------------------------------

    def _write_retained(self, lease: dict[str, Any], state: RetainedState) -> None:
        body = dict(lease)
        metadata = dict(body["metadata"])
        annotations = dict(metadata.get("annotations") or {})
        if state.claim is not None:
            annotations[CLAIM_ANNOTATION] = claim_annotation(state.claim)
        if state.adopted_copy is not None:
            annotations[ADOPTED_COPY_ANNOTATION] = state.adopted_copy
        if state.mirrored_intent is None:
            annotations.pop(MIRRORED_INTENT_ANNOTATION, None)  # adopted or dropped
        stored = retained_state_from_annotations(annotations)
        if state.intent is not None and state.intent != stored.intent:
            # Rewritten only when it changes, so recordedAt says when this intent was recorded.
            annotations[INTENT_ANNOTATION] = intent_annotation(state.intent, _now())
        metadata["annotations"] = annotations
        body["metadata"] = metadata
        try:
            written = self._api.replace_namespaced_lease(
                self.name,
                self.template.namespace,
                body,
                _request_timeout=self.timeout,
                _preload_content=False,
            )
        except ApiException:
            self._retained = None
            raise
        self._retained = json.loads(written.data)

    def claim(self, term: Term) -> ClaimResult:
        """Claim the writer identity for `term`, preserving the last intent; Reclaim when the
        leader-election Lease was recreated; adopt and remove an earlier release's copy."""
        for _ in range(CAS_ATTEMPTS):
            stored, lease = self.read_retained()
            leader, leader_lease = self.read_leader()
            decision = decide_claim(stored, term)
            if isinstance(decision, Refusal):
                lifted = reclaim_epoch(stored, term, leader)
                if isinstance(lifted, Refusal):
                    raise IntentRefused(f"claim refused: {decision.reason}; {lifted.reason}")
                term = self._lift_epoch(leader_lease, term, lifted)
                continue
            copy_raw = ((leader_lease or {}).get("metadata") or {}).get("annotations", {}) or {}
            adoption = adopt_legacy_copy(
                decision, copy_raw.get(INTENT_ANNOTATION), self.template.uid
            )
            new_state = adopt_mirrored_intent(adoption.state, self.template.uid)
            try:
                if new_state != stored:
                    self._write_retained(lease, new_state)
            except ApiException as exc:
                if exc.status == 409:
                    continue
                raise
            pending = False
            if adoption.remove_copy and leader_lease is not None:
                # Only after the intent (and the copy's digest) is safe on the retained Lease.
                pending = not self._remove_legacy_copy(leader_lease, term)
            return ClaimResult(term, new_state, adoption.adopted, pending)
        raise IntentRefused("claim lost the compare-and-swap race repeatedly")

    def _lift_epoch(self, leader_lease: dict[str, Any] | None, term: Term, epoch: int) -> Term:
        assert leader_lease is not None
        body = dict(leader_lease)
        metadata = dict(body["metadata"])
        metadata["annotations"] = {
            **(metadata.get("annotations") or {}),
            EPOCH_ANNOTATION: format_epoch(epoch),
        }
        body["metadata"] = metadata
        try:
            self._api.replace_namespaced_lease(
                self.leader_lease_name, self.leader_namespace, body, _request_timeout=self.timeout
            )
        except ApiException as exc:
            raise IntentRefused(f"reclaim failed: HTTP {exc.status}") from exc
        log.warning("reclaimed epoch %d after the leader Lease counter regressed", epoch)
        return Term(term.holder, epoch)

    def _remove_legacy_copy(self, leader_lease: dict[str, Any], term: Term) -> bool:
        """Remove the copy by compare-and-swap on the leader-election Lease while it names
        this term; re-read after a conflict (a renewal raced us). True when it is gone."""
        for _ in range(CAS_ATTEMPTS):
            if confirm_after_write(leader_view_from_lease(leader_lease), term) is not None:
                return False
            body = dict(leader_lease)
            metadata = dict(body["metadata"])
            annotations = dict(metadata.get("annotations") or {})
            if annotations.pop(INTENT_ANNOTATION, None) is None:
                return True
            metadata["annotations"] = annotations
            body["metadata"] = metadata
            try:
                self._api.replace_namespaced_lease(
                    self.leader_lease_name,
                    self.leader_namespace,
                    body,
                    _request_timeout=self.timeout,
                )
                return True
            except ApiException as exc:
                if exc.status != 409:
                    break
            _, leader_lease = self.read_leader()
            if leader_lease is None:
                return True
        # Already adopted (its digest is on the retained-state Lease): a later claim removes
        # it and never adopts it again.
        log.warning("legacy intent copy not removed; a later claim removes it")
        return False

    def record_intent(
        self, term: Term, plan_id: str, checksum: str, only_if_named: bool = False
    ) -> DeploymentIntent:
        """Record the deployment intent before the first apply of an output, or refuse;
        `only_if_named`: only while the stored intent already names this output (recovery)."""
        known = None if only_if_named else self._retained
        for _ in range(CAS_ATTEMPTS):
            leader_before, _ = self.read_leader()
            from_copy = known is not None
            stored, lease = (_retained_state(known), known) if known else self.read_retained()
            known = None
            decision = decide_record(
                stored, term, plan_id, checksum, self.template.uid, leader_before, only_if_named
            )
            if from_copy and (isinstance(decision, Refusal) or decision == stored):
                continue  # decided on the copy alone: read the Lease itself
            if isinstance(decision, Refusal):
                raise IntentRefused(decision.reason)
            if decision != stored:
                try:
                    self._write_retained(lease, decision)
                except ApiException as exc:
                    if exc.status == 409:
                        continue
                    raise
            leader_after, _ = self.read_leader()
            refusal = confirm_after_write(leader_after, term)
            if refusal is not None:
                raise IntentRefused(refusal.reason)
            assert decision.intent is not None
            return decision.intent
        raise IntentRefused("intent record lost the compare-and-swap race repeatedly")
