"""The leader term's public names, kept here for the callers that import them
(controller/replica.py, tests). The term itself lives in
controller/term/, one component per file (see controller/term/README.md)."""

from controller.term.drain import DRAIN_BOUND_SECONDS
from controller.term.metrics import RETAINED_CONFIG_ACTIVE
from controller.term.pipeline import LeaderPipeline
from controller.term.plans import PlanMemory
from controller.term.state import LeaderSettings, TermState

__all__ = [
    "DRAIN_BOUND_SECONDS",
    "RETAINED_CONFIG_ACTIVE",
    "LeaderPipeline",
    "LeaderSettings",
    "PlanMemory",
    "TermState",
]
