"""The resolver's rule (pure): trust the reachable endpoint that declares itself; and its
kubeconfig front end against a real API server."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st
from kubernetes.client import CustomObjectsApi

from controller.hub.publisher import GROUP, PLURAL, VERSION
from controller.hub.resolver import (
    EndpointObservation,
    declares_itself,
    resolve_kubeconfigs,
    resolve_observations,
)
from tests.hub.conftest import create_template

A, B = "http://127.0.0.1:1001", "http://127.0.0.1:1002"


def decl(endpoint: str, identity: str, updated: str = "2026-01-01T00:00:00Z") -> dict:
    return {"endpoint": endpoint, "activeIdentity": identity, "lastUpdated": updated}


def test_the_active_declares_itself_and_the_standby_names_the_active() -> None:
    obs = [
        EndpointObservation(A, None, True, decl(A, "hub-a")),
        EndpointObservation(B, None, True, decl(A, "hub-a")),  # the mirrored copy
    ]
    result = resolve_observations(obs)
    assert (result.active_url, result.active_identity) == (A, "hub-a")


def test_unreachable_endpoint_is_not_trusted() -> None:
    obs = [
        EndpointObservation(A, None, False, None, error="timed out"),
        EndpointObservation(B, None, True, decl(B, "hub-b")),
    ]
    assert resolve_observations(obs).active_url == B
    none = resolve_observations(
        [EndpointObservation(A, None, False), EndpointObservation(B, None, True)]
    )
    assert none.active_url is None


def test_identity_match_when_the_endpoints_identity_is_known() -> None:
    assert declares_itself(EndpointObservation(A, "hub-a", True, decl("https://x", "hub-a")))
    assert not declares_itself(EndpointObservation(A, "hub-b", True, decl(A, "hub-a")))


def test_fresher_last_updated_breaks_a_tie() -> None:
    old = EndpointObservation(A, None, True, decl(A, "hub-a", "2026-01-01T00:00:00Z"))
    new = EndpointObservation(B, None, True, decl(B, "hub-b", "2026-01-01T00:05:00Z"))
    assert resolve_observations([old, new]).active_url == B
    assert resolve_observations([new, old]).active_url == B
    same = EndpointObservation(B, None, True, decl(B, "hub-b", "2026-01-01T00:00:00Z"))
    assert resolve_observations([old, same]).active_url is None


@given(
    a_up=st.booleans(), b_up=st.booleans(), a_self=st.booleans(), b_self=st.booleans(),
    a_t=st.integers(0, 59), b_t=st.integers(0, 59),
)  # fmt: skip
def test_resolution_is_always_a_reachable_self_declared_endpoint(
    a_up, b_up, a_self, b_self, a_t, b_t
):
    at, bt = f"2026-01-01T00:00:{a_t:02d}Z", f"2026-01-01T00:00:{b_t:02d}Z"
    obs = [
        EndpointObservation(A, None, a_up, decl(A if a_self else B, "a", at)),
        EndpointObservation(B, None, b_up, decl(B if b_self else A, "b", bt)),
    ]
    result = resolve_observations(obs)
    claims = [o for o in obs if o.reachable and o.declaration["endpoint"] == o.url]
    if result.active_url is not None:
        chosen = next(o for o in obs if o.url == result.active_url)
        assert chosen in claims
    if len(claims) == 1:
        assert result.active_url == claims[0].url
    if len(claims) == 2 and a_t != b_t:
        assert result.active_url == (A if a_t > b_t else B)


def test_a_kubeconfig_that_cannot_be_loaded_is_one_unreachable_endpoint(
    clusters, ns, tmp_path
) -> None:
    """Through a real API server: a missing or malformed kubeconfig costs only its own row;
    the others are still read, in the order given."""
    a, _ = clusters
    create_template(a, ns)
    CustomObjectsApi(a.client).patch_namespaced_custom_object_status(
        GROUP, VERSION, ns, PLURAL, "haptic", {"status": {"activeController": decl(a.url, "hub-a")}}
    )
    broken = tmp_path / "broken.kubeconfig"
    broken.write_text("clusters: [this is not a kubeconfig")
    missing = str(tmp_path / "missing.kubeconfig")
    result = resolve_kubeconfigs(
        [missing, str(a.api.kubeconfig), str(broken)], namespace=ns, template_name="haptic",
        timeout=2.0,
    )  # fmt: skip
    assert (result.active_url.rstrip("/"), result.active_identity) == (a.url, "hub-a")
    first, second, third = result.observations
    assert not first.reachable and "no such file" in first.error
    assert second.reachable and second.url.rstrip("/") == a.url
    assert not third.reachable and "cannot load kubeconfig" in third.error
