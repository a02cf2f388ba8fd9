"""Idempotent writes of mirrored Kubernetes objects into PostgreSQL.

Each function takes a Kubernetes object (JSON dict) and upserts the rows
checkpoints.mapping derives from it. Rows are keyed by uid (or by a fingerprint of their
identifying values) and only overwritten by a newer resourceVersion, so replaying an event,
relisting, or two mirrors racing each other never duplicates or loses a row. Deletions only
mark rows collected.
"""

from __future__ import annotations

from typing import Any

from django.db import IntegrityError, transaction
from django.db.models import Q
from django.utils import timezone

from checkpoints import mapping
from checkpoints.models import (
    AuxiliaryObject,
    Checkpoint,
    CheckpointFile,
    DeploymentIntent,
    HubStatus,
    KubeEvent,
    LeadershipTerm,
    PodReceipt,
)


def _upsert_by_uid(model: type, row: dict[str, Any]) -> tuple[Any, bool]:
    """Create or update the row with row["uid"] if row's resourceVersion is newer.

    Returns (instance, changed). A reappearing uid clears the collected mark: the object
    exists again as far as the API server says.
    """
    with transaction.atomic():
        current = model.objects.select_for_update().filter(uid=row["uid"]).first()
        if current is None:
            try:
                with transaction.atomic():
                    return model.objects.create(**row), True
            except IntegrityError:
                # Another mirror inserted it between our read and our write.
                current = model.objects.select_for_update().get(uid=row["uid"])
        if not mapping.rv_newer(row["resource_version"], current.resource_version):
            return current, False
        for key, value in row.items():
            setattr(current, key, value)
        if hasattr(current, "collected"):
            current.collected = False
            current.collected_at = None
        current.save()
        return current, True


def _mark_collected(model: type, uid: str) -> int:
    return model.objects.filter(uid=uid, collected=False).update(
        collected=True, collected_at=timezone.now()
    )


# --- HAProxyCfg ---------------------------------------------------------------------------


def upsert_checkpoint(obj: dict[str, Any]) -> tuple[Checkpoint, bool]:
    """Store a checkpoint HAProxyCfg and its file rows."""
    row = mapping.checkpoint_row(obj)
    files = mapping.checkpoint_files(obj)
    with transaction.atomic():
        checkpoint, changed = _upsert_by_uid(Checkpoint, row)
        if changed:
            _sync_files(checkpoint, files)
    return checkpoint, changed


def _sync_files(checkpoint: Checkpoint, files: list[dict[str, Any]]) -> None:
    existing = {f.path: f for f in checkpoint.files.all()}
    for values in files:
        if values["kind"] not in ("config", "certificate") and values["content"] is None:
            values["content"] = _aux_content(values)
        current = existing.pop(values["path"], None)
        if current is None:
            CheckpointFile.objects.create(checkpoint=checkpoint, **values)
            continue
        if values["content"] is None and current.checksum == values["checksum"]:
            values["content"] = current.content
        for key, value in values.items():
            setattr(current, key, value)
        current.save()
    # A path the object no longer references: the checkpoint was rewritten. Rows are evidence
    # of what it held and are PROTECTed, so they stay; the detail shows the current set only
    # if the spec changed, which content-addressed checkpoints do not.
    for stale in existing.values():
        stale.delete()


def _aux_content(ref: dict[str, Any]) -> str | None:
    query = AuxiliaryObject.objects.filter(kind=ref["kind"])
    child = None
    if ref["object_uid"]:
        child = query.filter(uid=ref["object_uid"]).only("content").first()
    if child is None and ref["checksum"]:
        child = query.filter(checksum=ref["checksum"]).only("content").first()
    return child.content if child else None


def upsert_receipts(obj: dict[str, Any]) -> int:
    """Store every distinct receipt in status.deployedToPods; returns how many were new."""
    meta = obj.get("metadata") or {}
    rows = mapping.receipt_rows(obj)
    created = 0
    with transaction.atomic():
        for row in rows:
            receipt, was_created = PodReceipt.objects.get_or_create(
                fingerprint=row["fingerprint"], defaults=row
            )
            created += int(was_created)
            if not was_created and not receipt.current:
                receipt.current = True
                receipt.save(update_fields=["current", "last_seen_at"])
        PodReceipt.objects.filter(source_uid=meta.get("uid", ""), current=True).exclude(
            fingerprint__in=[r["fingerprint"] for r in rows]
        ).update(current=False)
    return created


def apply_haproxycfg(obj: dict[str, Any]) -> None:
    if mapping.haproxycfg_role(obj) == "checkpoint":
        _checkpoint, changed = upsert_checkpoint(obj)
        if changed:
            fill_missing_contents()
    upsert_receipts(obj)
    if mapping.haproxycfg_role(obj) == "published":
        _mark_promoted(obj)


def _mark_promoted(obj: dict[str, Any]) -> None:
    pointers = mapping.retained_pointers(obj)
    template_uid = (obj.get("spec") or {}).get("templateUID", "")
    scope = Checkpoint.objects.filter(namespace=(obj.get("metadata") or {}).get("namespace", ""))
    if template_uid:
        scope = scope.filter(template_uid=template_uid)
    scope.filter(uid__in=pointers, promoted=False).update(promoted=True)
    scope.filter(promoted=True).exclude(uid__in=pointers).update(promoted=False)


def delete_haproxycfg(obj: dict[str, Any]) -> None:
    uid = (obj.get("metadata") or {}).get("uid", "")
    if mapping.haproxycfg_role(obj) == "checkpoint":
        # Keep the last state the API server had before it removed the object.
        upsert_checkpoint(obj)
        _mark_collected(Checkpoint, uid)
    PodReceipt.objects.filter(source_uid=uid, current=True).update(current=False)


def relist_haproxycfgs(namespace: str, present: set[str]) -> int:
    """After a (re)list: objects the mirror had but the API server no longer has were deleted."""
    gone = Checkpoint.objects.filter(namespace=namespace, collected=False).exclude(uid__in=present)
    count = gone.update(collected=True, collected_at=timezone.now())
    PodReceipt.objects.filter(source_namespace=namespace, current=True).exclude(
        source_uid__in=present
    ).update(current=False)
    return count


# --- auxiliary children -------------------------------------------------------------------


def apply_auxiliary(obj: dict[str, Any]) -> None:
    row = mapping.auxiliary_row(obj)
    with transaction.atomic():
        child, _changed = _upsert_by_uid(AuxiliaryObject, row)
        # Content-addressed: every checkpoint file waiting for these bytes gets them.
        CheckpointFile.objects.filter(
            kind=row["kind"], checksum=row["checksum"], content__isnull=True
        ).update(content=child.content)


def fill_missing_contents() -> int:
    """Give checkpoint files the bytes of children mirrored concurrently with them."""
    filled = 0
    pending = CheckpointFile.objects.filter(
        content__isnull=True, kind__in=["map", "general", "crt-list"]
    )
    for f in pending.only("id", "kind", "checksum", "object_uid"):
        content = _aux_content({"kind": f.kind, "checksum": f.checksum, "object_uid": f.object_uid})
        if content is not None:
            filled += CheckpointFile.objects.filter(pk=f.pk, content__isnull=True).update(
                content=content
            )
    return filled


def delete_auxiliary(obj: dict[str, Any]) -> None:
    apply_auxiliary(obj)
    _mark_collected(AuxiliaryObject, (obj.get("metadata") or {}).get("uid", ""))


def relist_auxiliary(kind: str, namespace: str, present: set[str]) -> int:
    gone = AuxiliaryObject.objects.filter(kind=kind, namespace=namespace, collected=False)
    return gone.exclude(uid__in=present).update(collected=True, collected_at=timezone.now())


# --- Leases -------------------------------------------------------------------------------


def record_intent(row: dict[str, Any]) -> tuple[DeploymentIntent, bool]:
    try:
        with transaction.atomic():
            return DeploymentIntent.objects.get_or_create(
                fingerprint=row["fingerprint"], defaults=row
            )
    except IntegrityError:
        return DeploymentIntent.objects.get(fingerprint=row["fingerprint"]), False


def _term_order(row: dict[str, Any]) -> tuple[Q, Q]:
    """(newer, older) than this term: by fencing epoch, else by acquire time."""
    if row["epoch"] is not None:
        return Q(epoch__gt=row["epoch"]), Q(epoch__lt=row["epoch"]) | Q(epoch__isnull=True)
    if row["acquired_at"] is not None:
        return (
            Q(acquired_at__gt=row["acquired_at"]),
            Q(acquired_at__lt=row["acquired_at"]) | Q(acquired_at__isnull=True),
        )
    return Q(pk__in=[]), ~Q(pk__in=[])


def record_term(row: dict[str, Any], observed_at: Any = None) -> LeadershipTerm:
    """Store the Lease's current term and end the older open terms of the same Lease.

    Monotonic: replaying an older state (a lagging second mirror, a resumed watch) never
    reopens a term a newer one has ended, nor ends the newer one.
    """
    observed_at = observed_at or timezone.now()
    key = {k: row[k] for k in ("lease_namespace", "lease_name", "lease_uid", "holder", "epoch")}
    same_lease = LeadershipTerm.objects.filter(
        lease_namespace=row["lease_namespace"], lease_name=row["lease_name"]
    )
    newer, older = _term_order(row)
    with transaction.atomic():
        term = LeadershipTerm.objects.select_for_update().filter(**key).first()
        if term is None:
            try:
                with transaction.atomic():
                    term = LeadershipTerm.objects.create(**row)
            except IntegrityError:
                term = LeadershipTerm.objects.select_for_update().get(**key)
        renew = row["last_renew_at"]
        if renew and (term.last_renew_at is None or renew > term.last_renew_at):
            term.last_renew_at = renew
        if term.acquired_at is None:
            term.acquired_at = row["acquired_at"]
        superseded = same_lease.filter(newer).exclude(pk=term.pk).first()
        if superseded is not None:
            term.ended_at = term.ended_at or superseded.acquired_at or observed_at
        else:
            term.ended_at = None
        term.save()
        if superseded is None:
            same_lease.filter(older, ended_at__isnull=True).exclude(pk=term.pk).update(
                ended_at=row["acquired_at"] or observed_at
            )
    return term


def _open_terms(namespace: str, name: str) -> Any:
    return LeadershipTerm.objects.filter(
        lease_namespace=namespace, lease_name=name, ended_at__isnull=True
    )


def apply_lease(obj: dict[str, Any]) -> None:
    meta = obj.get("metadata") or {}
    if mapping.is_retained_state_lease(obj):
        row = mapping.intent_row(obj, "retained-state")
        if row:
            record_intent(row)
        return
    # A leader-election Lease: its term, and an intent an earlier release left on it.
    legacy = mapping.intent_row(obj, "leader-election")
    if legacy:
        record_intent(legacy)
    term = mapping.term_row(obj)
    if term:
        record_term(term)
        renew = term["last_renew_at"]
        if renew:
            HubStatus.objects.filter(namespace=meta.get("namespace", "")).update(
                lease_renew_time=renew
            )
    else:
        # Released (holderIdentity cleared): the terms acquired before the release ended.
        released = mapping.parse_time((obj.get("spec") or {}).get("renewTime"))
        ended = _open_terms(meta.get("namespace", ""), meta.get("name", ""))
        if released is not None:
            ended = ended.filter(Q(acquired_at__lte=released) | Q(acquired_at__isnull=True))
        ended.update(ended_at=released or timezone.now())


def delete_lease(obj: dict[str, Any]) -> None:
    apply_lease(obj)
    meta = obj.get("metadata") or {}
    _open_terms(meta.get("namespace", ""), meta.get("name", "")).update(ended_at=timezone.now())


def relist_leases(namespace: str, present_names: set[str]) -> int:
    gone = LeadershipTerm.objects.filter(lease_namespace=namespace, ended_at__isnull=True)
    return gone.exclude(lease_name__in=present_names).update(ended_at=timezone.now())


# --- Events and hub status ---------------------------------------------------------------


def apply_event(obj: dict[str, Any]) -> None:
    _upsert_by_uid(KubeEvent, mapping.event_row(obj))


def delete_event(obj: dict[str, Any]) -> None:
    apply_event(obj)
    _mark_collected(KubeEvent, (obj.get("metadata") or {}).get("uid", ""))


def relist_events(namespace: str, present: set[str]) -> int:
    gone = KubeEvent.objects.filter(namespace=namespace, collected=False).exclude(uid__in=present)
    return gone.update(collected=True, collected_at=timezone.now())


def relist_events_outside(namespace: str, present: set[str]) -> int:
    """Relist of the cluster-wide render-warning watch: rows outside the mirror's own
    namespace come only from it (the namespace's own watch relists the rest)."""
    gone = KubeEvent.objects.filter(collected=False).exclude(namespace=namespace)
    return gone.exclude(uid__in=present).update(collected=True, collected_at=timezone.now())


def apply_template_config(obj: dict[str, Any]) -> None:
    row = mapping.hub_row(obj)
    if not row["template_uid"]:
        return
    HubStatus.objects.update_or_create(
        template_uid=row["template_uid"],
        defaults={k: v for k, v in row.items() if k != "template_uid"},
    )
