"""Run one step with a deadline, so a hook that never returns cannot hang promotion."""

from __future__ import annotations

import threading
from collections.abc import Callable
from typing import TypeVar

T = TypeVar("T")


class StepTimeout(Exception):
    """The step did not finish within its budget (it may still be running)."""


def call_bounded(fn: Callable[[], T], timeout: float, name: str = "step") -> T:
    """fn() in a daemon thread; its result, its exception, or StepTimeout after `timeout`.

    A timed-out step is abandoned, not killed: Python cannot kill a thread. Callers bound
    the network calls inside their steps too, so an abandoned step ends on its own.
    """
    box: dict[str, object] = {}
    done = threading.Event()

    def run() -> None:
        try:
            box["value"] = fn()
        except BaseException as exc:  # handed to the caller, never swallowed
            box["error"] = exc
        finally:
            done.set()

    threading.Thread(target=run, name=f"hub-{name}", daemon=True).start()
    if not done.wait(timeout):
        raise StepTimeout(f"{name} did not finish within {timeout:g}s")
    if "error" in box:
        raise box["error"]  # type: ignore[misc]
    return box["value"]  # type: ignore[return-value]
