"""`make test` runs every test the seeds name on the real control plane too: each is defined
in a file the Makefile's REAL_TIER selects (tests/e2e, tests/hub, ...)."""

from __future__ import annotations

import ast
import functools
import re
from pathlib import Path

import pytest

from tests.conftest import REPO_ROOT

# The tests the seed documents name (TestAllAcceptanceParallel, the seeds' registry of
# acceptance tests, is this Makefile target itself).
SEED_NAMED = (
    "TestDeploymentIntentWritesNeverFailALeaseRenewal",
    "TestDrainPublishesNothingAfterAnotherReplicaTookTheLease",
    "TestGracefulLeaderStopLeavesTheNextLeaderAUsableCheckpoint",
    "TestGuardsAbort",
    "TestIngressRollingRestartUngatedRecovers",
    "TestIngressRollingRestartZeroDowntime",
    "TestLeaderChangeReloadsNothing",
    "TestNeverArmed",
    "TestPlaceholderMatchesServiceDefault",
    "TestPromote",
    "TestRetainedConfigurationAfterRecentDeployment",
    "TestRetainedConfigurationChecksCurrentHAProxy",
    "TestRetainedConfigurationFreshness",
    "TestRetainedConfigurationRecovery",
    "TestRetainedConfigurationSuddenFailover",
    "TestRetainedConfigurationTampering",
    "TestSchedulerDrainFollowsUpThePendingReloadAndDispatchesNoNewerPlan",
    "TestSelfHealthy",
    "TestUpgradedLeaderKeepsTheDeploymentIntentOfAnEarlierRelease",
)


def real_tier() -> list[Path]:
    text = (REPO_ROOT / "Makefile").read_text().replace("\\\n", " ")
    match = re.search(r"^REAL_TIER \?=(.*)$", text, flags=re.MULTILINE)
    assert match, "the Makefile defines no REAL_TIER"
    return [REPO_ROOT / p for p in match.group(1).split()]


# Seed names this repository spells otherwise.
SPELLED = {"TestPlaceholderMatchesServiceDefault": "test_placeholder_matches_the_shipped_default"}


def snake(name: str) -> str:
    """TestRetainedConfigurationChecksCurrentHAProxy ->
    test_retained_configuration_checks_current_haproxy."""
    if name in SPELLED:
        return SPELLED[name]
    words = re.findall(r"[A-Z][a-z]*", name.replace("HAProxy", "Haproxy"))
    return "_".join(w.lower() for w in words)


@functools.cache
def _definitions() -> tuple[tuple[Path, str, str], ...]:
    """(file, "class" or "function", name) of every test under tests/."""
    out = []
    for path in sorted((REPO_ROOT / "tests").rglob("test_*.py")):
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.ClassDef):
                out.append((path, "class", node.name))
            elif isinstance(node, ast.FunctionDef):
                out.append((path, "function", node.name))
    return tuple(out)


def defining_files(name: str) -> set[Path]:
    """Files with a test of that seed name: a class may add `_Detail`, a function more words
    (the seeds shorten some names)."""
    prefix = {"class": name, "function": snake(name)}
    return {
        path
        for path, kind, defined in _definitions()
        if defined == prefix[kind] or defined.startswith(prefix[kind] + "_")
    }


def test_snake_reads_a_run_of_capitals_as_one_word() -> None:
    assert snake("TestRetainedConfigurationChecksCurrentHAProxy") == (
        "test_retained_configuration_checks_current_haproxy"
    )


@pytest.mark.parametrize("name", SEED_NAMED)
def test_every_seed_named_test_is_in_the_real_tier(name: str) -> None:
    files = defining_files(name)
    assert files, f"no test named {name}"
    tier = real_tier()
    for path in sorted(files):
        assert any(path == p or p in path.parents for p in tier), f"{path} is not in REAL_TIER"
