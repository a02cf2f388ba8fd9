"""The check of recorded request shapes against the corpus (tests/fidelity/coverage.py)."""

from __future__ import annotations

import json
from pathlib import Path

from localcluster.requestshapes import RequestShape
from tests.fidelity.coverage import corpus_shapes, entry_shape, main, uncovered
from tests.fidelity.replay import load_corpus

SECRET_CREATE = RequestShape("POST", "/api/v1/namespaces/{ns}/secrets", "application/json", ())


def test_an_entry_has_the_shape_of_the_request_it_replays() -> None:
    steps = {s["id"]: s for s in load_corpus()}
    assert entry_shape(steps["secret-create"]) == SECRET_CREATE
    assert entry_shape(steps["secret-list-before"]) == RequestShape(
        "GET", "/api/v1/namespaces/{ns}/secrets", "", ("labelSelector", "limit")
    )
    assert "secret-create" in corpus_shapes(load_corpus())[SECRET_CREATE]


def test_a_shape_no_entry_replays_is_reported_and_kubectls_own_are_not() -> None:
    covered = corpus_shapes(load_corpus())
    new = RequestShape("DELETE", "/api/v1/namespaces/{ns}/widgets/{name}", "", ())
    kubectl_only = RequestShape("GET", "/api/v1/namespaces/{ns}/widgets", "", ("limit",))
    recorded = {
        SECRET_CREATE: {"haptic-controller"},
        new: {"haptic-controller", "kubectl"},
        kubectl_only: {"kubectl"},
    }
    assert uncovered(recorded, covered) == [(new, ["haptic-controller"])]


def test_the_command_fails_listing_what_is_missing(tmp_path: Path, capsys) -> None:
    shape = RequestShape("DELETE", "/api/v1/namespaces/{ns}/widgets/{name}", "", ())
    (tmp_path / "a.jsonl").write_text(
        json.dumps({**shape.to_json(), "userAgent": "haptic-controller"}) + "\n"
    )
    assert main([str(tmp_path), "--out", str(tmp_path / "report.md")]) == 1
    assert str(shape) in capsys.readouterr().out
    assert "**none**" in (tmp_path / "report.md").read_text()
    (tmp_path / "a.jsonl").write_text(
        json.dumps({**SECRET_CREATE.to_json(), "userAgent": "haptic-controller"}) + "\n"
    )
    assert main([str(tmp_path)]) == 0
    # A shape only the tests' own clients sent is listed, not required.
    (tmp_path / "a.jsonl").write_text(
        json.dumps({**shape.to_json(), "userAgent": "OpenAPI-Generator"}) + "\n"
    )
    assert main([str(tmp_path)]) == 0
    assert main([str(tmp_path / "none")]) == 0
    assert "no request shapes recorded" in capsys.readouterr().out
