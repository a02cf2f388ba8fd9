"""The pod page reads its agent's /healthz live (issue 20): a real agent process, receipts
mirrored through the store, the page rendered by Django's test client."""

from __future__ import annotations

from collections.abc import Iterator
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest
from django.test import Client

from checkpoints import store
from dashboard import live
from localcluster.ports import free_port
from tests.agents.helpers import AgentProcess, Site, free_ip, manifest_for
from tests.site import factories as f

pytestmark = [pytest.mark.django_db, pytest.mark.timeout(120)]


@pytest.fixture
def agent(tmp_path: Path) -> Iterator[AgentProcess]:
    process = AgentProcess(tmp_path / "agent").start()
    try:
        yield process
    finally:
        process.stop()


def site_of(agent: AgentProcess) -> Site:
    backend = (free_ip(), 1)
    return Site(agent.frontend_port, {"be_a": backend}, {"a.example": "be_a"})


def publish_receipt(agent: AgentProcess, plan: str, checksum: str) -> None:
    entry = f.receipt("pod-a", plan, checksum, "2026-12-02T10:00:00Z", term=("controller-a", 1))
    entry |= {"podIP": agent.ip, "agentPort": agent.port}
    store.apply_haproxycfg(f.published([entry]))


def pod_page(viewer: Any, fragment: bool = False) -> str:
    client = Client()
    client.force_login(viewer)
    response = client.get("/pods/pod-a/" + ("?fragment=1" if fragment else ""))
    assert response.status_code == 200
    return response.content.decode()


def test_the_pod_page_shows_what_the_agent_says_now_before_any_receipt_does(
    agent: AgentProcess, viewer: Any
) -> None:
    site = site_of(agent)
    first = agent.client.apply(manifest_for(site, "plan-one"))
    publish_receipt(agent, "plan-one", first.state.applied_checksum)
    page = pod_page(viewer)
    assert 'id="pod-live"' in page and "observed at" in page
    assert "plan-one" in page and "live plan differs" not in page
    # A second apply that no receipt has recorded yet: the page says so, live.
    site.hosts["b.example"] = "be_a"
    second = agent.client.apply(manifest_for(site, "plan-two", sequence=2, previous="plan-one"))
    for html in (pod_page(viewer), pod_page(viewer, fragment=True)):
        live = html[html.index('id="pod-live"') :]
        assert "plan-two" in live and second.state.applied_checksum in live
        assert "controller-a at epoch 1" in live
        assert "live plan differs from the last receipt" in live


def test_the_pod_page_says_the_agent_is_unreachable_when_it_is_stopped(
    agent: AgentProcess, viewer: Any
) -> None:
    first = agent.client.apply(manifest_for(site_of(agent), "plan-one"))
    publish_receipt(agent, "plan-one", first.state.applied_checksum)
    agent.stop()
    page = pod_page(viewer)
    live = page[page.index('id="pod-live"') :]
    assert "agent unreachable:" in live
    assert f"{agent.ip}:{agent.port}" in live


def test_a_receipt_without_an_address_says_where_is_unknown(viewer: Any) -> None:
    store.apply_haproxycfg(
        f.published([f.receipt("pod-a", "plan-one", f.sha("x"), "2026-12-02T10:00:00Z")])
    )
    page = pod_page(viewer)
    assert "agent unreachable: no address published for this pod yet" in page


def test_nothing_listens_within_the_timeout(viewer: Any) -> None:
    ip = free_ip()
    entry = f.receipt("pod-a", "plan-one", f.sha("x"), "2026-12-02T10:00:00Z")
    store.apply_haproxycfg(f.published([entry | {"podIP": ip, "agentPort": free_port(ip)}]))
    assert "agent unreachable:" in pod_page(viewer)


def test_an_answer_that_is_no_summary_or_from_another_pod_is_not_this_pods_agent() -> None:
    """Pod IPs are reused, and anything may listen on an old address: the page says so
    instead of showing another agent's plan as this pod's (or failing on a bad body)."""
    now = datetime.now(UTC)
    assert not live.observation(["not", "a", "dict"], "10.0.0.1:8405", now, "haproxy-0").reachable
    other = live.observation({"pod_name": "haproxy-9"}, "10.0.0.1:8405", now, "haproxy-0")
    assert not other.reachable and "another pod's agent" in other.why
    own = live.observation(
        {"pod_name": "haproxy-0", "applied_plan_id": "p", "term": "bad"}, "a", now, "haproxy-0"
    )
    assert own.reachable and own.applied_plan_id == "p" and own.applied_by == "unknown"
