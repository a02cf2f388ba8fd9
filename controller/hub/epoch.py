"""The fencing-epoch hand-off from the old Active to the promoted side.

Agents refuse an apply whose token epoch is below the epoch they last applied. Claiming an
epoch above the last one seen from the Active therefore makes the agents refuse a recovered
old Active instead of accepting two writers. The claim is written as a floor on the local
leader Lease's epoch annotation, where the controller's elector reads it when it starts its
next term; `EpochClaim.claimed` returns it to seed an elector directly. An unreadable epoch
on that Lease stops the claim (`contract.InvalidEpoch`): it is never overwritten as if it were 0.
"""

from __future__ import annotations

from kubernetes import client
from kubernetes.client.exceptions import ApiException

from contract import EPOCH_ANNOTATION, format_epoch, parse_epoch


def raised_epoch(current: int, floor: int) -> int:
    """Never lower an epoch: the annotation only moves up."""
    return max(current, floor)


class EpochClaim:
    def __init__(
        self,
        api_client: client.ApiClient,
        *,
        namespace: str,
        lease_name: str,
        request_timeout: float,
        attempts: int = 5,
    ) -> None:
        self.api = client.CoordinationV1Api(api_client)
        self.namespace = namespace
        self.lease_name = lease_name
        self.request_timeout = request_timeout
        self.attempts = attempts
        self.claimed: int | None = None

    def __call__(self, floor: int) -> int:
        """Raise the local leader Lease's epoch to at least `floor`; the epoch now recorded."""
        last: Exception | None = None
        for _ in range(self.attempts):
            try:
                epoch = self._once(floor)
            except ApiException as exc:
                if exc.status != 409:  # lost a race with the elector's renewal: re-read
                    raise
                last = exc
                continue
            self.claimed = epoch
            return epoch
        raise RuntimeError(f"could not record epoch {floor}: {last}")

    def _once(self, floor: int) -> int:
        t = self.request_timeout
        try:
            lease = self.api.read_namespaced_lease(
                self.lease_name, self.namespace, _request_timeout=t
            )
        except ApiException as exc:
            if exc.status != 404:
                raise
            body = client.V1Lease(
                metadata=client.V1ObjectMeta(
                    name=self.lease_name,
                    namespace=self.namespace,
                    annotations={EPOCH_ANNOTATION: format_epoch(floor)},
                ),
                spec=client.V1LeaseSpec(),
            )
            self.api.create_namespaced_lease(self.namespace, body, _request_timeout=t)
            return floor
        annotations = dict(lease.metadata.annotations or {})
        current = parse_epoch(annotations.get(EPOCH_ANNOTATION))
        epoch = raised_epoch(current, floor)
        if epoch != current:
            annotations[EPOCH_ANNOTATION] = format_epoch(epoch)
            lease.metadata.annotations = annotations
            self.api.replace_namespaced_lease(
                self.lease_name, self.namespace, lease, _request_timeout=t
            )
        return epoch
