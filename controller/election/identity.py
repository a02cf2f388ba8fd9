"""Who this replica is in the election: the pod name, else hostname_pid."""

from __future__ import annotations

import os
import socket

from config.env import environ as process_environ


def replica_identity(environ: dict[str, str] | None = None) -> str:
    env = process_environ() if environ is None else environ
    name = (env.get("POD_NAME") or "").strip()
    return name or f"{socket.gethostname()}_{os.getpid()}"


# The product in the User-Agent of every request a replica sends. The API server derives a
# write's field manager from the part before the first "/" (so managedFields stay one entry
# for all replicas); the identity after it lets an audit log tell the replicas apart.
USER_AGENT_PRODUCT = "haptic-controller"


def replica_user_agent(identity: str) -> str:
    return f"{USER_AGENT_PRODUCT}/{identity}"


def identity_from_user_agent(user_agent: str) -> str | None:
    """The replica identity in a User-Agent made by replica_user_agent, else None."""
    product, sep, identity = user_agent.partition("/")
    if product != USER_AGENT_PRODUCT or not sep or not identity:
        return None
    return identity.split(" ", 1)[0]
