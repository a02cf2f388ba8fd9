"""Reads: get, list (paged, or at an exact resourceVersion, from the watch history) and watch."""

from __future__ import annotations

import base64
import json
from typing import Any

from localcluster.errors import ApiError, gone, not_found
from localcluster.resources import ResourceType
from localcluster.selectors import FieldRequirement, Requirement, fields_match, labels_match
from localcluster.store.model import Event, Watcher
from localcluster.store.state import StoreState


class Reads(StoreState):
    def get(self, rt: ResourceType, ns: str, name: str) -> dict[str, Any]:
        obj = self.objects.get(rt.key, {}).get((ns, name))
        if obj is None:
            raise not_found(rt.plural, rt.group, name)
        return obj

    def _state_at(
        self,
        key: str,
        rv: int,
        too_old: str = "The resourceVersion for the provided list is too old.",
    ) -> dict[tuple[str, str], dict[str, Any]]:
        """The objects of one kind as they were at resourceVersion rv (from history)."""
        if rv < self.history_start:
            raise gone(too_old)
        if rv > self.rv:
            raise ApiError(504, f"Too large resource version: {rv}, current: {self.rv}", "Timeout")
        state = dict(self.objects.get(key, {}))
        for event in reversed(self.history):
            if event.rv <= rv:
                break
            if event.key != key:
                continue
            k = (event.namespace, event.obj["metadata"]["name"])
            if event.old is None:
                state.pop(k, None)
            else:
                state[k] = event.old
        return state

    def list(
        self,
        rt: ResourceType,
        ns: str | None,
        labels: list[Requirement] | None = None,
        fields: list[FieldRequirement] | None = None,
        limit: int = 0,
        continue_token: str | None = None,
        exact_rv: int | None = None,
    ) -> tuple[list[dict[str, Any]], int, str | None, int | None]:
        """(items, list resourceVersion, continue token, remaining count).

        Later pages of a paged list, and lists with resourceVersionMatch=Exact, are served
        from the state at that resourceVersion, rebuilt from the watch history."""
        list_rv = self.rv
        start_after: tuple[str, str] | None = None
        if continue_token:
            try:
                token = json.loads(base64.urlsafe_b64decode(continue_token.encode()))
                list_rv = int(token["rv"])
                start_after = (token["ns"], token["name"])
            except (ValueError, KeyError, TypeError):
                raise ApiError(400, "continue key is not valid") from None
            state = self._state_at(
                rt.key,
                list_rv,
                "The provided continue parameter is too old to display a consistent list "
                "result. You can start a new list without the continue parameter, or use the "
                "continue token in this response to retrieve the remainder of the results.",
            )
        elif exact_rv is not None:
            list_rv = exact_rv
            state = self._state_at(rt.key, list_rv)
        else:
            state = self.objects.get(rt.key, {})
        keys = sorted(k for k in state if ns is None or k[0] == ns)
        if start_after is not None:
            keys = [k for k in keys if k > start_after]
        items = []
        next_token = None
        remaining = None
        for n, k in enumerate(keys):
            obj = state[k]
            if labels and not labels_match(labels, obj):
                continue
            if fields and not fields_match(fields, obj):
                continue
            if limit and len(items) >= limit:
                last = items[-1]["metadata"]
                raw = json.dumps(
                    {"rv": list_rv, "ns": last.get("namespace", ""), "name": last["name"]}
                )
                next_token = base64.urlsafe_b64encode(raw.encode()).decode()
                if not labels and not fields:
                    remaining = len(keys) - n
                break
            items.append(obj)
        return items, list_rv, next_token, remaining

    def watch(
        self, rt: ResourceType, ns: str | None, resource_version: str | None, watcher: Watcher
    ) -> list[Event]:
        """Register a watcher; return the events it must see first (synthetic ADDED for a
        watch without a resourceVersion, else the history after it). 410 when too old."""
        key = rt.key
        if resource_version in (None, "", "0"):
            initial = [
                Event(int(obj["metadata"]["resourceVersion"]), key, "ADDED", k[0], obj, None)
                for k, obj in sorted(self.objects.get(key, {}).items())
                if ns is None or k[0] == ns
            ]
        else:
            try:
                since = int(resource_version)
            except ValueError:
                raise ApiError(400, f"invalid resource version: {resource_version}") from None
            if since < self.history_start:
                raise gone(f"too old resource version: {since} ({self.history_start + 1})")
            initial = [
                e
                for e in self.history
                if e.rv > since and e.key == key and (ns is None or e.namespace == ns)
            ]
        self.watchers.setdefault(key, set()).add(watcher)
        return initial

    def unwatch(self, watcher: Watcher) -> None:
        self.watchers.get(watcher.key, set()).discard(watcher)
