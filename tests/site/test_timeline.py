"""The timeline picture (dashboard/timeline.py), pure: layout invariants over generated
histories and windows (hypothesis), the window a request asks for, and the SVG itself."""

from __future__ import annotations

import xml.etree.ElementTree as ET
from datetime import UTC, datetime, timedelta

from hypothesis import given, settings
from hypothesis import strategies as st

from dashboard import timeline as tl

T0 = datetime(2026, 11, 30, 8, 0, tzinfo=UTC)
SVG = "{http://www.w3.org/2000/svg}"
LANES = [*tl.FIXED_LANES, "pod haproxy-0", "pod haproxy-1", "pod haproxy-10"]


@st.composite
def marks(draw: st.DrawFn) -> tl.Mark:
    at = T0 + timedelta(seconds=draw(st.integers(-4000, 8000)))
    span = draw(st.one_of(st.none(), st.integers(0, 5000)))
    return tl.Mark(
        lane=draw(st.sampled_from(LANES)),
        at=at,
        until=None if span is None else at + timedelta(seconds=span),
        label=draw(st.text(max_size=20)),
        href=f"/records/x/{draw(st.integers(0, 10**6))}/",
        tone=draw(st.sampled_from(tl.TONES)),
        kind=draw(st.sampled_from(["reload", "runtime", "error", "term", "intent"])),
        caption=draw(st.text(max_size=12)),
    )


@st.composite
def windows(draw: st.DrawFn) -> tl.Window:
    start = T0 + timedelta(seconds=draw(st.integers(-3000, 6000)))
    return tl.Window(start, start + timedelta(seconds=draw(st.integers(1, 9000))))


def overlaps(a: tl.Shape, b: tl.Shape) -> bool:
    return (
        a.x < b.x + b.width
        and b.x < a.x + a.width
        and a.y < b.y + b.height
        and b.y < a.y + a.height
    )


@settings(max_examples=300, deadline=None)
@given(
    st.lists(marks(), max_size=60),
    windows(),
    st.floats(400, 2400),
    st.lists(st.sampled_from(LANES), max_size=4),
)
def test_layout_invariants(
    given_marks: list[tl.Mark], window: tl.Window, width: float, empty_lanes: list[str]
) -> None:
    drawing = tl.layout(given_marks, window, width=width, lanes=empty_lanes)
    shown = [m for m in given_marks if tl.visible(m, window)]

    # Lanes: the named ones and those with marks, in lane order, stacked without overlap.
    titles = [lane.title for lane in drawing.lanes]
    assert titles == tl.lane_order(set(empty_lanes) | {m.lane for m in shown})
    y = tl.AXIS_HEIGHT
    for lane in drawing.lanes:
        assert lane.y == y and lane.height > 0
        y = lane.y + lane.height
    assert drawing.height >= y

    lanes = {lane.title: lane for lane in drawing.lanes}
    r = tl.DOT_RADIUS
    for shape in drawing.shapes:
        lane = lanes[shape.lane]
        # Inside its lane's band, and inside the axis (a dot's centre, a bar's whole extent).
        assert lane.y <= shape.y and shape.y + shape.height <= lane.y + lane.height
        if shape.dot:
            assert drawing.x0 <= shape.x + r and shape.x + shape.width - r <= drawing.x1
        else:
            assert drawing.x0 <= shape.x and shape.x + shape.width <= drawing.x1 + 1e-9
            assert shape.width >= tl.MIN_BAR - 1e-9

    # Sorted: lane by lane, and by time within a lane.
    order = [(titles.index(s.lane), s.at) for s in drawing.shapes]
    assert order == sorted(order)

    # No two marks of a lane cover each other.
    for i, a in enumerate(drawing.shapes):
        for b in drawing.shapes[i + 1 :]:
            if a.lane == b.lane:
                assert not overlaps(a, b), (a, b)

    # Every visible mark is drawn exactly once (alone or in a cluster), nothing else.
    assert sum(s.count for s in drawing.shapes) == len(shown)
    singles = sorted(s.href for s in drawing.shapes if s.count == 1)
    assert set(singles) <= {m.href for m in shown}
    for shape in drawing.shapes:
        if shape.count > 1:
            assert shape.kind == "cluster" and "start=" in shape.href

    # The SVG is well-formed, with one link per shape and every tick on the axis.
    root = ET.fromstring(tl.svg(drawing))
    assert len(root.findall(f"{SVG}a")) == len(drawing.shapes)
    assert all(drawing.x0 <= t.x <= drawing.x1 for t in drawing.ticks)
    assert [t.x for t in drawing.ticks] == sorted(t.x for t in drawing.ticks)


def test_marks_outside_the_window_are_left_out_and_spans_are_clipped() -> None:
    window = tl.Window(T0, T0 + timedelta(minutes=10))
    term = tl.Mark(tl.LEADERSHIP, T0 - timedelta(hours=1), "t", "/t", until=T0 + timedelta(hours=1))
    early = tl.Mark(tl.INTENTS, T0 - timedelta(seconds=1), "early", "/early")
    late = tl.Mark(tl.INTENTS, T0 + timedelta(minutes=11), "late", "/late")
    inside = tl.Mark(tl.INTENTS, T0 + timedelta(minutes=5), "inside", "/inside")
    drawing = tl.layout([term, early, late, inside], window, width=1000)
    assert [s.href for s in drawing.shapes] == ["/t", "/inside"]
    bar = drawing.shapes[0]
    assert (bar.x, bar.x + bar.width) == (drawing.x0, drawing.x1)
    dot = drawing.shapes[1]
    assert dot.x + tl.DOT_RADIUS == (drawing.x0 + drawing.x1) / 2


def test_close_instants_cluster_and_the_cluster_zooms_into_them() -> None:
    window = tl.Window(T0, T0 + timedelta(hours=1))
    close = [
        tl.Mark("pod haproxy-0", T0 + timedelta(minutes=30, seconds=s), "d", f"/{s}", kind=k)
        for s, k in ((0, "reload"), (1, "runtime"), (2, "error"))
    ]
    apart = tl.Mark("pod haproxy-0", T0 + timedelta(minutes=50), "d", "/apart", tone="ok")
    drawing = tl.layout([*close, apart], window, zoom_url="/timeline/")
    cluster, single = drawing.shapes
    assert cluster.count == 3 and single.href == "/apart"
    assert "1 error, 1 reload, 1 runtime" in cluster.title
    assert cluster.href.startswith("/timeline/?start=2026-11-30T08%3A29%3A59Z&end=")
    zoomed = tl.layout(
        close,
        tl.Window(T0 + timedelta(minutes=29, seconds=55), T0 + timedelta(minutes=30, seconds=5)),
    )
    assert [s.href for s in zoomed.shapes] == ["/0", "/1", "/2"]


def test_overlapping_spans_take_separate_rows() -> None:
    window = tl.Window(T0, T0 + timedelta(minutes=10))
    a = tl.Mark(tl.RECOVERIES, T0, "a", "/a", until=T0 + timedelta(minutes=5))
    b = tl.Mark(
        tl.RECOVERIES, T0 + timedelta(minutes=2), "b", "/b", until=T0 + timedelta(minutes=8)
    )
    c = tl.Mark(
        tl.RECOVERIES, T0 + timedelta(minutes=6), "c", "/c", until=T0 + timedelta(minutes=9)
    )
    drawing = tl.layout([a, b, c], window)
    ya, yb, yc = (s.y for s in drawing.shapes)
    assert ya == yc != yb
    assert drawing.lanes[0].height == 2 * tl.ROW_HEIGHT + 2 * tl.LANE_PAD


def test_choose_window() -> None:
    now = T0 + timedelta(days=3)
    asked = tl.choose_window("2026-11-30T08:00:00Z", "2026-11-30T09:00:00+00:00", None, now)
    assert asked == tl.Window(T0, T0 + timedelta(hours=1))
    naive = tl.choose_window("2026-11-30T08:00:00", "2026-11-30T08:00:30", None, now)
    assert naive.start == T0  # naive instants are UTC
    extent = (T0, T0 + timedelta(minutes=10))
    fitted = tl.choose_window(None, None, extent, now)
    assert fitted.start < T0 and fitted.end > extent[1]
    assert fitted.span < timedelta(minutes=11)
    # Unreadable, reversed or empty ranges fall back to the fitted one.
    for start, end in (("yesterday", "today"), ("2026-11-30T09:00:00Z", "2026-11-30T08:00:00Z")):
        assert tl.choose_window(start, end, extent, now) == fitted
    # A long history opens on its last day.
    long = tl.choose_window(None, None, (T0 - timedelta(days=30), T0), now)
    assert timedelta(hours=24) < long.span <= timedelta(hours=24) * 1.06
    # Nothing recorded: the last hour.
    assert tl.choose_window(None, None, None, now).end > now - timedelta(seconds=1)
    only_start = tl.choose_window("2026-11-30T08:05:00Z", None, extent, now)
    assert only_start == tl.Window(T0 + timedelta(minutes=5), extent[1])


def test_zoom_and_pan_keep_the_centre_and_the_span() -> None:
    window = tl.Window(T0, T0 + timedelta(hours=2))
    assert window.zoom(0.5) == tl.Window(T0 + timedelta(minutes=30), T0 + timedelta(minutes=90))
    assert window.zoom(2) == tl.Window(T0 - timedelta(hours=1), T0 + timedelta(hours=3))
    assert window.pan(0.5) == tl.Window(T0 + timedelta(hours=1), T0 + timedelta(hours=3))
    assert tl.Window(T0, T0 + timedelta(seconds=1)).zoom(0.01).span == tl.MIN_WINDOW


def test_deployment_kind_from_a_receipt() -> None:
    assert tl.deployment_kind("reload", "") == ("reload", "ok")
    assert tl.deployment_kind("runtime", "") == ("runtime", "ok")
    assert tl.deployment_kind("file-only", "") == ("file-only", "ok")
    assert tl.deployment_kind("", "refused: stale epoch") == ("error", "error")
    assert tl.deployment_kind("reload", "timeout") == ("error", "error")
    assert tl.deployment_kind("", "") == ("deployed", "info")


def test_each_way_a_deployment_went_is_drawn_its_own_way() -> None:
    """runtime, file-only and reload marks carry their mode as a class (a ring, a square
    and a filled dot in site.css) and say it in their title, clustered or not."""
    window = tl.Window(T0, T0 + timedelta(minutes=10))
    marks = [
        tl.Mark("pod p", T0 + timedelta(minutes=m), f"p: {kind}", f"/r/{m}", "ok", kind=kind)
        for m, kind in ((2, "runtime"), (5, "file-only"), (8, "reload"))
    ]
    picture = tl.svg(tl.layout(marks, window, width=800, lanes=["pod p"], zoom_url="/t/"))
    for kind in ("runtime", "file-only", "reload"):
        assert f'class="mark ok deploy-{kind}" data-kind="{kind}"' in picture
    wide = tl.Window(T0, T0 + timedelta(hours=10))
    crowded = tl.layout(marks, wide, width=400, lanes=["pod p"], zoom_url="/t/")
    (cluster,) = crowded.shapes
    assert "1 file-only, 1 reload, 1 runtime" in cluster.title


def test_svg_escapes_every_value() -> None:
    window = tl.Window(T0, T0 + timedelta(minutes=1))
    evil = tl.Mark(
        'pod <x>"', T0 + timedelta(seconds=30), '<script>alert("x")</script>', '/a?b=1&c="2"'
    )
    text = tl.svg(tl.layout([evil], window))
    assert "<script>" not in text and 'c="2"' not in text
    link = ET.fromstring(text).find(f"{SVG}a")
    assert link is not None and link.get("href") == '/a?b=1&c="2"'


def test_ticks_are_round_instants_on_the_axis() -> None:
    window = tl.Window(T0 + timedelta(seconds=7), T0 + timedelta(minutes=10, seconds=7))
    drawing = tl.layout([], window)
    assert [t.label for t in drawing.ticks][:3] == ["08:01", "08:02", "08:03"]
    hours = tl.layout([], tl.Window(T0, T0 + timedelta(days=5)))
    assert hours.ticks[0].label == "11-30 12:00"
    days = tl.layout([], tl.Window(T0, T0 + timedelta(days=10)))
    assert days.ticks[0].label == "2026-12-01"


def test_long_titles_and_captions_are_cut_to_fit() -> None:
    assert tl.fit("haproxy-nlv2xqdjbt-7ttqz", 1000) == "haproxy-nlv2xqdjbt-7ttqz"
    cut = tl.fit("pod haproxy-nlv2xqdjbt-7ttqz", 10 * tl.CHAR_WIDTH)
    assert cut == "pod hapro…" and len(cut) == 10
    assert tl.fit("controller-1 · epoch 2", 3 * tl.CHAR_WIDTH) == ""
    window = tl.Window(T0, T0 + timedelta(minutes=10))
    lane = "pod " + "x" * 80
    term = tl.Mark(lane, T0, "t", "/t", until=T0 + timedelta(seconds=40), caption="y" * 80)
    root = ET.fromstring(tl.svg(tl.layout([term], window, width=1000)))
    title = next(t for t in root.iter(f"{SVG}text") if t.get("class") == "lane-title")
    assert title.findtext(f"{SVG}title") == lane  # the whole name on hover
    assert "".join(title.itertext()).startswith(lane)
    shown = title.itertext()
    next(shown)
    assert len(next(shown)) * tl.CHAR_WIDTH <= tl.GUTTER - 12
    caption = next(t for t in root.iter(f"{SVG}text") if t.get("class") == "caption")
    assert caption.text.endswith("…")
