"""One ApiClient per cluster, built so that a request's timeout really bounds it.

urllib3 retries a timed-out GET up to three times by default, which would turn a 5 s dial
timeout into 20 s; the hub's clients never retry. Each cluster gets its own Configuration so
the Active's credentials and pool never mix with the Standby's own.
"""

from __future__ import annotations

import copy

from kubernetes import client, config


def no_retries(api_client: client.ApiClient) -> client.ApiClient:
    """The same client with retries disabled on its connection pool."""
    api_client.configuration.retries = 0
    # The pool is built at construction: rebuild it so the setting takes effect.
    api_client.rest_client = type(api_client.rest_client)(api_client.configuration)
    return api_client


def bounded_copy(api_client: client.ApiClient) -> client.ApiClient:
    """A separate client to the same cluster with retries off; the caller's is untouched."""
    configuration = copy.deepcopy(api_client.configuration)
    configuration.retries = 0
    copied = client.ApiClient(configuration)
    copied.user_agent = api_client.user_agent  # the replica's identity stays on its requests
    return copied


def cluster_client(kubeconfig: str, context: str = "") -> client.ApiClient:
    """A fresh ApiClient for one cluster's kubeconfig (never the process-wide default)."""
    configuration = client.Configuration()
    config.load_kube_config(
        config_file=kubeconfig, context=context or None, client_configuration=configuration
    )
    configuration.retries = 0
    return client.ApiClient(configuration)


def server_url(api_client: client.ApiClient) -> str:
    return str(api_client.configuration.host).rstrip("/")
