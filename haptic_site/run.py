"""`make run`: start the whole system on the embedded defaults and say where to look.

Every process logs under var/log/; Ctrl-C stops them all gracefully, in reverse start order,
and leaves no stray process (each child runs in its own process group).
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path

REPO_ROOT = Path(__file__).resolve().parent.parent
VAR_DIR = Path(os.environ.get("HAPTIC_VAR_DIR", REPO_ROOT / "var"))
LOG_DIR = VAR_DIR / "log"


@dataclass
class Supervised:
    name: str
    argv: list[str]
    env: dict[str, str] = field(default_factory=dict)
    process: subprocess.Popen[bytes] | None = None

    def start(self) -> None:
        LOG_DIR.mkdir(parents=True, exist_ok=True)
        log = open(LOG_DIR / f"{self.name}.log", "ab")  # noqa: SIM115 - owned by the child
        self.process = subprocess.Popen(
            self.argv,
            cwd=REPO_ROOT,
            env={**os.environ, **self.env},
            stdout=log,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )

    def stop(self, grace: float) -> None:
        if self.process is None or self.process.poll() is not None:
            return
        os.killpg(self.process.pid, signal.SIGTERM)
        try:
            self.process.wait(timeout=grace)
        except subprocess.TimeoutExpired:
            os.killpg(self.process.pid, signal.SIGKILL)
            self.process.wait()


def step(message: str) -> None:
    print(f">> {message}", flush=True)


def manage(*args: str) -> None:
    subprocess.run([sys.executable, "manage.py", *args], cwd=REPO_ROOT, check=True)


def main() -> int:
    port = int(os.environ.get("HAPTIC_WEB_PORT", "8000"))
    step("migrating the database (SQLite under var/ unless DATABASE_URL is set)")
    manage("migrate", "--noinput", "-v", "0")
    manage("collectstatic", "--noinput", "-v", "0")
    stack = [
        Supervised(
            "web",
            [
                sys.executable,
                "-m",
                "gunicorn",
                "haptic_site.wsgi",
                "--bind",
                f"127.0.0.1:{port}",
                "--workers",
                "2",
            ],
        ),
    ]
    for proc in stack:
        step(f"starting {proc.name} (log: {LOG_DIR / (proc.name + '.log')})")
        proc.start()
    print(f"\nhaptic is running. Dashboard: http://127.0.0.1:{port}/  (Ctrl-C stops it)\n")
    stopping = False

    def request_stop(signum: int, frame: object) -> None:
        nonlocal stopping
        stopping = True

    signal.signal(signal.SIGINT, request_stop)
    signal.signal(signal.SIGTERM, request_stop)
    try:
        while not stopping:
            for proc in stack:
                if proc.process is not None and proc.process.poll() is not None:
                    step(f"{proc.name} exited with {proc.process.returncode}; stopping")
                    stopping = True
            time.sleep(0.5)
    finally:
        step("stopping")
        for proc in reversed(stack):
            proc.stop(grace=20)
    return 0


if __name__ == "__main__":
    sys.exit(main())
