"""`python -m tests.agents.crashing_agent PLAN serve ...`: the real agent, which dies (exit 70)
right after it renamed the files of plan PLAN into place, before finishing that apply.

Fault injection for the crash-recovery test, kept out of the product: this module wraps the
agent core's journal and commit step, then runs the ordinary `agents` entry point.
"""

from __future__ import annotations

import os
import sys
from pathlib import Path
from typing import Any

import agents.core as core
from agents.__main__ import main

CRASH_EXIT_CODE = 70


def install(plan_id: str) -> None:
    applying: dict[str, str] = {}
    journal_class = core.Journal
    commit = core.commit

    class RecordingJournal(journal_class):  # type: ignore[misc, valid-type]
        def begin(self, root: Path, plan: str, *args: Any, **kwargs: Any) -> None:
            applying["plan"] = plan
            super().begin(root, plan, *args, **kwargs)

    def commit_then_die(*args: Any, **kwargs: Any) -> Any:
        result = commit(*args, **kwargs)
        if applying.get("plan") == plan_id:
            os._exit(CRASH_EXIT_CODE)  # die mid-apply: journal written, files renamed
        return result

    core.Journal = RecordingJournal  # type: ignore[misc]
    core.commit = commit_then_die


if __name__ == "__main__":
    install(sys.argv[1])
    sys.exit(main(sys.argv[2:]))
