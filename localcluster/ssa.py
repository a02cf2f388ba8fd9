"""Server-side apply: field sets, managedFields, conflicts and the apply merge. Pure logic.

A field path is a tuple of FieldsV1 path elements: "f:<field>", "k:<json key>" (an item of a
list map), "v:<json value>" (an item of a set list). A manager owns a set of paths; the
managedFields entry stores it in the FieldsV1 tree format the real server uses.
"""

from __future__ import annotations

import copy
import json
from dataclasses import dataclass
from typing import Any

from localcluster.resources import ListKeys

Path = tuple[str, ...]

# Metadata the server manages itself; never part of a manager's field set.
_SKIP_META = {
    "name",
    "namespace",
    "uid",
    "resourceVersion",
    "generation",
    "creationTimestamp",
    "managedFields",
    "selfLink",
    "deletionTimestamp",
    "deletionGracePeriodSeconds",
    "generateName",
}


@dataclass(frozen=True)
class Shape:
    """How lists merge for one resource type."""

    list_keys: ListKeys
    set_lists: frozenset[str]


def _sub(schema_path: str, key: str) -> str:
    return f"{schema_path}.{key}" if schema_path else key


def _key_json(item: dict[str, Any], keys: tuple[str, ...]) -> str:
    return json.dumps({k: item.get(k) for k in keys if k in item}, separators=(",", ":"))


def field_set(obj: dict[str, Any], shape: Shape) -> set[Path]:
    """The set of field paths an object (or an applied configuration) sets."""
    out: set[Path] = set()
    for key, value in obj.items():
        if key in ("apiVersion", "kind"):
            continue
        if key == "metadata" and isinstance(value, dict):
            meta = {k: v for k, v in value.items() if k not in _SKIP_META}
            _walk(meta, ("f:metadata",), "metadata", shape, out)
            continue
        _walk_value(value, ("f:" + key,), key, shape, out)
    return out


def _walk(node: dict[str, Any], path: Path, sp: str, shape: Shape, out: set[Path]) -> None:
    for key, value in node.items():
        _walk_value(value, (*path, "f:" + key), _sub(sp, key), shape, out)


def _walk_value(value: Any, path: Path, sp: str, shape: Shape, out: set[Path]) -> None:
    if isinstance(value, dict) and value:
        _walk(value, path, sp, shape, out)
    elif isinstance(value, list) and sp in shape.list_keys and shape.list_keys[sp]:
        keys = shape.list_keys[sp]
        for item in value:
            if not isinstance(item, dict):
                continue
            item_path = (*path, "k:" + _key_json(item, keys))
            out.add(item_path)
            _walk(item, item_path, sp + "[]", shape, out)
    elif isinstance(value, list) and sp in shape.set_lists:
        for item in value:
            out.add((*path, "v:" + json.dumps(item, separators=(",", ":"))))
    else:
        out.add(path)


def get_path(obj: Any, path: Path, shape: Shape) -> tuple[bool, Any]:
    """(found, value) of a field path in an object."""
    node = obj
    for pe in path:
        kind, _, rest = pe.partition(":")
        if kind == "f":
            if not isinstance(node, dict) or rest not in node:
                return False, None
            node = node[rest]
        elif kind == "k":
            key = json.loads(rest)
            if not isinstance(node, list):
                return False, None
            for item in node:
                if isinstance(item, dict) and all(item.get(k) == v for k, v in key.items()):
                    node = item
                    break
            else:
                return False, None
        elif kind == "v":
            value = json.loads(rest)
            if not isinstance(node, list) or value not in node:
                return False, None
            node = value
        else:
            return False, None
    return True, node


def remove_path(obj: Any, path: Path) -> None:
    """Remove a field, list-map item or set value from obj in place (if present)."""
    if not path:
        return
    parent = obj
    for pe in path[:-1]:
        found, parent = get_path(parent, (pe,), Shape({}, frozenset()))
        if not found:
            return
    kind, _, rest = path[-1].partition(":")
    if kind == "f" and isinstance(parent, dict):
        parent.pop(rest, None)
    elif kind == "k" and isinstance(parent, list):
        key = json.loads(rest)
        parent[:] = [
            i
            for i in parent
            if not (isinstance(i, dict) and all(i.get(k) == v for k, v in key.items()))
        ]
    elif kind == "v" and isinstance(parent, list):
        value = json.loads(rest)
        parent[:] = [i for i in parent if i != value]


def apply_merge(live: Any, applied: Any, shape: Shape, sp: str = "") -> Any:
    """Merge an applied configuration into the live object: maps and list maps merge,
    set lists union, everything else is replaced by the applied value."""
    if isinstance(applied, dict) and isinstance(live, dict):
        out = dict(live)
        for key, value in applied.items():
            out[key] = apply_merge(live.get(key), value, shape, _sub(sp, key))
        return out
    if isinstance(applied, list) and isinstance(live, list):
        keys = shape.list_keys.get(sp)
        if keys:
            merged = [copy.deepcopy(i) for i in live]
            for item in applied:
                if not isinstance(item, dict):
                    continue
                k = tuple(item.get(x) for x in keys)
                for n, cur in enumerate(merged):
                    if isinstance(cur, dict) and tuple(cur.get(x) for x in keys) == k:
                        merged[n] = apply_merge(cur, item, shape, sp + "[]")
                        break
                else:
                    merged.append(copy.deepcopy(item))
            return merged
        if sp in shape.set_lists:
            return list(live) + [copy.deepcopy(v) for v in applied if v not in live]
    return copy.deepcopy(applied)


# --- FieldsV1 <-> path sets ---------------------------------------------------------------


def to_fields_v1(paths: set[Path]) -> dict[str, Any]:
    tree: dict[str, Any] = {}
    for path in sorted(paths):
        node = tree
        for pe in path:
            node = node.setdefault(pe, {})
    # A path that is both owned and has owned children carries the "." marker.
    for path in paths:
        node = tree
        for pe in path:
            node = node[pe]
        if node and "." not in node:
            node["."] = {}
    return tree


def from_fields_v1(tree: dict[str, Any], prefix: Path = ()) -> set[Path]:
    out: set[Path] = set()
    for pe, sub in tree.items():
        if pe == ".":
            out.add(prefix)
            continue
        path = (*prefix, pe)
        if not sub:
            out.add(path)
        else:
            out |= from_fields_v1(sub, path)
    return out


@dataclass
class Manager:
    manager: str
    operation: str  # "Apply" or "Update"
    subresource: str  # "" or "status"
    api_version: str
    time: str
    paths: set[Path]

    @property
    def ident(self) -> tuple[str, str, str]:
        return (self.manager, self.operation, self.subresource)


def parse_managed(entries: list[dict[str, Any]] | None) -> list[Manager]:
    out = []
    for e in entries or []:
        out.append(
            Manager(
                manager=e.get("manager", ""),
                operation=e.get("operation", "Update"),
                subresource=e.get("subresource", ""),
                api_version=e.get("apiVersion", ""),
                time=e.get("time", ""),
                paths=from_fields_v1(e.get("fieldsV1") or {}),
            )
        )
    return out


def render_managed(managers: list[Manager]) -> list[dict[str, Any]]:
    out = []
    for m in managers:
        if not m.paths:
            continue
        entry: dict[str, Any] = {
            "manager": m.manager,
            "operation": m.operation,
            "apiVersion": m.api_version,
            "time": m.time,
            "fieldsType": "FieldsV1",
            "fieldsV1": to_fields_v1(m.paths),
        }
        if m.subresource:
            entry["subresource"] = m.subresource
        out.append(entry)
    return out


def _is_item_key(path: Path) -> bool:
    """A key field of a list-map item (it goes only with the item itself)."""
    if len(path) < 2 or not path[-2].startswith("k:") or not path[-1].startswith("f:"):
        return False
    return path[-1][2:] in json.loads(path[-2][2:])


def _leaf(path: Path, paths: set[Path]) -> bool:
    n = len(path)
    return not any(len(p) > n and p[:n] == path for p in paths)


def describe_path(path: Path) -> str:
    """`.status.conditions[type="Ready"].status`, as in the real conflict message."""
    out = []
    for pe in path:
        kind, _, rest = pe.partition(":")
        if kind == "f":
            out.append("." + rest)
        elif kind == "k":
            key = json.loads(rest)
            out.append("[" + ",".join(f"{k}={json.dumps(v)}" for k, v in key.items()) + "]")
        elif kind == "v":
            out.append(f"[{rest}]")
    return "".join(out)


@dataclass
class ApplyResult:
    obj: dict[str, Any]
    managers: list[Manager]
    conflicts: list[tuple[str, Path]]


def server_side_apply(
    live: dict[str, Any],
    applied: dict[str, Any],
    managers: list[Manager],
    manager: str,
    subresource: str,
    api_version: str,
    now: str,
    force: bool,
    shape: Shape,
) -> ApplyResult:
    """Merge `applied` into `live` for `manager`; report conflicts (unless forced), drop the
    fields this manager applied before and no longer applies (unless someone else owns them),
    and return the new managedFields."""
    applied_paths = field_set(applied, shape)
    merged = apply_merge(live, applied, shape)
    ident = (manager, "Apply", subresource)
    mine = next((m for m in managers if m.ident == ident), None)
    previous = set(mine.paths) if mine else set()
    # Copies: the caller's managers stay untouched when the apply is refused.
    others = [
        Manager(m.manager, m.operation, m.subresource, m.api_version, m.time, set(m.paths))
        for m in managers
        if m.ident != ident
    ]

    conflicts: list[tuple[str, Path]] = []
    for other in others:
        for path in applied_paths & other.paths:
            if not _leaf(path, applied_paths):
                continue
            before = get_path(live, path, shape)
            after = get_path(merged, path, shape)
            if before != after:
                conflicts.append((other.manager, path))
    if conflicts and not force:
        return ApplyResult(live, managers, sorted(conflicts))
    if force:
        lost = {p for _, p in conflicts}
        for other in others:
            other.paths -= lost

    still_owned: set[Path] = set()
    for other in others:
        still_owned |= other.paths
    # Shortest first: dropping a list-map item drops its fields with it.
    for path in sorted(previous - applied_paths, key=len):
        n = len(path)
        if any(p[:n] == path for p in still_owned) or _is_item_key(path):
            continue
        remove_path(merged, path)

    new_mine = Manager(manager, "Apply", subresource, api_version, now, applied_paths)
    new_managers = [m for m in others if m.paths]
    if mine is None:
        new_managers.append(new_mine)
    else:
        position = managers.index(mine)
        new_managers.insert(min(position, len(new_managers)), new_mine)
    return ApplyResult(merged, new_managers, [])


def _top(obj: dict[str, Any]) -> dict[str, Any]:
    """The part of an object managers own: no apiVersion/kind, no server-managed metadata."""
    out = {k: v for k, v in obj.items() if k not in ("apiVersion", "kind", "metadata")}
    meta = obj.get("metadata")
    if isinstance(meta, dict):
        kept = {k: v for k, v in meta.items() if k not in _SKIP_META}
        if kept:
            out["metadata"] = kept
    return out


def diff_paths(
    old: dict[str, Any], new: dict[str, Any], shape: Shape
) -> tuple[set[Path], set[Path]]:
    """(paths of `new` that are absent or different in `old`, paths of `old` gone in `new`),
    the same as comparing the two field sets path by path, but walking only the subtrees that
    differ (equal subtrees are skipped with one C-level `==`)."""
    changed: set[Path] = set()
    removed: set[Path] = set()

    def subtree(value: Any, path: Path, sp: str) -> set[Path]:
        out: set[Path] = set()
        _walk_value(value, path, sp, shape, out)
        return out

    def walk_dict(o: dict[str, Any], n: dict[str, Any], path: Path, sp: str) -> None:
        for key, nv in n.items():
            p, s = (*path, "f:" + key), _sub(sp, key)
            if key in o:
                walk_value(o[key], nv, p, s)
            else:
                changed.update(subtree(nv, p, s))
        for key, ov in o.items():
            if key not in n:
                removed.update(subtree(ov, (*path, "f:" + key), _sub(sp, key)))

    def walk_value(o: Any, n: Any, path: Path, sp: str) -> None:
        if o == n and type(o) is type(n):
            return
        if isinstance(o, dict) and isinstance(n, dict) and o and n:
            walk_dict(o, n, path, sp)
            return
        keys = shape.list_keys.get(sp)
        if isinstance(o, list) and isinstance(n, list) and keys:
            old_items = {_key_json(i, keys): i for i in o if isinstance(i, dict)}
            new_items = {_key_json(i, keys): i for i in n if isinstance(i, dict)}
            for k, item in new_items.items():
                ip = (*path, "k:" + k)
                if k not in old_items:
                    changed.add(ip)
                    _walk(item, ip, sp + "[]", shape, changed)
                elif old_items[k] != item:
                    changed.add(ip)
                    walk_dict(old_items[k], item, ip, sp + "[]")
            for k, item in old_items.items():
                if k not in new_items:
                    ip = (*path, "k:" + k)
                    removed.add(ip)
                    _walk(item, ip, sp + "[]", shape, removed)
            return
        if isinstance(o, list) and isinstance(n, list) and sp in shape.set_lists:
            for v in n:
                if v not in o:
                    changed.add((*path, "v:" + json.dumps(v, separators=(",", ":"))))
            for v in o:
                if v not in n:
                    removed.add((*path, "v:" + json.dumps(v, separators=(",", ":"))))
            return
        # Different shapes (or leaves): compare the two subtrees path by path.
        old_set, new_set = subtree(o, path, sp), subtree(n, path, sp)
        base = len(path)
        for p in new_set:
            if p not in old_set or get_path(o, p[base:], shape) != get_path(n, p[base:], shape):
                changed.add(p)
        removed.update(old_set - new_set)

    walk_dict(_top(old), _top(new), (), "")
    return changed, removed


def record_update(
    old: dict[str, Any] | None,
    new: dict[str, Any],
    managers: list[Manager],
    manager: str,
    subresource: str,
    api_version: str,
    now: str,
    shape: Shape,
) -> list[Manager]:
    """After a non-apply write: the updating manager takes the fields it changed, and fields
    that no longer exist leave every manager."""
    if old is None:
        changed, removed = field_set(new, shape), set()
    else:
        changed, removed = diff_paths(old, new, shape)
    ident = (manager, "Update", subresource)
    out = []
    found = False
    for m in managers:
        m = Manager(
            m.manager, m.operation, m.subresource, m.api_version, m.time, set(m.paths) - removed
        )
        if m.ident == ident:
            found = True
            if changed:
                m.paths |= changed
                m.time = now
        else:
            m.paths -= changed
        out.append(m)
    if not found and changed:
        out.append(Manager(manager, "Update", subresource, api_version, now, changed))
    return [m for m in out if m.paths]
