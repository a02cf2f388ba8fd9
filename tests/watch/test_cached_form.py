"""The form objects take in the caches (controller.watch.informer.cached_form)."""

from __future__ import annotations

import json

from hypothesis import given
from hypothesis import strategies as st

from controller.watch.informer import INTERNED_MAX, cached_form, interned, strip_managed_fields

JSON = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False) | st.text(max_size=80),
    lambda inner: (
        st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=8), inner, max_size=4)
    ),
    max_leaves=30,
)


@given(JSON)
def test_interning_keeps_the_value(value):
    decoded = json.loads(json.dumps(value))
    assert interned(decoded) == decoded


def test_two_decodings_share_keys_and_short_strings_but_not_long_ones():
    long_text = "x" * (INTERNED_MAX + 1)
    text = json.dumps(
        {
            "metadata": {"name": "web", "namespace": "shop", "managedFields": [{"manager": "k"}]},
            "data": {"cert": long_text},
        }
    )
    a, b = cached_form(json.loads(text)), cached_form(json.loads(text))
    assert a == b == strip_managed_fields(json.loads(text))
    assert next(iter(a)) is next(iter(b))  # the key "metadata"
    assert a["metadata"]["namespace"] is b["metadata"]["namespace"]
    assert a["data"]["cert"] == b["data"]["cert"] and a["data"]["cert"] is not b["data"]["cert"]
    assert "managedFields" not in a["metadata"]
