"""Which Ingresses are ours: IngressClass semantics as the Kubernetes Ingress API defines them."""

from __future__ import annotations

import pytest

from controller.render import RenderInput, render
from tests.render import builders as b

CONTROLLER = "haproxy-haptic.org/controller"


def ingress_class(name: str, controller: str = CONTROLLER, default: bool = False) -> dict:
    meta: dict = {"name": name}
    if default:
        meta["annotations"] = {"ingressclass.kubernetes.io/is-default-class": "true"}
    return {
        "apiVersion": "networking.k8s.io/v1",
        "kind": "IngressClass",
        "metadata": meta,
        "spec": {"controller": controller},
    }


def _ingresses() -> list[dict]:
    def one(name: str, cls: str | None = None, annotation: str | None = None) -> dict:
        rules = [(f"{name}.test", [b.path("/", "web")])]
        obj = b.ingress("default", name, rules, ingress_class=cls)
        if annotation:
            obj["metadata"]["annotations"] = {"kubernetes.io/ingress.class": annotation}
        return obj

    return [
        one("named-ours", cls="haptic"),
        one("named-other", cls="nginx"),
        one("named-missing", cls="gone"),
        one("unnamed"),
        one("annotated-ours", annotation="haptic"),
        one("annotated-other", annotation="nginx"),
        # spec.ingressClassName wins over the deprecated annotation.
        one("both", cls="nginx", annotation="haptic"),
    ]


def _served(classes: list[dict] | None, **config) -> set[str]:
    out = render(
        RenderInput(
            b.template_config(**config),
            ingresses=_ingresses(),
            services=[b.service("default", "web", [(None, 80, 8080)])],
            ingressclasses=classes,
        )
    )
    assert out.warnings == ()  # another controller's Ingress is not a warning
    return {k.split(".")[0] for k, _ in out.plan["maps"]["maps/hosts.map"].items()}


def test_an_ingress_is_ours_when_its_class_names_our_controller() -> None:
    classes = [ingress_class("haptic"), ingress_class("nginx", "k8s.io/ingress-nginx")]
    assert _served(classes) == {"named-ours", "annotated-ours"}


def test_an_ingress_without_class_is_ours_only_with_our_default_class() -> None:
    ours_default = [ingress_class("haptic", default=True), ingress_class("nginx", "other")]
    assert _served(ours_default) == {"named-ours", "annotated-ours", "unnamed"}
    theirs_default = [ingress_class("haptic"), ingress_class("nginx", "other", default=True)]
    assert _served(theirs_default) == {"named-ours", "annotated-ours"}


@pytest.mark.parametrize("classes", [[], [ingress_class("nginx", "k8s.io/ingress-nginx")]])
def test_without_a_class_of_ours_nothing_is_served(classes: list[dict]) -> None:
    assert _served(classes) == set()


def test_ingress_class_name_in_the_template_config_narrows_to_that_class() -> None:
    classes = [ingress_class("haptic", default=True), ingress_class("haptic-b")]
    assert _served(classes, ingress_class="haptic-b") == set()  # "haptic" is not served
    assert _served([*classes, ingress_class("x")], ingress_class="haptic") == {
        "named-ours",
        "annotated-ours",
        "unnamed",
    }


def test_without_class_information_every_ingress_renders() -> None:
    # Offline renders (fixtures without IngressClasses): None, not an empty class set.
    assert len(_served(None)) == len(_ingresses())


def test_served_ingresses_are_the_ones_holding_a_route() -> None:
    # What the Ingress status writer publishes addresses on: ours with a route or default.
    older = b.ingress("default", "older", [("a.test", [b.path("/", "web")])], created="2026-01-01")
    newer = b.ingress("default", "newer", [("a.test", [b.path("/", "api")])], created="2026-02-01")
    default_only = b.ingress("default", "fallback", default=("web", 80))
    other = b.ingress("default", "other", [("b.test", [b.path("/", "web")])], ingress_class="x")
    out = render(
        RenderInput(
            b.template_config(),
            ingresses=[older, newer, default_only, other],
            services=[b.service("default", n, [(None, 80, 8080)]) for n in ("web", "api")],
            ingressclasses=[ingress_class("haptic", default=True)],
        )
    )
    assert out.served_ingresses == ("default/fallback", "default/older")
    assert [(w.name, w.reason) for w in out.warnings] == [("newer", "RouteConflict")]
