"""Container environment and command resolution, as the kubelet does it. Pure."""

from __future__ import annotations

import re
from typing import Any

# (kind, name) -> decoded key/value data; kind is "secret" or "configmap".
RefData = dict[tuple[str, str], dict[str, str]]

_SUBSCRIPT = re.compile(r"^metadata\.(labels|annotations)\['(.+)'\]\Z")


class EnvError(ValueError):
    """The container cannot start: a reference in its env does not resolve."""


def field_ref_value(pod: dict[str, Any], path: str, pod_ip: str, host_ip: str) -> str:
    meta = pod.get("metadata") or {}
    spec = pod.get("spec") or {}
    simple = {
        "metadata.name": meta.get("name", ""),
        "metadata.namespace": meta.get("namespace", "default"),
        "metadata.uid": meta.get("uid", ""),
        "spec.nodeName": spec.get("nodeName", ""),
        "spec.serviceAccountName": spec.get("serviceAccountName", ""),
        "status.podIP": pod_ip,
        "status.podIPs": pod_ip,
        "status.hostIP": host_ip,
        "status.hostIPs": host_ip,
    }
    if path in simple:
        return simple[path]
    match = _SUBSCRIPT.match(path)
    if match:
        return (meta.get(match.group(1)) or {}).get(match.group(2), "")
    raise EnvError(f"unsupported fieldRef fieldPath {path!r}")


def referenced_objects(container: dict[str, Any]) -> set[tuple[str, str]]:
    """Secrets and ConfigMaps the container's env needs, so the caller can fetch them."""
    refs: set[tuple[str, str]] = set()
    for item in container.get("env") or []:
        source = item.get("valueFrom") or {}
        if "secretKeyRef" in source:
            refs.add(("secret", source["secretKeyRef"]["name"]))
        if "configMapKeyRef" in source:
            refs.add(("configmap", source["configMapKeyRef"]["name"]))
    for item in container.get("envFrom") or []:
        if "secretRef" in item:
            refs.add(("secret", item["secretRef"]["name"]))
        if "configMapRef" in item:
            refs.add(("configmap", item["configMapRef"]["name"]))
    return refs


def expand(text: str, env: dict[str, str]) -> str:
    """Kubernetes $(VAR) expansion: defined vars are replaced, unknown ones stay literal,
    and $$ escapes a dollar."""
    out: list[str] = []
    i = 0
    while i < len(text):
        ch = text[i]
        if ch == "$" and i + 1 < len(text):
            nxt = text[i + 1]
            if nxt == "$":
                out.append("$")
                i += 2
                continue
            if nxt == "(":
                end = text.find(")", i + 2)
                if end != -1:
                    name = text[i + 2 : end]
                    out.append(env[name] if name in env else text[i : end + 1])
                    i = end + 1
                    continue
        out.append(ch)
        i += 1
    return "".join(out)


def _ref_value(refs: RefData, kind: str, ref: dict[str, Any]) -> str | None:
    data = refs.get((kind, ref["name"]))
    value = None if data is None else data.get(ref["key"])
    if value is None and not ref.get("optional"):
        raise EnvError(f"{kind} {ref['name']!r} key {ref['key']!r} not found")
    return value


def container_env(
    pod: dict[str, Any],
    container: dict[str, Any],
    pod_ip: str,
    host_ip: str,
    refs: RefData,
) -> dict[str, str]:
    """The variables a container gets from its spec plus the always-present downward-API
    values POD_NAME, POD_NAMESPACE, POD_IP and POD_UID (spec entries win)."""
    meta = pod.get("metadata") or {}
    env: dict[str, str] = {
        "POD_NAME": meta.get("name", ""),
        "POD_NAMESPACE": meta.get("namespace", "default"),
        "POD_IP": pod_ip,
        "POD_UID": meta.get("uid", ""),
    }
    for item in container.get("envFrom") or []:
        prefix = item.get("prefix", "")
        for kind, key in (("secret", "secretRef"), ("configmap", "configMapRef")):
            if key in item:
                data = refs.get((kind, item[key]["name"]))
                if data is None and not item[key].get("optional"):
                    raise EnvError(f"{kind} {item[key]['name']!r} not found")
                for k, v in (data or {}).items():
                    env[prefix + k] = v
    for item in container.get("env") or []:
        name = item["name"]
        if "value" in item or "valueFrom" not in item:
            env[name] = expand(str(item.get("value", "")), env)
            continue
        source = item["valueFrom"]
        value: str | None
        if "fieldRef" in source:
            value = field_ref_value(pod, source["fieldRef"]["fieldPath"], pod_ip, host_ip)
        elif "secretKeyRef" in source:
            value = _ref_value(refs, "secret", source["secretKeyRef"])
        elif "configMapKeyRef" in source:
            value = _ref_value(refs, "configmap", source["configMapKeyRef"])
        else:
            # resourceFieldRef has no meaning for a local process; leave the variable empty.
            value = ""
        if value is not None:
            env[name] = value
    return env


def container_argv(container: dict[str, Any], env: dict[str, str]) -> list[str]:
    """command + args with $(VAR) expansion; the image is ignored, so a command is required."""
    command = list(container.get("command") or [])
    if not command:
        raise EnvError(
            "localcluster runs containers as local processes and ignores images: "
            "the container needs an explicit command"
        )
    return [expand(str(a), env) for a in command + list(container.get("args") or [])]
