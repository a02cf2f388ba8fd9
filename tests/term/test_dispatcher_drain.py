"""While the scheduler drains, every dispatcher path that deploys on its own initiative sends
only the last dispatched plan, never a newer render the draining scheduler refused (issue
15, hole 3; docs/term.md, "The graceful drain"). Push to new pods is shown through real
agents in tests/retained/test_term_holes.py; agent repair and drift prevention take the same
`Dispatcher.current()`, shown here with the dispatcher's collaborators faked."""

from __future__ import annotations

from types import SimpleNamespace
from typing import Any

from controller.render import RenderedFile, RenderOutput, build_plan, checksum, plan_id
from controller.term.dispatcher import Dispatcher, LockedScheduler
from controller.term.state import TermState


def _output(n: int) -> RenderOutput:
    files = (RenderedFile("haproxy.cfg", "config", f"global\n# {n}\n".encode()),)
    plan = build_plan(list(files))
    return RenderOutput(files, plan, plan_id(plan), checksum(files), plan["structure_digest"])


def _draining_dispatcher() -> tuple[Dispatcher, RenderOutput, RenderOutput, list[Any]]:
    """plan2 dispatched, then plan3 accepted and submitted, then the drain began."""
    plan2, plan3 = _output(2), _output(3)
    scheduler = LockedScheduler(min_interval=60.0)
    scheduler.submit(plan2.plan_id, plan2)
    scheduler.next_action(0.0)  # plan2 dispatched
    scheduler.completed(plan2.plan_id)
    state = TermState()
    state.accept(plan2)
    state.accept(plan3)  # the newer render: the accepted output, waiting in the scheduler
    scheduler.submit(plan3.plan_id, plan3)
    scheduler.begin_drain()
    sent: list[Any] = []
    pod = SimpleNamespace(name="haproxy-0")
    broken = SimpleNamespace(pod_name="haproxy-0", reachable=True, invariant_violation="x")
    ctx = SimpleNamespace(
        state=state,
        stopping=False,
        targets=lambda: [pod],
        deployer=SimpleNamespace(read_states=lambda pods, verify: [broken]),
        run_deployment=lambda output, only: sent.append(("repair", output.plan_id, only)),
        settings=SimpleNamespace(drift_interval=0.0),
    )
    dispatcher = Dispatcher(ctx, scheduler)  # type: ignore[arg-type]
    return dispatcher, plan2, plan3, sent


def test_agent_repair_during_the_drain_sends_the_last_dispatched_plan() -> None:
    dispatcher, plan2, plan3, sent = _draining_dispatcher()
    assert dispatcher.ctx.state.last_good is plan3, "premise: a newer render was accepted"
    dispatcher._check_agents()
    assert sent == [("repair", plan2.plan_id, {"haproxy-0"})]


def test_drift_prevention_during_the_drain_sends_the_last_dispatched_plan(monkeypatch) -> None:
    dispatcher, plan2, _, sent = _draining_dispatcher()
    monkeypatch.setattr(
        dispatcher, "deploy", lambda output, **kw: sent.append(("drift", output.plan_id, kw))
    )
    assert dispatcher._drift_due()
    dispatcher._drift_prevention()
    assert sent == [("drift", plan2.plan_id, {"verify": True})]


def test_deploy_refuses_anything_but_the_last_dispatched_plan_while_draining() -> None:
    dispatcher, plan2, plan3, _ = _draining_dispatcher()
    assert dispatcher._may_dispatch(plan2)
    assert not dispatcher._may_dispatch(plan3)
