"""spec.httpResources with two controller replicas (issue 18, "The HTTP store"): only the
leader fetches, and after a graceful hand-over only the new leader does. Each replica's
fetches carry its User-Agent (`haptic-controller/<identity>`), as its Kubernetes requests
do, so the source's request log says who fetched."""

from __future__ import annotations

import hashlib
import time
from collections.abc import Iterator

import kubernetes
import pytest

from controller.election.identity import identity_from_user_agent
from devstack import stack
from devstack.stack import wait_for
from tests.e2e.harness import System, start_system
from tests.httpstore.conftest import Source, _template, serve_sources

pytestmark = pytest.mark.e2e


@pytest.fixture(scope="module")
def system() -> Iterator[System]:
    system = start_system("http-store-leader", haproxy_replicas=1, controllers=2)
    try:
        yield system
    finally:
        system.stop()


def _fetchers(source: Source, since: int = 0) -> set[str | None]:
    return {identity_from_user_agent(r.get("User-Agent", "")) for r in source.requests[since:]}


def test_only_the_leader_fetches_and_after_a_hand_over_only_the_new_one(system: System) -> None:
    sources = {"motd": Source(b"one\n", etag='"1"')}
    with serve_sources(sources) as base:
        patch = _template(base, motd={"refreshInterval": "500ms", "timeout": "500ms"})
        patch["spec"]["files"] = {"motd.txt": {"template": "{{ http.motd }}"}}
        kubernetes.client.CustomObjectsApi(system.client).patch_namespaced_custom_object(
            "haproxy-haptic.org", "v1alpha1", stack.NAMESPACE, "haproxytemplateconfigs",
            "haptic", patch,
        )  # fmt: skip
        one = hashlib.sha256(b"one\n").hexdigest()
        wait_for(
            lambda: system.file_digests("general/motd.txt") == {one},
            90,
            what="the first body on the pods",
        )
        leader = wait_for(system.leader, 10, what="a leader")
        time.sleep(3)  # several refresh intervals
        assert len(sources["motd"].requests) >= 3, "premise: the leader refreshes"
        assert _fetchers(sources["motd"]) == {leader}

        system.controllers[leader].stop(grace=30)  # SIGTERM: drain, release the Lease
        successor = wait_for(
            lambda: (h := system.leader()) not in (None, leader) and h, 60, what="a new leader"
        )
        mark = len(sources["motd"].requests)
        sources["motd"].body, sources["motd"].etag = b"two\n", '"2"'
        two = hashlib.sha256(b"two\n").hexdigest()
        wait_for(
            lambda: system.file_digests("general/motd.txt") == {two},
            60,
            what="the second body on the pods",
        )
        time.sleep(2)
        assert _fetchers(sources["motd"], mark) == {successor}
