"""A receipt names which way its pod took the plan, through the production deployer and a
real agent running real haproxy: a reload, then a file-only apply (a map file's bytes
changed, its entries did not: nothing to tell the worker)."""

from __future__ import annotations

from dataclasses import replace

from controller.deploy.deployer import AgentPool, Deployer, HAProxyPod
from controller.render import RenderInput, RenderOutput, render
from controller.render.model import RenderedFile
from controller.render.plan import build_plan, checksum, plan_id
from tests.agents.helpers import TOKEN
from tests.retained.test_drain import Harness


def with_commented_map(output: RenderOutput, path: str = "maps/hosts.map") -> RenderOutput:
    """`output` with a comment line on top of one map file: new bytes, same entries."""
    files = tuple(
        RenderedFile(f.path, f.kind, b"# one line per host\n" + f.content) if f.path == path else f
        for f in output.files
    )
    plan = build_plan(files)
    return replace(
        output,
        files=files,
        plan=plan,
        plan_id=plan_id(plan),
        checksum=checksum(files),
        structure_digest=plan["structure_digest"],
    )


def test_receipts_name_a_reload_and_a_file_only_deployment(harness: Harness) -> None:
    (agent,) = harness.add_agents(1)
    pod = HAProxyPod("haproxy-0", "uid-0", agent.ip)
    deployer = Deployer(AgentPool(port=agent.port, token=lambda: TOKEN))
    harness.closers += [deployer.close, deployer.pool.close]
    first = render(RenderInput(**harness.snapshot()))
    (outcome,) = deployer.deploy(first, [pod], "controller-a", 1, {})
    receipt = outcome.receipt(first)
    assert outcome.action == "reload" and receipt is not None and receipt.mode == "reload"

    second = with_commented_map(first)
    assert second.plan_id != first.plan_id and second.plan["maps"] == first.plan["maps"]
    (outcome,) = deployer.deploy(second, [pod], "controller-a", 1, {first.plan_id: first.plan})
    receipt = outcome.receipt(second)
    assert outcome.action == "file-only", outcome.summary
    assert receipt is not None and receipt.mode == "file-only"
    assert receipt.as_status()["mode"] == "file-only"
    assert receipt.running_plan_id == first.plan_id  # the worker was not reloaded
    state = agent.client.state(verify=True)
    assert state.verification["files_ok"] and state.invariant_violation is None
