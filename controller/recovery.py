"""Recovery from a retained checkpoint after a render failure (ADR-0033, the I/O side).

Reads the fleet through `GET /v1/state?verify=1`, the intent before the leader Lease, the
pointers and one list per child kind; decodes and verifies every pointed checkpoint; lets the
pure `evaluate_recovery` decide; re-reads the pointers to reject a snapshot that changed;
validates the recovered output with the current HAProxy binary; then applies it only to
bootstrap pods, re-checking intent and fleet right before each apply. Configured pods get
nothing. Nothing here repairs, publishes or clears the render error.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable
from dataclasses import dataclass

from contract import PodAction
from controller.publish.checkpoints import CFG_PLURAL, KIND_PLURALS, pointers_from_status
from controller.render import RenderOutput, build_plan, checksum, plan_id
from controller.rendergate import check_output
from controller.retained.checkpoint import (
    CHECKPOINT_ROLE,
    ROLE_LABEL,
    TEMPLATE_UID_LABEL,
    decode_checkpoint,
)
from controller.retained.selection import RecoveryVerdict, evaluate_recovery
from controller.term.host import RecoveryHost
from controller.term.metrics import RETAINED_CONFIG_ACTIVE

log = logging.getLogger(__name__)

RETRY_ATTEMPTS = 5
RETRY_DELAY = 2.0
RECHECKS_AFTER_CONFLICT = 2


@dataclass(frozen=True)
class RecoveryEvaluation:
    verdict: RecoveryVerdict
    output: RenderOutput | None
    validation: str  # the current haproxy's verdict text, or why it did not run
    validated: bool


def evaluate(pipeline: RecoveryHost) -> RecoveryEvaluation:
    """Collect everything and decide, with no side effect (also the manual review's dry
    run)."""
    store, objects, template = pipeline.store, pipeline.objects, pipeline.template
    intent = store.read_intent()  # the intent before the leader Lease (seed, "Readers")
    pipeline.check_term()
    ordinary = objects.get(CFG_PLURAL, template.name)
    pointers = pointers_from_status(ordinary)
    selector = f"{TEMPLATE_UID_LABEL}={template.uid}"
    children = {}
    for kind, plural in KIND_PLURALS.items():
        for obj in objects.list(plural, selector):
            children[(kind, obj["metadata"]["name"])] = obj
    secrets = {s["metadata"]["name"]: s for s in objects.list_secrets(selector)}
    configs = {
        c["metadata"]["name"]: c
        for c in objects.list(CFG_PLURAL, f"{selector},{ROLE_LABEL}={CHECKPOINT_ROLE}")
    }
    decoded = {
        p.name: decode_checkpoint(template, p, configs.get(p.name), children, secrets)
        for p in pointers
    }
    fleet = pipeline.deployer.read_states(pipeline.targets(), verify=True)
    verdict = evaluate_recovery(
        intent, pointers, {n: d.snapshot for n, d in decoded.items()}, fleet
    )
    # Re-read the pointers: a snapshot that changed during collection is rejected.
    if pointers_from_status(objects.get(CFG_PLURAL, template.name)) != pointers:
        verdict = RecoveryVerdict(
            False, "checkpoint pointers changed during collection", None, (), verdict.checks
        )
    output = None
    if verdict.checkpoint is not None:
        files = decoded[verdict.checkpoint.name].files
        if files:
            plan = build_plan(list(files))
            output = RenderOutput(
                files, plan, plan_id(plan), checksum(files), plan["structure_digest"]
            )
    if output is None:
        return RecoveryEvaluation(verdict, None, "no checkpoint to validate", False)
    # The current binary decides; an earlier binary's acceptance never substitutes.
    gate = check_output(output, pipeline.gate.binary, pipeline.gate.timeout)
    return RecoveryEvaluation(verdict, output, gate.output, gate.accepted)


def attempt_recovery(
    pipeline: RecoveryHost, render_error: str, done: Callable[[], None] = lambda: None
) -> None:
    """Evaluate and, when everything holds, dispatch to bootstrap pods; bounded retries in
    the background for transient failures; a good render cancels them."""

    def run() -> None:
        try:
            _run(pipeline, render_error)
        except Exception:
            log.exception("recovery attempt failed")
        finally:
            done()

    threading.Thread(target=run, name="recovery", daemon=True).start()


def _run(pipeline: RecoveryHost, render_error: str) -> None:
    for attempt in range(RETRY_ATTEMPTS):
        if not pipeline.alive() or pipeline.last_good is not None:
            return  # the term ended, or a new render succeeded
        try:
            result = evaluate(pipeline)
        except Exception as exc:
            log.warning("recovery attempt %d failed to collect: %s", attempt + 1, exc)
            _sleep(pipeline)
            continue
        verdict = result.verdict
        log.info("recovery attempt %d: %s", attempt + 1, verdict.reason)
        if not verdict.eligible or result.output is None:
            if verdict.nothing_to_recover:
                return  # every pod is configured and agrees
            pipeline.notice("Warning", "RetainedConfigUnavailable", verdict.reason)
            _sleep(pipeline)
            continue
        if not result.validated:
            pipeline.notice(
                "Warning",
                "RetainedConfigUnavailable",
                f"current HAProxy refuses checkpoint {verdict.checkpoint.name}: "
                f"{result.validation}",
            )
            return
        RETAINED_CONFIG_ACTIVE.set(1)
        if pipeline.last_good is not None:
            # A render succeeded during the evaluation: nothing is scheduled, and its
            # convergence may have cleared the gauge before the line above.
            RETAINED_CONFIG_ACTIVE.set(0)
            return
        pipeline.notice(
            "Warning",
            "RetainedConfigActive",
            f"serving retained checkpoint {result.output.checksum} to bootstrap pods; "
            f"render error: {render_error}",
        )
        dispatch(pipeline, result)
        return


def dispatch(pipeline: RecoveryHost, result: RecoveryEvaluation) -> dict[str, str]:
    """Apply the recovered output to each bootstrap target, re-checking intent and fleet
    agreement right before every apply and after a state conflict; returns what happened
    per pod (`stopped: <why>` where a re-check ended recovery)."""
    assert result.output is not None
    done: dict[str, str] = {}
    for target in result.verdict.targets:
        for _ in range(1 + RECHECKS_AFTER_CONFLICT):
            what = _apply_to(pipeline, result, target)
            if what is None:
                return done  # the term ended
            done[target] = what
            if PodAction.of_summary(what) is not PodAction.REFUSED:
                break  # a 409 means the pod changed since the check: check again
        if done[target].startswith("stopped"):
            return done
    return done


def _apply_to(pipeline: RecoveryHost, result: RecoveryEvaluation, target: str) -> str | None:
    """One re-checked apply to `target`; None when the term ended."""
    assert result.output is not None
    if not pipeline.alive():
        return None
    if pipeline.last_good is not None:
        return "stopped: a render succeeded"
    # Re-check intent and live fleet agreement immediately before each apply.
    again = evaluate(pipeline)
    if (
        not again.verdict.eligible
        or again.output is None
        or again.output.checksum != result.output.checksum
        or target not in again.verdict.targets
    ):
        log.warning("recovery of %s stopped: %s", target, again.verdict.reason)
        return f"stopped: {again.verdict.reason}"
    if pipeline.last_good is not None:  # it arrived during the evaluation
        return "stopped: a render succeeded"
    # Through the same fenced deployment path as every apply (Dispatcher.deploy, in
    # place). It carries the bootstrap expectation itself: the agent refuses (409) a pod
    # configured since this check, and the intent is only re-stamped, never replaced.
    pipeline.plans.remember(result.output)
    what = pipeline.run_deployment(result.output, {target}, bootstrap_only=True).get(target)
    log.info("recovery apply to %s: %s", target, what)
    return what or "stopped: not applied (a render succeeded or the intent moved on)"


def _sleep(pipeline: RecoveryHost) -> None:
    pipeline.wake(RETRY_DELAY)
