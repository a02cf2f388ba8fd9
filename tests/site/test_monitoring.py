"""deploy/monitoring/: the alert rules and the Grafana dashboard name only metrics the
controller really exports, and the seed's retained-configuration alert is there."""

from __future__ import annotations

import json
import re

import yaml
from prometheus_client import REGISTRY

from tests.conftest import REPO_ROOT

MONITORING = REPO_ROOT / "deploy" / "monitoring"
METRIC = re.compile(r"\b(?:haptic|ha)_[a-z_]+\b")


def _exported() -> set[str]:
    """Sample names on a controller's /metrics (the process-wide registry it serves)."""
    # Importing registers their metrics (haptic_retained_config_active lives in leader).
    import controller.leader
    import controller.metrics
    import controller.reconciler
    import controller.render.warnings
    import controller.watch.metrics  # noqa: F401
    from controller.election.metrics import default_metrics as election_metrics
    from controller.hub.metrics import default_metrics as hub_metrics

    election_metrics()
    hub_metrics()
    names = set()
    for family in REGISTRY.collect():
        names.add(family.name)
        names |= {sample.name for sample in family.samples}
        if family.type == "counter":
            # A labelled counter without a child yet has no sample: its exposed name.
            names.add(family.name + "_total")
    return names


def _rules() -> list[dict]:
    groups = yaml.safe_load((MONITORING / "alerts.yaml").read_text())["groups"]
    return [rule for group in groups for rule in group["rules"]]


def test_the_retained_configuration_alert_warns_after_two_minutes() -> None:
    rule = next(r for r in _rules() if r["alert"] == "HAProxyRetainedConfigurationActive")
    assert rule["for"] == "2m" and rule["labels"]["severity"] == "warning"
    assert "haptic_retained_config_active" in rule["expr"]


def test_rules_and_dashboard_name_only_exported_metrics() -> None:
    exported = _exported()
    rules = _rules()
    assert len({r["alert"] for r in rules}) == len(rules)
    named = {m for r in rules for m in METRIC.findall(r["expr"])}
    dashboard = json.loads((MONITORING / "grafana-dashboard.json").read_text())
    exprs = [t["expr"] for p in dashboard["panels"] for t in p["targets"]]
    named |= {m for e in exprs for m in METRIC.findall(e)}
    assert named and named <= exported, sorted(named - exported)
    assert len({p["id"] for p in dashboard["panels"]}) == len(dashboard["panels"])
