"""Writes: create, replace, patch, apply, delete and bind, through admission (admission.py)
into the one commit (state.py)."""

from __future__ import annotations

import time
from typing import Any

from localcluster import builtin, schema, ssa
from localcluster.errors import STALE, ApiError, already_exists, conflict, invalid, not_found
from localcluster.patches import json_patch, merge_patch, strategic_merge
from localcluster.resources import ResourceType
from localcluster.selectors import FieldRequirement, Requirement
from localcluster.store import admission
from localcluster.store.model import CRD_KEY, NS_KEY, DeleteOptions, clone, now_iso
from localcluster.store.reads import Reads

# What kube-apiserver names in the details of a binding's Conflict (tests/fidelity: pod-bind-again).
BINDING_KIND = "pods/binding"


class Writes(Reads):
    def create(
        self,
        rt: ResourceType,
        ns: str,
        body: dict[str, Any],
        manager: str,
        dry_run: bool = False,
        managers: list[ssa.Manager] | None = None,
    ) -> dict[str, Any]:
        if not isinstance(body, dict):
            raise ApiError(400, "the body of the request must be an object")
        obj = clone(body)
        meta = obj.setdefault("metadata", {})
        if not isinstance(meta, dict):
            raise ApiError(400, "metadata must be an object")
        ns = admission.place_new(rt, ns, meta)
        name = admission.name_new(rt, meta)
        admission.check_namespace(rt, ns, self.objects.get(NS_KEY, {}).get(("", ns)))
        if (ns, name) in self.objects.get(rt.key, {}):
            raise already_exists(rt.plural, rt.group, name)
        admission.stamp_new(rt, obj)
        builtin.prepare_create(rt, obj)
        builtin.normalize(rt, obj)
        if rt.custom:
            if rt.status_subresource:
                obj.pop("status", None)
            obj = schema.apply_defaults(rt.schema, obj)
        if rt.kind == "Service" and admission.allocate_cluster_ip(obj, self._service_ips + 1):
            self._service_ips += 1
        if rt.key == CRD_KEY:
            admission.crd_status(obj)
        admission.validate(rt, obj)
        if managers is None:
            managers = ssa.record_update(
                None, obj, [], manager, "", rt.api_version, now_iso(), admission.shape(rt)
            )
        obj["metadata"]["managedFields"] = ssa.render_managed(managers)
        if dry_run:
            return obj
        return self._commit(rt, ns, name, None, obj)

    def _update(
        self,
        rt: ResourceType,
        ns: str,
        name: str,
        old: dict[str, Any],
        new: dict[str, Any],
        subresource: str,
        manager: str,
        dry_run: bool = False,
        managers: list[ssa.Manager] | None = None,
        binding: bool = False,
    ) -> dict[str, Any]:
        """The common tail of PUT, PATCH and apply: precondition, subresource rules,
        immutable metadata, defaults, validation, generation, managedFields, no-op detection."""
        new = admission.carry_over(rt, name, old, new, subresource)
        meta, old_meta = new["metadata"], old["metadata"]
        if rt.custom:
            new = schema.apply_defaults(rt.schema, new)
            meta = new["metadata"]
        if rt.key == CRD_KEY:
            new["status"] = old.get("status")
        builtin.normalize(rt, new)
        if subresource != "status" and not binding:
            causes = builtin.validate_update(rt, old, new)
            if causes:
                raise invalid(rt.kind, rt.group, name, causes)
        admission.validate(rt, new)
        if rt.generation and admission.generation_changes(rt, old, new):
            meta["generation"] = int(old_meta.get("generation", 1)) + 1
        if managers is None:
            managers = ssa.record_update(
                admission.without_managed(old),
                admission.without_managed(new),
                ssa.parse_managed(old_meta.get("managedFields")),
                manager,
                subresource,
                rt.api_version,
                now_iso(),
                admission.shape(rt),
            )
        meta["managedFields"] = ssa.render_managed(managers)
        meta["resourceVersion"] = old_meta["resourceVersion"]
        if admission.same(old, new):
            return old  # no-op writes do not bump the resourceVersion
        if (
            meta.get("deletionTimestamp")
            and not meta.get("finalizers")
            and old_meta.get("finalizers")
            and int(meta.get("deletionGracePeriodSeconds") or 0) == 0
        ):
            # The last finalizer is gone: the deletion completes.
            if dry_run:
                return new
            return self._remove(rt, ns, name, new)
        if dry_run:
            return new
        return self._commit(rt, ns, name, old, new)

    def _remove(self, rt: ResourceType, ns: str, name: str, obj: dict[str, Any]) -> dict[str, Any]:
        """Remove the object for good (DELETED event); the GC follows up on dependents."""
        stored = self.objects.get(rt.key, {}).get((ns, name))
        if stored is not obj:
            # The final state (e.g. without its last finalizer) is what DELETED carries.
            self.objects.setdefault(rt.key, {})[(ns, name)] = obj
            if stored is not None:
                self._index(rt.key, ns, name, stored, obj)
        return self._commit(rt, ns, name, obj, None)

    def replace(
        self,
        rt: ResourceType,
        ns: str,
        name: str,
        body: dict[str, Any],
        subresource: str,
        manager: str,
        dry_run: bool = False,
    ) -> dict[str, Any]:
        old = self.get(rt, ns, name)
        meta = body.get("metadata") if isinstance(body, dict) else None
        if not rt.unconditional_update and not (meta or {}).get("resourceVersion"):
            raise invalid(rt.plural, rt.group, name, [admission.MISSING_RV_CAUSE])
        return self._update(rt, ns, name, old, clone(body), subresource, manager, dry_run)

    def patch(
        self,
        rt: ResourceType,
        ns: str,
        name: str,
        patch_type: str,
        body: Any,
        subresource: str,
        manager: str | None,
        force: bool = False,
        dry_run: bool = False,
    ) -> dict[str, Any]:
        if patch_type == "apply":
            return self.apply(rt, ns, name, body, subresource, manager, force, dry_run)
        old = self.get(rt, ns, name)
        manager = manager or "unknown"
        if patch_type == "json":
            new = json_patch(old, body)
        elif patch_type == "merge":
            if not isinstance(body, dict):
                raise ApiError(400, "merge patch body must be a JSON object")
            new = merge_patch(old, body)
        elif patch_type == "strategic":
            if not rt.strategic_merge:
                raise ApiError(
                    415,
                    "the body of the request was in an unknown format - accepted media types "
                    "include: application/json-patch+json, application/merge-patch+json, "
                    "application/apply-patch+yaml",
                )
            if not isinstance(body, dict):
                raise ApiError(400, "strategic merge patch body must be a JSON object")
            new = strategic_merge(old, body, rt.list_keys, rt.set_lists)
        else:
            raise ApiError(415, f"unsupported patch type {patch_type}")
        new = clone(new)
        # A resourceVersion in the patch is a precondition; otherwise the patch applies to
        # whatever version is current.
        patched_rv = (new.get("metadata") or {}).get("resourceVersion")
        if patch_type != "json" and "resourceVersion" not in ((body or {}).get("metadata") or {}):
            patched_rv = None
        if isinstance(new.get("metadata"), dict) and patched_rv is None:
            new["metadata"].pop("resourceVersion", None)
        return self._update(rt, ns, name, old, new, subresource, manager, dry_run)

    def apply(
        self,
        rt: ResourceType,
        ns: str,
        name: str,
        body: Any,
        subresource: str,
        manager: str | None,
        force: bool,
        dry_run: bool = False,
    ) -> dict[str, Any]:
        if not manager:
            raise invalid("PatchOptions", "meta.k8s.io", "", [admission.MISSING_MANAGER_CAUSE])
        if not isinstance(body, dict):
            raise ApiError(400, "apply body must be an object")
        applied = clone(body)
        meta = applied.setdefault("metadata", {})
        if meta.get("name") not in (None, name):
            raise ApiError(400, "the name of the object does not match the name on the URL")
        want_rv = meta.pop("resourceVersion", None)
        want_uid = meta.get("uid")
        for f in ("uid", "creationTimestamp", "managedFields", "generation", "namespace"):
            meta.pop(f, None)
        applied.pop("apiVersion", None)
        applied.pop("kind", None)
        if subresource == "status":
            applied = {"status": applied.get("status", {})}
        elif rt.status_subresource:
            applied.pop("status", None)
        existing = self.objects.get(rt.key, {}).get((ns, name))
        shape = admission.shape(rt)
        t = now_iso()
        if existing is None:
            if subresource:
                raise not_found(rt.plural, rt.group, name)
            result = ssa.server_side_apply(
                {}, applied, [], manager, "", rt.api_version, t, force, shape
            )
            obj = result.obj
            obj.setdefault("metadata", {})["name"] = name
            return self.create(rt, ns, obj, manager, dry_run, managers=result.managers)
        if want_rv not in (None, "") and str(want_rv) != existing["metadata"]["resourceVersion"]:
            raise conflict(rt.plural, rt.group, name, STALE)
        if want_uid not in (None, "") and want_uid != existing["metadata"].get("uid"):
            # As the real server answers an applied configuration naming another object's
            # uid: the uid is immutable, so the apply is refused (a uid precondition).
            raise invalid(
                rt.kind,
                rt.group,
                name,
                [
                    {
                        "field": "metadata.uid",
                        "reason": "FieldValueInvalid",
                        "message": f'Invalid value: "{want_uid}": field is immutable',
                    }
                ],
            )
        live = admission.without_managed(existing)
        managers = ssa.parse_managed(existing["metadata"].get("managedFields"))
        result = ssa.server_side_apply(
            live, applied, managers, manager, subresource, rt.api_version, t, force, shape
        )
        if result.conflicts:
            raise admission.apply_conflict(rt, name, result.conflicts, rt.api_version)
        new = result.obj
        new["metadata"].pop("resourceVersion", None)
        return self._update(
            rt, ns, name, existing, new, subresource, manager, dry_run, managers=result.managers
        )

    def delete(
        self, rt: ResourceType, ns: str, name: str, options: DeleteOptions
    ) -> tuple[dict[str, Any], bool]:
        """Delete (or start deleting) an object. Returns (object, removed_now)."""
        obj = self.get(rt, ns, name)
        meta = obj["metadata"]
        if options.uid is not None and options.uid != meta.get("uid"):
            raise conflict(
                rt.plural,
                rt.group,
                name,
                f"Precondition failed: UID in precondition: {options.uid}, "
                f"UID in object meta: {meta.get('uid')}",
                kind=rt.kind,
            )
        if options.resource_version is not None and (
            str(options.resource_version) != meta["resourceVersion"]
        ):
            raise conflict(
                rt.plural,
                rt.group,
                name,
                "Precondition failed: ResourceVersion in precondition: "
                f"{options.resource_version}, ResourceVersion in object meta: "
                f"{meta['resourceVersion']}",
                kind=rt.kind,
            )
        new = clone(obj)
        new_meta = new["metadata"]
        finalizers = list(new_meta.get("finalizers") or [])
        uid = meta.get("uid")
        policy_finalizer = {"Foreground": "foregroundDeletion", "Orphan": "orphan"}.get(
            options.propagation
        )
        if policy_finalizer and self.dependents.get(uid) and policy_finalizer not in finalizers:
            finalizers.append(policy_finalizer)
        # A pod bound to a node terminates gracefully: the node stops its containers and then
        # deletes it with gracePeriodSeconds=0.
        grace: int | None = None
        bound_pod = (
            rt.kind == "Pod"
            and bool((obj.get("spec") or {}).get("nodeName"))
            and (obj.get("status") or {}).get("phase") not in ("Succeeded", "Failed")
        )
        if bound_pod:
            grace = options.grace_period
            if grace is None:
                grace = int((obj.get("spec") or {}).get("terminationGracePeriodSeconds", 30))
        is_ns = rt.key == NS_KEY
        pending = (
            bool(finalizers)
            or (grace is not None and grace > 0)
            or (is_ns and self._namespace_has_content(name))
        )
        if not pending:
            if options.dry_run:
                return obj, True
            return self._remove(rt, ns, name, obj), True
        shorter = grace is not None and grace < int(meta.get("deletionGracePeriodSeconds") or 0)
        unchanged = finalizers == list(meta.get("finalizers") or [])
        if meta.get("deletionTimestamp") and unchanged and not shorter:
            return obj, False  # already being deleted
        if not new_meta.get("deletionTimestamp") or shorter:
            # A second delete may only shorten the grace period (as the node does with 0).
            new_meta["deletionTimestamp"] = now_iso(time.time() + (grace or 0))
            new_meta["deletionGracePeriodSeconds"] = grace or 0
        if finalizers:
            new_meta["finalizers"] = finalizers
        if is_ns:
            new.setdefault("status", {})["phase"] = "Terminating"
        if options.dry_run:
            return new, False
        out = self._commit(rt, ns, name, obj, new)
        if bound_pod and grace and self._call_later is not None:
            # Without a node to finish the deletion, the pod goes a little after its grace.
            self._call_later(grace + 5.0, lambda: self._force_remove(rt, ns, name, uid))
        return out, False

    def bind(
        self, rt: ResourceType, ns: str, name: str, body: dict[str, Any], manager: str
    ) -> None:
        """pods/binding: set spec.nodeName once (409 if already bound or the uid differs)."""
        pod = self.get(rt, ns, name)
        target = (body.get("target") or {}).get("name")
        if not target:
            raise invalid(
                "Binding",
                "",
                name,
                [
                    {
                        "field": "target.name",
                        "reason": "FieldValueRequired",
                        "message": "Required value",
                    }
                ],
            )
        want_uid = (body.get("metadata") or {}).get("uid")
        if want_uid and want_uid != pod["metadata"].get("uid"):
            raise conflict(
                rt.plural,
                rt.group,
                name,
                "Precondition failed: UID in precondition: "
                f"{want_uid}, UID in object meta: {pod['metadata'].get('uid')}",
                kind=BINDING_KIND,
            )
        current = (pod.get("spec") or {}).get("nodeName")
        if current:
            raise conflict(
                rt.plural,
                rt.group,
                name,
                f'pod {name} is already assigned to node "{current}"',
                kind=BINDING_KIND,
            )
        new = clone(pod)
        new["spec"]["nodeName"] = target
        self._update(rt, ns, name, pod, new, "", manager, binding=True)

    def _force_remove(self, rt: ResourceType, ns: str, name: str, uid: str | None) -> None:
        obj = self.objects.get(rt.key, {}).get((ns, name))
        if obj is None or obj["metadata"].get("uid") != uid:
            return
        if not obj["metadata"].get("finalizers"):
            self._remove(rt, ns, name, obj)
        elif obj["metadata"].get("deletionGracePeriodSeconds"):
            # Finalizers still pending: the grace is over, their removal completes the delete.
            new = clone(obj)
            new["metadata"]["deletionGracePeriodSeconds"] = 0
            self._commit(rt, ns, name, obj, new)

    def delete_collection(
        self,
        rt: ResourceType,
        ns: str | None,
        labels: list[Requirement],
        fields: list[FieldRequirement],
        options: DeleteOptions,
    ) -> list[dict[str, Any]]:
        items, _, _, _ = self.list(rt, ns, labels, fields)
        out = []
        for obj in list(items):
            m = obj["metadata"]
            try:
                out.append(self.delete(rt, m.get("namespace", ""), m["name"], options)[0])
            except ApiError:
                continue
        return out

    def _namespace_has_content(self, ns: str) -> bool:
        for key, bucket in self.objects.items():
            rt = self.registry.by_key(key)
            if rt is not None and rt.namespaced and any(k[0] == ns for k in bucket):
                return True
        return False
