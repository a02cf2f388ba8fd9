"""The test scheduler's order (tests/conftest.py): the longest modules go out first, and the
list of them names modules that exist."""

from __future__ import annotations

from tests.conftest import LONGEST_FIRST, REPO_ROOT, _longest_first


def test_every_module_of_the_longest_first_list_exists() -> None:
    missing = [m for m in LONGEST_FIRST if not (REPO_ROOT / m).is_file()]
    assert missing == []
    assert len(set(LONGEST_FIRST)) == len(LONGEST_FIRST)


def test_the_longest_modules_go_first_and_the_rest_keep_their_order() -> None:
    spread = f"{LONGEST_FIRST[0]}::test_one"
    scopes = ["tests/b.py", LONGEST_FIRST[2], "tests/a.py", spread, LONGEST_FIRST[1]]
    assert _longest_first(scopes) == [
        spread,
        LONGEST_FIRST[1],
        LONGEST_FIRST[2],
        "tests/b.py",
        "tests/a.py",
    ]
