"""The soak's own Redis and PostgreSQL, so restarting them disturbs nobody else.

The machine's shared Redis and PostgreSQL serve other engineers' tests; the soak restarts
only servers it started itself, on free loopback ports under its own temp directory.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import socket
import subprocess
import time
from dataclasses import dataclass, field
from pathlib import Path

from localcluster.node.processes import end
from localcluster.ports import free_port


def _wait_port(port: int, up: bool, timeout: float) -> bool:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        with socket.socket() as sock:
            sock.settimeout(0.3)
            listening = sock.connect_ex(("127.0.0.1", port)) == 0
        if listening == up:
            return True
        time.sleep(0.1)
    return False


@dataclass
class Redis:
    """A non-persistent redis-server on a free port (a restart loses its queues, as a
    crashed broker would)."""

    workdir: Path
    port: int = field(default_factory=free_port)
    proc: subprocess.Popen[bytes] | None = None
    restarts: int = 0

    @property
    def url(self) -> str:
        return f"redis://127.0.0.1:{self.port}/0"

    def start(self) -> Redis:
        self.workdir.mkdir(parents=True, exist_ok=True)
        log = open(self.workdir / "redis.log", "ab")  # noqa: SIM115 - handed to the child
        argv = ["redis-server", "--port", str(self.port), "--bind", "127.0.0.1"]
        argv += ["--save", "", "--appendonly", "no", "--dir", str(self.workdir)]
        self.proc = subprocess.Popen(argv, stdout=log, stderr=subprocess.STDOUT)
        log.close()
        if not _wait_port(self.port, True, 10):
            raise RuntimeError("redis-server did not start")
        return self

    def stop(self) -> None:
        if self.proc is not None:
            end(self.proc, timeout=10)

    def restart(self, down_seconds: float) -> None:
        self.stop()
        time.sleep(down_seconds)
        self.start()
        self.restarts += 1


@dataclass
class Postgres:
    """A throwaway PostgreSQL cluster (initdb as the postgres user, trust auth on loopback).

    The soak runs as root here and initdb refuses root, so the server runs as `postgres`
    through runuser; pg_ctl owns its lifecycle (postmaster.pid), never a broad kill.
    """

    workdir: Path
    port: int = field(default_factory=free_port)
    restarts: int = 0
    bin_dir: Path | None = None

    @property
    def url(self) -> str:
        return f"postgres://postgres@127.0.0.1:{self.port}/postgres"

    @property
    def datadir(self) -> Path:
        return self.workdir / "data"

    @staticmethod
    def find_bin_dir() -> Path | None:
        for candidate in sorted(Path("/usr/lib/postgresql").glob("*/bin"), reverse=True):
            if (candidate / "initdb").exists() and (candidate / "pg_ctl").exists():
                return candidate
        found = shutil.which("pg_ctl")
        return Path(found).parent if found else None

    def _as_owner(self, argv: list[str]) -> list[str]:
        if os.geteuid() == 0:
            return ["runuser", "-u", "postgres", "--", *argv]
        return argv

    def _run(self, argv: list[str], timeout: float = 60) -> None:
        done = subprocess.run(
            self._as_owner(argv), capture_output=True, timeout=timeout, cwd="/", check=False
        )
        if done.returncode != 0:
            raise RuntimeError(f"{argv[0]} failed: {done.stderr.decode(errors='replace')[-500:]}")

    def start(self) -> Postgres:
        self.bin_dir = self.bin_dir or self.find_bin_dir()
        if self.bin_dir is None:
            raise RuntimeError("no PostgreSQL server binaries (initdb, pg_ctl)")
        self.workdir.mkdir(parents=True, exist_ok=True)
        if os.geteuid() == 0:
            # postgres must reach its directory through the soak's (root-owned) temp root.
            os.chmod(self.workdir.parent, 0o755)
            shutil.chown(self.workdir, "postgres", "postgres")
        if not (self.datadir / "PG_VERSION").exists():
            self._run(
                [
                    str(self.bin_dir / "initdb"),
                    "-D",
                    str(self.datadir),
                    "-A",
                    "trust",
                    "-U",
                    "postgres",
                    "--no-sync",
                ]
            )
        self._pg_ctl_start()
        return self

    def _pg_ctl_start(self) -> None:
        options = f"-p {self.port} -k {self.workdir} -c listen_addresses=127.0.0.1 -c fsync=off"
        self._run(
            [
                str(self.bin_dir / "pg_ctl"),
                "-D",
                str(self.datadir),
                "-o",
                options,
                "-l",
                str(self.workdir / "postgres.log"),
                "-w",
                "-t",
                "30",
                "start",
            ]
        )

    def stop(self) -> None:
        if self.bin_dir is None or not (self.datadir / "postmaster.pid").exists():
            return
        with contextlib.suppress(subprocess.SubprocessError, RuntimeError):
            self._run(
                [
                    str(self.bin_dir / "pg_ctl"),
                    "-D",
                    str(self.datadir),
                    "-m",
                    "fast",
                    "-w",
                    "-t",
                    "30",
                    "stop",
                ]
            )

    def restart(self, down_seconds: float) -> None:
        self.stop()
        time.sleep(down_seconds)
        self._pg_ctl_start()
        self.restarts += 1
