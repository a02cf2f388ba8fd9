"""Fenced Celery tasks that run on the leader queue.

A leader task carries its term's fencing token as a plain dict (first argument) and runs
only inside that term, in the process that holds it:

* token of this process's live term: run; the task calls `fence.check()` before each side
  effect, which re-checks the local term and then the leader Lease (`check_term`);
* token of a term that has ended: do nothing, log why, return {"status": "stale", ...};
* token of another replica's live term (consumed in the instant around a hand-over):
  hand the message back to the queue for that replica;
* no token (operator or dashboard request): run under this process's live term, else hand
  it back.

Routing: `send_leader_task(app, name, token, ...)` or `task.apply_async(..., queue=...)`.
"""

from __future__ import annotations

import functools
import logging
from collections.abc import Callable, Mapping
from typing import Any

from celery import Celery, shared_task
from celery.exceptions import Reject
from celery.result import AsyncResult
from kubernetes import client

from config import env
from controller.election.term import FencingToken, Term
from controller.fencing import StaleTerm, as_token, check_term
from controller.kubeclient import from_kubeconfig
from controller.replica_runtime import current_runtime, leader_queue_name

log = logging.getLogger(__name__)


class Fence:
    """What a running leader task holds: its token and the proof-before-side-effect check."""

    def __init__(self, token: FencingToken, term: Term, api_client: client.ApiClient):
        self.token = token
        self.term = term
        self.api_client = api_client

    def check(self) -> None:
        """Raise StaleTerm unless the term is still live here and current on the Lease."""
        if not self.term.is_valid():
            raise StaleTerm(self.token, f"the local term ended ({self.term.end_reason})")
        check_term(self.api_client, self.token)


def _stale(task_name: str, token: FencingToken | None, reason: str) -> dict[str, Any]:
    who = f"{token.holder}@{token.epoch}" if token else "no term"
    log.warning("leader task %s (%s) did nothing: %s", task_name, who, reason)
    return {"status": "stale", "reason": reason}


def leader_task(name: str, **options: Any) -> Callable[[Callable[..., Any]], Any]:
    """Decorate `fn(fence, *args, **kwargs)` as a fenced task named `name` on the leader queue.

    The Celery task takes `(token_dict_or_None, *args, **kwargs)`.
    """

    # Routed to the leader queue by default (HAPTIC_LEADER_QUEUE when the module loads).
    options.setdefault("queue", leader_queue_name())

    def wrap(fn: Callable[..., Any]) -> Any:
        @shared_task(name=name, bind=True, acks_late=True, **options)
        @functools.wraps(fn)
        def task(self: Any, token: Mapping[str, Any] | None, *args: Any, **kwargs: Any) -> Any:
            runtime = current_runtime()
            local = runtime.current_term() if runtime is not None else None
            wanted = as_token(token) if token else None
            if wanted is None:
                if local is None:
                    raise Reject("no live term in this process", requeue=True)
                wanted = local.token
            if local is None or local.token != wanted:
                mine = runtime is not None and wanted.holder == runtime.identity
                if mine:
                    return _stale(name, wanted, "its term in this process has ended")
                api = runtime.api_client if runtime is not None else _api_client()
                try:
                    check_term(api, wanted)
                except StaleTerm as exc:
                    return _stale(name, wanted, exc.reason)
                # A live term of another replica: give the message back to the queue.
                raise Reject(f"term {wanted.holder}@{wanted.epoch} lives elsewhere", requeue=True)
            assert runtime is not None
            fence = Fence(wanted, local, runtime.api_client)
            try:
                return fn(fence, *args, **kwargs)
            except StaleTerm as exc:
                return _stale(name, wanted, exc.reason)

        return task

    return wrap


_fallback_client: client.ApiClient | None = None


def _api_client() -> client.ApiClient:
    global _fallback_client
    if _fallback_client is None:
        _fallback_client = from_kubeconfig(env.kubeconfig())
    return _fallback_client


def send_leader_task(
    app: Celery,
    name: str,
    token: FencingToken | Mapping[str, Any] | None,
    *args: Any,
    queue: str | None = None,
    **kwargs: Any,
) -> AsyncResult:
    """Queue a leader task with its token (None: run under whichever term executes it)."""
    body = token.to_dict() if isinstance(token, FencingToken) else token
    return app.send_task(
        name, args=[body, *args], kwargs=kwargs, queue=queue or leader_queue_name()
    )
