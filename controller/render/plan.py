"""The canonical plan of a rendered file set and the runtime operations between two plans.

The plan is read back from the rendered bytes (server lines of haproxy.cfg, entries of map
files) rather than from the library's model, so it is also right for a user's own
haproxyConfig template. Everything here is pure.
"""

from __future__ import annotations

import copy
import hashlib
import json
import re
import sys
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from controller.render.model import RenderedFile

PLAN_VERSION = 1
_SECTION_KEYWORDS = (
    "global",
    "defaults",
    "frontend",
    "backend",
    "listen",
    "peers",
    "resolvers",
    "userlist",
    "program",
    "http-errors",
    "ring",
    "mailers",
    "cache",
    "log-forward",
)
_MASK = "<runtime>"


def checksum(files: Iterable[RenderedFile]) -> str:
    """`sha256:<hex>` over every file sorted by path: `path NUL content NUL` each."""
    h = hashlib.sha256()
    for f in sorted(files, key=lambda f: f.path):
        h.update(f.path.encode())
        h.update(b"\0")
        h.update(f.content)
        h.update(b"\0")
    return "sha256:" + h.hexdigest()


def _split_addr(addr: str) -> tuple[str, int | None]:
    # IPv4 or name with an optional port; a bracketed IPv6 keeps its brackets off.
    if addr.startswith("["):
        host, _, rest = addr[1:].partition("]")
        port = rest[1:] if rest.startswith(":") else ""
    else:
        host, sep, port = addr.rpartition(":")
        if not sep:
            host, port = addr, ""
    return host, int(port) if port.isdigit() else None


def _server_line(tokens: list[str]) -> dict[str, Any]:
    address, port = _split_addr(tokens[2]) if len(tokens) > 2 else ("", None)
    weight = 1
    enabled = True
    for i, tok in enumerate(tokens[3:], start=3):
        if tok == "weight" and i + 1 < len(tokens) and tokens[i + 1].isdigit():
            weight = int(tokens[i + 1])
        elif tok == "disabled":
            enabled = False
        elif tok == "enabled":
            enabled = True
    return {"address": address, "port": port, "weight": weight, "enabled": enabled}


# The shape the kubernetes-backends library renders; other server lines take the slow path.
_FAST_SERVER = re.compile(
    r"^(\s+)server (\S+) (\d{1,3}\.\d{1,3}\.\d{1,3}\.\d{1,3}):(\d+) weight (\d+)( disabled)?$"
)


def _mask_server(line: str, tokens: list[str]) -> str:
    out = [*tokens[:2], _MASK]
    skip = False
    for i, tok in enumerate(tokens[3:], start=3):
        if skip:
            skip = False
            continue
        if tok == "weight" and i + 1 < len(tokens):
            out += ["weight", _MASK]
            skip = True
        elif tok not in ("disabled", "enabled"):
            out.append(tok)
    indent = line[: len(line) - len(line.lstrip())]
    return indent + " ".join(out)


def parse_config(config: str) -> tuple[dict[str, dict[str, dict[str, Any]]], str]:
    """Servers per backend (name -> slot state) and the structure digest of haproxy.cfg.

    The structure digest masks exactly the attributes the runtime API can change (address,
    port, weight, enabled), so two configs with the same digest differ only in those.
    """
    backends: dict[str, dict[str, dict[str, Any]]] = {}
    servers: dict[str, dict[str, Any]] | None = None
    masked: list[str] = []
    for line in config.splitlines():
        # The prefix test first: most lines of a backend (settings, route rules) are not
        # server lines, and a failing regex match costs more than a string comparison.
        if servers is not None and line.startswith("    server "):
            m = _FAST_SERVER.match(line)
            if m:
                indent, name, address, port, weight, disabled = m.groups()
                servers[name] = {
                    "address": address,
                    "port": int(port),
                    "weight": int(weight),
                    "enabled": disabled is None,
                }
                masked.append(f"{indent}server {name} {_MASK} weight {_MASK}")
                continue
        if not line or line[0] in " \t":
            if servers is not None and line.lstrip()[:7] in ("server ", "server\t"):
                tokens = line.split()
                if len(tokens) >= 3:
                    servers[tokens[1]] = _server_line(tokens)
                    masked.append(_mask_server(line, tokens))
                    continue
            masked.append(line)
            continue
        tokens = line.split()
        if tokens and tokens[0] in _SECTION_KEYWORDS:
            if tokens[0] in ("backend", "listen") and len(tokens) > 1:
                servers = backends.setdefault(tokens[1], {})
            else:
                servers = None
        masked.append(line)
    digest = hashlib.sha256("\n".join(masked).encode()).hexdigest()
    return backends, digest


def parse_map(content: str) -> tuple[dict[str, str], bool]:
    """Entries of a map file (key -> value) and whether a key appears more than once."""
    entries: dict[str, str] = {}
    duplicate = False
    for line in content.splitlines():
        stripped = line.strip()
        if not stripped or stripped.startswith("#"):
            continue
        parts = stripped.split(None, 1)
        key, value = parts[0], parts[1].strip() if len(parts) > 1 else ""
        if key in entries:
            duplicate = True
            continue  # HAProxy keeps the first entry for a key
        # Interned: every kept plan names the same hosts and backends (see build_plan).
        entries[sys.intern(key)] = sys.intern(value)
    return entries, duplicate


def build_plan(
    files: Sequence[RenderedFile], previous: Mapping[str, Any] | None = None
) -> dict[str, Any]:
    """The canonical plan of a file set (JSON-able; keys sorted when serialised).

    `previous` (a plan, optional): its backends and maps that are equal to this set's are
    shared, not copied. Plans are never changed in place, and the leader keeps the plans of
    the last outputs (controller/term/plans.py): at 5,000 Ingresses each full render's
    server slots would otherwise cost several MiB more per kept plan (issue 19).

    Raises ValueError (UnicodeDecodeError included) for a set without haproxy.cfg or with
    text files that are not UTF-8.
    """
    by_path = {f.path: f for f in files}
    if "haproxy.cfg" not in by_path:
        raise ValueError("file set has no haproxy.cfg")
    backends, structure = parse_config(by_path["haproxy.cfg"].content.decode())
    maps: dict[str, dict[str, str]] = {}
    duplicates: list[str] = []
    for f in files:
        if f.kind == "map":
            entries, dup = parse_map(f.content.decode())
            maps[f.path] = entries
            if dup:
                duplicates.append(f.path)
    if previous:
        _share(backends, previous.get("backends"))
        _share(maps, previous.get("maps"))
    return {
        "version": PLAN_VERSION,
        "backends": backends,
        "maps": maps,
        "map_duplicates": sorted(duplicates),
        "files": {f.path: {"kind": f.kind, "sha256": f.sha256} for f in files},
        "structure_digest": structure,
    }


def _share(values: dict[str, Any], previous: Any) -> None:
    """Replace each value of `values` equal to `previous`'s under the same key by that one."""
    if not isinstance(previous, Mapping):
        return
    for key, value in values.items():
        old = previous.get(key)
        if old is not value and old == value:
            values[key] = old


def canonical_json(value: Any) -> str:
    """The canonical JSON a plan ID hashes: sorted keys, no spaces, ASCII."""
    return json.dumps(value, sort_keys=True, separators=(",", ":"), ensure_ascii=True)


def plan_id(plan: Mapping[str, Any]) -> str:
    """Hex sha256 of the canonical JSON of a plan."""
    return hashlib.sha256(canonical_json(plan).encode()).hexdigest()


def _member(key: str, value: Any) -> bytes:
    return f"{canonical_json(key)}:{canonical_json(value)}".encode()


@dataclass(frozen=True)
class PlanJSON:
    """The canonical JSON of a plan kept in pieces: one per backend, one per other top-level
    key. Serialising 50,000 server slots costs more than the rest of an endpoint change, so
    the incremental path (controller.render.incremental) re-serialises only the backends and
    keys it changed; `text()` is byte for byte `canonical_json(plan)`. The pieces are kept
    encoded (canonical JSON is ASCII): the plan ID of an update then hashes them without
    encoding a megabyte of text again (issue 19)."""

    members: tuple[bytes, ...]  # `"name":{servers}` per backend, in name order
    index: Mapping[str, int]  # backend name -> its position in members
    others: Mapping[str, bytes]  # top-level key other than "backends" -> JSON of its value

    @classmethod
    def of(cls, plan: Mapping[str, Any]) -> PlanJSON:
        names = sorted(plan["backends"])
        return cls(
            tuple(_member(name, plan["backends"][name]) for name in names),
            {name: i for i, name in enumerate(names)},
            {
                key: canonical_json(value).encode()
                for key, value in plan.items()
                if key != "backends"
            },
        )

    def replaced(
        self, plan: Mapping[str, Any], backends: Iterable[str], keys: Iterable[str]
    ) -> PlanJSON:
        """The pieces of `plan`, which differs from this one only in `backends` (names it
        already has) and the other top-level `keys`."""
        members = list(self.members)
        for name in backends:
            members[self.index[name]] = _member(name, plan["backends"][name])
        others = dict(self.others)
        for key in keys:
            others[key] = canonical_json(plan[key]).encode()
        return PlanJSON(tuple(members), self.index, others)

    def _pieces(self) -> list[bytes]:
        parts = {**self.others, "backends": None}
        pieces = [b"{"]
        for i, key in enumerate(sorted(parts)):
            pieces.append((b"," if i else b"") + canonical_json(key).encode() + b":")
            if key == "backends":
                pieces += [b"{", b",".join(self.members), b"}"]
            else:
                value = parts[key]
                assert value is not None
                pieces.append(value)
        pieces.append(b"}")
        return pieces

    def text(self) -> str:
        return b"".join(self._pieces()).decode()

    def plan_id(self) -> str:
        h = hashlib.sha256()
        for piece in self._pieces():
            h.update(piece)
        return h.hexdigest()


def runtime_operations(
    old_plan: Mapping[str, Any], new_plan: Mapping[str, Any]
) -> list[dict[str, Any]] | None:
    """Operations that take a pod from `old_plan` to `new_plan` without a reload, or None.

    None means a reload is needed: the structure differs, a non-map file differs, the file
    set differs, or a changed map has duplicate keys (its runtime state would be ambiguous).
    An empty list means nothing to do.
    """
    if old_plan.get("version") != new_plan.get("version"):
        return None
    if old_plan["structure_digest"] != new_plan["structure_digest"]:
        return None
    old_files, new_files = old_plan["files"], new_plan["files"]
    if set(old_files) != set(new_files):
        return None
    changed_maps: list[str] = []
    for path in sorted(new_files):
        if old_files[path] == new_files[path]:
            continue
        if path == "haproxy.cfg" and new_files[path]["kind"] == old_files[path]["kind"]:
            continue  # equal structure digests: only runtime server attributes differ
        if new_files[path]["kind"] != "map" or old_files[path]["kind"] != "map":
            return None
        changed_maps.append(path)
    dups = set(old_plan.get("map_duplicates", ())) | set(new_plan.get("map_duplicates", ()))
    if dups.intersection(changed_maps):
        return None

    ops: list[dict[str, Any]] = []
    old_backends, new_backends = old_plan["backends"], new_plan["backends"]
    if set(old_backends) != set(new_backends):  # cannot happen with equal digests; be safe
        return None
    for backend in sorted(new_backends):
        server_ops = server_operations(backend, old_backends[backend], new_backends[backend])
        if server_ops is None:
            return None
        ops += server_ops
    for path in changed_maps:
        old_entries = old_plan["maps"].get(path, {})
        new_entries = new_plan["maps"].get(path, {})
        for key in sorted(old_entries.keys() - new_entries.keys()):
            ops.append({"op": "map_del", "map": path, "key": key})
        for key in sorted(new_entries):
            if old_entries.get(key) != new_entries[key]:
                ops.append({"op": "map_set", "map": path, "key": key, "value": new_entries[key]})
    return ops


def server_operations(
    backend: str,
    old_servers: Mapping[str, Mapping[str, Any]],
    new_servers: Mapping[str, Mapping[str, Any]],
) -> list[dict[str, Any]] | None:
    """`set_server` operations that take one backend's slots from old to new (server name
    order), or None when the slots differ (a reload)."""
    if set(old_servers) != set(new_servers):
        return None
    ops: list[dict[str, Any]] = []
    for server in sorted(new_servers):
        new = new_servers[server]
        if old_servers[server] == new:
            continue
        if new["port"] is None:  # a port-less server cannot be set at runtime
            return None
        ops.append(
            {
                "op": "set_server",
                "backend": backend,
                "server": server,
                "address": new["address"],
                "port": new["port"],
                "weight": new["weight"],
                "state": "ready" if new["enabled"] else "maint",
            }
        )
    return ops


def apply_runtime_operations(
    plan: Mapping[str, Any], ops: Sequence[Mapping[str, Any]]
) -> dict[str, Any]:
    """The runtime state (backends and maps) after applying `ops` to `plan`, as a new dict.

    What an agent does through the runtime API, modelled on the plan; used to check that
    runtime_operations is complete and by anyone simulating a pod.
    """
    state = {"backends": copy.deepcopy(plan["backends"]), "maps": copy.deepcopy(plan["maps"])}
    for op in ops:
        if op["op"] == "set_server":
            server = state["backends"][op["backend"]][op["server"]]
            server.update(
                address=op["address"],
                port=op["port"],
                weight=op["weight"],
                enabled=op["state"] == "ready",
            )
        elif op["op"] == "map_set":
            state["maps"].setdefault(op["map"], {})[op["key"]] = op["value"]
        elif op["op"] == "map_del":
            state["maps"].get(op["map"], {}).pop(op["key"], None)
        else:
            raise ValueError(f"unknown runtime operation {op['op']!r}")
    return state


def runtime_state(plan: Mapping[str, Any]) -> dict[str, Any]:
    """The part of a plan the runtime API can change: servers and map entries."""
    return {"backends": plan["backends"], "maps": plan["maps"]}
