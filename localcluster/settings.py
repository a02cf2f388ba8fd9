"""The local cluster's settings from the environment: the one place `localcluster` reads
`os.environ`. It runs without Django (`python -m localcluster`, and its node's pods), so it
cannot use `haptic_site/env.py`."""

from __future__ import annotations

import os
from pathlib import Path

# Which cluster start_cluster() gives fixtures: "local" (this package's API server, the
# default) or "real" (kube-apiserver and friends, built by `make kube`).
TEST_CLUSTER_ENV = "HAPTIC_TEST_CLUSTER"


def test_cluster_kind() -> str:
    return os.environ.get(TEST_CLUSTER_ENV) or "local"


def kube_bin_dir(default: Path) -> Path:
    """HAPTIC_KUBE_BIN: where `make kube` put etcd and the Kubernetes binaries."""
    return Path(os.environ.get("HAPTIC_KUBE_BIN") or default)


def pod_env(name: str, default: str = "") -> str:
    """A downward-API variable (POD_NAME, POD_NAMESPACE, POD_IP) of a program run in a pod."""
    return os.environ.get(name) or default


def child_environ() -> dict[str, str]:
    """A copy of this process's environment, for a child process to start from."""
    return dict(os.environ)
