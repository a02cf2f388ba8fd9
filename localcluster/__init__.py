"""A Kubernetes-compatible API server and local node for running haptic on one machine.

It has no Django dependency; clients talk to it over HTTP with the official kubernetes client.
"""
