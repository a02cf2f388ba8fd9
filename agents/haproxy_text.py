"""Parsers for what HAProxy prints on its master CLI and runtime API. Pure functions."""

from __future__ import annotations

from dataclasses import dataclass

# Server admin-state flags (HAProxy's SRV_ADMF_*): forced, inherited and resolver maintenance
# mean "maint"; forced or inherited drain mean "drain". Configured maintenance (0x04, from
# `disabled` in the config) stays set after `state ready` and does not stop the server.
ADMF_MAINT = 0x01 | 0x02 | 0x20
ADMF_DRAIN = 0x08 | 0x10


@dataclass(frozen=True)
class ProcInfo:
    master_pid: int | None
    workers: tuple[int, ...]
    old_workers: tuple[int, ...]


@dataclass(frozen=True)
class ServerState:
    backend: str
    server: str
    address: str
    port: int | None
    weight: int
    admin_state: int
    op_state: int

    @property
    def state(self) -> str:
        if self.admin_state & ADMF_MAINT:
            return "maint"
        if self.admin_state & ADMF_DRAIN:
            return "drain"
        return "ready"


def parse_show_proc(text: str) -> ProcInfo:
    """`show proc` on the master CLI: the master line, then `# workers`, `# old workers`."""
    master: int | None = None
    workers: list[int] = []
    old: list[int] = []
    section = "master"
    for line in text.splitlines():
        stripped = line.strip()
        if not stripped:
            continue
        if stripped.startswith("#"):
            lowered = stripped.lower()
            if lowered.startswith("# old workers"):
                section = "old"
            elif lowered.startswith("# workers"):
                section = "workers"
            elif lowered.startswith("# programs"):
                section = "programs"
            continue
        fields = stripped.split()
        if len(fields) < 2 or not fields[0].isdigit():
            continue
        pid = int(fields[0])
        if fields[1] == "master":
            master = pid
        elif fields[1] == "worker":
            (old if section == "old" else workers).append(pid)
    return ProcInfo(master, tuple(workers), tuple(old))


def parse_reload_response(text: str) -> tuple[bool, str]:
    """The master CLI `reload` answer: `Success=1|0`, `--`, then the startup log."""
    lines = text.splitlines()
    ok = any(line.strip() == "Success=1" for line in lines[:3])
    log = "\n".join(lines[lines.index("--") + 1 :] if "--" in lines else lines[1:]).strip()
    return ok, log


def alert_lines(log: str) -> str:
    """HAProxy's own error text: the ALERT lines of a log, or the whole log if none."""
    alerts = [line for line in log.splitlines() if "[ALERT]" in line]
    return "\n".join(alerts) if alerts else log.strip()


def parse_servers_state(text: str) -> dict[tuple[str, str], ServerState]:
    """`show servers state [backend]`: version line, `#` header naming columns, rows."""
    columns: list[str] = []
    result: dict[tuple[str, str], ServerState] = {}
    for line in text.splitlines():
        if line.startswith("# "):
            columns = line[2:].split()
            continue
        fields = line.split()
        if not columns or len(fields) < len(columns):
            continue
        row = dict(zip(columns, fields, strict=False))
        port = row.get("srv_port", "0")
        state = ServerState(
            backend=row["be_name"],
            server=row["srv_name"],
            address=row["srv_addr"],
            port=int(port) if port.isdigit() and port != "0" else None,
            weight=int(row["srv_uweight"]),
            admin_state=int(row["srv_admin_state"]),
            op_state=int(row["srv_op_state"]),
        )
        result[(state.backend, state.server)] = state
    return result


def parse_show_map(text: str) -> dict[str, str]:
    """`show map <map>`: `<ptr> <key> <value>` per line."""
    entries: dict[str, str] = {}
    for line in text.splitlines():
        parts = line.split(" ", 2)
        if len(parts) == 3 and parts[0].startswith("0x"):
            entries[parts[1]] = parts[2]
    return entries


def parse_map_file(content: bytes) -> dict[str, str]:
    """A map file as HAProxy loads it: `key value`, `#` comments and blank lines skipped."""
    entries: dict[str, str] = {}
    for raw in content.decode(errors="replace").splitlines():
        line = raw.strip()
        if not line or line.startswith("#"):
            continue
        parts = line.split(None, 1)
        # HAProxy keeps the first entry for lookups; `show map` lists all. Last wins here
        # only for duplicate keys, which the renderer does not produce.
        entries[parts[0]] = parts[1].strip() if len(parts) > 1 else ""
    return entries


def parse_show_info(text: str) -> dict[str, str]:
    info: dict[str, str] = {}
    for line in text.splitlines():
        key, sep, value = line.partition(":")
        if sep:
            info[key.strip()] = value.strip()
    return info
