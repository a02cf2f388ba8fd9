"""Tests of and on the real control plane (localcluster/real/)."""

import pytest

from localcluster.real.cluster import missing_binaries

# Every test that starts a real control plane itself: skipped, saying what to run, when the
# binaries are not built (`make kube` needs Go; `make run` and the local tier do not).
NEEDS_REAL_CONTROL_PLANE = pytest.mark.skipif(
    bool(missing_binaries()),
    reason=f"real control plane not built ({', '.join(missing_binaries())}): run make kube",
)
