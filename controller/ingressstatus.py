"""Ingress status: `status.loadBalancer.ingress` on every Ingress the fleet serves.

Once every HAProxy pod runs a render (the leader pipeline's `on_converged`), each Ingress in
`RenderOutput.served_ingresses` gets the fleet's addresses: those of the publish Service
named in `templateLibraries.ingress.publishService` (its load balancer status, else its
external IPs, else its cluster IP), else the HAProxy pods' IPs. An Ingress that carries our
addresses but is no longer served loses them (ours: managedFields name FIELD_MANAGER as the
owner of status.loadBalancer.ingress, so a later term clears what an earlier one wrote).
Only the leader writes, under the fencing token (check_term before each batch), with the
field manager FIELD_MANAGER.

`status_changes` is the pure decision; `IngressStatusWriter` is the I/O, one per term.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import Any

from kubernetes import client
from kubernetes.client.exceptions import ApiException

from controller.newest import NewestOnly
from controller.watch.store import same_objects

log = logging.getLogger(__name__)

FIELD_MANAGER = "haptic-ingress-status"  # kept in the caches: informer.KEPT_FIELD_MANAGERS
WRITE_TIMEOUT = 5.0

Entries = tuple[tuple[tuple[str, str], ...], ...]  # status.loadBalancer.ingress, comparable


def _entries(raw: Any) -> Entries:
    if not isinstance(raw, list):
        return ()
    return tuple(
        tuple(sorted((str(k), str(v)) for k, v in e.items() if k in ("ip", "hostname")))
        for e in raw
        if isinstance(e, Mapping)
    )


def current_entries(ingress: Mapping[str, Any]) -> Entries:
    status = ingress.get("status") or {}
    return _entries((status.get("loadBalancer") or {}).get("ingress"))


def fleet_entries(addresses: Iterable[str]) -> Entries:
    """Entries for addresses: IPs as `ip`, names as `hostname`, sorted, no duplicates."""
    out = set()
    for address in addresses:
        if not address:
            continue
        is_ip = address.replace(".", "").isdigit() or ":" in address
        out.add((("ip" if is_ip else "hostname", address),))
    return tuple(sorted(out))


def publish_addresses(service: Mapping[str, Any] | None) -> list[str]:
    """A publish Service's addresses: load balancer status, else external IPs, else its
    cluster IP (none when it has none)."""
    if not service:
        return []
    lb = ((service.get("status") or {}).get("loadBalancer") or {}).get("ingress") or []
    found = [e.get("ip") or e.get("hostname") for e in lb if isinstance(e, Mapping)]
    if any(found):
        return [a for a in found if a]
    spec = service.get("spec") or {}
    external = [a for a in spec.get("externalIPs") or [] if a]
    if external:
        return external
    cluster_ip = spec.get("clusterIP")
    return [cluster_ip] if cluster_ip and cluster_ip != "None" else []


def manages_status(ingress: Mapping[str, Any], manager: str = FIELD_MANAGER) -> bool:
    """Whether `manager` owns status.loadBalancer.ingress in managedFields: the API server
    moves ownership to whoever writes the field last, so this says whose addresses they are
    across leadership terms and address changes."""
    for entry in (ingress.get("metadata") or {}).get("managedFields") or []:
        if not isinstance(entry, Mapping) or entry.get("manager") != manager:
            continue
        fields = ((entry.get("fieldsV1") or {}).get("f:status") or {}).get("f:loadBalancer")
        if isinstance(fields, Mapping) and "f:ingress" in fields:
            return True
    return False


def status_changes(
    served: Iterable[str],
    ingresses: Iterable[Mapping[str, Any]],
    desired: Entries,
    ours: Callable[[Mapping[str, Any], Entries], bool],
) -> list[tuple[str, str, Entries]]:
    """(namespace, name, entries) to write: `desired` on served Ingresses that do not show
    it, `()` (clear) on the others when what they show is ours (`ours(ingress, current)`).
    Pure."""
    served = set(served)
    out = []
    for obj in ingresses:
        meta = obj.get("metadata") or {}
        namespace, name = str(meta.get("namespace") or ""), str(meta.get("name") or "")
        key = f"{namespace}/{name}"
        current = current_entries(obj)
        if key in served:
            if desired and current != desired:
                out.append((namespace, name, desired))
        elif current and ours(obj, current):
            out.append((namespace, name, ()))
    return sorted(out)


class IngressStatusWriter:
    """Writes Ingress status for one leadership term."""

    def __init__(
        self,
        api_client: client.ApiClient,
        ingresses: Callable[[], Sequence[Mapping[str, Any]]],
        addresses: Callable[[], list[str]],
        *,
        term_valid: Callable[[], bool],
        check_term: Callable[[], None],
    ) -> None:
        self.api = client.NetworkingV1Api(api_client)
        self.ingresses = ingresses
        self.addresses = addresses
        self.term_valid = term_valid
        self.check_term = check_term
        # What this term wrote: ours to clear even where managedFields are not kept.
        self.written: dict[str, Entries] = {}
        # A stale term or a failed write: the next convergence retries.
        self._later: NewestOnly[Any] = NewestOnly("ingress-status", term_valid, self.apply)
        # The inputs of the last apply that found nothing to write: while they are the very
        # same (the caches replace an Ingress's dict when it changes, never edit it), there
        # is nothing to look at again, which spares every converged endpoint change a pass
        # over every Ingress (issue 19).
        self._settled: tuple[Any, Sequence[Mapping[str, Any]]] | None = None

    def apply_later(self, output: Any) -> None:
        """`apply` on the writer's own thread, the newest output only. The pipeline calls
        this on the deploy path when the fleet converged: after a change most Ingresses share
        (a new term, a mass create) that is one PATCH per Ingress, which must not hold up the
        next deployment (a 36 s stall at 800 Ingresses under load, bench_convergence)."""
        self._later.submit(output)

    def _ours(self, ingress: Mapping[str, Any], current: Entries) -> bool:
        if manages_status(ingress):
            return True
        meta = ingress.get("metadata") or {}
        return self.written.get(f"{meta.get('namespace')}/{meta.get('name')}") == current

    def apply(self, output: Any) -> list[str]:
        """Write the status of a converged output; returns "ns/name" of what was written."""
        if not self.term_valid():
            return []
        desired = fleet_entries(self.addresses())
        served = tuple(getattr(output, "served_ingresses", ()) or ())
        ingresses = self.ingresses()
        if self._is_settled((served, desired), ingresses):
            return []
        todo = status_changes(served, ingresses, desired, self._ours)
        if not todo:
            self._settled = ((served, desired), ingresses)
            return []
        self._settled = None
        self.check_term()  # proof against the Lease once per batch, before the writes
        done = []
        for namespace, name, entries in todo:
            if self._write(namespace, name, entries):
                done.append(f"{namespace}/{name}")
        return done

    def _is_settled(self, inputs: Any, ingresses: Sequence[Mapping[str, Any]]) -> bool:
        settled = self._settled
        return settled is not None and settled[0] == inputs and same_objects(settled[1], ingresses)

    def _write(self, namespace: str, name: str, entries: Entries) -> bool:
        body = {
            "status": {"loadBalancer": {"ingress": [dict(e) for e in entries] if entries else None}}
        }
        try:
            self.api.patch_namespaced_ingress_status(
                name,
                namespace,
                body,
                field_manager=FIELD_MANAGER,
                _request_timeout=WRITE_TIMEOUT,
            )
        except ApiException as exc:
            if exc.status != 404:
                log.warning("ingress status %s/%s not written: %s", namespace, name, exc)
            return False
        self.written[f"{namespace}/{name}"] = entries
        return True


def fleet_addresses(
    template: Mapping[str, Any] | None,
    service: Callable[[str, str], Mapping[str, Any] | None],
    pod_ips: Iterable[str | None],
) -> list[str]:
    """The addresses to publish: the publish Service's (`templateLibraries.ingress.
    publishService: namespace/name`) when the template config names one, else the pod IPs
    of the HAProxy pods."""
    spec = (template or {}).get("spec") or {}
    ingress = (spec.get("templateLibraries") or {}).get("ingress") or {}
    publish = ingress.get("publishService")
    if publish in (None, ""):
        return sorted({ip for ip in pod_ips if ip})
    if not (isinstance(publish, str) and publish.count("/") == 1 and all(publish.split("/"))):
        _warn_once(f"publishService {publish!r} is not 'namespace/name': no Ingress status")
        return []
    namespace, _, name = publish.partition("/")
    found = service(namespace, name)
    addresses = publish_addresses(found)
    if not addresses:
        why = "not found" if not found else "has no address yet"
        _warn_once(f"publish Service {publish} {why}: no Ingress status is written")
    else:
        _warned.clear()  # fixed: a later breakage is said again
    return addresses


_warned: set[str] = set()


def _warn_once(message: str) -> None:
    """A misconfigured publish Service is said once per process and problem, not per write
    (the writer asks on every render)."""
    if message not in _warned:
        _warned.add(message)
        log.warning("%s", message)
