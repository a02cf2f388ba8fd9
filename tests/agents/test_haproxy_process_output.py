"""Where haproxy's output goes (issue 18): stdout is the agent's own (the pod log; the
e2e test tests/e2e/test_routing.py reads it through the API), and stderr passes through the
agent, which keeps its last lines to explain a failed start."""

from __future__ import annotations

import subprocess
import sys
import textwrap
from pathlib import Path

from controller.rendergate import haproxy_binary

REPO = Path(__file__).resolve().parents[2]

# Starts a Supervisor on a config haproxy refuses, in a child whose stdout and stderr are
# files: what the container log would receive.
SCRIPT = textwrap.dedent(
    """
    import sys
    from pathlib import Path
    from agents.haproxy_process import Layout, Supervisor
    data = Path(sys.argv[1])
    layout = Layout(data, data)
    layout.config_root.mkdir(parents=True, exist_ok=True)
    layout.agent_cfg.write_text("global\\n    master-worker\\n")
    layout.root_cfg.write_text(sys.argv[3])
    supervisor = Supervisor(sys.argv[2], layout, {})
    try:
        supervisor.start(timeout=10)
    except RuntimeError as exc:
        print("ERROR", exc, file=sys.stdout, flush=True)
    else:
        supervisor.stop()
    """
)


def _run(tmp_path: Path, config: str) -> tuple[str, str]:
    out, err = tmp_path / "stdout", tmp_path / "stderr"
    with out.open("wb") as o, err.open("wb") as e:
        subprocess.run(
            [sys.executable, "-c", SCRIPT, str(tmp_path), haproxy_binary(), config],
            stdout=o, stderr=e, cwd=REPO, timeout=60, check=True,
        )  # fmt: skip
    return out.read_text(), err.read_text()


def test_a_refused_start_names_haproxys_alert_and_the_alert_reaches_the_agents_stderr(
    tmp_path: Path,
) -> None:
    stdout, stderr = _run(tmp_path, "global\n    no-such-directive on\n")
    assert "ERROR haproxy exited at start:" in stdout
    assert "no-such-directive" in stdout.split("ERROR", 1)[1]
    assert "no-such-directive" in stderr  # relayed to the container's stderr
    assert not (tmp_path / "haproxy.log").exists()
