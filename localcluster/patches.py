"""Merge patch (RFC 7386), JSON patch (RFC 6902) and strategic merge patch; pure functions."""

from __future__ import annotations

import copy
import logging
from typing import Any

from localcluster.errors import ApiError
from localcluster.resources import ListKeys

log = logging.getLogger(__name__)


def merge_patch(target: Any, patch: Any) -> Any:
    """RFC 7386: objects merge recursively, null deletes, anything else replaces."""
    if not isinstance(patch, dict):
        return copy.deepcopy(patch)
    result = dict(target) if isinstance(target, dict) else {}
    for key, value in patch.items():
        if value is None:
            result.pop(key, None)
        else:
            result[key] = merge_patch(result.get(key), value)
    return result


def _unescape(token: str) -> str:
    return token.replace("~1", "/").replace("~0", "~")


def _pointer(path: str) -> list[str]:
    if path == "":
        return []
    if not path.startswith("/"):
        raise ApiError(422, f"invalid JSON pointer {path!r}")
    return [_unescape(t) for t in path[1:].split("/")]


def _resolve(doc: Any, tokens: list[str]) -> Any:
    node = doc
    for token in tokens:
        if isinstance(node, dict):
            if token not in node:
                raise KeyError(token)
            node = node[token]
        elif isinstance(node, list):
            node = node[_index(token, len(node), allow_end=False)]
        else:
            raise KeyError(token)
    return node


def _index(token: str, length: int, allow_end: bool) -> int:
    if token == "-" and allow_end:
        return length
    if not token.isdigit():
        raise KeyError(token)
    i = int(token)
    if i > length or (i == length and not allow_end):
        raise KeyError(token)
    return i


def _add(doc: Any, tokens: list[str], value: Any) -> Any:
    if not tokens:
        return value
    parent = _resolve(doc, tokens[:-1])
    last = tokens[-1]
    if isinstance(parent, dict):
        parent[last] = value
    elif isinstance(parent, list):
        parent.insert(_index(last, len(parent), allow_end=True), value)
    else:
        raise KeyError(last)
    return doc


def _remove(doc: Any, tokens: list[str]) -> Any:
    if not tokens:
        raise KeyError("")
    parent = _resolve(doc, tokens[:-1])
    last = tokens[-1]
    if isinstance(parent, dict):
        if last not in parent:
            raise KeyError(last)
        return parent.pop(last)
    if isinstance(parent, list):
        return parent.pop(_index(last, len(parent), allow_end=False))
    raise KeyError(last)


def json_patch(target: Any, ops: Any) -> Any:
    """Apply RFC 6902 operations; a failed `test` or a missing path is 422 like the server."""
    if not isinstance(ops, list):
        raise ApiError(400, "json patch must be a list of operations")
    doc = copy.deepcopy(target)
    for op in ops:
        if not isinstance(op, dict) or "op" not in op:
            raise ApiError(400, f"invalid json patch operation: {op!r}")
        kind = op["op"]
        path = op.get("path", "")
        try:
            tokens = _pointer(path)
            if kind == "add":
                doc = _add(doc, tokens, copy.deepcopy(op.get("value")))
            elif kind == "remove":
                _remove(doc, tokens)
            elif kind == "replace":
                _resolve(doc, tokens)
                if tokens:
                    _remove(doc, tokens)
                doc = _add(doc, tokens, copy.deepcopy(op.get("value")))
            elif kind == "move":
                value = _remove(doc, _pointer(op["from"]))
                doc = _add(doc, tokens, value)
            elif kind == "copy":
                value = copy.deepcopy(_resolve(doc, _pointer(op["from"])))
                doc = _add(doc, tokens, value)
            elif kind == "test":
                if _resolve(doc, tokens) != op.get("value"):
                    raise _patch_failed(f"testing value {path} failed")
            else:
                raise ApiError(400, f"Unexpected kind: {kind}")
        except (KeyError, IndexError, TypeError) as exc:
            raise _patch_failed(
                f'{kind} operation does not apply: doc is missing path: "{path}": {exc}'
            ) from None
    return doc


def _patch_failed(detail: str) -> ApiError:
    """kube-apiserver's answer to a patch that does not apply: a generic 422 (its
    NewGenericServerResponse), whose fixed message drops the patch library's words
    (`detail`, logged here at debug level only)."""
    log.debug("patch does not apply: %s", detail)
    return ApiError(422, "the server rejected our request due to an error in our request")


def _item_key(item: Any, keys: tuple[str, ...]) -> Any:
    if not isinstance(item, dict):
        return ("__value__", item)
    return tuple(item.get(k) for k in keys)


def strategic_merge(
    target: Any, patch: Any, list_keys: ListKeys, set_lists: frozenset[str], path: str = ""
) -> Any:
    """Strategic merge patch for built-in kinds: lists with a merge key merge item by item.

    Supports null deletion, `$patch: delete|replace` in maps and list items,
    `$deleteFromPrimitiveList/<field>` and ignores `$setElementOrder/` and `$retainKeys`.
    """
    if not isinstance(patch, dict):
        return copy.deepcopy(patch)
    if patch.get("$patch") == "replace":
        return {k: copy.deepcopy(v) for k, v in patch.items() if k != "$patch"}
    if patch.get("$patch") == "delete":
        return None
    result = dict(target) if isinstance(target, dict) else {}
    for key, value in patch.items():
        if key in ("$patch", "$retainKeys") or key.startswith("$setElementOrder/"):
            continue
        if key.startswith("$deleteFromPrimitiveList/"):
            field = key.split("/", 1)[1]
            current = result.get(field)
            if isinstance(current, list) and isinstance(value, list):
                result[field] = [v for v in current if v not in value]
            continue
        sub = f"{path}.{key}" if path else key
        if value is None:
            result.pop(key, None)
            continue
        if isinstance(value, list) and sub in list_keys:
            result[key] = _merge_list(result.get(key), value, list_keys, set_lists, sub)
        elif isinstance(value, list) and sub in set_lists:
            current = list(result.get(key) or [])
            result[key] = current + [v for v in value if v not in current]
        elif isinstance(value, dict):
            merged = strategic_merge(result.get(key), value, list_keys, set_lists, sub)
            if merged is None:
                result.pop(key, None)
            else:
                result[key] = merged
        else:
            result[key] = copy.deepcopy(value)
    return result


def _merge_list(
    current: Any, patch: list[Any], list_keys: ListKeys, set_lists: frozenset[str], path: str
) -> list[Any]:
    # Strategic merge keys on one field (the first), e.g. containerPort for ports.
    keys = list_keys[path][:1]
    merged = [copy.deepcopy(i) for i in current] if isinstance(current, list) else []
    if any(isinstance(i, dict) and i.get("$patch") == "replace" for i in patch):
        return [copy.deepcopy(i) for i in patch if not (isinstance(i, dict) and "$patch" in i)]
    index = {_item_key(item, keys): n for n, item in enumerate(merged)}
    for item in patch:
        k = _item_key(item, keys)
        if isinstance(item, dict) and item.get("$patch") == "delete":
            if k in index:
                merged[index[k]] = None
            continue
        if k in index and merged[index[k]] is not None:
            merged[index[k]] = strategic_merge(
                merged[index[k]], item, list_keys, set_lists, path + "[]"
            )
        else:
            index[k] = len(merged)
            merged.append(strategic_merge({}, item, list_keys, set_lists, path + "[]"))
    return [i for i in merged if i is not None]
