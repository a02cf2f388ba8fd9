"""Leader election on a coordination.k8s.io Lease with fenced terms.

Small modules with one job each, after client-go's leaderelection:
timing (settings and defaults), record (what is on the Lease), decisions (pure: expiry,
what to write, term validity), lease_store (Lease I/O), term (fencing token and live term),
elector (one round), supervisor (rounds in a thread), events, metrics, identity, and
template_config (the settings from the HAProxyTemplateConfig: refused when invalid,
followed without a restart).
"""

from controller.election.elector import ElectionCallbacks, LeaderElector
from controller.election.record import EPOCH_ANNOTATION
from controller.election.rounds import ElectionSupervisor
from controller.election.term import FencingToken, Term
from controller.election.timing import (
    DEFAULT_LEASE_NAME,
    ElectionSettings,
    ElectionTiming,
    parse_duration,
    settings_from_spec,
)

__all__ = [
    "DEFAULT_LEASE_NAME",
    "EPOCH_ANNOTATION",
    "ElectionCallbacks",
    "ElectionSettings",
    "ElectionSupervisor",
    "ElectionTiming",
    "FencingToken",
    "LeaderElector",
    "Term",
    "parse_duration",
    "settings_from_spec",
]
