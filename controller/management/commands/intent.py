"""python manage.py intent: the deployment intent, the term claim and the leader Lease."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

from contract import CFG_PLURAL

from ._ops import (
    CLAIM_ANNOTATION,
    EPOCH_ANNOTATION,
    INTENT_ANNOTATION,
    LEADER_LEASE,
    KubeCommand,
    parse_json_annotation,
    short,
)


def _age(when: datetime | None) -> str:
    if when is None:
        return "-"
    seconds = (datetime.now(UTC) - when).total_seconds()
    return f"{when.isoformat()} ({seconds:.1f}s ago)"


class Command(KubeCommand):
    help = (
        "Show the durable deployment intent and the term claim recorded on the retained-state "
        "Lease <template>-retained-state (ADR-0033), the leader-election Lease haptic-leader "
        "(holder, fencing epoch, renewals), and whether the intent names a retained "
        "checkpoint. Also reports an intent left on the leader Lease by an earlier release."
    )

    def handle(self, *args: Any, **options: Any) -> None:
        self.setup(options)
        retained_name = f"{self.template}-retained-state"
        retained = self.lease(retained_name)
        leader = self.lease(LEADER_LEASE)
        ordinary = self.custom_get(CFG_PLURAL, self.template)
        pointers = ((ordinary or {}).get("status") or {}).get("retainedConfigs") or []

        r_ann = (retained.metadata.annotations if retained else None) or {}
        l_ann = (leader.metadata.annotations if leader else None) or {}
        intent = parse_json_annotation(r_ann, INTENT_ANNOTATION)
        claim = parse_json_annotation(r_ann, CLAIM_ANNOTATION)
        legacy = parse_json_annotation(l_ann, INTENT_ANNOTATION)
        epoch = l_ann.get(EPOCH_ANNOTATION)
        named = None
        if isinstance(intent, dict):
            named = next((p for p in pointers if p.get("checksum") == intent.get("checksum")), None)
        leader_info = None
        if leader is not None:
            spec = leader.spec
            leader_info = {
                "holder": spec.holder_identity,
                "epoch": epoch,
                "acquireTime": spec.acquire_time,
                "renewTime": spec.renew_time,
                "leaseDurationSeconds": spec.lease_duration_seconds,
                "leaseTransitions": spec.lease_transitions,
            }
        if self.as_json:
            self.emit_json(
                {
                    "retainedStateLease": retained_name if retained else None,
                    "intent": intent,
                    "claim": claim,
                    "legacyIntentOnLeaderLease": legacy,
                    "leader": leader_info,
                    "intentCheckpoint": named,
                }
            )
            return
        out = self.stdout.write
        out(f"leader Lease {self.namespace}/{LEADER_LEASE}:")
        if leader_info is None:
            out("  none (no controller has run in this namespace)")
        else:
            out(f"  holder      {leader_info['holder'] or '- (released)'}")
            out(f"  epoch       {epoch or '-'}")
            out(f"  acquired    {_age(leader_info['acquireTime'])}")
            out(f"  renewed     {_age(leader_info['renewTime'])}")
            out(
                f"  duration    {leader_info['leaseDurationSeconds'] or '-'}s, "
                f"transitions {leader_info['leaseTransitions'] or 0}"
            )
        out(f"\nretained-state Lease {self.namespace}/{retained_name}:")
        if retained is None:
            out("  none (created with the first deployment intent)")
        out("  claim       " + _describe(claim, ("holder", "epoch", "claimedAt")))
        if isinstance(intent, dict):
            out(
                f"  intent      plan {short(intent.get('planID'))}  checksum "
                f"{short(intent.get('checksum'))}"
            )
            out(
                f"              by {intent.get('holder')} epoch {intent.get('epoch')} at "
                f"{intent.get('recordedAt')}, template uid {intent.get('templateUID')}"
            )
            if named:
                out(f"  checkpoint  {named.get('name')} (retained, uid {named.get('uid')})")
            else:
                out("  checkpoint  none retained for this checksum yet")
        else:
            out("  intent      none recorded")
        if legacy is not None:
            out(
                "\nleader Lease also carries an intent from an earlier release: "
                + _describe(legacy, ("planID", "checksum", "holder", "epoch"))
            )


def _describe(value: Any, keys: tuple[str, ...]) -> str:
    if not isinstance(value, dict):
        return "none" if value is None else str(value)
    return ", ".join(f"{k} {value.get(k, '-')}" for k in keys)
