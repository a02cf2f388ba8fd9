"""The HTTP store's state machine, schedule and headers: named cases and, with hypothesis,
the invariants over any order of fetches and gate verdicts."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from controller.httpstore import cache
from controller.httpstore.cache import FetchResult, ResourceSpec, ResourceState

SPEC = ResourceSpec("blocklist", "http://127.0.0.1/x", interval=60.0)


def body(text: str, etag: str | None = None) -> FetchResult:
    return FetchResult(body=text, etag=etag)


def test_first_body_is_pending_until_a_render_with_it_passes_the_gate() -> None:
    s = cache.on_fetch(ResourceState(), body("a", '"1"'), 0.0, SPEC)
    assert s.accepted is None and s.pending.body == "a" and cache.offered(s).body == "a"
    s = cache.on_verdict(s, cache.Version("a").digest, accepted=True)
    assert s.accepted.body == "a" and s.pending is None


def test_a_refused_body_is_discarded_and_not_offered_again() -> None:
    s = ResourceState(accepted=cache.Version("a"))
    s = cache.on_fetch(s, body("b"), 0.0, SPEC)
    assert cache.offered(s).body == "b"
    s = cache.on_verdict(s, cache.Version("b").digest, accepted=False)
    assert s.pending is None and cache.offered(s).body == "a"
    # The source still answers "b": it is not proposed again; a new body is.
    assert cache.on_fetch(s, body("b"), 60.0, SPEC).pending is None
    assert cache.on_fetch(s, body("c"), 60.0, SPEC).pending.body == "c"


def test_a_verdict_about_an_older_body_changes_nothing() -> None:
    s = cache.on_fetch(ResourceState(accepted=cache.Version("a")), body("b"), 0.0, SPEC)
    s2 = cache.on_fetch(s, body("c"), 1.0, SPEC)
    assert cache.on_verdict(s2, cache.Version("b").digest, accepted=True) == s2
    assert cache.on_verdict(s2, cache.Version("b").digest, accepted=False) == s2


def test_a_failed_fetch_keeps_both_bodies_and_backs_off() -> None:
    s = cache.on_fetch(ResourceState(accepted=cache.Version("a")), body("b"), 0.0, SPEC)
    for n, delay in enumerate((1.0, 2.0, 4.0), start=1):
        s = cache.on_fetch(s, FetchResult(error="HTTP 500"), 10.0, SPEC)
        assert s.failures == n and s.next_fetch == 10.0 + delay
    assert s.accepted.body == "a" and s.pending.body == "b" and s.error == "HTTP 500"
    s = cache.on_fetch(s, FetchResult(not_modified=True), 20.0, SPEC)
    assert s.failures == 0 and s.error is None and s.next_fetch == 80.0


def test_expired_after_three_intervals_without_success() -> None:
    s = cache.on_fetch(ResourceState(), body("a"), 0.0, SPEC)
    assert not cache.expired(s, 180.0, SPEC) and cache.expired(s, 180.5, SPEC)
    assert not cache.expired(ResourceState(), 0.0, SPEC)  # never tried: not yet a fault
    assert cache.expired(cache.on_fetch(ResourceState(), FetchResult(error="x"), 0, SPEC), 0, SPEC)


def test_conditional_headers_come_from_the_newest_200() -> None:
    assert cache.conditional_headers(ResourceState()) == {}
    s = cache.on_fetch(
        ResourceState(), FetchResult("a", '"v1"', "Tue, 01 Dec 2026 00:00:00 GMT"), 0, SPEC
    )
    assert cache.conditional_headers(s) == {
        "If-None-Match": '"v1"',
        "If-Modified-Since": "Tue, 01 Dec 2026 00:00:00 GMT",
    }
    # A refused body's validators stay: the server answers 304 and nothing is re-offered.
    s = cache.on_verdict(s, cache.Version("a").digest, accepted=False)
    assert cache.conditional_headers(s)["If-None-Match"] == '"v1"'


def test_auth_headers() -> None:
    assert cache.auth_header("basic", {"username": "u", "password": "p"}) == {
        "Authorization": "Basic dTpw"
    }
    assert cache.auth_header("bearer", {"token": "t\n"}) == {"Authorization": "Bearer t"}
    with pytest.raises(KeyError):
        cache.auth_header("bearer", {})


def test_parse_resources_skips_invalid_entries_with_a_reason() -> None:
    template = {
        "spec": {
            "httpResources": {
                "good": {"url": "https://example.test/a", "refreshInterval": "5m", "timeout": "2s"},
                "ftp": {"url": "ftp://x"},
                "auth": {"url": "http://x/", "auth": {"type": "digest"}},
            }
        }
    }
    specs, problems = cache.parse_resources(template)
    assert list(specs) == ["good"]
    assert specs["good"].interval == 300 and specs["good"].timeout == 2
    assert [p.split(":")[0] for p in problems] == [
        "spec.httpResources.auth",
        "spec.httpResources.ftp",
    ]


_bodies = st.sampled_from(["a", "b", "c"])
_steps = st.lists(
    st.one_of(
        st.tuples(st.just("fetch"), _bodies),
        st.tuples(st.just("304"), st.none()),
        st.tuples(st.just("error"), st.none()),
        st.tuples(st.just("verdict"), st.tuples(_bodies, st.booleans())),
    ),
    max_size=30,
)


@given(_steps)
def test_only_gate_passed_bodies_become_accepted_and_failures_never_lose_one(steps) -> None:
    state, passed, now = ResourceState(), set(), 0.0
    for kind, arg in steps:
        before = state
        now += 1
        if kind == "fetch":
            state = cache.on_fetch(state, body(arg), now, SPEC)
        elif kind == "304":
            state = cache.on_fetch(state, FetchResult(not_modified=True), now, SPEC)
        elif kind == "error":
            state = cache.on_fetch(state, FetchResult(error="boom"), now, SPEC)
            assert (state.accepted, state.pending) == (before.accepted, before.pending)
        else:
            text, ok = arg
            state = cache.on_verdict(state, cache.Version(text).digest, ok)
            if ok and before.pending is not None and before.pending.body == text:
                passed.add(text)
        # Accepted only ever holds a body the gate passed; accepted only changes by a verdict.
        assert state.accepted is None or state.accepted.body in passed
        if kind != "verdict":
            assert state.accepted == before.accepted
        # Pending is a body different from accepted, and never the refused one.
        if state.pending is not None:
            assert state.accepted is None or state.pending.body != state.accepted.body
            assert state.pending.digest != state.refused
        # Templates see something once anything was fetched and not refused.
        assert cache.offered(state) in (state.pending, state.accepted)
        assert state.next_fetch > now - 1 or kind == "verdict"


@given(st.integers(0, 100), st.floats(0.1, 86400))
def test_retries_come_sooner_than_refreshes_and_never_faster_after_more_failures(n, interval):
    delay = cache.next_fetch_delay(n, interval)
    assert 0 < delay <= interval
    assert cache.next_fetch_delay(n + 1, interval) >= delay or n == 0
    assert cache.next_fetch_delay(0, interval) == interval
