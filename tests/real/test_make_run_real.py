"""`HAPTIC_CLUSTER=real make run`: the whole system on the real control plane, the printed
curl line answered by every HAProxy pod, and Ctrl-C leaving nothing running.

Skipped when the real control plane is not built (`make kube`, which needs Go).
"""

from __future__ import annotations

import json
import shlex
import shutil
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from devstack import stack
from localcluster.ports import free_port
from tests.real import NEEDS_REAL_CONTROL_PLANE
from tests.run.test_make_run import MakeRun, _alive, _curl, _pod_ips

pytestmark = [
    NEEDS_REAL_CONTROL_PLANE,
    pytest.mark.timeout(900),
]


class RealMakeRun(MakeRun):
    def env(self) -> dict[str, str]:
        return {**super().env(), "HAPTIC_CLUSTER": "real"}


@pytest.fixture
def make_run() -> Iterator[RealMakeRun]:
    var_dir = Path(tempfile.mkdtemp(prefix="haptic-run-real-")) / "var"
    run = RealMakeRun(var_dir, free_port())
    run.start()
    try:
        yield run
    finally:
        run.kill_everything()
        stack.sweep_pods(var_dir / "cluster-real")
        shutil.rmtree(var_dir.parent, ignore_errors=True)


def test_make_run_on_the_real_cluster(make_run: RealMakeRun) -> None:
    line = make_run.wait_line("Try:        curl -H 'Host: echo.local'", timeout=600)
    elapsed = time.monotonic() - make_run.started
    print(f"HAPTIC_CLUSTER=real make run reached the curl line in {elapsed:.1f}s")
    assert (make_run.var_dir / "cluster-real" / "pki" / "ca.crt").exists()
    argv = shlex.split(line.removeprefix("Try:").strip())
    ips = _pod_ips(make_run.lines)
    assert len(ips) == 3 and all(ip.startswith("198.18.") for ip in ips), make_run.lines
    for ip in ips:
        deadline = time.monotonic() + 60
        while True:
            code, body = _curl([*argv[:3], f"http://{ip}:8080/"])
            if code == 200 or time.monotonic() > deadline:
                break
            time.sleep(0.5)
        assert code == 200, (ip, code, body)
        assert json.loads(body)["pod"].startswith("echo-")
    make_run.record()
    assert make_run.interrupt(timeout=180) == 0
    assert _alive(make_run.seen) == []
