"""The config tree on a real filesystem: journal, commit, restore, symlink refusal."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from agents.filetree import (
    DigestCache,
    Journal,
    TreeError,
    check_inside,
    commit,
    flat_name,
    hash_tree,
    stage,
    update_store,
    write_atomic,
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


def test_the_digest_cache_hashes_again_whatever_changed_on_disk(tmp_path: Path) -> None:
    """The apply path's digest cache (issue 19) answers from memory only for a file whose
    inode, size and times are those it hashed: an edit in place of the same size, a file
    replaced by rename and a new file are all hashed again."""
    cache = DigestCache()
    (tmp_path / "maps").mkdir()
    cfg, host_map = tmp_path / "haproxy.cfg", tmp_path / "maps" / "hosts.map"
    cfg.write_bytes(b"global\n")
    host_map.write_bytes(b"a.example be_a\n")
    first = hash_tree(tmp_path, cache)
    again = hash_tree(tmp_path, cache)
    assert again == first == hash_tree(tmp_path)
    assert again["haproxy.cfg"] is first["haproxy.cfg"]  # answered from the cache
    with open(host_map, "r+b") as fh:  # in place, same size
        fh.write(b"b")
    edited = hash_tree(tmp_path, cache)
    assert edited["maps/hosts.map"] != first["maps/hosts.map"]
    assert edited == hash_tree(tmp_path)
    write_atomic(cfg, b"global!\n", durable=False)  # a new inode
    (tmp_path / "maps" / "new.map").write_bytes(b"")
    assert hash_tree(tmp_path, cache) == hash_tree(tmp_path)


def test_a_file_the_agent_wrote_is_known_until_it_changes(tmp_path: Path) -> None:
    """`DigestCache.wrote` records the digest of bytes the agent renamed into place; `read`
    answers with it only while the file is untouched, and hashes an edit in place."""
    cache = DigestCache()
    cfg = tmp_path / "haproxy.cfg"
    write_atomic(cfg, b"global\n", durable=False)
    cache.wrote("haproxy.cfg", cfg, "recorded-digest", 7)
    assert cache.read("haproxy.cfg", cfg) == (b"global\n", "recorded-digest")
    assert hash_tree(tmp_path, cache)["haproxy.cfg"].sha256 == "recorded-digest"
    with open(cfg, "r+b") as fh:
        fh.write(b"G")
    assert cache.read("haproxy.cfg", cfg) == (b"Global\n", sha256_hex(b"Global\n"))
    assert hash_tree(tmp_path, cache) == hash_tree(tmp_path)
