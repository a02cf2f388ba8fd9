"""The apply manifest: parsing, path checks, digests. Pure functions, no I/O.

The controller sends the complete file set of a plan: each file's bytes, or, for a pod that
runs the manifest's expected previous plan, that plan's bytes of the same path with a few
byte-range edits (an endpoint change rewrites a handful of server lines of a configuration of
megabytes; docs/contracts.md "Files from the base plan"). Everything here decides whether
that manifest is acceptable before a single byte reaches the disk.
"""

from __future__ import annotations

import base64
import binascii
import re
from dataclasses import dataclass, field, replace
from typing import Any

from contract import content_checksum, sha256_hex

KINDS = ("config", "map", "general", "certificate", "crt-list")
MODES = ("auto", "reload", "revert_lkg")
SERVER_STATES = ("ready", "maint", "drain")
ROOT_CONFIG = "haproxy.cfg"

# Where each kind may live inside the config tree (the rendered config resolves relative
# paths against it through `default-path config`).
KIND_DIRS = {"map": "maps", "general": "general", "certificate": "certs", "crt-list": "crt-lists"}

MAX_PATH_LEN = 255
MAX_DEPTH = 4
DEFAULT_MAX_FILES = 2000
DEFAULT_MAX_OPERATIONS = 50_000
MAX_FIELD_LEN = 1024

# One path component: conservative on purpose, map paths end up inside runtime API commands.
_COMPONENT = re.compile(r"^[A-Za-z0-9_][A-Za-z0-9._@+=-]*\Z")
# Names that end up in runtime API commands: no whitespace, no separators of that protocol.
_NAME = re.compile(r"^[A-Za-z0-9_.:@+=/-]+\Z")
_HEX64 = re.compile(r"^[0-9a-f]{64}\Z")
# Map keys and values: printable ASCII (keys without spaces, as in a map file). The runtime
# API client escapes spaces, `;` and backslashes.
_MAP_KEY = re.compile(r"^[\x21-\x7e]+\Z")
_MAP_VALUE = re.compile(r"^[\x21-\x7e](?:[\x20-\x7e]*[\x21-\x7e])?\Z")


class ManifestError(ValueError):
    """A manifest the agent refuses before writing anything; `reason` is machine-readable."""

    def __init__(self, reason: str, detail: str = "") -> None:
        super().__init__(f"{reason}: {detail}" if detail else reason)
        self.reason = reason
        self.detail = detail


@dataclass(frozen=True)
class Token:
    holder: str
    epoch: int
    sequence: int

    def as_dict(self) -> dict[str, Any]:
        return {"holder": self.holder, "epoch": self.epoch, "sequence": self.sequence}


@dataclass(frozen=True)
class FileEntry:
    path: str
    kind: str
    sha256: str
    size: int
    content: bytes = field(repr=False)


@dataclass(frozen=True)
class Edit:
    """Replace `length` bytes at `offset` of the base file with `text` (UTF-8)."""

    offset: int
    length: int
    text: bytes


@dataclass(frozen=True)
class BasedEntry:
    """A file whose bytes are those of the same path in the expected previous plan, with
    `edits` (none: unchanged). Resolved against the pod's files by `resolve_base`."""

    path: str
    kind: str
    sha256: str
    size: int
    edits: tuple[Edit, ...]


@dataclass(frozen=True)
class SetServer:
    backend: str
    server: str
    address: str | None
    port: int | None
    weight: int | None
    state: str | None
    op: str = "set_server"


@dataclass(frozen=True)
class MapOp:
    op: str  # map_set | map_del
    map: str
    key: str
    value: str | None


RuntimeOp = SetServer | MapOp


@dataclass(frozen=True)
class Manifest:
    plan_id: str
    checksum: str
    structure_digest: str
    token: Token
    expected_previous_plan_id: str | None
    mode: str
    files: tuple[FileEntry, ...]
    runtime_operations: tuple[RuntimeOp, ...]
    # Recovery (ADR-0033) applies only to bootstrap pods: the agent, not a read the sender
    # made earlier, decides that the pod is still bootstrap when the apply arrives.
    expect_bootstrap: bool = False
    # Files still to be taken from the base plan (resolve_base); `files` holds the others.
    based: tuple[BasedEntry, ...] = ()

    def file_map(self) -> dict[str, FileEntry]:
        return {f.path: f for f in self.files}

    def identities(self) -> dict[str, FileEntry | BasedEntry]:
        """Every file's path, kind, digest and size, whether its bytes came or not."""
        return {f.path: f for f in (*self.files, *self.based)}


def check_path(path: Any, kind: str | None = None) -> str:
    """Return `path` if it is a safe relative path inside the config tree, else raise.

    Refuses absolute paths, `..`, empty or dot components, odd characters, too deep or too
    long paths, and paths outside the directory their kind lives in.
    """
    if not isinstance(path, str) or not path:
        raise ManifestError("bad_path", "path must be a non-empty string")
    if len(path) > MAX_PATH_LEN:
        raise ManifestError("bad_path", f"path longer than {MAX_PATH_LEN} characters")
    if path.startswith("/"):
        raise ManifestError("bad_path", f"absolute path refused: {path!r}")
    parts = path.split("/")
    if len(parts) > MAX_DEPTH:
        raise ManifestError("bad_path", f"path deeper than {MAX_DEPTH}: {path!r}")
    for part in parts:
        if part in ("", ".", ".."):
            raise ManifestError("bad_path", f"traversal or empty component refused: {path!r}")
        if not _COMPONENT.match(part):
            raise ManifestError("bad_path", f"refused characters in path: {path!r}")
    if kind is not None:
        if kind == "config":
            if path != ROOT_CONFIG:
                raise ManifestError("bad_path", f"a config file must be {ROOT_CONFIG!r}")
        elif len(parts) < 2 or parts[0] != KIND_DIRS[kind]:
            raise ManifestError("bad_path", f"a {kind} file must live under {KIND_DIRS[kind]}/")
    return path


def _digest(value: Any, what: str) -> str:
    if not isinstance(value, str):
        raise ManifestError("bad_manifest", f"{what} must be a string")
    value = value.removeprefix("sha256:")
    if not _HEX64.match(value):
        raise ManifestError("bad_manifest", f"{what} must be 64 lowercase hex digits")
    return value


def _str(
    obj: dict,
    key: str,
    *,
    optional: bool = False,
    name: bool = False,
    pattern: re.Pattern[str] | None = None,
) -> str | None:
    value = obj.get(key)
    if value is None and optional:
        return None
    if not isinstance(value, str) or not value or len(value) > MAX_FIELD_LEN:
        raise ManifestError("bad_manifest", f"{key} must be a non-empty string")
    if name:
        pattern = _NAME
    if pattern is not None and not pattern.match(value):
        raise ManifestError("bad_manifest", f"{key} has refused characters: {value!r}")
    return value


def _int(obj: dict, key: str, lo: int, hi: int, *, optional: bool = False) -> int | None:
    value = obj.get(key)
    if value is None and optional:
        return None
    if isinstance(value, bool) or not isinstance(value, int) or not lo <= value <= hi:
        raise ManifestError("bad_manifest", f"{key} must be an integer in [{lo}, {hi}]")
    return value


def parse_token(raw: Any) -> Token:
    if not isinstance(raw, dict):
        raise ManifestError("bad_manifest", "token must be an object")
    holder = _str(raw, "holder")
    epoch = _int(raw, "epoch", 0, 2**62)
    sequence = _int(raw, "sequence", 0, 2**62)
    assert holder is not None and epoch is not None and sequence is not None
    return Token(holder, epoch, sequence)


def parse_operation(raw: Any, map_paths: set[str] | None) -> RuntimeOp:
    if not isinstance(raw, dict):
        raise ManifestError("bad_operation", "an operation must be an object")
    op = raw.get("op")
    if op == "set_server":
        state = raw.get("state")
        if state is not None and state not in SERVER_STATES:
            raise ManifestError("bad_operation", f"state must be one of {SERVER_STATES}")
        address = _str(raw, "address", optional=True, name=True)
        port = _int(raw, "port", 1, 65535, optional=True)
        weight = _int(raw, "weight", 0, 256, optional=True)
        if address is None and port is not None:
            raise ManifestError("bad_operation", "port without address")
        backend = _str(raw, "backend", name=True)
        server = _str(raw, "server", name=True)
        assert backend is not None and server is not None
        return SetServer(backend, server, address, port, weight, state)
    if op in ("map_set", "map_del"):
        map_path = check_path(raw.get("map"), "map")
        if map_paths is not None and map_path not in map_paths:
            raise ManifestError("bad_operation", f"map {map_path!r} is not a map of this plan")
        key = _str(raw, "key", pattern=_MAP_KEY)
        value = _str(raw, "value", pattern=_MAP_VALUE) if op == "map_set" else None
        assert key is not None
        return MapOp(op, map_path, key, value)
    raise ManifestError("bad_operation", f"unknown op {op!r}")


def parse_manifest(
    raw: Any,
    *,
    max_files: int = DEFAULT_MAX_FILES,
    max_operations: int = DEFAULT_MAX_OPERATIONS,
) -> Manifest:
    """Validate a decoded JSON manifest completely: shape, paths, digests, sizes, checksum."""
    if not isinstance(raw, dict):
        raise ManifestError("bad_manifest", "manifest must be a JSON object")
    mode = raw.get("mode", "auto")
    if mode not in MODES:
        raise ManifestError("bad_manifest", f"mode must be one of {MODES}")
    plan_id = _str(raw, "plan_id", name=True)
    token = parse_token(raw.get("token"))
    expected = _str(raw, "expected_previous_plan_id", optional=True, name=True)
    expect_bootstrap = raw.get("expect_bootstrap", False)
    if not isinstance(expect_bootstrap, bool):
        raise ManifestError("bad_manifest", "expect_bootstrap must be a boolean")
    if expect_bootstrap and expected is not None:
        raise ManifestError(
            "bad_manifest", "expect_bootstrap contradicts an expected previous plan"
        )
    raw_files = raw.get("files", [])
    raw_ops = raw.get("runtime_operations", [])
    if not isinstance(raw_files, list) or not isinstance(raw_ops, list):
        raise ManifestError("bad_manifest", "files and runtime_operations must be lists")
    if len(raw_files) > max_files:
        raise ManifestError("too_many_files", f"{len(raw_files)} files, limit {max_files}")
    if len(raw_ops) > max_operations:
        raise ManifestError(
            "too_many_operations", f"{len(raw_ops)} operations, limit {max_operations}"
        )
    files, based = _parse_files(raw_files)
    if based and expected is None:
        raise ManifestError("bad_manifest", "files from the base plan need its plan ID")
    if based and mode != "auto":
        raise ManifestError("bad_manifest", f"files from the base plan in mode {mode!r}")
    checksum, structure = _declared_identity(raw, mode, files, based)
    map_paths = {f.path for f in (*files, *based) if f.kind == "map"}
    ops = tuple(parse_operation(op, map_paths) for op in raw_ops)
    assert plan_id is not None
    return Manifest(
        plan_id=plan_id,
        checksum=checksum,
        structure_digest=structure,
        token=token,
        expected_previous_plan_id=expected,
        mode=mode,
        files=files,
        runtime_operations=ops,
        expect_bootstrap=expect_bootstrap,
        based=based,
    )


def _parse_files(raw_files: list[Any]) -> tuple[tuple[FileEntry, ...], tuple[BasedEntry, ...]]:
    """Every file entry checked, each sorted by path; no path twice, none both file and
    directory."""
    files: list[FileEntry] = []
    based: list[BasedEntry] = []
    seen: set[str] = set()
    for item in raw_files:
        entry = _parse_file(item, seen)
        seen.add(entry.path)
        if isinstance(entry, BasedEntry):
            based.append(entry)
        else:
            files.append(entry)
    # Directory/file clashes ("maps" as file and "maps/x") would make the tree unwritable.
    prefixes = {"/".join(p.split("/")[:i]) for p in seen for i in range(1, p.count("/") + 1)}
    if clash := prefixes & seen:
        raise ManifestError("bad_path", f"path used as file and directory: {sorted(clash)[0]!r}")
    files.sort(key=lambda f: f.path)
    based.sort(key=lambda f: f.path)
    return tuple(files), tuple(based)


def _parse_file(item: Any, seen: set[str]) -> FileEntry | BasedEntry:
    """One file entry: kind, path, declared digest and size, and bytes that match both (or
    the edits of the base plan's bytes, checked once resolved)."""
    if not isinstance(item, dict):
        raise ManifestError("bad_manifest", "a file entry must be an object")
    kind = item.get("kind")
    if kind not in KINDS:
        raise ManifestError("bad_manifest", f"kind must be one of {KINDS}")
    path = check_path(item.get("path"), kind)
    if path in seen:
        raise ManifestError("bad_manifest", f"duplicate path {path!r}")
    sha = _digest(item.get("sha256"), f"sha256 of {path}")
    size = _int(item, "size", 0, 2**40)
    assert size is not None
    if "base_edits" in item:
        if "content_b64" in item:
            raise ManifestError("bad_manifest", f"{path}: content_b64 and base_edits together")
        return BasedEntry(path, kind, sha, size, _parse_edits(item["base_edits"], path))
    b64 = item.get("content_b64")
    if not isinstance(b64, str):
        raise ManifestError("bad_manifest", f"content_b64 of {path} must be a string")
    try:
        content = base64.b64decode(b64, validate=True)
    except (binascii.Error, ValueError) as exc:
        raise ManifestError("bad_manifest", f"content_b64 of {path}: {exc}") from None
    if len(content) != size:
        raise ManifestError("size_mismatch", f"{path}: {len(content)} bytes, declared {size}")
    if sha256_hex(content) != sha:
        raise ManifestError("digest_mismatch", f"{path}: content does not match sha256")
    return FileEntry(path, kind, sha, len(content), content)


def _parse_edits(raw: Any, path: str) -> tuple[Edit, ...]:
    """`[[offset, length, text], ...]`: ascending, not overlapping (bounds are checked
    against the base bytes in resolve_base)."""
    if not isinstance(raw, list) or len(raw) > DEFAULT_MAX_OPERATIONS:
        raise ManifestError("bad_patch", f"base_edits of {path} must be a list of edits")
    edits: list[Edit] = []
    end = 0
    for item in raw:
        if (
            not isinstance(item, list)
            or len(item) != 3
            or not all(isinstance(n, int) and not isinstance(n, bool) for n in item[:2])
            or not isinstance(item[2], str)
        ):
            raise ManifestError("bad_patch", f"{path}: an edit is [offset, length, text]")
        offset, length, text = item
        if offset < end or length < 0:
            raise ManifestError("bad_patch", f"{path}: edits must ascend and not overlap")
        end = offset + length
        edits.append(Edit(offset, length, text.encode()))
    return tuple(edits)


def apply_edits(base: bytes, edits: tuple[Edit, ...]) -> bytes:
    """`base` with every edit made (offsets are into `base`)."""
    if edits and edits[-1].offset + edits[-1].length > len(base):
        raise ManifestError("bad_patch", "an edit reaches past the end of the base file")
    pieces: list[bytes] = []
    at = 0
    for edit in edits:
        pieces += (base[at : edit.offset], edit.text)
        at = edit.offset + edit.length
    pieces.append(base[at:])
    return b"".join(pieces)


def resolve_base(m: Manifest, base: dict[str, bytes]) -> Manifest:
    """`m` with its based files made from `base` (path -> the bytes of the expected previous
    plan; the caller proved them), each checked against its declared size and digest, and
    the whole set against the declared checksum."""
    files = list(m.files)
    for entry in m.based:
        if entry.path not in base:
            raise ManifestError("base_unavailable", f"{entry.path} is not in the base plan")
        content = apply_edits(base[entry.path], entry.edits)
        if len(content) != entry.size:
            raise ManifestError(
                "size_mismatch", f"{entry.path}: {len(content)} bytes, declared {entry.size}"
            )
        if sha256_hex(content) != entry.sha256:
            raise ManifestError("digest_mismatch", f"{entry.path}: edits do not give sha256")
        files.append(FileEntry(entry.path, entry.kind, entry.sha256, entry.size, content))
    files.sort(key=lambda f: f.path)
    _check_checksum(m.checksum, files)
    return replace(m, files=tuple(files), based=())


def _check_checksum(declared: str, files: list[FileEntry] | tuple[FileEntry, ...]) -> None:
    actual = content_checksum({f.path: f.content for f in files})
    if declared != actual:
        raise ManifestError("checksum_mismatch", f"declared {declared}, computed {actual}")


def _declared_identity(
    raw: dict, mode: str, files: tuple[FileEntry, ...], based: tuple[BasedEntry, ...] = ()
) -> tuple[str, str]:
    """The declared content checksum and structure digest, checked against the files unless
    the manifest only asks to revert to the last known good configuration (or some files
    come from the base plan: resolve_base checks it then)."""
    if mode == "revert_lkg":
        return raw.get("checksum") or "", raw.get("structure_digest") or ""
    if ROOT_CONFIG not in {f.path for f in (*files, *based)}:
        raise ManifestError("bad_manifest", f"the file set must contain {ROOT_CONFIG}")
    checksum = _str(raw, "checksum")
    assert checksum is not None
    if not based:
        _check_checksum(checksum, files)
    return checksum, _digest(raw.get("structure_digest"), "structure_digest")


def file_entry(path: str, kind: str, content: bytes) -> dict[str, Any]:
    """Build one manifest file entry (used by the controller's client and by tests)."""
    return {
        "path": path,
        "kind": kind,
        "sha256": sha256_hex(content),
        "size": len(content),
        "content_b64": base64.b64encode(content).decode(),
    }


def build_manifest(
    *,
    plan_id: str,
    files: dict[str, tuple[str, bytes]],
    structure_digest: str,
    token: dict[str, Any],
    expected_previous_plan_id: str | None,
    mode: str = "auto",
    runtime_operations: list[dict[str, Any]] | None = None,
    expect_bootstrap: bool = False,
) -> dict[str, Any]:
    """A complete manifest dict from {path: (kind, bytes)}; computes digests and checksum."""
    return {
        "plan_id": plan_id,
        "checksum": content_checksum({p: c for p, (_, c) in files.items()}),
        "structure_digest": structure_digest,
        "token": token,
        "expected_previous_plan_id": expected_previous_plan_id,
        "mode": mode,
        "files": [file_entry(p, k, c) for p, (k, c) in sorted(files.items())],
        "runtime_operations": runtime_operations or [],
        "expect_bootstrap": expect_bootstrap,
    }
