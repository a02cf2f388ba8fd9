"""Lease I/O: read, create and compare-and-swap the election record over the Kubernetes API.

Every call takes a timeout so that a black-holed API server cannot hold the elector past
its renew deadline.
"""

from __future__ import annotations

import copy
import threading
from collections.abc import Mapping
from datetime import datetime
from typing import Any, Protocol

import urllib3
from kubernetes import client
from kubernetes.client.exceptions import ApiException

from controller.election.record import EPOCH_ANNOTATION, LeaseRecord, format_epoch, parse_epoch
from controller.kubeclient import bounded_copy


class LeaseConflict(Exception):
    """Another writer changed the Lease since we read it (HTTP 409): we lost the race."""


class LeaseUnavailable(Exception):
    """The API server did not answer usefully in time (timeout, connection error, 5xx)."""


class LeaseStore(Protocol):
    namespace: str
    name: str

    def get(self, timeout: float) -> LeaseRecord | None: ...

    def create(self, record: LeaseRecord, timeout: float) -> LeaseRecord: ...

    def update(self, record: LeaseRecord, timeout: float) -> LeaseRecord:
        """Write `record` if the Lease is still at `record.resource_version`."""
        ...


def record_from_lease(lease: client.V1Lease) -> LeaseRecord:
    spec = lease.spec or client.V1LeaseSpec()
    annotations = lease.metadata.annotations or {}
    return LeaseRecord(
        holder=spec.holder_identity or "",
        lease_duration_seconds=spec.lease_duration_seconds or 0,
        acquire_time=spec.acquire_time,
        renew_time=spec.renew_time,
        transitions=spec.lease_transitions or 0,
        epoch=parse_epoch(annotations.get(EPOCH_ANNOTATION)),
        resource_version=lease.metadata.resource_version,
    )


def record_from_object(lease: Mapping[str, Any]) -> LeaseRecord:
    """The record of a Lease as a plain dict (camelCase, as a watch delivers it)."""
    spec = lease.get("spec") or {}
    meta = lease.get("metadata") or {}
    return LeaseRecord(
        holder=spec.get("holderIdentity") or "",
        lease_duration_seconds=spec.get("leaseDurationSeconds") or 0,
        acquire_time=_parse_time(spec.get("acquireTime")),
        renew_time=_parse_time(spec.get("renewTime")),
        transitions=spec.get("leaseTransitions") or 0,
        epoch=parse_epoch((meta.get("annotations") or {}).get(EPOCH_ANNOTATION)),
        resource_version=meta.get("resourceVersion"),
    )


def _parse_time(text: str | None) -> datetime | None:
    return datetime.fromisoformat(text) if text else None


def _micro(when: datetime | None) -> datetime | None:
    # MicroTime needs a fractional part; isoformat() drops it when it is zero.
    if when is not None and when.microsecond == 0:
        return when.replace(microsecond=1)
    return when


class KubeLeaseStore:
    """The leader Lease through CoordinationV1Api. Keeps the last object it saw so an update
    preserves metadata it does not own (labels, other annotations)."""

    def __init__(self, api_client: client.ApiClient, namespace: str, name: str):
        self.api = client.CoordinationV1Api(bounded_copy(api_client))
        self.namespace = namespace
        self.name = name
        self._lock = threading.Lock()
        self._last: client.V1Lease | None = None
        self.uid: str | None = None

    def get(self, timeout: float) -> LeaseRecord | None:
        try:
            lease = self.api.read_namespaced_lease(
                self.name, self.namespace, _request_timeout=_timeout(timeout)
            )
        except ApiException as exc:
            if exc.status == 404:
                return None
            raise LeaseUnavailable(f"read lease: HTTP {exc.status} {exc.reason}") from exc
        except (urllib3.exceptions.HTTPError, OSError) as exc:
            raise LeaseUnavailable(f"read lease: {exc}") from exc
        return self._remember(lease)

    def create(self, record: LeaseRecord, timeout: float) -> LeaseRecord:
        body = client.V1Lease(
            metadata=client.V1ObjectMeta(name=self.name, namespace=self.namespace),
            spec=client.V1LeaseSpec(),
        )
        self._apply(body, record)
        try:
            lease = self.api.create_namespaced_lease(
                self.namespace, body, _request_timeout=_timeout(timeout)
            )
        except ApiException as exc:
            if exc.status == 409:
                raise LeaseConflict("lease created by another replica") from exc
            raise LeaseUnavailable(f"create lease: HTTP {exc.status} {exc.reason}") from exc
        except (urllib3.exceptions.HTTPError, OSError) as exc:
            raise LeaseUnavailable(f"create lease: {exc}") from exc
        return self._remember(lease)

    def update(self, record: LeaseRecord, timeout: float) -> LeaseRecord:
        with self._lock:
            last = self._last
        if last is None or last.metadata.resource_version != record.resource_version:
            # Not the version we last saw: the write would clobber unknown metadata.
            raise LeaseConflict("record is not based on the last observed lease")
        body = copy.deepcopy(last)
        self._apply(body, record)
        try:
            lease = self.api.replace_namespaced_lease(
                self.name, self.namespace, body, _request_timeout=_timeout(timeout)
            )
        except ApiException as exc:
            if exc.status in (404, 409):
                raise LeaseConflict(f"lease changed underneath us (HTTP {exc.status})") from exc
            raise LeaseUnavailable(f"update lease: HTTP {exc.status} {exc.reason}") from exc
        except (urllib3.exceptions.HTTPError, OSError) as exc:
            raise LeaseUnavailable(f"update lease: {exc}") from exc
        return self._remember(lease)

    def _apply(self, body: client.V1Lease, record: LeaseRecord) -> None:
        spec = body.spec or client.V1LeaseSpec()
        spec.holder_identity = record.holder
        spec.lease_duration_seconds = record.lease_duration_seconds
        spec.acquire_time = _micro(record.acquire_time)
        spec.renew_time = _micro(record.renew_time)
        spec.lease_transitions = record.transitions
        body.spec = spec
        annotations = dict(body.metadata.annotations or {})
        annotations[EPOCH_ANNOTATION] = format_epoch(record.epoch)
        body.metadata.annotations = annotations
        body.metadata.resource_version = record.resource_version

    def _remember(self, lease: client.V1Lease) -> LeaseRecord:
        record = record_from_lease(lease)
        with self._lock:
            self._last = lease
            self.uid = lease.metadata.uid
        return record


def _timeout(seconds: float) -> float:
    # The client refuses a zero timeout; a tiny one fails fast, as an expired budget should.
    return max(0.05, seconds)
