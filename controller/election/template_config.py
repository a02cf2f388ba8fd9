"""Read the election settings from the HAProxyTemplateConfig (defaults if it is absent)."""

from __future__ import annotations

import logging

from kubernetes import client
from kubernetes.client.exceptions import ApiException

from controller.election.timing import ElectionSettings, settings_from_spec

log = logging.getLogger(__name__)

GROUP = "haproxy-haptic.org"
VERSION = "v1alpha1"
PLURAL = "haproxytemplateconfigs"


def load_election_settings(
    api_client: client.ApiClient, namespace: str, name: str, timeout: float = 10.0
) -> ElectionSettings:
    """`spec.controller.leaderElection` of the named template config.

    A missing config means defaults; an invalid duration raises ValueError, because electing
    with timings the operator did not ask for could break the failover they planned for.
    """
    api = client.CustomObjectsApi(api_client)
    try:
        obj = api.get_namespaced_custom_object(
            GROUP, VERSION, namespace, PLURAL, name, _request_timeout=timeout
        )
    except ApiException as exc:
        if exc.status == 404:
            log.info("no HAProxyTemplateConfig %s/%s: default election timings", namespace, name)
            return ElectionSettings()
        raise
    return settings_from_spec(obj.get("spec") if isinstance(obj, dict) else None)
