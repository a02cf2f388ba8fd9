"""The HAProxy agent: supervises one haproxy and serves an authenticated apply API.

It runs inside the HAProxy pod and must not import Django or touch a database.
"""
