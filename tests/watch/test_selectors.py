"""Label selectors: dict matching, string form, and the parser agree (no I/O)."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from kubewatch import selectors

KEYS = ["app", "tier", "haproxy-haptic.org/role", "x"]
VALUES = ["a", "b", "c-1", "web.v2"]

labels_st = st.dictionaries(st.sampled_from(KEYS), st.sampled_from(VALUES), max_size=4)
expr_st = st.one_of(
    st.builds(
        lambda k, op, vs: {"key": k, "operator": op, "values": vs},
        st.sampled_from(KEYS),
        st.sampled_from(["In", "NotIn"]),
        st.lists(st.sampled_from(VALUES), min_size=1, max_size=3, unique=True),
    ),
    st.builds(
        lambda k, op: {"key": k, "operator": op},
        st.sampled_from(KEYS),
        st.sampled_from(["Exists", "DoesNotExist"]),
    ),
)
selector_st = st.builds(
    lambda ml, me: {"matchLabels": ml, "matchExpressions": me},
    labels_st,
    st.lists(expr_st, max_size=3),
)


@given(selector_st, labels_st)
def test_string_form_matches_like_the_selector(selector, labels):
    text = selectors.to_string(selector)
    assert selectors.matches_string(text, labels) == selectors.matches(selector, labels)


@given(selector_st, labels_st)
def test_match_labels_are_required_exactly(selector, labels):
    if selectors.matches(selector, labels):
        for k, v in selector["matchLabels"].items():
            assert labels.get(k) == v


def test_examples():
    sel = {
        "matchLabels": {"app": "haproxy"},
        "matchExpressions": [
            {"key": "tier", "operator": "NotIn", "values": ["canary"]},
            {"key": "x", "operator": "DoesNotExist"},
        ],
    }
    assert selectors.to_string(sel) == "app=haproxy,tier notin (canary),!x"
    assert selectors.matches(sel, {"app": "haproxy"})
    assert selectors.matches(sel, {"app": "haproxy", "tier": "prod"})
    assert not selectors.matches(sel, {"app": "haproxy", "tier": "canary"})
    assert not selectors.matches(sel, {"app": "haproxy", "x": "1"})
    assert not selectors.matches(sel, {"app": "other"})
    assert selectors.matches({}, {"anything": "1"})
    assert selectors.matches(None, None)
    assert selectors.matches_string("app==a, tier!=b, x", {"app": "a", "x": ""})
    assert selectors.matches_string("tier in (a, b)", {"tier": "b"})
    assert not selectors.matches_string("tier in (a,b)", {})


@pytest.mark.parametrize("bad", ["app in ()", "a,,b", "tier in (a", "bad key=1"])
def test_malformed_strings_are_rejected(bad):
    with pytest.raises(selectors.SelectorError):
        selectors.parse(bad)


def test_malformed_selector_dicts_are_rejected():
    with pytest.raises(selectors.SelectorError):
        selectors.requirements({"matchExpressions": [{"key": "a", "operator": "Near"}]})
    with pytest.raises(selectors.SelectorError):
        selectors.requirements({"matchExpressions": [{"key": "a", "operator": "In"}]})
