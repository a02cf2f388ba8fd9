"""Which hub is Active? Read status.activeController from both endpoints (seed 004).

Rule: trust a reachable endpoint whose published declaration names itself. A Standby's copy
is mirrored from the Active, so it names the Active, not itself; no role knowledge and no
timeout-based death inference is needed. If both declare themselves (a partition healed
after a promotion), the fresher lastUpdated wins.
"""

from __future__ import annotations

import os
from collections.abc import Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from kubernetes import client

from contract import GROUP, TEMPLATE_PLURAL, VERSION
from controller.kubeclient import from_kubeconfig, server_url


@dataclass(frozen=True)
class EndpointObservation:
    url: str
    identity: str | None  # the endpoint's own hub identity, when the caller knows it
    reachable: bool
    declaration: Mapping[str, Any] | None = None  # status.activeController as read
    error: str | None = None


@dataclass(frozen=True)
class Resolution:
    active_url: str | None
    active_identity: str | None
    reason: str
    observations: tuple[EndpointObservation, ...] = ()


def _norm(url: str | None) -> str:
    return (url or "").strip().rstrip("/").lower()


def declares_itself(obs: EndpointObservation) -> bool:
    if not obs.reachable or not obs.declaration:
        return False
    if obs.identity:
        return obs.declaration.get("activeIdentity") == obs.identity
    return bool(obs.declaration.get("endpoint")) and _norm(obs.declaration["endpoint"]) == _norm(
        obs.url
    )


def _updated(obs: EndpointObservation) -> datetime | None:
    text = (obs.declaration or {}).get("lastUpdated")
    try:
        return datetime.fromisoformat(str(text).replace("Z", "+00:00")) if text else None
    except ValueError:
        return None


def resolve_observations(observations: Sequence[EndpointObservation]) -> Resolution:
    obs = tuple(observations)
    claims = [o for o in obs if declares_itself(o)]
    if not claims:
        return Resolution(None, None, "no reachable endpoint declares itself Active", obs)
    if len(claims) == 1:
        c = claims[0]
        return Resolution(c.url, c.declaration.get("activeIdentity"), "self-declared", obs)
    dated = [(t, o) for o in claims if (t := _updated(o)) is not None]
    dated.sort(key=lambda pair: pair[0], reverse=True)
    if not dated or (len(dated) > 1 and dated[0][0] == dated[1][0]):
        return Resolution(None, None, "several endpoints declare themselves; no fresher one", obs)
    best = dated[0][1]
    return Resolution(best.url, best.declaration.get("activeIdentity"), "fresher lastUpdated", obs)


def observe(
    api_client: client.ApiClient,
    *,
    namespace: str,
    template_name: str,
    identity: str | None = None,
    timeout: float = 5.0,
) -> EndpointObservation:
    url = server_url(api_client)
    try:
        obj = client.CustomObjectsApi(api_client).get_namespaced_custom_object(
            GROUP, VERSION, namespace, TEMPLATE_PLURAL, template_name, _request_timeout=timeout
        )
    except Exception as exc:
        return EndpointObservation(url, identity, reachable=False, error=str(exc)[:200])
    declaration = (obj.get("status") or {}).get("activeController")
    return EndpointObservation(url, identity, reachable=True, declaration=declaration)


def resolve(
    endpoints: Sequence[tuple[client.ApiClient, str | None]],
    *,
    namespace: str,
    template_name: str,
    timeout: float = 5.0,
) -> Resolution:
    """Observe every endpoint at once (each read bounded by `timeout`) and apply the rule."""
    if not endpoints:
        return Resolution(None, None, "no endpoints given")
    with ThreadPoolExecutor(max_workers=len(endpoints)) as pool:
        observations = list(
            pool.map(
                lambda e: observe(
                    e[0], namespace=namespace, template_name=template_name, identity=e[1],
                    timeout=timeout,
                ),
                endpoints,
            )
        )  # fmt: skip
    return resolve_observations(observations)


def load_client(path: str) -> tuple[client.ApiClient | None, str | None]:
    """A client for one kubeconfig, or why there is none (never raises)."""
    # For a missing file the kubernetes library only says "No configuration found".
    if not os.path.isfile(path):
        return None, f"cannot load kubeconfig {path}: no such file"
    try:
        return from_kubeconfig(path, bounded=True), None
    # Malformed YAML, a missing context, unreadable credentials...: the library raises many
    # types, and each is this endpoint's error, never the whole resolution's.
    except Exception as exc:
        return None, f"cannot load kubeconfig {path}: {exc}"[:300]


def resolve_kubeconfigs(
    kubeconfigs: Sequence[str],
    identities: Sequence[str | None] | None = None,
    *,
    namespace: str,
    template_name: str,
    timeout: float = 5.0,
) -> Resolution:
    """`resolve` from kubeconfig paths (one client per cluster, closed afterwards). The
    observations follow the order of `kubeconfigs`; one that cannot be loaded is an
    unreachable endpoint carrying its error, and the others are still read."""
    idents = list(identities) if identities else [None] * len(kubeconfigs)
    if len(idents) != len(kubeconfigs):
        raise ValueError("give one identity per kubeconfig, or none")
    loaded = [load_client(path) for path in kubeconfigs]
    try:
        good = [(c, i) for (c, _), i in zip(loaded, idents, strict=True) if c is not None]
        read = iter(
            resolve(good, namespace=namespace, template_name=template_name, timeout=timeout)
            .observations
        )  # fmt: skip
        observations = [
            next(read) if c is not None else EndpointObservation("", i, False, error=error)
            for (c, error), i in zip(loaded, idents, strict=True)
        ]
    finally:
        for c, _ in loaded:
            if c is not None:
                c.close()
    if not observations:
        return Resolution(None, None, "no endpoints given")
    return resolve_observations(observations)
