"""Property tests of the manifest parser and the path checks (pure, no I/O)."""

from __future__ import annotations

import base64
import contextlib
import copy
import json

import pytest
from hypothesis import example, given, settings
from hypothesis import strategies as st

from agents.manifest import (
    KIND_DIRS,
    ManifestError,
    build_manifest,
    check_path,
    content_checksum,
    parse_manifest,
)

COMPONENT = st.from_regex(r"[A-Za-z0-9_][A-Za-z0-9._-]{0,20}", fullmatch=True)
TOKEN = {"holder": "ctl", "epoch": 3, "sequence": 7}
DIGEST = "ab" * 32


def _files(extra: dict[str, tuple[str, bytes]]) -> dict[str, tuple[str, bytes]]:
    return {"haproxy.cfg": ("config", b"global\n"), **extra}


@st.composite
def safe_paths(draw):
    kind = draw(st.sampled_from(sorted(KIND_DIRS)))
    parts = draw(st.lists(COMPONENT, min_size=1, max_size=3))
    return kind, "/".join([KIND_DIRS[kind], *parts])


@given(safe_paths())
@settings(deadline=None)
def test_safe_paths_of_their_kind_are_accepted(kind_path):
    kind, path = kind_path
    assert check_path(path, kind) == path


@given(
    st.lists(COMPONENT, min_size=0, max_size=3),
    st.sampled_from(["..", ".", ""]),
    st.lists(COMPONENT, min_size=0, max_size=2),
)
@settings(deadline=None)
def test_traversal_and_empty_components_are_refused(before, bad, after):
    path = "/".join(["maps", *before, bad, *after])
    with pytest.raises(ManifestError) as err:
        check_path(path, "map")
    assert err.value.reason == "bad_path"


@given(safe_paths())
@settings(deadline=None)
def test_absolute_paths_are_refused(kind_path):
    kind, path = kind_path
    with pytest.raises(ManifestError):
        check_path("/" + path, kind)


@given(st.text(min_size=1, max_size=40))
@example("0\n")  # found by CI: "$" also matched before a trailing newline
@settings(deadline=None)
def test_any_text_is_either_a_clean_relative_path_or_refused(text):
    try:
        path = check_path(text)
    except ManifestError as exc:
        assert exc.reason == "bad_path"
        return
    parts = path.split("/")
    assert not path.startswith("/")
    assert all(p not in ("", ".", "..") for p in parts)
    assert all(ch.isalnum() or ch in "._@+=-/" for ch in path)


@given(safe_paths())
@settings(deadline=None)
def test_a_path_outside_the_directory_of_its_kind_is_refused(kind_path):
    kind, path = kind_path
    other = next(k for k in sorted(KIND_DIRS) if k != kind)
    with pytest.raises(ManifestError):
        check_path(path, other)


@given(st.dictionaries(safe_paths(), st.binary(max_size=200), max_size=5))
@settings(max_examples=60, deadline=None)
def test_built_manifests_round_trip_through_the_parser(entries):
    files = _files({path: (kind, data) for (kind, path), data in entries.items()})
    # A path used both as a file and as a directory is refused elsewhere; skip it here.
    paths = set(files)
    if any(p.startswith(q + "/") for p in paths for q in paths):
        return
    raw = build_manifest(
        plan_id="p1",
        files=files,
        structure_digest=DIGEST,
        token=TOKEN,
        expected_previous_plan_id=None,
    )
    manifest = parse_manifest(json.loads(json.dumps(raw)))
    assert {f.path: f.content for f in manifest.files} == {p: c for p, (_, c) in files.items()}
    assert manifest.checksum == content_checksum({p: c for p, (_, c) in files.items()})
    assert manifest.token.epoch == 3 and manifest.mode == "auto"


@given(st.binary(min_size=1, max_size=100), st.integers(min_value=0, max_value=99))
@settings(deadline=None)
def test_any_flipped_byte_is_caught_by_the_digest(data, index):
    raw = build_manifest(
        plan_id="p1",
        files=_files({"maps/a.map": ("map", data)}),
        structure_digest=DIGEST,
        token=TOKEN,
        expected_previous_plan_id=None,
    )
    tampered = bytearray(data)
    tampered[index % len(data)] ^= 0xFF
    entry = next(f for f in raw["files"] if f["path"] == "maps/a.map")
    entry["content_b64"] = base64.b64encode(bytes(tampered)).decode()
    with pytest.raises(ManifestError) as err:
        parse_manifest(raw)
    assert err.value.reason == "digest_mismatch"


def _valid() -> dict:
    return build_manifest(
        plan_id="p1",
        files=_files({"maps/a.map": ("map", b"k v\n")}),
        structure_digest=DIGEST,
        token=TOKEN,
        expected_previous_plan_id=None,
        runtime_operations=[
            {"op": "set_server", "backend": "b", "server": "s", "address": "10.0.0.1", "port": 80},
            {"op": "map_set", "map": "maps/a.map", "key": "k", "value": "v2"},
        ],
    )


JSONISH = st.recursive(
    st.none() | st.booleans() | st.integers() | st.text(max_size=10),
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=8), inner),
    max_leaves=10,
)


@given(
    st.sampled_from(
        ["plan_id", "checksum", "token", "mode", "files", "runtime_operations", "structure_digest"]
    ),
    JSONISH,
)
@settings(max_examples=150, deadline=None)
def test_corrupting_any_field_never_escapes_as_anything_but_a_manifest_error(key, value):
    raw = _valid()
    raw[key] = value
    with contextlib.suppress(ManifestError):
        parse_manifest(raw)


def test_size_checksum_limits_and_operations_are_enforced():
    parse_manifest(_valid())
    raw = _valid()
    raw["files"][0]["size"] += 1
    with pytest.raises(ManifestError, match="size_mismatch"):
        parse_manifest(raw)
    raw = _valid()
    raw["checksum"] = "sha256:" + "0" * 64
    with pytest.raises(ManifestError, match="checksum_mismatch"):
        parse_manifest(raw)
    with pytest.raises(ManifestError, match="too_many_files"):
        parse_manifest(_valid(), max_files=1)
    with pytest.raises(ManifestError, match="too_many_operations"):
        parse_manifest(_valid(), max_operations=1)
    raw = _valid()
    raw["runtime_operations"][1]["map"] = "maps/other.map"
    with pytest.raises(ManifestError, match="not a map of this plan"):
        parse_manifest(raw)
    raw = _valid()
    raw["runtime_operations"][0]["backend"] = "b; shutdown sessions"
    with pytest.raises(ManifestError, match="refused characters"):
        parse_manifest(raw)
    raw = copy.deepcopy(_valid())
    raw["files"] = [f for f in raw["files"] if f["path"] != "haproxy.cfg"]
    with pytest.raises(ManifestError, match=r"haproxy\.cfg"):
        parse_manifest(raw)


def test_a_path_used_as_file_and_directory_is_refused():
    with pytest.raises(ManifestError, match="file and directory"):
        parse_manifest(
            build_manifest(
                plan_id="p1",
                files=_files({"general/a": ("general", b"x"), "general/a/b": ("general", b"y")}),
                structure_digest=DIGEST,
                token=TOKEN,
                expected_previous_plan_id=None,
            )
        )
