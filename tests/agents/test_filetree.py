"""The config tree on a real filesystem: journal, commit, restore, symlink refusal."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from agents.filetree import (
    Journal,
    TreeError,
    check_inside,
    commit,
    flat_name,
    hash_tree,
    stage,
    update_store,
)
from agents.manifest import FileEntry, sha256_hex


def entry(path: str, data: bytes, kind: str = "map") -> FileEntry:
    return FileEntry(path, kind, sha256_hex(data), len(data), data)


def test_commit_then_restore_puts_the_previous_tree_back(tmp_path: Path):
    root = tmp_path / "config"
    root.mkdir()
    (root / "haproxy.cfg").write_bytes(b"old cfg")
    (root / "maps").mkdir()
    (root / "maps" / "gone.map").write_bytes(b"gone")
    before = hash_tree(root)
    staging = tmp_path / "staging"
    stage(staging, [entry("haproxy.cfg", b"new cfg", "config"), entry("maps/new.map", b"n")])
    journal = Journal(tmp_path / "journal")
    touched = ["haproxy.cfg", "maps/gone.map", "maps/new.map"]
    journal.begin(root, "p2", "p1", touched, durable=True)
    staged = {p: staging / p for p in ("haproxy.cfg", "maps/new.map")}
    commit(staged, root, ["maps/gone.map"])
    after = hash_tree(root)
    assert set(after) == {"haproxy.cfg", "maps/new.map"}
    assert after["haproxy.cfg"].sha256 == sha256_hex(b"new cfg")
    assert journal.pending()["plan_id"] == "p2"
    journal.restore(root)
    assert hash_tree(root) == before
    journal.clear()
    assert journal.pending() is None
    assert list((tmp_path / "journal").iterdir()) == []


def test_the_last_known_good_store_keeps_copies_not_links(tmp_path: Path):
    root = tmp_path / "config"
    (root / "maps").mkdir(parents=True)
    (root / "haproxy.cfg").write_bytes(b"cfg")
    (root / "maps" / "a.map").write_bytes(b"a b")
    store = tmp_path / "lkg"
    plan = {"haproxy.cfg": sha256_hex(b"cfg"), "maps/a.map": sha256_hex(b"a b")}
    update_store(root, store, plan, None)
    with open(root / "maps" / "a.map", "ab") as fh:  # edited in place behind the agent
        fh.write(b" evil")
    assert (store / flat_name("maps/a.map")).read_bytes() == b"a b"
    update_store(root, store, {"haproxy.cfg": plan["haproxy.cfg"]}, plan)
    assert sorted(p.name for p in store.iterdir()) == ["haproxy.cfg"]


def test_symlinks_and_escapes_are_refused(tmp_path: Path):
    root = tmp_path / "config"
    outside = tmp_path / "outside"
    root.mkdir()
    outside.mkdir()
    os.symlink(outside, root / "maps")
    with pytest.raises(TreeError) as err:
        check_inside(root, "maps/x.map")
    assert err.value.reason == "symlink_refused"
    assert check_inside(root, "general/x") == root / "general" / "x"
    assert hash_tree(root)["maps"].sha256 is None  # reported, not followed
