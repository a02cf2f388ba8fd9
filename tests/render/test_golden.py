"""Golden outputs for representative Ingress sets, each validated by the real haproxy -c.

Regenerate after an intended template change with HAPTIC_UPDATE_GOLDEN=1 and review the diff.
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from controller.render import render
from controller.rendergate import check_tree
from tests.render.cases import CASES

GOLDEN = Path(__file__).resolve().parent / "golden"
UPDATE = os.environ.get("HAPTIC_UPDATE_GOLDEN") == "1"


def _golden_files(case: str) -> dict[str, bytes]:
    root = GOLDEN / case
    return {
        p.relative_to(root).as_posix(): p.read_bytes()
        for p in sorted(root.rglob("*"))
        if p.is_file()
    }


@pytest.mark.parametrize("case", sorted(CASES))
def test_render_matches_golden_output(case: str) -> None:
    out = render(CASES[case]())
    assert out.warnings == ()
    rendered = {f.path: f.content for f in out.files}
    if UPDATE:
        root = GOLDEN / case
        for path, content in rendered.items():
            (root / path).parent.mkdir(parents=True, exist_ok=True)
            (root / path).write_bytes(content)
        for stale in set(_golden_files(case)) - set(rendered):
            (root / stale).unlink()
    golden = _golden_files(case)
    assert sorted(rendered) == sorted(golden), "file set differs from golden"
    for path in golden:
        assert rendered[path] == golden[path], f"{case}/{path} differs from golden"


@pytest.mark.parametrize("case", sorted(CASES))
def test_golden_output_is_accepted_by_haproxy(case: str) -> None:
    # Checks the committed golden tree itself, so a stale golden file cannot hide an
    # invalid configuration.
    root = GOLDEN / case
    assert (root / "haproxy.cfg").is_file()
    accepted, output = check_tree(root)
    assert accepted, output
    assert "[ALERT]" not in output and "[WARNING]" not in output, output


def test_golden_cases_cover_the_features() -> None:
    # The golden set is only worth something if it exercises what the libraries offer.
    tls = _golden_files("tls")
    assert "crt-lists/crt-list.txt" in tls and "certs/secure_site-tls.pem" in tls
    assert b"ssl crt-list crt-lists/crt-list.txt" in tls["haproxy.cfg"]
    assert b"^[^.]+\\.example\\.test$ *.example.test" in tls["maps/hosts-wildcard.map"]
    paths = _golden_files("multiple_paths")
    assert b"shop.example.test/api/health shop_api_8000" in paths["maps/path-exact.map"]
    assert b"shop.example.test/api/ shop_api_8000" in paths["maps/path-prefix.map"]
    assert paths["haproxy.cfg"].count(b"server SRV_") == 10 + 5  # 7 -> 10 slots, 2 -> 5
    default = _golden_files("default_backend")
    assert b"default_backend default_fallback_80" in default["haproxy.cfg"]
    assert b"*/docs default_docs_80" in default["maps/path-exact.map"]
    gated = _golden_files("readiness_gated_pod")["haproxy.cfg"].decode()
    assert "server SRV_1 10.6.0.1:8080 weight 1\n" in gated
    assert "server SRV_2 10.6.0.2:8080 weight 1\n" in gated
    assert "server SRV_3 10.6.0.3:8080 weight 1 disabled\n" in gated
    assert "server SRV_4 10.6.0.4:8080 weight 1 disabled\n" in gated
    assert "server SRV_5 10.6.0.5:8080 weight 1 disabled\n" in gated
