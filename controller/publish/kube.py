"""Small helpers over the kubernetes client for haproxy-haptic.org objects (bounded calls)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from kubernetes import client
from kubernetes.client.exceptions import ApiException

from contract import GROUP, VERSION


class StatusRaceLost(RuntimeError):
    """A status read-modify-write lost the resourceVersion compare-and-swap every attempt."""


class Objects:
    """Namespaced custom objects and Secrets as plain dicts, every call with a timeout.

    `bound(write)`, when given, is asked before every request: it raises to stop the request
    (a publication past its deadline or term, see controller/term/publisher.py) and returns
    the seconds left, which then cap the request's timeout.
    """

    def __init__(
        self,
        api_client: client.ApiClient,
        namespace: str,
        timeout: float = 5.0,
        bound: Callable[[bool], float] | None = None,
    ):
        self.custom = client.CustomObjectsApi(api_client)
        self.core = client.CoreV1Api(api_client)
        self.serialize = api_client.sanitize_for_serialization
        self.namespace = namespace
        self.timeout = timeout
        self.bound = bound

    def _budget(self, write: bool = False) -> float:
        if self.bound is None:
            return self.timeout
        return max(0.05, min(self.timeout, self.bound(write)))

    def get(self, plural: str, name: str) -> dict[str, Any] | None:
        try:
            return self.custom.get_namespaced_custom_object(
                GROUP, VERSION, self.namespace, plural, name, _request_timeout=self._budget()
            )
        except ApiException as exc:
            if exc.status == 404:
                return None
            raise

    def list(self, plural: str, label_selector: str) -> list[dict[str, Any]]:
        result = self.custom.list_namespaced_custom_object(
            GROUP,
            VERSION,
            self.namespace,
            plural,
            label_selector=label_selector,
            _request_timeout=self._budget(),
        )
        return list(result.get("items") or [])

    def create(self, plural: str, body: dict[str, Any]) -> dict[str, Any]:
        return self.custom.create_namespaced_custom_object(
            GROUP, VERSION, self.namespace, plural, body, _request_timeout=self._budget(write=True)
        )

    def replace(self, plural: str, body: dict[str, Any]) -> dict[str, Any]:
        return self._replace(self.custom.replace_namespaced_custom_object, plural, body)

    def replace_status(self, plural: str, body: dict[str, Any]) -> dict[str, Any]:
        return self._replace(self.custom.replace_namespaced_custom_object_status, plural, body)

    def _replace(self, call: Callable[..., Any], plural: str, body: dict[str, Any]) -> Any:
        name = body["metadata"]["name"]
        return call(
            GROUP, VERSION, self.namespace, plural, name, body, _request_timeout=self._budget(True)
        )

    def update_status(
        self,
        plural: str,
        name: str,
        change: Callable[[dict[str, Any]], dict[str, Any] | None],
        attempts: int = 5,
        known: dict[str, Any] | None = None,
    ) -> dict[str, Any] | None:
        """Read, change and replace an object's status, again on 409 (another writer won).

        `change(obj)` returns the status to write, or None when there is nothing to write.
        Returns the object as it now stands (the write's answer, or the object read when
        there was nothing to write); None when it does not exist; StatusRaceLost when every
        attempt lost. `known`: the object as the caller last had it (a previous answer of
        this call); the first attempt writes on it without reading. It is a compare-and-swap
        on its resourceVersion, so a stale copy answers 409 and is read again, and a "nothing
        to write" decided on the copy alone is checked against a read.
        """
        copy = known
        for _ in range(attempts):
            from_copy = copy is not None
            obj = copy if copy is not None else self.get(plural, name)
            copy = None
            if obj is None:
                return None
            status = change(obj)
            if status is None:
                if from_copy:
                    continue
                return obj
            try:
                return self.replace_status(plural, {**obj, "status": status})
            except ApiException as exc:
                if exc.status != 409:
                    raise
        raise StatusRaceLost(
            f"{plural}/{name}: status lost the compare-and-swap race {attempts} times"
        )

    def delete(self, plural: str, name: str, uid: str, resource_version: str) -> bool:
        """Delete with uid and resourceVersion preconditions; False when they no longer hold."""
        options = client.V1DeleteOptions(
            preconditions=client.V1Preconditions(uid=uid, resource_version=resource_version)
        )
        try:
            self.custom.delete_namespaced_custom_object(
                GROUP,
                VERSION,
                self.namespace,
                plural,
                name,
                body=options,
                _request_timeout=self._budget(write=True),
            )
        except ApiException as exc:
            if exc.status in (404, 409):
                return False
            raise
        return True

    # -- Secrets ----------------------------------------------------------------------

    def get_secret(self, name: str) -> dict[str, Any] | None:
        try:
            secret = self.core.read_namespaced_secret(
                name, self.namespace, _request_timeout=self._budget()
            )
        except ApiException as exc:
            if exc.status == 404:
                return None
            raise
        return self.serialize(secret)

    def list_secrets(self, label_selector: str) -> list[dict[str, Any]]:
        result = self.core.list_namespaced_secret(
            self.namespace, label_selector=label_selector, _request_timeout=self._budget()
        )
        return [self.serialize(s) for s in result.items]

    def create_secret(self, body: dict[str, Any]) -> dict[str, Any]:
        created = self.core.create_namespaced_secret(
            self.namespace, body, _request_timeout=self._budget(write=True)
        )
        return self.serialize(created)

    def replace_secret(self, body: dict[str, Any]) -> dict[str, Any]:
        replaced = self.core.replace_namespaced_secret(
            body["metadata"]["name"],
            self.namespace,
            body,
            _request_timeout=self._budget(write=True),
        )
        return self.serialize(replaced)

    def delete_secret(self, name: str, uid: str, resource_version: str) -> bool:
        options = client.V1DeleteOptions(
            preconditions=client.V1Preconditions(uid=uid, resource_version=resource_version)
        )
        try:
            self.core.delete_namespaced_secret(
                name, self.namespace, body=options, _request_timeout=self._budget(write=True)
            )
        except ApiException as exc:
            if exc.status in (404, 409):
                return False
            raise
        return True
