"""Volumes for processes without a mount namespace. Pure.

A volume's files live in `<pod dir>/volumes/<name>/` (hostPath volumes use the host path), and
every argv element or env value that names a path under a container's mountPath is rewritten
to the local directory, so `--token-file /var/run/haptic/token` with a Secret volume mounted at
/var/run/haptic reads the Secret's `token` key. emptyDir volumes are empty directories that the
pod's containers share.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

from .podenv import EnvError, RefData, field_ref_value

VOLUMES_DIR = "volumes"


def volume_refs(pod: dict[str, Any]) -> set[tuple[str, str]]:
    refs: set[tuple[str, str]] = set()
    for vol in (pod.get("spec") or {}).get("volumes") or []:
        if "secret" in vol:
            refs.add(("secret", vol["secret"].get("secretName", "")))
        if "configMap" in vol:
            refs.add(("configmap", vol["configMap"].get("name", "")))
    return refs


def _keyed_files(source: dict[str, Any], data: dict[str, str] | None, what: str) -> dict[str, str]:
    if data is None:
        if source.get("optional"):
            return {}
        raise EnvError(f"{what} not found")
    items = source.get("items")
    if not items:
        return dict(data)
    out = {}
    for item in items:
        if item["key"] not in data:
            if source.get("optional"):
                continue
            raise EnvError(f"{what} has no key {item['key']!r}")
        out[item.get("path") or item["key"]] = data[item["key"]]
    return out


def volume_files(
    volume: dict[str, Any], pod: dict[str, Any], pod_ip: str, host_ip: str, refs: RefData
) -> dict[str, str] | None:
    """Relative path -> content for volumes with content; None for emptyDir/hostPath/other."""
    if "secret" in volume:
        name = volume["secret"].get("secretName", "")
        return _keyed_files(volume["secret"], refs.get(("secret", name)), f"secret {name!r}")
    if "configMap" in volume:
        name = volume["configMap"].get("name", "")
        return _keyed_files(
            volume["configMap"], refs.get(("configmap", name)), f"configmap {name!r}"
        )
    if "downwardAPI" in volume:
        out = {}
        for item in volume["downwardAPI"].get("items") or []:
            if "fieldRef" in item:
                out[item["path"]] = field_ref_value(
                    pod, item["fieldRef"]["fieldPath"], pod_ip, host_ip
                )
        return out
    return None


def volume_dir(volume: dict[str, Any], pod_dir: Path) -> Path:
    if "hostPath" in volume:
        return Path(volume["hostPath"]["path"])
    return pod_dir / VOLUMES_DIR / volume["name"]


def mount_map(
    pod: dict[str, Any], container: dict[str, Any], pod_dir: Path
) -> list[tuple[str, str]]:
    """(mountPath, local path) for the container's mounts, longest mountPath first."""
    volumes = {v["name"]: v for v in (pod.get("spec") or {}).get("volumes") or []}
    out = []
    for mount in container.get("volumeMounts") or []:
        vol = volumes.get(mount.get("name"))
        if vol is None:
            raise EnvError(f"volumeMount {mount.get('name')!r} names no volume")
        local = volume_dir(vol, pod_dir)
        if mount.get("subPath"):
            local = local / mount["subPath"]
        out.append((mount["mountPath"].rstrip("/") or "/", str(local)))
    return sorted(out, key=lambda m: len(m[0]), reverse=True)


def translate(text: str, mounts: list[tuple[str, str]]) -> str:
    """Rewrite paths under a mountPath to the local directory, in one pass (a rewritten path is
    never rewritten again, e.g. by an emptyDir at /tmp). A path counts where it starts the
    string or follows whitespace, = : , or a quote, and ends there or continues with '/'
    (so shell snippets in `sh -c` are covered too)."""
    table = {m: local for m, local in mounts if m != "/"}  # never rewrite every absolute path
    if not table:
        return text
    alternatives = "|".join(re.escape(m) for m in sorted(table, key=len, reverse=True))
    pattern = re.compile(r"(^|[\s=:,'\"])(" + alternatives + r")(?=/|$|[\s,:'\"])")
    return pattern.sub(lambda m: m.group(1) + table[m.group(2)], text)
