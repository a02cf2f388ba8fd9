"""python manage.py localcluster up|down|status: the local cluster in the background."""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

from django.core.management.base import BaseCommand, CommandError

from config import env
from devstack import stack

from ._ops import var_dir


class Command(BaseCommand):
    help = (
        "Start or stop the local cluster (`python -m localcluster up`: a Kubernetes-compatible "
        "API server plus the local node that runs pods as processes) in the background. "
        "Its objects persist in the state dir (default var/cluster); its kubeconfig is "
        "written there. `down` stops the cluster that `make run` or `localcluster up` "
        "started, found through var/localcluster.pid; the node stops its pods first."
    )

    def add_arguments(self, parser: Any) -> None:
        sub = parser.add_subparsers(dest="action", required=True, metavar="up|down|status")
        up = sub.add_parser("up", help="start the cluster in the background and wait until ready")
        up.add_argument(
            "--port",
            type=int,
            default=env.env_int("HAPTIC_CLUSTER_PORT", 16443),
            help="API server port (default $HAPTIC_CLUSTER_PORT or 16443; 0 = any free port)",
        )
        up.add_argument(
            "--state-dir",
            type=Path,
            default=None,
            help="objects, kubeconfig and pod directories (default var/cluster)",
        )
        up.add_argument("--timeout", type=float, default=60.0, help="seconds to wait for ready")
        down = sub.add_parser("down", help="stop the running cluster (pods first)")
        down.add_argument(
            "--timeout",
            type=float,
            default=60.0,
            help="seconds to wait for a graceful stop before SIGKILL (default 60)",
        )
        sub.add_parser("status", help="say whether a cluster is running, and where")

    def handle(self, *args: Any, **options: Any) -> None:
        getattr(self, f"_{options['action']}")(options)

    def _status(self, options: dict[str, Any]) -> None:
        info = stack.read_cluster_pidfile(var_dir())
        if info is None:
            self.stdout.write("local cluster: not running")
            return
        self.stdout.write(
            f"local cluster: running (pid {info['pid']}, started by {info.get('started_by')})\n"
            f"  API:        {info['url']}\n"
            f"  kubeconfig: {Path(info['state_dir']) / 'kubeconfig'}"
        )

    def _up(self, options: dict[str, Any]) -> None:
        base = var_dir()
        running = stack.read_cluster_pidfile(base)
        if running is not None:
            self.stdout.write(f"already running (pid {running['pid']}) at {running['url']}")
            return
        state_dir = (options["state_dir"] or base / "cluster").resolve()
        port = options["port"]
        if port and stack.port_in_use(port):
            raise CommandError(f"port {port} is in use: pass --port (0 = any free port)")
        log_path = base / "log" / "localcluster.log"
        log_path.parent.mkdir(parents=True, exist_ok=True)
        offset = log_path.stat().st_size if log_path.exists() else 0
        # Its own session: it outlives this command and ignores this terminal's Ctrl-C.
        proc = stack.cluster_process(state_dir, port, log_path).start()
        assert proc.proc is not None
        try:
            info = stack.record_cluster_when_ready(
                base, proc, offset, state_dir, "manage.py localcluster up", options["timeout"]
            )
        except BaseException as exc:
            proc.stop(grace=10)
            raise CommandError(f"the local cluster did not start ({exc}); see {log_path}") from exc
        self.stdout.write(
            f"local cluster running (pid {proc.proc.pid})\n"
            f"  API:        {info['url']}\n"
            f"  admin:      {info['admin_url'] or '-'}\n"
            f"  kubeconfig: {state_dir / 'kubeconfig'}\n"
            f"  log:        {log_path}\n"
            "stop it with: python manage.py localcluster down"
        )

    def _down(self, options: dict[str, Any]) -> None:
        base = var_dir()
        info = stack.read_cluster_pidfile(base)
        if info is None:
            self.stdout.write(
                f"no local cluster running (no live pid in {base / 'localcluster.pid'})"
            )
            return
        pid = int(info["pid"])
        began = time.monotonic()
        self.stdout.write(f"stopping the local cluster (pid {pid}); its node stops the pods first")
        clean = stack.stop_group(pid, options["timeout"])
        # Pods outlive a node that had to be killed; they carry its state-dir marker.
        strays = stack.sweep_pods(Path(info["state_dir"]))
        stack.remove_cluster_pidfile(base, pid)
        how = "gracefully" if clean else "with SIGKILL after the timeout"
        self.stdout.write(f"stopped {how} in {time.monotonic() - began:.1f}s")
        if strays:
            self.stdout.write(f"killed {len(strays)} pod processes left behind")
