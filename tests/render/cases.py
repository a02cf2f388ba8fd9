"""Representative Ingress sets; each has a golden output under tests/render/golden/<name>/."""

from __future__ import annotations

from collections.abc import Callable

from controller.render import RenderInput
from tests.render import builders as b


def simple_host() -> RenderInput:
    return RenderInput(
        b.template_config(),
        ingresses=[b.ingress("default", "web", [("web.example.test", [b.path("/", "web")])])],
        services=[b.service("default", "web", [(None, 80, 8080)])],
        endpointslices=[
            b.endpointslice(
                "default",
                "web",
                [b.endpoint("10.1.0.12"), b.endpoint("10.1.0.3"), b.endpoint("10.1.0.7", False)],
                [(None, 8080)],
            )
        ],
    )


def multiple_paths() -> RenderInput:
    # Exact, Prefix (with a trailing slash) and ImplementationSpecific; a named service port;
    # 7 endpoint entries across two slices, one address in both: 6 servers in 2 blocks of 5.
    return RenderInput(
        b.template_config(slots=5),
        ingresses=[
            b.ingress(
                "shop",
                "storefront",
                [
                    (
                        "shop.example.test",
                        [
                            b.path("/", "front", "http"),
                            b.path("/api/", "api", 8000),
                            b.path("/api/health", "api", 8000, "Exact"),
                            b.path("/static", "front", "http", "ImplementationSpecific"),
                        ],
                    )
                ],
            )
        ],
        services=[
            b.service("shop", "front", [("http", 80, 8080), ("metrics", 9100, 9100)]),
            b.service("shop", "api", [(None, 8000, 9000)]),
        ],
        endpointslices=[
            b.endpointslice(
                "shop",
                "front",
                [b.endpoint(f"10.2.0.{i}") for i in (5, 1, 3, 4)],
                [("http", 8080), ("metrics", 9100)],
                suffix="a",
            ),
            b.endpointslice(
                "shop",
                "front",
                [b.endpoint(f"10.2.1.{i}") for i in (2, 1)] + [b.endpoint("10.2.0.1")],
                [("http", 8080), ("metrics", 9100)],
                suffix="b",
            ),
            b.endpointslice(
                "shop", "api", [b.endpoint("10.2.9.1"), b.endpoint("10.2.9.2")], [(None, 9000)]
            ),
        ],
    )


def tls() -> RenderInput:
    return RenderInput(
        b.template_config(),
        ingresses=[
            b.ingress(
                "secure",
                "site",
                [
                    ("www.example.test", [b.path("/", "site")]),
                    ("*.example.test", [b.path("/", "site")]),
                ],
                tls=[("site-tls", ["www.example.test", "*.example.test"])],
            )
        ],
        services=[b.service("secure", "site", [(None, 80, 8443)])],
        endpointslices=[
            b.endpointslice("secure", "site", [b.endpoint("10.3.0.1")], [(None, 8443)])
        ],
        secrets=[b.tls_secret("secure", "site-tls")],
    )


def default_backend() -> RenderInput:
    return RenderInput(
        b.template_config(),
        ingresses=[
            b.ingress(
                "default",
                "catch-all",
                [(None, [b.path("/docs", "docs", 80, "Exact")])],
                default=("fallback", 80),
            ),
            b.ingress("default", "app", [("app.example.test", [b.path("/", "app")])]),
        ],
        services=[
            b.service("default", "fallback", [(None, 80, 8080)]),
            b.service("default", "docs", [(None, 80, 8080)]),
            b.service("default", "app", [(None, 80, 8080)]),
        ],
        endpointslices=[
            b.endpointslice("default", "fallback", [b.endpoint("10.4.0.1")], [(None, 8080)]),
            b.endpointslice("default", "docs", [b.endpoint("10.4.0.2")], [(None, 8080)]),
            b.endpointslice("default", "app", [b.endpoint("10.4.0.3")], [(None, 8080)]),
        ],
    )


def multiple_namespaces() -> RenderInput:
    # The same Service name in two namespaces must give two backends.
    return RenderInput(
        b.template_config(),
        ingresses=[
            b.ingress("team-a", "web", [("a.example.test", [b.path("/", "web")])]),
            b.ingress("team-b", "web", [("b.example.test", [b.path("/", "web")])]),
            b.ingress("team-b", "blog", [("b.example.test", [b.path("/blog", "blog")])]),
        ],
        services=[
            b.service("team-a", "web", [(None, 80, 8080)]),
            b.service("team-b", "web", [(None, 80, 8080)]),
            b.service("team-b", "blog", [(None, 80, 2368)]),
        ],
        endpointslices=[
            b.endpointslice("team-a", "web", [b.endpoint("10.5.0.1")], [(None, 8080)]),
            b.endpointslice("team-b", "web", [b.endpoint("10.5.1.1")], [(None, 8080)]),
            b.endpointslice("team-b", "blog", [b.endpoint("10.5.2.1")], [(None, 2368)]),
        ],
    )


def readiness_gated_pod() -> RenderInput:
    # ADR-0034: with the gate on, a not-ready endpoint whose pod holds the gate and reports
    # ContainersReady=True renders enabled; the others stay disabled.
    return RenderInput(
        b.template_config(gate=True),
        ingresses=[b.ingress("default", "web", [("web.example.test", [b.path("/", "web")])])],
        services=[b.service("default", "web", [(None, 80, 8080)])],
        endpointslices=[
            b.endpointslice(
                "default",
                "web",
                [
                    b.endpoint("10.6.0.1", True, pod="web-ready"),
                    b.endpoint("10.6.0.2", False, pod="web-gated"),
                    b.endpoint("10.6.0.3", False, pod="web-gated-starting"),
                    b.endpoint("10.6.0.4", False, pod="web-ungated"),
                    b.endpoint("10.6.0.5", False, pod="web-gated-leaving", terminating=True),
                ],
                [(None, 8080)],
            )
        ],
        pods=[
            b.pod("default", "web-ready", gate=True, containers_ready=True, ready=True),
            b.pod("default", "web-gated", gate=True, containers_ready=True),
            b.pod("default", "web-gated-starting", gate=True, containers_ready=False),
            b.pod("default", "web-ungated", gate=False, containers_ready=True),
            b.pod("default", "web-gated-leaving", gate=True, containers_ready=True),
        ],
    )


CASES: dict[str, Callable[[], RenderInput]] = {
    "simple_host": simple_host,
    "multiple_paths": multiple_paths,
    "tls": tls,
    "default_backend": default_backend,
    "multiple_namespaces": multiple_namespaces,
    "readiness_gated_pod": readiness_gated_pod,
}
