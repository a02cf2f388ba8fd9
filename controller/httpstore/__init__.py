"""The HTTP store (issue 18): `spec.httpResources` fetched by the leader, offered to templates
as `http.<name>`, with a pending body accepted only once a render with it passes the render
gate. `cache` is the pure state machine, `fetcher` one bounded request, `store` the I/O loop.
"""
