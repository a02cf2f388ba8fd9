"""Election settings read from the HAProxyTemplateConfig on the local API server."""

from __future__ import annotations

import time
import uuid
from typing import Any

import pytest
from kubernetes import client

from contract import GROUP, VERSION
from contract import TEMPLATE_PLURAL as PLURAL
from controller.election.template_config import (
    CONDITION,
    INVALID_REASON,
    RESTART_REASON,
    ElectionConfigError,
    ElectionConfigVerdict,
    Follow,
    follow,
    judge_election_config,
    load_election_settings,
)
from controller.election.timing import ElectionSettings, ElectionTiming
from controller.replica_runtime import ReplicaRuntime, RuntimeConfig
from devstack.stack import wait_for
from tests.election.conftest import NAMESPACE

pytestmark = [pytest.mark.e2e, pytest.mark.timeout(60)]


def create_config(api: client.ApiClient, election: dict[str, Any]) -> str:
    name = f"htc-{uuid.uuid4().hex[:8]}"
    client.CustomObjectsApi(api).create_namespaced_custom_object(
        GROUP,
        VERSION,
        NAMESPACE,
        PLURAL,
        {
            "apiVersion": f"{GROUP}/{VERSION}",
            "kind": "HAProxyTemplateConfig",
            "metadata": {"name": name},
            "spec": {
                "podSelector": {"matchLabels": {"app": "haproxy"}},
                "controller": {"leaderElection": election},
            },
        },
    )
    return name


def test_overrides_from_the_template_config(api_server: Any) -> None:
    api = api_server.api_client()
    name = create_config(
        api,
        {
            "leaseName": "custom",
            "leaseDuration": "4s",
            "renewDeadline": "3s",
            "retryPeriod": "500ms",
        },
    )
    settings = load_election_settings(api, NAMESPACE, name)
    assert settings == ElectionSettings(True, "custom", ElectionTiming(4.0, 3.0, 0.5))


def test_defaults_without_a_config_and_refusal_of_inconsistent_timings(api_server: Any) -> None:
    api = api_server.api_client()
    assert load_election_settings(api, NAMESPACE, "does-not-exist") == ElectionSettings()
    # Only a 4 s lease: the CRD default renewDeadline (20 s) would outlast it.
    name = create_config(api, {"leaseDuration": "4s"})
    with pytest.raises(ValueError, match="renewDeadline"):
        load_election_settings(api, NAMESPACE, name)


# -- refused, not replaced by defaults; followed without a restart (issue 15, 2.12) -------


def patch_election(api: client.ApiClient, name: str, election: dict[str, Any]) -> None:
    client.CustomObjectsApi(api).patch_namespaced_custom_object(
        GROUP,
        VERSION,
        NAMESPACE,
        PLURAL,
        name,
        {"spec": {"controller": {"leaderElection": election}}},
    )


def condition(api: client.ApiClient, name: str) -> dict[str, Any] | None:
    obj = client.CustomObjectsApi(api).get_namespaced_custom_object(
        GROUP, VERSION, NAMESPACE, PLURAL, name
    )
    for cond in (obj.get("status") or {}).get("conditions") or []:
        if cond["type"] == CONDITION:
            return cond
    return None


def events_on(api: client.ApiClient, name: str, reason: str) -> list[Any]:
    return [
        e
        for e in client.CoreV1Api(api).list_namespaced_event(NAMESPACE).items
        if e.reason == reason
        and e.involved_object.kind == "HAProxyTemplateConfig"
        and e.involved_object.name == name
    ]


def lease_exists(api: client.ApiClient, lease: str) -> bool:
    try:
        client.CoordinationV1Api(api).read_namespaced_lease(lease, NAMESPACE)
    except client.ApiException as exc:
        assert exc.status == 404
        return False
    return True


def test_an_invalid_block_is_refused_with_a_condition_and_an_event_until_fixed(
    api_server: Any, registries: None
) -> None:
    api = api_server.api_client()
    lease = f"lease-{uuid.uuid4().hex[:8]}"
    # Only a 4 s lease: the CRD default renewDeadline (20 s) would outlast it.
    name = create_config(api, {"leaseName": lease, "leaseDuration": "4s"})
    runtime = ReplicaRuntime(RuntimeConfig("cfg-a", NAMESPACE, name, "leader-unused", ""), api)
    runtime.start()
    try:
        assert runtime.elector is None and runtime.refusal is not None
        cond = wait_for(lambda: condition(api, name), timeout=10)
        assert (cond["status"], cond["reason"]) == ("False", INVALID_REASON)
        assert "renewDeadline" in cond["message"] and "not electing" in cond["message"]
        (event,) = wait_for(lambda: events_on(api, name, INVALID_REASON), timeout=10)
        assert event.type == "Warning" and "renewDeadline" in event.message
        time.sleep(1.0)
        assert not lease_exists(api, lease), "no election with timings nobody asked for"

        patch_election(api, name, {"renewDeadline": "3s", "retryPeriod": "500ms"})
        wait_for(lambda: runtime.current_term() is not None, timeout=15)
        assert runtime.elector is not None
        assert runtime.elector.timing == ElectionTiming(4.0, 3.0, 0.5)
        wait_for(lambda: (condition(api, name) or {}).get("status") == "True", timeout=10)
        assert len(events_on(api, name, INVALID_REASON)) == 1  # one event per refusal
    finally:
        runtime.shutdown()


def test_timings_follow_the_template_config_without_a_restart(
    api_server: Any, registries: None
) -> None:
    api = api_server.api_client()
    lease = f"lease-{uuid.uuid4().hex[:8]}"
    block = {"leaseName": lease, "leaseDuration": "4s", "renewDeadline": "3s"}
    name = create_config(api, {**block, "retryPeriod": "500ms"})
    settings = load_election_settings(api, NAMESPACE, name)
    runtime = ReplicaRuntime(
        RuntimeConfig("cfg-b", NAMESPACE, name, "leader-unused", ""), api, settings
    )
    runtime.start()
    leases = client.CoordinationV1Api(api)
    try:
        first = wait_for(runtime.current_term, timeout=15)
        patch_election(
            api, name, {"leaseDuration": "6s", "renewDeadline": "4s", "retryPeriod": "1s"}
        )
        assert runtime.elector is not None
        wait_for(lambda: runtime.elector.timing == ElectionTiming(6.0, 4.0, 1.0), timeout=10)
        # The next renewal records the new duration; the same term goes on.
        wait_for(
            lambda: leases.read_namespaced_lease(lease, NAMESPACE).spec.lease_duration_seconds == 6,
            timeout=10,
        )
        assert runtime.current_term() is first

        # An invalid change is refused: the timings in force stay, the term goes on.
        patch_election(api, name, {"leaseDuration": "2s"})
        wait_for(lambda: (condition(api, name) or {}).get("status") == "False", timeout=10)
        assert runtime.elector.timing == ElectionTiming(6.0, 4.0, 1.0)
        assert "timings unchanged" in condition(api, name)["message"]
        assert runtime.current_term() is first
    finally:
        runtime.shutdown()


def test_enabled_false_is_refused_at_load_with_a_clear_message(api_server: Any) -> None:
    api = api_server.api_client()
    name = create_config(api, {"enabled": False})
    with pytest.raises(ElectionConfigError, match="enabled=false is not supported"):
        load_election_settings(api, NAMESPACE, name)


def test_follow_decisions() -> None:
    base = ElectionSettings(True, "l", ElectionTiming(4.0, 3.0, 0.5))
    faster = ElectionSettings(True, "l", ElectionTiming(2.0, 1.5, 0.3))
    refused = judge_election_config({"controller": {"leaderElection": {"leaseDuration": "1s"}}})
    assert refused.settings is None and "renewDeadline" in (refused.error or "")
    assert follow(None, refused).action is Follow.KEEP
    assert follow(base, refused).condition[1] == INVALID_REASON
    assert follow(None, ElectionConfigVerdict(base)).action is Follow.START
    assert follow(base, ElectionConfigVerdict(faster)).action is Follow.RETIME
    assert follow(base, ElectionConfigVerdict(base)).action is Follow.KEEP
    moved = follow(base, ElectionConfigVerdict(ElectionSettings(True, "other", base.timing)))
    assert moved.action is Follow.KEEP and moved.condition[:2] == ("False", RESTART_REASON)
    bad_name = judge_election_config({"controller": {"leaderElection": {"leaseName": "Bad_Name"}}})
    assert bad_name.settings is None and "DNS subdomain" in (bad_name.error or "")
