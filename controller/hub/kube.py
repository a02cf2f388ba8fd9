"""A small dict-in, dict-out client over one cluster's ApiClient, for the mirror.

The mirror copies several kinds (Secrets and custom resources) verbatim, so it works on
plain JSON objects by path rather than on generated models. Every call carries a timeout.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from kubernetes import client
from kubernetes.client.exceptions import ApiException

from contract import API_VERSION, CFG_KIND, CFG_PLURAL, CHILD_KINDS, TEMPLATE_KIND, TEMPLATE_PLURAL


@dataclass(frozen=True)
class Kind:
    """Where a kind lives in the API, and whether the mirror carries its status."""

    name: str
    api_path: str  # "/api/v1" or "/apis/<group>/<version>"
    plural: str
    # The status haptic writes and reads: the template config's (activeController, render
    # warnings) and the HAProxyCfg's (receipts, checkpoint pointers). The children's status
    # subresource holds nothing of haptic's, so their copies carry none and
    # deploy/rbac-standby.yaml grants no write of it.
    mirrored_status: bool

    def collection(self, namespace: str) -> str:
        return f"{self.api_path}/namespaces/{namespace}/{self.plural}"

    def item(self, namespace: str, name: str) -> str:
        return f"{self.collection(namespace)}/{name}"


SECRET = Kind("Secret", "/api/v1", "secrets", False)
_CRD_PATH = f"/apis/{API_VERSION}"
TEMPLATE = Kind(TEMPLATE_KIND, _CRD_PATH, TEMPLATE_PLURAL, True)
CFG = Kind(CFG_KIND, _CRD_PATH, CFG_PLURAL, True)
MAP = Kind(CHILD_KINDS["map"].kind, _CRD_PATH, CHILD_KINDS["map"].plural, False)
GENERAL = Kind(CHILD_KINDS["general"].kind, _CRD_PATH, CHILD_KINDS["general"].plural, False)
CRTLIST = Kind(CHILD_KINDS["crt-list"].kind, _CRD_PATH, CHILD_KINDS["crt-list"].plural, False)
LEASE = Kind("Lease", "/apis/coordination.k8s.io/v1", "leases", False)


class Kube:
    def __init__(self, api_client: client.ApiClient, timeout: float) -> None:
        self.api_client = api_client
        self.timeout = timeout

    def _send(
        self,
        method: str,
        path: str,
        *,
        query: Mapping[str, Any] | None = None,
        body: Any = None,
        content_type: str = "application/json",
        timeout: Any = None,
    ) -> Any:
        headers = {"Accept": "application/json"}
        if body is not None:
            headers["Content-Type"] = content_type
        request = self.api_client.param_serialize(
            method,
            path,
            query_params=[(k, v) for k, v in (query or {}).items() if v is not None],
            header_params=headers,
            body=body,
            auth_settings=["BearerToken"],
        )
        return self.api_client.call_api(*request, _request_timeout=timeout or self.timeout)

    def request(self, method: str, path: str, **kwargs: Any) -> dict[str, Any]:
        # A 429 was already asked again by the client's pool (controller/kubeclient.py).
        response = self._send(method, path, **kwargs)
        data = response.read()
        if not 200 <= response.status <= 299:
            raise _api_error(response.status, response.reason, data)
        return json.loads(data) if data else {}

    def get(self, path: str) -> dict[str, Any]:
        return self.request("GET", path)

    def list(self, path: str, label_selector: str | None = None) -> dict[str, Any]:
        return self.request("GET", path, query={"labelSelector": label_selector})

    def create(self, path: str, body: Mapping[str, Any]) -> dict[str, Any]:
        return self.request("POST", path, body=dict(body))

    def replace(self, path: str, body: Mapping[str, Any]) -> dict[str, Any]:
        return self.request("PUT", path, body=dict(body))

    def delete(self, path: str, uid: str, resource_version: str) -> dict[str, Any]:
        # Preconditions: never delete an object that changed since we decided to.
        body = {
            "kind": "DeleteOptions",
            "apiVersion": "v1",
            "preconditions": {"uid": uid, "resourceVersion": resource_version},
        }
        return self.request("DELETE", path, body=body)


def _api_error(status: int, reason: str, data: bytes | None) -> ApiException:
    exc = ApiException(status=status, reason=reason)
    exc.body = data.decode(errors="replace") if data else None
    return exc
