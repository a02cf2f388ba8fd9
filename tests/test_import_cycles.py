"""No import cycles: every product module imports cleanly as the first module of a process.

A cycle shows only for some import orders (the module imported first stops half way while
the cycle comes back to it), so each module is imported first, in a fork of a process that
has loaded only third-party packages. Other failures (a module that needs Django set up)
are not this test's business; only "partially initialized module" errors count.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
PRODUCT = ("agents", "checkpoints", "config", "contract", "controller", "dashboard", "devstack",
           "haptic_site", "localcluster", "soak")  # fmt: skip

CHECK = r"""
import importlib, os, sys, traceback
for preload in ("kubernetes", "celery", "django", "jinja2", "aiohttp", "httpx", "yaml",
                "prometheus_client", "rest_framework"):
    try:
        importlib.import_module(preload)
    except Exception:
        pass
failed = []
for name in sys.argv[1:]:
    read, write = os.pipe()
    pid = os.fork()
    if pid == 0:
        os.close(read)
        try:
            importlib.import_module(name)
        except ImportError as exc:
            if "partially initialized" in str(exc) or "circular import" in str(exc):
                os.write(write, f"{name}: {exc}".encode())
        except BaseException:
            pass
        os._exit(0)
    os.close(write)
    with os.fdopen(read, "rb") as pipe:
        text = pipe.read().decode()
    os.waitpid(pid, 0)
    if text:
        failed.append(text)
print("\n".join(failed))
"""


def _modules() -> list[str]:
    names = []
    for top in PRODUCT:
        for path in sorted((REPO / top).rglob("*.py")):
            rel = path.relative_to(REPO).with_suffix("")
            if "migrations" in rel.parts or rel.name == "__main__":
                continue
            parts = list(rel.parts[:-1]) if rel.name == "__init__" else list(rel.parts)
            names.append(".".join(parts))
    return names


def test_every_module_imports_first_without_a_cycle() -> None:
    env = {**os.environ, "DJANGO_SETTINGS_MODULE": "haptic_site.settings", "PYTHONPATH": str(REPO)}
    done = subprocess.run(
        [sys.executable, "-c", CHECK, *_modules()],
        cwd=REPO,
        env=env,
        capture_output=True,
        text=True,
        timeout=600,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "", f"import cycles:\n{done.stdout}"
