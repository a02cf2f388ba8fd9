"""Container environment and argv resolution."""

from __future__ import annotations

import pytest

from localcluster.node.podenv import (
    EnvError,
    container_argv,
    container_env,
    expand,
    referenced_objects,
)

POD = {
    "metadata": {
        "name": "web-1",
        "namespace": "shop",
        "uid": "u-1",
        "labels": {"app": "web"},
    },
    "spec": {"nodeName": "localnode"},
}


def test_downward_api_and_values() -> None:
    container = {
        "name": "c",
        "env": [
            {"name": "A", "value": "1"},
            {"name": "B", "value": "$(A)-$(POD_NAME)-$(MISSING)-$$(A)"},
            {"name": "IP", "valueFrom": {"fieldRef": {"fieldPath": "status.podIP"}}},
            {"name": "NS", "valueFrom": {"fieldRef": {"fieldPath": "metadata.namespace"}}},
            {"name": "APP", "valueFrom": {"fieldRef": {"fieldPath": "metadata.labels['app']"}}},
            {"name": "S", "valueFrom": {"secretKeyRef": {"name": "s", "key": "k"}}},
            {"name": "M", "valueFrom": {"configMapKeyRef": {"name": "m", "key": "k"}}},
        ],
    }
    refs = {("secret", "s"): {"k": "sv"}, ("configmap", "m"): {"k": "mv"}}
    env = container_env(POD, container, "127.3.3.3", "127.0.0.1", refs)
    assert env["POD_NAME"] == "web-1" and env["POD_NAMESPACE"] == "shop"
    assert env["POD_IP"] == "127.3.3.3" and env["POD_UID"] == "u-1"
    assert env["B"] == "1-web-1-$(MISSING)-$(A)"
    assert (env["IP"], env["NS"], env["APP"], env["S"], env["M"]) == (
        "127.3.3.3",
        "shop",
        "web",
        "sv",
        "mv",
    )
    assert referenced_objects(container) == {("secret", "s"), ("configmap", "m")}


def test_missing_reference_fails_unless_optional() -> None:
    ref = {"name": "X", "valueFrom": {"secretKeyRef": {"name": "s", "key": "k"}}}
    with pytest.raises(EnvError):
        container_env(POD, {"name": "c", "env": [ref]}, "127.3.3.3", "127.0.0.1", {})
    ref["valueFrom"]["secretKeyRef"]["optional"] = True
    env = container_env(POD, {"name": "c", "env": [ref]}, "127.3.3.3", "127.0.0.1", {})
    assert "X" not in env


def test_argv_expands_and_requires_command() -> None:
    env = {"PORT": "8080"}
    argv = container_argv({"command": ["serve"], "args": ["--port", "$(PORT)"]}, env)
    assert argv == ["serve", "--port", "8080"]
    with pytest.raises(EnvError, match="command"):
        container_argv({"name": "c", "image": "nginx", "args": ["x"]}, env)


def test_expand_edge_cases() -> None:
    assert expand("$", {}) == "$"
    assert expand("$(", {}) == "$("
    assert expand("a$b", {}) == "a$b"
