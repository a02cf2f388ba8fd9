"""Rendering: HAProxyTemplateConfig + watched objects -> HAProxy config tree (pure).

out = render(RenderInput(template_config=htc, ingresses=[...], services=[...], ...))
out.files, out.plan, out.plan_id, out.checksum, out.structure_digest, out.warnings
runtime_operations(old.plan, new.plan)  # None -> reload needed
"""

from controller.render.engine import render
from controller.render.libraries import (
    GATE_CONDITION,
    LibrarySettings,
    gate_admits,
    holds_gate,
    slot_count,
)
from controller.render.model import RenderedFile, RenderError, RenderInput, RenderOutput
from controller.render.plan import (
    apply_runtime_operations,
    build_plan,
    checksum,
    plan_id,
    runtime_operations,
    runtime_state,
)

__all__ = [
    "GATE_CONDITION",
    "LibrarySettings",
    "RenderError",
    "RenderInput",
    "RenderOutput",
    "RenderedFile",
    "apply_runtime_operations",
    "build_plan",
    "checksum",
    "gate_admits",
    "holds_gate",
    "plan_id",
    "render",
    "runtime_operations",
    "runtime_state",
    "slot_count",
]
