"""The contract's codec and content checksum: what the controller writes, every reader reads."""

from __future__ import annotations

import binascii

import pytest
from hypothesis import given
from hypothesis import strategies as st

from contract import content_checksum, pack, unpack
from controller.render import RenderedFile, checksum

PATHS = st.text(alphabet="abcdefghij/._-", min_size=1, max_size=20)


@given(st.binary(max_size=4096))
def test_pack_round_trips_and_is_deterministic(data: bytes) -> None:
    assert unpack(pack(data)) == data
    assert pack(data) == pack(data)  # mtime 0: equal bytes, equal text (content addresses)


@pytest.mark.parametrize("text", ["not base64!", "aGVsbG8=\n#"])
def test_unpack_refuses_text_outside_the_alphabet(text: str) -> None:
    with pytest.raises(binascii.Error):
        unpack(text)


@given(st.dictionaries(PATHS, st.binary(max_size=256), min_size=1, max_size=8))
def test_agent_and_controller_compute_the_same_checksum(files: dict[str, bytes]) -> None:
    # The controller's render checksum (controller/render/plan.py) is the same contract.
    rendered = [RenderedFile(path, "general", content) for path, content in files.items()]
    assert content_checksum(files) == checksum(rendered)
