"""The local node: pods as process groups on loopback addresses, plus the EndpointSlice and
Deployment controllers a cluster would run."""

from .agent import NodeAgent

__all__ = ["NodeAgent"]
