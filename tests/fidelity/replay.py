"""Replay the fidelity corpus against one API server and reduce each answer to what haptic
relies on, so the answers of the local and the real server can be compared line by line.

Pure parts (substitution, normalization, comparison) are plain functions; `Replayer` does
the HTTP, through the kubeconfig's own credentials (a token for the local server, client
certificates for the real one)."""

from __future__ import annotations

import json
import re
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import kubernetes
import urllib3
import yaml

CORPUS_DIR = Path(__file__).resolve().parent / "corpus"
_REF = re.compile(r"\$\{([A-Za-z0-9_-]+)\.([A-Za-z0-9_.\[\]-]+)\}")


def load_corpus(name: str = "requests.yaml") -> list[dict[str, Any]]:
    return yaml.safe_load((CORPUS_DIR / name).read_text())


def dig(obj: Any, path: str) -> Any:
    """`a.b.0.c` into nested dicts/lists; None when any step is missing."""
    for part in path.split("."):
        if isinstance(obj, list) and part.isdigit() and int(part) < len(obj):
            obj = obj[int(part)]
        elif isinstance(obj, dict) and part in obj:
            obj = obj[part]
        else:
            return None
    return obj


def substitute(value: Any, saved: dict[str, Any], ns: str) -> Any:
    """`{ns}` and `${name.path}` (a value of a saved answer) anywhere in strings."""
    if isinstance(value, str):
        value = value.replace("{ns}", ns)
        whole = _REF.fullmatch(value)
        if whole:
            return dig(saved.get(whole.group(1)), whole.group(2))
        return _REF.sub(lambda m: str(dig(saved.get(m.group(1)), m.group(2))), value)
    if isinstance(value, list):
        return [substitute(v, saved, ns) for v in value]
    if isinstance(value, dict):
        return {k: substitute(v, saved, ns) for k, v in value.items()}
    return value


# What legitimately differs between two servers, and so is never compared by value: the
# values of uids, timestamps and resourceVersions (only their presence), and the messages
# of Status objects (only reason, code and details). See tests/fidelity/README.md.
_PRESENCE_ONLY = ("uid", "resourceVersion", "creationTimestamp")


def shape_object(obj: dict[str, Any], read: list[str]) -> dict[str, Any]:
    """An object as the code sees it: kind, name, generation, which of uid/resourceVersion/
    creationTimestamp are present, and the value of each field in `read`."""
    meta = obj.get("metadata") or {}
    shape: dict[str, Any] = {
        "kind": obj.get("kind"),
        "apiVersion": obj.get("apiVersion"),
        "name": meta.get("name"),
        "generation": meta.get("generation"),
        "has": sorted(k for k in _PRESENCE_ONLY if meta.get(k)),
    }
    for path in read:
        shape[path] = normalize_value(path, dig(obj, path))
    return shape


def normalize_value(path: str, value: Any) -> Any:
    """Fields read by the code whose exact value is server-specific become comparable."""
    if path.endswith("managedFields") and isinstance(value, list):
        # Who manages what (and through which operation and subresource), not when.
        # fieldsV1 is left out: the real server also records the null timestamps its
        # defaulting adds to a PUT, and the "." markers; the managers are what haptic reads.
        return sorted(
            (m.get("manager"), m.get("operation"), m.get("subresource", "")) for m in value
        )
    if path.endswith("conditions") and isinstance(value, list):
        return [
            {
                k: v
                for k, v in c.items()
                if v is not None and k not in ("lastTransitionTime", "lastProbeTime")
            }
            for c in value
        ]
    return value


def shape_status(body: dict[str, Any]) -> dict[str, Any]:
    details = body.get("details") or {}
    causes = sorted((c.get("field", ""), c.get("reason", "")) for c in details.get("causes") or [])
    return {
        "kind": body.get("kind"),
        "status": body.get("status"),
        "reason": body.get("reason"),
        "code": body.get("code"),
        "details": {
            k: details.get(k) for k in ("name", "group", "kind") if details.get(k) is not None
        },
        "causes": causes,
    }


def shape_answer(status: int, body: Any, step: dict[str, Any]) -> dict[str, Any]:
    """The comparable answer to one request."""
    answer: dict[str, Any] = {"code": status}
    if not isinstance(body, dict):
        answer["body"] = "non-json" if body else "empty"
        return answer
    read = step.get("read") or []
    if body.get("kind") == "Status":
        answer["status"] = shape_status(body)
    elif isinstance(body.get("items"), list):
        meta = body.get("metadata") or {}
        answer["list"] = {
            "kind": body.get("kind"),
            "has_resourceVersion": bool(meta.get("resourceVersion")),
            "names": sorted((i.get("metadata") or {}).get("name") for i in body["items"]),
            "items": [shape_object(i, read) for i in body["items"]] if read else [],
        }
    else:
        answer["object"] = shape_object(body, read)
    return answer


def shape_events(events: list[dict[str, Any]], read: list[str]) -> list[Any]:
    """A watch stream as the code consumes it: each event's type and object name; an ERROR
    as its Status; a BOOKMARK as whether it carries a resourceVersion and nothing else."""
    out: list[Any] = []
    for event in events:
        etype = event.get("type")
        obj = event.get("object") or {}
        if etype == "ERROR":
            out.append(["ERROR", shape_status(obj)])
        elif etype == "BOOKMARK":
            meta = obj.get("metadata") or {}
            out.append(["BOOKMARK", bool(meta.get("resourceVersion"))])
        else:
            item = [etype, (obj.get("metadata") or {}).get("name")]
            item += [normalize_value(p, dig(obj, p)) for p in read]
            out.append(item)
    return out


def difference(local: Any, real: Any) -> bool:
    return json.dumps(local, sort_keys=True) != json.dumps(real, sort_keys=True)


@dataclass
class Replayer:
    """One server: its ApiClient (credentials from its kubeconfig) and the saved answers."""

    api_client: kubernetes.client.ApiClient
    ns: str = "fidelity"
    saved: dict[str, Any] = field(default_factory=dict)

    def _http(
        self, method: str, path: str, query: dict[str, Any], body: Any, ctype: str,
        read_timeout: float,
    ) -> tuple[int, Any]:  # fmt: skip
        config = self.api_client.configuration
        headers = {"Accept": "application/json"}
        token = (config.api_key or {}).get("authorization") or (config.api_key or {}).get(
            "BearerToken"
        )
        if token:
            headers["Authorization"] = token
        data = None
        if body is not None:
            headers["Content-Type"] = ctype
            data = body.encode() if isinstance(body, str) else json.dumps(body).encode()
        url = config.host + path
        fields = [(k, str(v).lower() if isinstance(v, bool) else str(v)) for k, v in query.items()]
        if fields:
            from urllib.parse import urlencode

            url += "?" + urlencode(fields)
        pool = self.api_client.rest_client.pool_manager
        timeout = urllib3.Timeout(connect=5, read=read_timeout)
        resp = pool.request(
            method, url, body=data, headers=headers, timeout=timeout, preload_content=False,
            retries=False,
        )  # fmt: skip
        try:
            raw = resp.read()
        finally:
            resp.release_conn()
        return resp.status, raw

    def run(self, step: dict[str, Any]) -> dict[str, Any]:
        """Send one corpus entry; returns its comparable answer (and saves it if asked)."""
        for _ in range(int(step.get("sleep_before", 0) * 10)):
            time.sleep(0.1)
        path = substitute(step["path"], self.saved, self.ns)
        query = substitute(step.get("query") or {}, self.saved, self.ns)
        body = substitute(step.get("body"), self.saved, self.ns)
        ctype = step.get("content_type", "application/json")
        if isinstance(body, dict) and "yaml" in ctype:
            body = yaml.safe_dump(body)
        watching = str(query.get("watch", "")).lower() == "true"
        read_timeout = float(query.get("timeoutSeconds", 10)) + 10
        status, raw = self._http(step.get("method", "GET"), path, query, body, ctype, read_timeout)
        if watching and status == 200:
            events = [json.loads(line) for line in raw.splitlines() if line.strip()]
            return {"code": status, "events": shape_events(events, step.get("read") or [])}
        try:
            parsed = json.loads(raw) if raw else None
        except ValueError:
            parsed = raw.decode(errors="replace")[:200]
        if step.get("save") and isinstance(parsed, dict):
            self.saved[step["save"]] = parsed
        return shape_answer(status, parsed, step)
