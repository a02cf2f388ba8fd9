"""The config tree on disk: staging, journal, commit with haproxy.cfg last, hashing.

Files are never modified in place: new bytes are written in a staging directory on the same
filesystem and renamed over the old ones, so a journal made of hard links to the previous
files is enough to put the previous tree back.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import shutil
import stat
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path

from agents.manifest import ROOT_CONFIG, FileEntry


class TreeError(RuntimeError):
    def __init__(self, reason: str, detail: str) -> None:
        super().__init__(f"{reason}: {detail}")
        self.reason = reason
        self.detail = detail


def _fsync_dir(path: Path) -> None:
    fd = os.open(path, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def write_atomic(path: Path, data: bytes, durable: bool = True) -> None:
    tmp = path.with_name(f".{path.name}.tmp")
    with open(tmp, "wb") as fh:
        fh.write(data)
        if durable:
            fh.flush()
            os.fsync(fh.fileno())
    os.replace(tmp, path)
    if durable:
        _fsync_dir(path.parent)


def check_inside(root: Path, rel: str) -> Path:
    """The absolute target of `rel`, refusing any symlink on the way and any escape.

    `rel` passed the manifest's path check (no `..`, no absolute path), so with no symlink
    among its components the target cannot leave `root`.
    """
    if rel.startswith("/") or ".." in rel.split("/"):
        raise TreeError("path_outside_tree", rel)
    current = root
    for part in rel.split("/"):
        current = current / part
        if current.is_symlink():
            raise TreeError("symlink_refused", f"{rel}: {current.relative_to(root)} is a symlink")
    return root / rel


@dataclass(frozen=True)
class DiskFile:
    sha256: str | None  # None: not a regular file (symlink, device...)
    size: int


class DigestCache:
    """Digests of the files an apply hashed, by what any change to a file changes on disk:
    device, inode, size, and modification and change times in nanoseconds (the agent writes
    by rename, a new inode; an edit in place moves mtime and ctime, and ctime cannot be set
    back from user space). The apply path hashes only what changed since (issue 19); a
    verified read (`GET /v1/state?verify=1`) re-hashes every byte, without it."""

    def __init__(self) -> None:
        self._known: dict[str, tuple[tuple[int, ...], DiskFile]] = {}

    @staticmethod
    def _key(st: os.stat_result) -> tuple[int, ...]:
        return (st.st_dev, st.st_ino, st.st_size, st.st_mtime_ns, st.st_ctime_ns)

    def digest(self, rel: str, path: Path, st: os.stat_result) -> DiskFile:
        known = self._known.get(rel)
        if known is not None and known[0] == self._key(st):
            return known[1]
        return self._hashed(rel, path.read_bytes(), st)

    def read(self, rel: str, path: Path) -> tuple[bytes, str]:
        """The bytes of a regular file and their sha256 (from the cache when unchanged)."""
        st = path.lstat()
        if not stat.S_ISREG(st.st_mode):
            raise TreeError("not_a_file", rel)
        data = path.read_bytes()
        known = self._known.get(rel)
        if known is not None and known[0] == self._key(st) == self._key(path.lstat()):
            found = known[1]
        else:
            found = self._hashed(rel, data, st)
        assert found.sha256 is not None
        return data, found.sha256

    def _hashed(self, rel: str, data: bytes, st: os.stat_result) -> DiskFile:
        found = DiskFile(hashlib.sha256(data).hexdigest(), len(data))
        self._known[rel] = (self._key(st), found)
        return found

    def wrote(self, rel: str, path: Path, sha256: str, size: int) -> None:
        """The agent just renamed these bytes into place: their digest is known."""
        self._known[rel] = (self._key(path.lstat()), DiskFile(sha256, size))


def hash_tree(root: Path, cache: DigestCache | None = None) -> dict[str, DiskFile]:
    """Every entry under `root` (hidden temp files excluded), without following symlinks;
    with `cache`, a file unchanged on disk since it was last hashed is not read again."""
    digests = cache if cache is not None else DigestCache()  # none: every byte hashed
    found: dict[str, DiskFile] = {}
    if not root.is_dir():
        return found
    for dirpath, dirnames, filenames in os.walk(root, followlinks=False):
        base = Path(dirpath)
        for name in list(dirnames):
            if (base / name).is_symlink():
                found[str((base / name).relative_to(root))] = DiskFile(None, 0)
        for name in filenames:
            if name.startswith("."):
                continue
            path = base / name
            rel = str(path.relative_to(root))
            st = path.lstat()
            if not stat.S_ISREG(st.st_mode):
                found[rel] = DiskFile(None, 0)  # symlink, device...
            else:
                found[rel] = digests.digest(rel, path, st)
    return found


def _ensure_parent(path: Path) -> None:
    # A stat is much cheaper than mkdir(exist_ok=True) on overlay filesystems.
    if not path.parent.is_dir():
        path.parent.mkdir(parents=True, exist_ok=True)


def stage(staging: Path, files: Iterable[FileEntry], durable: bool = True) -> None:
    """Write a complete tree (for `haproxy -c` before a reload)."""
    for entry in files:
        target = staging / entry.path
        _ensure_parent(target)
        _write(target, entry.content, durable, _mode(entry))


def _mode(entry: FileEntry) -> int:
    # Certificates carry private keys: readable by the agent's user (and haproxy) only.
    return 0o600 if entry.kind == "certificate" else 0o644


def stage_beside(root: Path, files: Iterable[FileEntry], durable: bool = True) -> dict[str, Path]:
    """Write new bytes next to their targets (hidden names); rename makes them live."""
    staged = {}
    for entry in files:
        target = root / entry.path
        _ensure_parent(target)
        tmp = target.with_name(f".{target.name}.stage")
        _write(tmp, entry.content, durable, _mode(entry))
        staged[entry.path] = tmp
    return staged


def _write(path: Path, data: bytes, durable: bool, mode: int = 0o644) -> None:
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, mode)
    os.fchmod(fd, mode)  # an existing file keeps its mode on O_CREAT otherwise
    with open(fd, "wb") as fh:
        fh.write(data)
        if durable:
            fh.flush()
            os.fsync(fh.fileno())


class Journal:
    """Hard links to the files an apply is about to replace or remove, plus a record.

    The record is written last and removed first: without a record there is no journal,
    and files are only replaced after the record exists.
    """

    def __init__(self, directory: Path) -> None:
        self.directory = directory
        self.record_path = directory / "journal.json"

    def pending(self) -> dict | None:
        try:
            return json.loads(self.record_path.read_text())
        except FileNotFoundError:
            return None
        except (OSError, ValueError):
            return {"complete": False}

    def begin(
        self, root: Path, plan_id: str, previous: str | None, paths: Iterable[str], durable: bool
    ) -> None:
        self.clear()
        entries: dict[str, str | None] = {}
        for index, rel in enumerate(paths):
            current = root / rel
            if current.is_file() and not current.is_symlink():
                os.link(current, self.directory / f"saved-{index}")
                entries[rel] = f"saved-{index}"
            else:
                entries[rel] = None
        record = {
            "plan_id": plan_id,
            "previous_plan_id": previous,
            "entries": entries,
            "complete": True,
        }
        write_atomic(self.record_path, json.dumps(record).encode(), durable)

    def restore(self, root: Path) -> None:
        """Put every journaled path back as it was (haproxy.cfg last)."""
        record = self.pending()
        if not record or not record.get("complete"):
            raise TreeError("journal_incomplete", "no complete journal to restore")
        entries: dict[str, str | None] = record["entries"]
        for rel in sorted(entries, key=lambda p: (p == ROOT_CONFIG, p)):
            target = root / rel
            saved = entries[rel]
            if saved:
                _ensure_parent(target)
                tmp = target.with_name(f".{target.name}.restore")
                if tmp.exists():
                    tmp.unlink()
                os.link(self.directory / saved, tmp)
                os.replace(tmp, target)
            elif target.is_file() or target.is_symlink():
                target.unlink()
        prune_empty_dirs(root)

    def clear(self) -> None:
        if not self.directory.is_dir():
            self.directory.mkdir(parents=True, exist_ok=True)
            return
        with contextlib.suppress(FileNotFoundError):
            self.record_path.unlink()
        for name in os.listdir(self.directory):
            path = self.directory / name
            if path.is_dir() and not path.is_symlink():
                shutil.rmtree(path)
            else:
                path.unlink()


def commit(staged: dict[str, Path], root: Path, remove: Iterable[str]) -> None:
    """Rename staged files into the tree and remove the others, haproxy.cfg last."""
    removed = False
    for rel in remove:
        target = root / rel
        if target.is_file() or target.is_symlink():
            target.unlink()
            removed = True
    for rel in sorted(staged, key=lambda p: (p == ROOT_CONFIG, p)):
        target = root / rel
        _ensure_parent(target)
        os.replace(staged[rel], target)
    if removed:
        prune_empty_dirs(root)


def prune_empty_dirs(root: Path) -> None:
    for dirpath, _dirs, _files in sorted(os.walk(root), key=lambda t: -len(t[0])):
        path = Path(dirpath)
        if path != root and not any(path.iterdir()):
            path.rmdir()


def flat_name(rel: str) -> str:
    """A tree path as one file name ("%" never occurs in accepted paths)."""
    return rel.replace("/", "%")


def update_store(
    root: Path, store: Path, plan: dict[str, str], previous: dict[str, str] | None
) -> None:
    """Make `store` hold copies of `plan` (path -> sha256) taken from `root`, copying only
    what differs from `previous`. Copies, not links: a file edited in place behind the
    agent's back must not edit the last-known-good copy with it."""
    if not store.is_dir():
        store.mkdir(parents=True, exist_ok=True)
        previous = None
    previous = previous or {}
    for rel, sha in plan.items():
        if previous.get(rel) == sha and (store / flat_name(rel)).is_file():
            continue
        tmp = store / f".{flat_name(rel)}.tmp"
        shutil.copy(root / rel, tmp)  # bytes and mode (private keys stay 0600)
        os.replace(tmp, store / flat_name(rel))
    wanted = {flat_name(rel) for rel in plan}
    for name in os.listdir(store):
        if name not in wanted:
            (store / name).unlink()
