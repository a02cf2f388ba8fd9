"""No function of the product code is over 80 lines without a reason (issue 17, item 9).

A longer function says why in a comment starting with `# long:` on its `def` line or the
line just above it. Nested functions count on their own and inside their parent.
"""

from __future__ import annotations

import ast
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
PRODUCT = ("agents", "bench", "checkpoints", "config", "contract", "controller", "dashboard",
           "devstack", "haptic_site", "localcluster", "soak")  # fmt: skip
LIMIT = 80


def long_functions() -> list[str]:
    found = []
    for top in PRODUCT:
        for path in sorted((REPO / top).rglob("*.py")):
            if "migrations" in path.parts:
                continue
            source = path.read_text()
            lines = source.splitlines()
            for node in ast.walk(ast.parse(source)):
                if not isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
                    continue
                length = (node.end_lineno or node.lineno) - node.lineno + 1
                first = node.decorator_list[0].lineno if node.decorator_list else node.lineno
                said = lines[max(first - 2, 0) : node.lineno]
                if length > LIMIT and not any("# long:" in line for line in said):
                    found.append(f"{path.relative_to(REPO)}:{node.lineno} {node.name} {length}")
    return found


def test_no_function_is_over_80_lines_without_a_reason() -> None:
    assert long_functions() == []
