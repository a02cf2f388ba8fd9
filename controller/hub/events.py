"""Kubernetes Events of the hub, attached to the hub Lease in the controller's namespace
(an Event lives in the namespace of the object it is attached to)."""

from __future__ import annotations

import uuid
from collections.abc import Callable
from datetime import UTC, datetime

from kubernetes import client

COMPONENT = "haptic-hub"


def event_emitter(
    api_client: client.ApiClient,
    *,
    namespace: str,
    lease_name: str,
    lease_uid: Callable[[], str | None],
    request_timeout: float,
) -> Callable[[str, str, str], None]:
    """A PromotionHooks.emit_event: (type, reason, message) -> one core/v1 Event."""
    api = client.CoreV1Api(api_client)

    def emit(event_type: str, reason: str, message: str) -> None:
        now = datetime.now(UTC)
        body = client.CoreV1Event(
            metadata=client.V1ObjectMeta(
                name=f"{lease_name}.{uuid.uuid4().hex[:12]}", namespace=namespace
            ),
            involved_object=client.V1ObjectReference(
                api_version="coordination.k8s.io/v1",
                kind="Lease",
                name=lease_name,
                namespace=namespace,
                uid=lease_uid(),
            ),
            reason=reason,
            message=message,
            type=event_type,
            source=client.V1EventSource(component=COMPONENT),
            first_timestamp=now,
            last_timestamp=now,
            count=1,
        )
        api.create_namespaced_event(namespace, body, _request_timeout=request_timeout)

    return emit
