"""contract.PodAction: one set of names for what an apply did to a pod."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from contract import PodAction
from controller.deploy.deployer import HAProxyPod, PodOutcome

POD = HAProxyPod("haproxy-0", "uid-0", "127.0.0.9")


def test_an_agent_result_read_as_text_becomes_the_enum() -> None:
    outcome = PodOutcome(POD, "reload_scheduled", None)  # type: ignore[arg-type]
    assert outcome.action is PodAction.RELOAD_SCHEDULED
    assert outcome.action.is_reload and outcome.action.deployed and not outcome.action.is_error


def test_summaries_name_their_action() -> None:
    refused = PodOutcome(POD, PodAction.REFUSED, None, error="409", reason="stale_epoch")
    failed = PodOutcome(POD, PodAction.FAILED, None, error="timed out")
    assert PodAction.of_summary(refused.summary) is PodAction.REFUSED
    assert PodAction.of_summary(failed.summary) is PodAction.FAILED
    assert PodAction.of_summary("stopped: the intent moved") is None


@given(st.sampled_from(list(PodAction)), st.text())
def test_every_action_reads_back_from_its_summary(action: PodAction, error: str) -> None:
    outcome = PodOutcome(POD, action, None, error=error if action.is_error else None)
    assert PodAction.of_summary(outcome.summary) is action
