"""Which mirrored warning Events are current (checkpoints/warnings.py), over generated renders."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

from hypothesis import given
from hypothesis import strategies as st

from checkpoints.warnings import WarningEvent, current_ids, merge_summaries, text_of
from controller.render.model import REASONS, RenderWarning
from controller.render.warnings import SUMMARY_LIMIT, warnings_summary

T0 = datetime(2026, 11, 30, 8, tzinfo=UTC)

# The summary's text carries no reason: as in controller/render, a message names its problem.
warning = st.builds(
    lambda kind, namespace, name, reason, detail: RenderWarning(
        kind, namespace, name, reason, f"{reason}: {detail}"
    ),
    kind=st.sampled_from(["Ingress", "Service", "Secret"]),
    namespace=st.sampled_from(["shop", "blog"]),
    name=st.sampled_from(["web", "www", "tls"]),
    reason=st.sampled_from(REASONS[:3]),
    detail=st.sampled_from(["not found", "invalid"]),
)


def _event(i: int, w: RenderWarning) -> WarningEvent:
    return WarningEvent(i, w.kind, w.namespace, w.name, w.reason, w.message, T0 + timedelta(i))


@given(
    history=st.lists(warning, max_size=15),
    last=st.lists(warning, max_size=SUMMARY_LIMIT + 5, unique=True),
)
def test_current_events_are_the_last_renders_warnings(
    history: list[RenderWarning], last: list[RenderWarning]
) -> None:
    # Events of earlier renders first, then one per warning of the last render.
    events = [_event(i, w) for i, w in enumerate(history + last)]
    summary = merge_summaries([warnings_summary(last)])
    current = [e for e in events if e.id in current_ids(summary, events)]
    keys = [(e.kind, e.namespace, e.name, e.reason, e.message) for e in current]
    assert len(keys) == len(set(keys))  # one row per warning
    # Every warning of the last render has its newest Event shown.
    assert {text_of(e) for e in current} >= {str(w) for w in last}
    newest = {(e.kind, e.namespace, e.name, e.reason, e.message): e.id for e in events}
    assert all(newest[k] == e.id for k, e in zip(keys, current, strict=True))
    last_reasons = {w.reason for w in last}
    assert all(e.reason in last_reasons for e in current)
    if len(last) <= SUMMARY_LIMIT:  # the summary names every warning: nothing else is shown
        assert {text_of(e) for e in current} == {str(w) for w in last}


def test_no_summary_means_no_current_warning() -> None:
    events = [_event(1, RenderWarning("Ingress", "shop", "web", REASONS[0], "x"))]
    assert current_ids(merge_summaries([]), events) == []
