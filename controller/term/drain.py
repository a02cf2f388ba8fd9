"""The graceful drain (ADR-0033 "Graceful leader stop"; docs/term.md "The graceful drain"):
one deadline, 15 s at most.

Dispatch nothing but the last dispatched plan; wait for it and its paced reload; re-check
both Leases; publish past the throttle. Every step checks the one deadline and stops once it
has passed; the publication's own bound (controller/term/publisher.py) caps each request by
what is left and re-checks the term before each write. A term that lost its Lease
publishes nothing.
"""

from __future__ import annotations

import logging
import time

from controller.term.context import TermContext
from controller.term.dispatcher import Dispatcher, LockedScheduler
from controller.term.publisher import Publisher

log = logging.getLogger(__name__)

DRAIN_BOUND_SECONDS = 15.0


def drain(
    ctx: TermContext,
    scheduler: LockedScheduler,
    dispatcher: Dispatcher,
    publisher: Publisher,
    deadline: float,
) -> None:
    publisher.set_deadline(deadline)
    last = scheduler.begin_drain()
    ctx.pause(
        max(0.0, deadline - time.monotonic()),
        until=lambda: scheduler.in_flight is None,
    )
    if last is not None and time.monotonic() < deadline:
        dispatcher.await_pending_reloads(last.output, deadline)
    if time.monotonic() >= deadline or not ctx.term_valid():
        log.warning("drain ran out of time or term; publishing nothing")
        return
    try:
        ctx.check_term()
        stored, _ = ctx.store.read_retained()
    except Exception as exc:
        log.warning("drain: lease check failed (%s); publishing nothing", exc)
        return
    if stored.claim is None or (stored.claim.holder, stored.claim.epoch) != (
        ctx.term.holder,
        ctx.term.epoch,
    ):
        log.warning("drain: another term claimed the retained state; publishing nothing")
        return
    publisher.publish(last.output if last is not None else None)
