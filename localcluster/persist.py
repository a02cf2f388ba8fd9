"""State on disk: a snapshot plus an append-only journal of writes, compacted on start.

Each journal line is {"rv": N, "k": [resource key, namespace, name], "o": object or null}.
A torn last line (crash mid-write) is ignored.
"""

from __future__ import annotations

import fcntl
import json
import os
from pathlib import Path
from typing import Any

ObjKey = tuple[str, str, str]
Record = tuple[int, ObjKey, "dict[str, Any] | None"]


class Journal:
    def __init__(self, state_dir: Path) -> None:
        self.dir = state_dir
        self.dir.mkdir(parents=True, exist_ok=True)
        self.snapshot_path = self.dir / "objects.json"
        self.journal_path = self.dir / "journal.jsonl"
        self._file: Any = None
        self.appended = 0  # records since the last compaction
        # One server per state dir: a second one would interleave journals. The lock goes
        # away with the process, so a restart after a crash is fine.
        self._lock = (self.dir / "lock").open("w")
        try:
            fcntl.flock(self._lock, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError:
            self._lock.close()
            raise RuntimeError(f"state dir {self.dir} is in use by another localcluster") from None

    def load(self) -> tuple[int, dict[ObjKey, dict[str, Any]], list[Record]]:
        """(snapshot resourceVersion, snapshot objects, journal records after it)."""
        rv = 0
        objects: dict[ObjKey, dict[str, Any]] = {}
        records: list[Record] = []
        if self.snapshot_path.exists():
            data = json.loads(self.snapshot_path.read_text())
            rv = int(data.get("resourceVersion", 0))
            for entry in data.get("objects", []):
                objects[tuple(entry["k"])] = entry["o"]  # type: ignore[index]
        if self.journal_path.exists():
            with self.journal_path.open() as f:
                for line in f:
                    try:
                        rec = json.loads(line)
                    except json.JSONDecodeError:
                        break  # torn tail
                    if int(rec["rv"]) > rv:
                        records.append((int(rec["rv"]), tuple(rec["k"]), rec["o"]))  # type: ignore[arg-type]
        return rv, objects, records

    def compact(self, rv: int, objects: dict[ObjKey, dict[str, Any]]) -> None:
        """Write the whole state as a new snapshot (atomically) and start an empty journal."""
        self._close_file()
        tmp = self.snapshot_path.with_suffix(".tmp")
        payload = {
            "resourceVersion": rv,
            "objects": [{"k": list(k), "o": o} for k, o in objects.items()],
        }
        tmp.write_text(json.dumps(payload, separators=(",", ":")))
        os.replace(tmp, self.snapshot_path)
        self._file = self.journal_path.open("w")
        self.appended = 0

    def append(self, rv: int, key: ObjKey, obj: dict[str, Any] | None) -> None:
        if self._file is None:
            self._file = self.journal_path.open("a")
        self._file.write(json.dumps({"rv": rv, "k": list(key), "o": obj}, separators=(",", ":")))
        self._file.write("\n")
        self.appended += 1
        # Flushed to the OS on every write so a killed process loses nothing.
        self._file.flush()

    def _close_file(self) -> None:
        if self._file is not None:
            self._file.close()
            self._file = None

    def close(self) -> None:
        """Close the journal and give up the state dir."""
        self._close_file()
        if not self._lock.closed:
            self._lock.close()
