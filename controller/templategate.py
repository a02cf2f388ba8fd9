"""The template gate: a changed HAProxyTemplateConfig is used only once its
`spec.validationTests` pass (issue 18).

Each distinct template (by `template_fingerprint`: spec, labels, annotations, uid) is tested
once, before the first render that would use it: its fixtures are rendered and its assertions
checked, `haproxyValid` with the real `haproxy -c` (controller/render/validate.py). A template
whose tests pass becomes the accepted one; one whose tests fail is refused and renders keep
using the last accepted template (none after a restart: then nothing renders until the template
is fixed, and the pods keep serving what they run). A template without validationTests is
accepted as it is.

`TemplateChoice` is the decision, without I/O; `TemplateGate` wraps it with the test run, a
metric and the leader's report (an Event on the template config and its `TemplateValidated`
status condition, fenced by the term).
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable, Mapping
from dataclasses import dataclass, replace
from datetime import UTC, datetime
from typing import Any

from kubernetes import client

from controller.metrics import TEMPLATE_REFUSED as REFUSED
from controller.metrics import TEMPLATE_VALIDATION_RUNS as RUNS
from controller.render.validate import TestResult, run_tests
from controller.render.warnings import fenced_template_status
from controller.watch.caches import template_fingerprint

log = logging.getLogger(__name__)

CONDITION = "TemplateValidated"
HEALTH_COMPONENT = "template-gate"
FAILED_REASON = "TemplateValidationFailed"
PASSED_REASON = "TemplateValidationPassed"
FIRST_FAILURES = 5

Template = Mapping[str, Any]
RunTests = Callable[[Template], tuple[TestResult, ...]]


def _generation(template: Template | None) -> int | None:
    return ((template or {}).get("metadata") or {}).get("generation")


@dataclass(frozen=True)
class TemplateVerdict:
    """The outcome of one template's validation tests."""

    fingerprint: tuple
    generation: int | None
    results: tuple[TestResult, ...]
    # The generation renders use instead (a refused template only).
    fallback_generation: int | None = None

    @property
    def accepted(self) -> bool:
        return all(r.passed for r in self.results)

    def message(self) -> str:
        """One line for the Event and the condition: which tests failed and why."""
        gen = f"generation {self.generation}"
        if not self.results:
            return f"{gen}: no validation tests"
        if self.accepted:
            return f"{gen}: {len(self.results)} validation tests passed"
        failures = [f"{r.name}: {f}" for r in self.results if not r.passed for f in r.failures]
        shown = "; ".join(failures[:FIRST_FAILURES])
        more = (
            f" (+{len(failures) - FIRST_FAILURES} more)" if len(failures) > FIRST_FAILURES else ""
        )
        using = (
            f"renders use generation {self.fallback_generation}"
            if self.fallback_generation is not None
            else "no accepted template: nothing renders"
        )
        return f"{gen} refused, {using}: {shown}{more}"


@dataclass
class TemplateChoice:
    """Which template renders use (pure). `accepted`: the newest template that passed."""

    accepted: Template | None = None
    passed: TemplateVerdict | None = None  # the accepted template's verdict
    refused: TemplateVerdict | None = None

    def select(
        self, current: Template | None, run: RunTests
    ) -> tuple[Template | None, TemplateVerdict | None]:
        """(the template to render with, the verdict on `current` when it was tested now, is
        refused, or lifts a refusal by going back to the accepted template; None when
        `current` is the accepted template and nothing changed)."""
        if not current:
            return None, None
        fingerprint = template_fingerprint(current)
        if self.passed is not None and fingerprint == self.passed.fingerprint:
            self.accepted = current  # same template; keep the newest object
            if self.refused is None:
                return current, None
            # Back to the accepted template (a revert): the refusal is over. A new verdict
            # object, so that it is reported even if the first one was.
            self.refused = None
            self.passed = replace(self.passed, generation=_generation(current))
            return current, self.passed
        if self.refused is not None and self.refused.fingerprint == fingerprint:
            return self.accepted, self.refused
        verdict = TemplateVerdict(fingerprint, _generation(current), run(current))
        if verdict.accepted:
            self.accepted, self.passed, self.refused = current, verdict, None
            return current, verdict
        self.refused = replace(verdict, fallback_generation=_generation(self.accepted))
        return self.accepted, self.refused


def validation_runner(
    check: Callable[[Any], tuple[bool, str]],
    http: Callable[[], Mapping[str, str]] | None = None,
) -> RunTests:
    """The template's own validationTests with `check` as the haproxyValid assertion and
    `http()` as the bodies of spec.httpResources (what the leader's render would see)."""

    def run(template: Template) -> tuple[TestResult, ...]:
        results = tuple(run_tests(template, check, http() if http else None))
        if results:
            RUNS.labels("passed" if all(r.passed for r in results) else "failed").inc()
        return results

    return run


Report = Callable[[TemplateVerdict], None]


class TemplateGate:
    """One per replica, across terms: the accepted template survives a leader change of
    this replica. `attach` installs the term's reporter; every verdict (and a refusal still
    standing when a new term starts) is reported once to it; a template without tests
    only corrects the condition an earlier verdict left."""

    def __init__(self, run: RunTests) -> None:
        self._run = run
        self._choice = TemplateChoice()
        self._lock = threading.Lock()
        self._report: Report | None = None
        self._reported: TemplateVerdict | None = None

    def attach(self, report: Report | None) -> None:
        with self._lock:
            self._report, self._reported = report, None

    def refusal(self) -> str | None:
        """Why the newest template is not used (a /healthz probe), None when it is."""
        with self._lock:
            refused = self._choice.refused
        return refused.message() if refused is not None else None

    def select(self, current: Template | None) -> Template | None:
        with self._lock:
            template, verdict = self._choice.select(current, self._run)
            if verdict is None or verdict is self._reported:
                return template
            self._reported = verdict
            report = self._report
        REFUSED.set(0 if verdict.accepted else 1)
        if report is not None:
            try:
                report(verdict)
            except Exception as exc:  # a report; never the reason a render does not run
                log.warning("template validation not reported: %s", exc)
        return template


def template_reporter(
    api_client: client.ApiClient,
    namespace: str,
    name: str,
    record_event: Callable[[str, str, str], None],
    check_term: Callable[[], None],
    conditions: Callable[[], list[dict[str, Any]]],
) -> Report:
    """The leader's report of a verdict: an Event on the template config and its
    `TemplateValidated` condition (other conditions kept), written only within the term."""
    patch_status = fenced_template_status(api_client, namespace, name, check_term)

    def report(verdict: TemplateVerdict) -> None:
        current = conditions()
        if not verdict.results and all(c.get("type") != CONDITION for c in current):
            return  # no tests, and no condition of an earlier verdict to correct
        message = verdict.message()
        if verdict.accepted:
            record_event("Normal", PASSED_REASON, message)
        else:
            log.warning("template refused: %s", message)
            record_event("Warning", FAILED_REASON, message)
        ours = {
            "type": CONDITION,
            "status": "True" if verdict.accepted else "False",
            "reason": PASSED_REASON if verdict.accepted else FAILED_REASON,
            "message": message[:1024],
            "lastTransitionTime": datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%SZ"),
        }
        others = [c for c in current if c.get("type") != CONDITION]
        patch_status({"conditions": [*others, ours]})

    return report
