"""Template tags of the dashboard pages."""

from __future__ import annotations

import json
from typing import Any

from django import template

register = template.Library()

# Longer JSON than this is folded behind its summary (a <details> element).
FOLD_LINES = 6
FOLD_CHARS = 300


def audit_json(data: Any) -> dict[str, Any]:
    """An audit record's data as indented JSON, and whether and how to fold it."""
    text = json.dumps(data, indent=2, sort_keys=True, ensure_ascii=False, default=str)
    folded = text.count("\n") + 1 > FOLD_LINES or len(text) > FOLD_CHARS
    if isinstance(data, dict):
        keys = sorted(data)
        summary = ", ".join(keys[:4]) + (f", … ({len(keys)} keys)" if len(keys) > 4 else "")
    else:
        summary = f"{type(data).__name__}, {len(text)} characters"
    return {"text": text, "folded": folded, "summary": summary}


@register.inclusion_tag("dashboard/_audit_data.html")
def audit_data(data: Any) -> dict[str, Any]:
    return audit_json(data)
