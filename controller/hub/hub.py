"""Assembly: the parts of the hub a controller replica runs for its --ha-mode.

standalone: nothing but an open write fence; no client is built, nothing is read or written.
active:     hub elector + status.activeController publisher; fence open.
standby:    fence shut; mirror from the Active; publisher (no-op until it leads); the poll of
            the Active's Lease, which promotes through the guarded sequence.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import datetime

from kubernetes import client

from controller.hub.bounded import call_bounded
from controller.hub.config import HaMode, HubConfig
from controller.hub.detection import RemoteLeaseTracker
from controller.hub.elector import HubElector
from controller.hub.epoch import EpochClaim
from controller.hub.events import event_emitter
from controller.hub.fence import WriteFence
from controller.hub.kube import Kube
from controller.hub.leases import LeaseView, read_lease
from controller.hub.metrics import HubMetrics, default_metrics
from controller.hub.mirror import Mirror
from controller.hub.promotion import Promoter, PromotionHooks
from controller.hub.publisher import Publisher
from controller.hub.standby import StandbyWatcher
from controller.kubeclient import bounded_copy, from_kubeconfig

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class HubStatus:
    """What an operator (or /healthz, or the dashboard) wants to know about this hub."""

    mode: str
    identity: str
    leading: bool
    fence_open: bool
    armed: bool
    active_renewed_at: datetime | None
    active_epoch_seen: int
    failed_reads: int
    promoted: bool
    promoted_epoch: int | None
    mirror_running: bool
    mirror_synced: bool
    mirror_passes: int
    mirror_error: str | None


@dataclass
class Hub:
    config: HubConfig
    fence: WriteFence
    elector: HubElector | None = None
    publisher: Publisher | None = None
    mirror: Mirror | None = None
    tracker: RemoteLeaseTracker | None = None
    promoter: Promoter | None = None
    watcher: StandbyWatcher | None = None
    epoch_claim: Callable[[int], int] | None = None
    _started: bool = field(default=False, repr=False)

    @property
    def promoted(self) -> bool:
        return self.promoter is not None and self.promoter.promoted

    @property
    def promoted_epoch(self) -> int | None:
        """The fencing epoch the promoted side claimed: seed the controller's elector with it."""
        result = self.promoter.result if self.promoter else None
        return result.epoch if result else None

    def status(self) -> HubStatus:
        snap = self.tracker.snapshot() if self.tracker is not None else None
        retained = snap.retained if snap is not None else None
        mirror = self.mirror
        return HubStatus(
            mode=self.config.mode.value,
            identity=self.config.identity,
            leading=self.is_leader(),
            fence_open=self.fence.is_open(),
            armed=retained is not None,
            active_renewed_at=retained.renew_time if retained is not None else None,
            active_epoch_seen=snap.last_epoch if snap is not None else 0,
            failed_reads=snap.consecutive_failures if snap is not None else 0,
            promoted=self.promoted,
            promoted_epoch=self.promoted_epoch,
            mirror_running=mirror is not None and mirror.running,
            mirror_synced=mirror is not None and mirror.synced,
            mirror_passes=mirror.passes if mirror is not None else 0,
            mirror_error=mirror.last_error if mirror is not None else None,
        )

    def is_leader(self) -> bool:
        """Hub leadership; False for the whole promotion sequence whatever the flag says."""
        if self.config.mode is HaMode.STANDALONE:
            return True
        if self.promoter is not None and self.promoter.promoting:
            return False
        return self.elector is not None and self.elector.is_leader()

    def start(self) -> None:
        if self._started or self.config.mode is HaMode.STANDALONE:
            return
        self._started = True
        if self.config.mode is HaMode.ACTIVE and self.elector is not None:
            self.elector.start()
        if self.mirror is not None:
            self.mirror.start()
        if self.publisher is not None:
            self.publisher.start()
        if self.watcher is not None:
            self.watcher.start()

    def stop(self, release: bool = True) -> None:
        """Stop every loop this hub started and wait for them (bounded by the grace period)."""
        grace = self.config.promotion_grace_period
        if self.watcher is not None:
            self.watcher.stop(grace + self.config.promotion_dial_timeout * 3)
        if self.mirror is not None:
            self.mirror.stop(grace)
        if self.publisher is not None:
            self.publisher.stop(grace + self.config.promotion_dial_timeout * 2)
        if self.elector is not None:
            self.elector.stop(release=release, timeout=grace + self.config.promotion_dial_timeout)
        self._started = False


def build_hub(
    config: HubConfig,
    local_api_client: client.ApiClient | None = None,
    remote_api_client: client.ApiClient | None = None,
    *,
    kick: Callable[[], None] | None = None,
    claim_epoch: Callable[[int], int] | None = None,
    metrics: HubMetrics | None = None,
    mirror_watch_timeout: float = 5.0,
) -> Hub:
    """Wire the hub for `config.mode`. The controller passes its own ApiClient as the local
    one; the Active's is built from --ha-active-kubeconfig unless given (a separate client,
    never the process-wide default)."""
    if config.mode is HaMode.STANDALONE:
        return Hub(config=config, fence=WriteFence(open_=True))
    if local_api_client is None:
        raise ValueError(f"--ha-mode {config.mode.value} needs the controller's API client")
    # The hub's own clients: retries off so every timeout is a real bound, and nothing
    # changed on the controller's client.
    local_api_client = bounded_copy(local_api_client)
    dial = config.promotion_dial_timeout
    elector = HubElector(
        local_api_client,
        namespace=config.namespace,
        name=config.hub_lease_name,
        identity=config.identity,
        lease_duration=config.lease_duration,
        renew_deadline=config.renew_deadline,
        retry_period=config.retry_period,
        request_timeout=dial,
    )
    hub = Hub(config=config, fence=WriteFence(open_=config.mode is HaMode.ACTIVE), elector=elector)
    hub.publisher = Publisher(
        local_api_client,
        namespace=config.namespace,
        template_name=config.template_name,
        identity=config.identity,
        endpoint=config.self_endpoint,
        ca_bundle_path=config.self_ca_bundle_path,
        is_leader=hub.is_leader,
        request_timeout=dial,
        fast_interval=config.fast_publish_interval,
        slow_interval=config.publish_interval,
    )
    if config.mode is HaMode.ACTIVE:
        return hub

    remote = bounded_copy(remote_api_client) if remote_api_client is not None else None
    if remote is None and config.active_kubeconfig:
        remote = from_kubeconfig(config.active_kubeconfig, config.active_context, bounded=True)
    _add_standby_parts(
        hub, config, local_api_client, remote, kick, claim_epoch,
        metrics or default_metrics(), mirror_watch_timeout,
    )  # fmt: skip
    return hub


def _remote_readers(
    remote: client.ApiClient, config: HubConfig
) -> tuple[Callable[[], LeaseView], Callable[[], int]]:
    """Reads of the Active's hub Lease and of its leader Lease's epoch, each bounded by the
    dial timeout twice over: the request timeout, and a deadline on the call itself."""
    dial, ns = config.promotion_dial_timeout, config.remote_namespace

    def read_remote() -> LeaseView:
        return call_bounded(
            lambda: read_lease(remote, ns, config.hub_lease_name, dial), dial, "poll"
        )

    def read_epoch() -> int:
        return call_bounded(
            lambda: read_lease(remote, ns, config.leader_lease_name, dial).epoch, dial, "epoch"
        )

    return read_remote, read_epoch


def _add_standby_parts(
    hub: Hub,
    config: HubConfig,
    local: client.ApiClient,
    remote: client.ApiClient | None,
    kick: Callable[[], None] | None,
    claim_epoch: Callable[[int], int] | None,
    metrics: HubMetrics,
    mirror_watch_timeout: float,
) -> None:
    dial = config.promotion_dial_timeout
    elector, publisher = hub.elector, hub.publisher
    assert elector is not None and publisher is not None
    hub.tracker = RemoteLeaseTracker()
    read_remote = read_epoch = None
    if remote is not None:
        read_remote, read_epoch = _remote_readers(remote, config)
        hub.mirror = Mirror(
            Kube(remote, dial),
            Kube(local, dial),
            remote_namespace=config.remote_namespace,
            local_namespace=config.namespace,
            template_name=config.template_name,
            source=config.mirror_source,
            prune_interval=config.mirror_prune_interval,
            watch_read_timeout=mirror_watch_timeout,
        )
    hub.epoch_claim = claim_epoch or EpochClaim(
        local, namespace=config.namespace, lease_name=config.leader_lease_name,
        request_timeout=dial,
    )  # fmt: skip

    def acquire_lease() -> None:
        elector.acquire_once()
        elector.start()  # keep renewing from now on

    def publish() -> None:
        outcome = publisher.publish_now()
        if outcome.error or outcome.refused:
            raise RuntimeError(outcome.error or outcome.refused)

    mirror = hub.mirror
    hooks = PromotionHooks(
        stop_mirror=mirror.stop if mirror is not None else None,
        resume_mirror=mirror.start if mirror is not None else None,
        acquire_lease=acquire_lease,
        release_lease=lambda: elector.stop(release=True, timeout=dial * 2),
        claim_epoch=hub.epoch_claim,
        publish=publish,
        kick=kick,
        emit_event=event_emitter(
            local,
            namespace=config.namespace,
            lease_name=config.hub_lease_name,
            lease_uid=lambda: elector.uid,
            request_timeout=dial,
        ),
    )
    hub.promoter = Promoter(
        fence=hub.fence,
        hooks=hooks,
        tracker=hub.tracker,
        check_self=lambda: _self_check(local, config),
        read_remote=read_remote,
        padding_seconds=config.padding_seconds,
        dial_timeout=dial,
        grace_period=config.promotion_grace_period,
        metrics=metrics,
    )
    if read_remote is not None:
        # Without a client to the Active there is nothing to poll and nothing can ever arm.
        hub.watcher = StandbyWatcher(
            read_remote=read_remote,
            read_remote_epoch=read_epoch,
            tracker=hub.tracker,
            promoter=hub.promoter,
            poll_interval=config.poll_interval,
            padding_seconds=config.padding_seconds,
        )


def _self_check(local_api_client: client.ApiClient, config: HubConfig) -> None:
    """Our own hub Lease through our own client: NotFound still proves the server answers."""
    read_lease(
        local_api_client, config.namespace, config.hub_lease_name, config.promotion_dial_timeout
    )
