"""Fencing: before each side effect, work proves its term is still the Lease's current one.

The local Term says whether this process still believes it leads; the Lease is the
authority. `check_term` reads the leader Lease and accepts a token only when the Lease still
names the token's holder at the token's epoch (a released Lease names nobody).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from kubernetes import client
from kubernetes.client.exceptions import ApiException

from controller.election.lease_store import record_from_lease
from controller.election.record import InvalidEpoch
from controller.election.term import FencingToken
from controller.kubeclient import bounded_copy

DEFAULT_TIMEOUT = 5.0


class StaleTerm(Exception):
    """The token's term is over (or cannot be proven current): do nothing."""

    def __init__(self, token: FencingToken, reason: str):
        super().__init__(f"term {token.holder}@{token.epoch} is not current: {reason}")
        self.token = token
        self.reason = reason


def as_token(token: FencingToken | Mapping[str, Any]) -> FencingToken:
    return token if isinstance(token, FencingToken) else FencingToken.from_dict(token)


_bounded: dict[int, tuple[client.ApiClient, client.CoordinationV1Api]] = {}


def _leases_api(api: client.ApiClient | client.CoordinationV1Api) -> client.CoordinationV1Api:
    # One non-retrying client per caller's client, so a check takes at most its timeout.
    base = api.api_client if isinstance(api, client.CoordinationV1Api) else api
    cached = _bounded.get(id(base))
    if cached is None or cached[0] is not base:
        cached = (base, client.CoordinationV1Api(bounded_copy(base)))
        _bounded[id(base)] = cached
    return cached[1]


def check_term(
    api: client.ApiClient | client.CoordinationV1Api,
    token: FencingToken | Mapping[str, Any],
    timeout: float = DEFAULT_TIMEOUT,
) -> bool:
    """True if `token` names the current term of its Lease; raises StaleTerm otherwise.

    An unreachable API server also raises StaleTerm: a term that cannot be proven current
    must not act.
    """
    token = as_token(token)
    leases = _leases_api(api)
    try:
        lease = leases.read_namespaced_lease(
            token.lease_name, token.namespace, _request_timeout=timeout
        )
        record = record_from_lease(lease)
    except ApiException as exc:
        if exc.status == 404:
            raise StaleTerm(token, "the leader Lease does not exist") from exc
        raise StaleTerm(token, f"cannot read the leader Lease: HTTP {exc.status}") from exc
    except InvalidEpoch as exc:
        raise StaleTerm(token, str(exc)) from exc
    except Exception as exc:  # timeouts, refused connections: not provably current
        raise StaleTerm(token, f"cannot read the leader Lease: {exc}") from exc
    if record.released:
        raise StaleTerm(token, f"the Lease was released (epoch {record.epoch})")
    if record.holder != token.holder:
        raise StaleTerm(token, f"the Lease is held by {record.holder}")
    if record.epoch != token.epoch:
        raise StaleTerm(token, f"the Lease is at epoch {record.epoch}")
    return True
