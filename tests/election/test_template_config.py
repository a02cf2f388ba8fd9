"""Election settings read from the HAProxyTemplateConfig on the local API server."""

from __future__ import annotations

import uuid
from typing import Any

import pytest
from kubernetes import client

from controller.election.template_config import GROUP, PLURAL, VERSION, load_election_settings
from controller.election.timing import ElectionSettings, ElectionTiming
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
