"""A subset of the fidelity corpus against both API servers: every difference must be one
that tests/fidelity/corpus/known.yaml explains (the full run is `make fidelity`).

Skipped when the real control plane is not built (`make kube`, which needs Go)."""

from __future__ import annotations

import pytest

from localcluster.real.testing import RealApiServer
from localcluster.testing import ApiServer
from tests.fidelity.compare import load_known, replay, unexplained
from tests.fidelity.replay import load_corpus
from tests.real import NEEDS_REAL_CONTROL_PLANE

# Lease election, custom resources with the status subresource, Conflict/NotFound/Invalid,
# and the gate condition applied with SSA next to the node's own conditions.
SUBSET = (
    "namespace-create",
    "lease-",
    "cfg-",
    "secret-create",
    "secret-read-missing",
    "pod-create",
    "pod-bind",
    "pod-read",
    "pod-replace-status",
    "pod-apply-status-gate",
)


def subset() -> list[dict]:
    """Entries named in SUBSET (exactly, or by a prefix ending in "-")."""

    def chosen(step_id: str) -> bool:
        return any(step_id == p or (p.endswith("-") and step_id.startswith(p)) for p in SUBSET)

    return [s for s in load_corpus() if chosen(s["id"])]


@NEEDS_REAL_CONTROL_PLANE
@pytest.mark.timeout(240)
def test_subset_has_no_unexplained_difference() -> None:
    corpus = subset()
    with RealApiServer.start() as real, ApiServer.start() as local:
        results = {
            "requests": (replay(local, corpus, "fidelity"), replay(real, corpus, "fidelity")),
            "kubectl": ({}, {}),
        }
    assert unexplained(results, load_known()) == []


def test_every_client_call_of_the_code_is_in_the_corpus() -> None:
    """The coverage check of the hand-curated corpus: each Kubernetes client method the code
    calls (grep of controller/, checkpoints/, haptic_site/, soak/, localcluster/node/) is
    named by some entry's sites."""
    import re

    from tests.conftest import REPO_ROOT

    pattern = re.compile(
        r"\.((?:list|read|create|patch|replace|delete)_(?:namespaced|node|[a-z_]*for_all)[a-z_]*)\("
    )
    called: set[str] = set()
    for folder in ("controller", "checkpoints", "haptic_site", "soak", "localcluster/node"):
        for path in (REPO_ROOT / folder).rglob("*.py"):
            called |= set(pattern.findall(path.read_text()))
    named = " ".join(str(s.get("sites")) for s in load_corpus())
    # Reads the local node makes only of its own Node (create/read/replace_node_status) and
    # the kinds the corpus covers under another name.
    missing = sorted(m for m in called if m not in named)
    assert missing == []
