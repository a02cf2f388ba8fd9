"""The Active's Lease as the Standby sees it, and bounded reads of Leases.

Every networked read here takes a timeout: a black-holed API server must cost at most the
dial timeout, never the OS TCP timeout (seed 004, "the poll was not bounded").
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import UTC, datetime

from kubernetes import client
from kubernetes.client.exceptions import ApiException

from contract import EPOCH_ANNOTATION, parse_epoch


@dataclass(frozen=True)
class LeaseView:
    """What detection needs from a Lease: the holder's newest proof of life."""

    holder: str
    renew_time: datetime | None
    lease_duration_seconds: int
    resource_version: str = ""
    epoch: int = 0


class LeaseNotFound(Exception):
    """The API server answered: no such Lease."""


def _aware(when: datetime | None) -> datetime | None:
    if when is not None and when.tzinfo is None:
        return when.replace(tzinfo=UTC)
    return when


def view_from_lease(lease: client.V1Lease) -> LeaseView:
    spec = lease.spec or client.V1LeaseSpec()
    annotations = (lease.metadata and lease.metadata.annotations) or {}
    return LeaseView(
        holder=spec.holder_identity or "",
        renew_time=_aware(spec.renew_time or spec.acquire_time),
        lease_duration_seconds=int(spec.lease_duration_seconds or 0),
        resource_version=(lease.metadata and lease.metadata.resource_version) or "",
        epoch=parse_epoch(annotations.get(EPOCH_ANNOTATION)),
    )


def read_lease(
    api_client: client.ApiClient, namespace: str, name: str, timeout: float
) -> LeaseView:
    """One read bounded by `timeout` in total (urllib3 total timeout, no retries on the
    hub's clients). Raises LeaseNotFound on 404; any other failure propagates."""
    api = client.CoordinationV1Api(api_client)
    try:
        lease = api.read_namespaced_lease(name, namespace, _request_timeout=timeout)
    except ApiException as exc:
        if exc.status == 404:
            raise LeaseNotFound(f"{namespace}/{name}") from exc
        raise
    return view_from_lease(lease)
