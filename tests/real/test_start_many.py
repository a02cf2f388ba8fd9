"""start_many: the stages of several control planes interleave (their waits overlap), and a
failure of one stops every plane."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from localcluster.real.cluster import start_many


class Plane:
    """Stands for a ControlPlane: three stages, the log shared by all planes."""

    def __init__(self, name: str, log: list[str], fail_at: int | None = None) -> None:
        self.name, self.log, self.fail_at = name, log, fail_at
        self.stopped = False

    def stages(self, deadline: float) -> Iterator[None]:
        for step in range(3):
            if step == self.fail_at:
                raise RuntimeError(f"{self.name} failed")
            self.log.append(f"{self.name}{step}")
            if step < 2:
                yield

    def stop(self) -> None:
        self.stopped = True


def test_each_stage_of_every_plane_runs_before_any_plane_goes_on() -> None:
    log: list[str] = []
    planes = [Plane("a", log), Plane("b", log)]
    start_many(planes)  # type: ignore[arg-type]
    assert log == ["a0", "b0", "a1", "b1", "a2", "b2"]
    assert not any(p.stopped for p in planes)


def test_one_failing_plane_stops_them_all() -> None:
    log: list[str] = []
    planes = [Plane("a", log), Plane("b", log, fail_at=1)]
    with pytest.raises(RuntimeError, match="b failed"):
        start_many(planes)  # type: ignore[arg-type]
    assert all(p.stopped for p in planes)
