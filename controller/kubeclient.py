"""Every ApiClient haptic builds, with one retry policy (docs/design/kube-clients.md).

Two rules, as client-go's rest.Request keeps them:
- a 429 (kube-apiserver's "storage is (re)initializing" while a resource's watch cache
  starts, or API priority and fairness shedding load) is asked again after the pause its
  Retry-After names, up to TOO_MANY_REQUESTS_RETRIES times, for every verb: a 429 means the
  request was not served, so a write asked again is not a write done twice;
- a bounded client never retries a timed-out or dropped request, so a 5 s timeout bounds
  the call (urllib3's default would retry a read three times, turning 5 s into 20 s).
"""

from __future__ import annotations

import base64
import copy

from kubernetes import client, config
from kubernetes.client.exceptions import ApiException
from urllib3.util.retry import Retry

# client-go's ceiling: one request plus 10 more after Retry-After answers.
TOO_MANY_REQUESTS_RETRIES = 10


class _Policy(Retry):
    """urllib3's Retry, but a 429 is asked again for every verb (it was never served), while
    a read error is asked again only for the idempotent verbs urllib3 names."""

    def is_retry(self, method: str, status_code: int, has_retry_after: bool = False) -> bool:
        if self.status_forcelist and status_code in self.status_forcelist:
            return True
        return super().is_retry(method, status_code, has_retry_after)


def retry_policy(*, bounded: bool) -> Retry:
    """The pool's policy (the module docstring's two rules). read=False and connect=False
    re-raise the caller's own error, the ReadTimeoutError it expects."""
    return _Policy(
        total=None,
        connect=False if bounded else 3,
        read=False if bounded else 3,
        redirect=False,  # kube-apiserver never redirects; a redirect is answered as is
        other=0,
        status=TOO_MANY_REQUESTS_RETRIES,
        status_forcelist=frozenset({429}),
        respect_retry_after_header=True,
        raise_on_status=False,  # the last 429 reaches the caller as an ApiException
    )


def from_configuration(
    configuration: client.Configuration, *, bounded: bool = False
) -> client.ApiClient:
    """An ApiClient on `configuration`, whose retries it sets to the policy."""
    configuration.retries = retry_policy(bounded=bounded)
    return client.ApiClient(configuration)


def from_kubeconfig(path: str, context: str = "", *, bounded: bool = False) -> client.ApiClient:
    """A client for one kubeconfig; empty `path` means the in-cluster service account."""
    configuration = client.Configuration()
    if path:
        config.load_kube_config(
            config_file=path, context=context or None, client_configuration=configuration
        )
    else:
        config.load_incluster_config(client_configuration=configuration)
    return from_configuration(configuration, bounded=bounded)


def bounded_copy(api_client: client.ApiClient) -> client.ApiClient:
    """A separate, bounded client to the same cluster; the caller's is untouched."""
    copied = from_configuration(copy.deepcopy(api_client.configuration), bounded=True)
    copied.user_agent = api_client.user_agent  # the replica's identity stays on its requests
    return copied


def server_url(api_client: client.ApiClient) -> str:
    """The API server a client talks to, without a trailing slash."""
    return str(api_client.configuration.host).rstrip("/")


def secret_data(
    api_client: client.ApiClient, namespace: str, name: str, timeout: float = 5.0
) -> dict[str, str] | None:
    """A Secret's data, decoded to text; None when there is no such Secret."""
    try:
        secret = client.CoreV1Api(api_client).read_namespaced_secret(
            name, namespace, _request_timeout=timeout
        )
    except ApiException as exc:
        if exc.status == 404:
            return None
        raise
    return {k: base64.b64decode(v).decode() for k, v in (secret.data or {}).items()}
