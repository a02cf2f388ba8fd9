"""The timeline picture, pure: marks (plain values taken from the mirrored history) and a time
window in, an SVG drawing out. No database, no clock: the edge (dashboard/marks.py) reads the
rows and passes `now`.

Layout: one horizontal lane per kind of record (leadership, intents, checkpoints, recoveries,
render failures, hub) and one per HAProxy pod, stacked top to bottom on a shared time axis.
Marks with a duration (terms, reviews, repeated events) are bars, packed into as many rows
as their overlaps need; instant marks (receipts, intents, checkpoints, events seen once) are
dots on one row, and dots that would touch are drawn as one cluster whose link zooms into
it, so a dense run never hides a mark behind another.
"""

from __future__ import annotations

import html
import re
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from urllib.parse import urlencode

from contract import APPLY_MODES, FILE_ONLY
from controller.hub.promotion import EVENT_ABORTED, EVENT_PROMOTED

# Fixed lanes, top to bottom; pod lanes ("pod <name>") follow, sorted by name.
LEADERSHIP = "leadership"
INTENTS = "intents"
CHECKPOINTS = "checkpoints"
RECOVERIES = "recoveries"
RENDER_FAILURES = "render failures"
HUB = "hub"
FIXED_LANES = (LEADERSHIP, INTENTS, CHECKPOINTS, RECOVERIES, RENDER_FAILURES, HUB)
POD_LANE_PREFIX = "pod "

TONES = ("ok", "error", "warn", "info")

# Geometry, in SVG user units (pixels at 100 %).
GUTTER = 190  # lane titles
RIGHT_PAD = 12
AXIS_HEIGHT = 28
ROW_HEIGHT = 16
LANE_PAD = 4
DOT_RADIUS = 4
MIN_BAR = 3
CHAR_WIDTH = 6.5  # of the 11 px font, for deciding how much of a caption or title fits
MIN_WINDOW = timedelta(seconds=1)

TICK_STEPS = tuple(
    timedelta(seconds=s)
    for s in (
        1, 2, 5, 10, 15, 30,
        60, 120, 300, 600, 900, 1800,
        3600, 7200, 10800, 21600, 43200,
        86400, 172800, 604800, 2592000,
    )
)  # fmt: skip


@dataclass(frozen=True)
class Mark:
    """One record on the timeline: an instant (`until` None) or a span."""

    lane: str
    at: datetime
    label: str
    href: str
    tone: str = "info"
    until: datetime | None = None
    kind: str = ""
    caption: str = ""  # short text drawn inside a bar wide enough for it


XOf = Callable[[datetime], float]


@dataclass(frozen=True)
class Window:
    start: datetime
    end: datetime

    @property
    def span(self) -> timedelta:
        return self.end - self.start

    def zoom(self, factor: float) -> Window:
        """The window `factor` times as long, around the same centre (factor < 1 zooms in)."""
        centre = self.start + self.span / 2
        half = max(self.span * factor / 2, MIN_WINDOW / 2)
        return Window(centre - half, centre + half)

    def pan(self, fraction: float) -> Window:
        shift = self.span * fraction
        return Window(self.start + shift, self.end + shift)

    def query(self) -> str:
        return urlencode({"start": iso(self.start), "end": iso(self.end)})


@dataclass(frozen=True)
class Lane:
    title: str
    y: float
    height: float


@dataclass(frozen=True)
class Shape:
    """A drawn mark: a bar (rect) or a dot (circle at x, y+h/2), linked to its record."""

    lane: str
    x: float
    y: float
    width: float
    height: float
    tone: str
    href: str
    title: str
    at: datetime
    kind: str = ""
    dot: bool = False
    count: int = 1  # > 1: a cluster of dots
    caption: str = ""


@dataclass(frozen=True)
class Tick:
    x: float
    label: str


@dataclass
class Drawing:
    width: float
    height: float
    x0: float  # the axis: [x0, x1] is [window.start, window.end]
    x1: float
    window: Window
    lanes: list[Lane] = field(default_factory=list)
    shapes: list[Shape] = field(default_factory=list)
    ticks: list[Tick] = field(default_factory=list)


# Event reasons drawn, with their lane and tone. RenderFailed: controller/leader.py;
# RetainedConfig*: controller/recovery.py; the promotion reasons: controller/hub/promotion.py.
EVENT_MARKS: dict[str, tuple[str, str]] = {
    "RenderFailed": (RENDER_FAILURES, "error"),
    "RetainedConfigActive": (RECOVERIES, "warn"),
    "RetainedConfigUnavailable": (RECOVERIES, "error"),
    EVENT_PROMOTED: (HUB, "ok"),
    EVENT_ABORTED: (HUB, "error"),
}


def deployment_kind(mode: str, last_error: str) -> tuple[str, str]:
    """(kind, tone) of a pod receipt. The receipt's mode says what the agent did: "reload"
    (a worker started from the plan), "runtime" (runtime API commands, no reload) or
    "file-only" (the files written, nothing the worker had to be told). A receipt with an
    error records a failed or refused apply (the leader writes no mode then)."""
    if last_error:
        return "error", "error"
    if mode in APPLY_MODES:
        return mode, "ok"
    return "deployed", "info"


def iso(moment: datetime) -> str:
    return moment.astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def parse_time(raw: str | None) -> datetime | None:
    """An ISO 8601 instant from a query parameter; naive means UTC; None when unreadable."""
    if not raw:
        return None
    try:
        moment = datetime.fromisoformat(raw.strip().replace(" ", "+").replace("Z", "+00:00"))
    except ValueError:
        return None
    return moment if moment.tzinfo else moment.replace(tzinfo=UTC)


def choose_window(
    start: str | None,
    end: str | None,
    extent: tuple[datetime, datetime] | None,
    now: datetime,
    default_span: timedelta = timedelta(hours=24),
) -> Window:
    """The window asked for (query parameters start/end), else one fitting the recorded
    history: from its first record (at most `default_span` back) to its last, padded."""
    begin, finish = parse_time(start), parse_time(end)
    if begin and finish and finish - begin >= MIN_WINDOW:
        return Window(begin, finish)
    if extent is None:
        last, first = now, now - timedelta(hours=1)
    else:
        first, last = extent
        first = max(first, last - default_span)
    if finish and not begin:
        return Window(finish - max(last - first, MIN_WINDOW), finish)
    if begin and not finish:
        return Window(begin, max(begin + MIN_WINDOW, last))
    pad = max((last - first) * 0.03, timedelta(seconds=5))
    return Window(first - pad, last + pad)


def lane_order(titles: Iterable[str]) -> list[str]:
    """Fixed lanes in their order, then pod lanes by name, then anything else by name."""
    present = set(titles)
    fixed = [t for t in FIXED_LANES if t in present]
    pods = sorted(t for t in present if t.startswith(POD_LANE_PREFIX))
    other = sorted(present - set(fixed) - set(pods))
    return fixed + pods + other


def visible(mark: Mark, window: Window) -> bool:
    if mark.until is None:
        return window.start <= mark.at <= window.end
    return mark.at <= window.end and max(mark.at, mark.until) >= window.start


def layout(
    marks: Iterable[Mark],
    window: Window,
    width: float = 1200.0,
    lanes: Sequence[str] = (),
    zoom_url: str = "",
) -> Drawing:
    """Place every mark of `window` (and the lanes named in `lanes`, even when empty).
    A cluster links to `zoom_url` with the window around its members."""
    x0, x1 = GUTTER, max(width - RIGHT_PAD, GUTTER + 50.0)
    drawing = Drawing(width=x1 + RIGHT_PAD, height=0, x0=x0, x1=x1, window=window)
    seconds = max(window.span.total_seconds(), 1e-9)

    def x_of(moment: datetime) -> float:
        offset = (moment - window.start).total_seconds() / seconds
        return x0 + min(max(offset, 0.0), 1.0) * (x1 - x0)

    by_lane: dict[str, list[Mark]] = {title: [] for title in lanes}
    for mark in marks:
        if visible(mark, window):
            by_lane.setdefault(mark.lane, []).append(mark)
    y = float(AXIS_HEIGHT)
    for title in lane_order(by_lane):
        items = sorted(by_lane[title], key=lambda m: (m.at, m.until or m.at, m.href))
        bars, rows = _bars(title, [m for m in items if m.until is not None], x_of, x1, y + LANE_PAD)
        dots = _dots(
            title,
            [m for m in items if m.until is None],
            x_of,
            y + LANE_PAD + rows * ROW_HEIGHT,
            zoom_url,
        )
        rows += 1 if dots or not bars else 0
        height = rows * ROW_HEIGHT + 2 * LANE_PAD
        drawing.lanes.append(Lane(title, y, height))
        drawing.shapes.extend(sorted(bars + dots, key=lambda s: (s.at, s.x, s.y)))
        y += height
    drawing.height = y + LANE_PAD
    drawing.ticks = ticks(window, x_of)
    return drawing


def _bars(
    title: str, marks: list[Mark], x_of: XOf, x1: float, top: float
) -> tuple[list[Shape], int]:
    """Spans as bars, first-fit into rows so bars of one row never overlap; and the rows."""
    row_ends: list[float] = []
    shapes = []
    for mark in marks:  # sorted by start
        assert mark.until is not None
        left = x_of(mark.at)
        right = max(x_of(mark.until), left)
        if right - left < MIN_BAR:
            left = min(left, x1 - MIN_BAR)
            right = left + MIN_BAR
        row = next((i for i, end in enumerate(row_ends) if end < left), len(row_ends))
        if row == len(row_ends):
            row_ends.append(right)
        row_ends[row] = right
        shapes.append(
            Shape(
                lane=title,
                x=left,
                y=top + row * ROW_HEIGHT + 2,
                width=right - left,
                height=ROW_HEIGHT - 4,
                tone=mark.tone,
                href=mark.href,
                title=mark.label,
                at=mark.at,
                kind=mark.kind,
                caption=mark.caption,
            )
        )
    return shapes, len(row_ends)


def _dots(title: str, marks: list[Mark], x_of: XOf, top: float, zoom_url: str) -> list[Shape]:
    """Instants as dots; dots closer than a diameter (and a gap) chain into one cluster."""
    shapes: list[Shape] = []
    group: list[tuple[float, Mark]] = []

    def flush() -> None:
        if not group:
            return
        first, last = group[0][0], group[-1][0]
        members = [m for _, m in group]
        tones = {m.tone for m in members}
        tone = next((t for t in ("error", "warn", "ok", "info") if t in tones), "info")
        if len(members) == 1:
            mark = members[0]
            href, label, kind = mark.href, mark.label, mark.kind
        else:
            href = zoom_url + "?" + Window(members[0].at, members[-1].at).zoom(1.5).query()
            label = cluster_label(members)
            kind = "cluster"
        shapes.append(
            Shape(
                lane=title,
                x=first - DOT_RADIUS,
                y=top + ROW_HEIGHT / 2 - DOT_RADIUS,
                width=last - first + 2 * DOT_RADIUS,
                height=2 * DOT_RADIUS,
                tone=tone,
                href=href,
                title=label,
                at=members[0].at,
                kind=kind,
                dot=True,
                count=len(members),
            )
        )
        group.clear()

    for mark in marks:  # sorted by time, so x never decreases
        x = x_of(mark.at)
        if group and x - group[-1][0] > 2 * DOT_RADIUS + 2:
            flush()
        group.append((x, mark))
    flush()
    return shapes


def cluster_label(members: Sequence[Mark]) -> str:
    counts: dict[str, int] = {}
    for mark in members:
        counts[mark.kind or "record"] = counts.get(mark.kind or "record", 0) + 1
    parts = ", ".join(f"{n} {kind}" for kind, n in sorted(counts.items()))
    return (
        f"{len(members)} records from {iso(members[0].at)} to {iso(members[-1].at)} "
        f"({parts}); click to zoom in"
    )


def ticks(window: Window, x_of: XOf, most: int = 10) -> list[Tick]:
    """Round instants (UTC) every step, the smallest step giving at most `most` ticks."""
    span = window.span
    step = next((s for s in TICK_STEPS if span / s <= most), TICK_STEPS[-1])
    step_s = int(step.total_seconds())
    epoch = datetime(1970, 1, 1, tzinfo=UTC)
    first = int((window.start - epoch).total_seconds() // step_s + 1) * step_s
    if step >= timedelta(days=1):
        fmt = "%Y-%m-%d"
    elif step >= timedelta(hours=1):
        fmt = "%m-%d %H:%M"
    else:
        fmt = "%H:%M" if step_s % 60 == 0 else "%H:%M:%S"
    out = []
    moment = epoch + timedelta(seconds=first)
    while moment <= window.end and len(out) <= most:
        out.append(Tick(x_of(moment), moment.strftime(fmt)))
        moment += step
    return out


# Characters XML 1.0 forbids even escaped (C0 controls but tab, newline, return; FFFE, FFFF;
# lone surrogates): an event message may carry them, and one would break the whole picture.
_NOT_XML = re.compile("[\x00-\x08\x0b\x0c\x0e-\x1f\ufffe\uffff\ud800-\udfff]")


def _escape(value: object) -> str:
    return html.escape(_NOT_XML.sub("\ufffd", str(value)), quote=True)


def fit(text: str, room: float) -> str:
    """`text`, cut with an ellipsis to what `room` units hold; empty when under 4 characters
    would show (a shorter stub says nothing)."""
    most = int(room // CHAR_WIDTH)
    if len(text) <= most:
        return text
    return text[: most - 1] + "…" if most >= 4 else ""


def _attrs(values: Mapping[str, object]) -> str:
    return " ".join(f'{k}="{_escape(v)}"' for k, v in values.items())


def svg(drawing: Drawing) -> str:
    """The drawing as one <svg> element: lanes, axis and ticks, each mark an <a> link."""
    w = drawing.window
    parts = [
        "<svg "
        + _attrs(
            {
                "xmlns": "http://www.w3.org/2000/svg",
                "class": "timeline",
                "viewBox": f"0 0 {drawing.width:.0f} {drawing.height:.0f}",
                "width": f"{drawing.width:.0f}",
                "height": f"{drawing.height:.0f}",
                "role": "img",
                "data-start": iso(w.start),
                "data-end": iso(w.end),
                "data-x0": f"{drawing.x0:.1f}",
                "data-x1": f"{drawing.x1:.1f}",
            }
        )
        + ">",
        f"<title>Timeline from {iso(w.start)} to {iso(w.end)} (UTC)</title>",
    ]
    for index, lane in enumerate(drawing.lanes):
        parts.append(
            f"<g {_attrs({'class': 'lane', 'data-lane': lane.title})}>"
            + "<rect "
            + _attrs(
                {
                    "class": "band odd" if index % 2 else "band",
                    "x": 0,
                    "y": f"{lane.y:.1f}",
                    "width": f"{drawing.width:.0f}",
                    "height": f"{lane.height:.1f}",
                }
            )
            + "/>"
            + f"<text {_attrs({'class': 'lane-title', 'x': 6, 'y': f'{lane.y + 15:.1f}'})}>"
            + f"<title>{_escape(lane.title)}</title>"
            + f"{_escape(fit(lane.title, drawing.x0 - 12))}</text></g>"
        )
    parts.append(_axis(drawing))
    parts.extend(_shape(shape) for shape in drawing.shapes)
    parts.append("</svg>")
    return "".join(parts)


def _axis(drawing: Drawing) -> str:
    out = [
        '<g class="axis"><line '
        + _attrs({"x1": drawing.x0, "x2": drawing.x1, "y1": AXIS_HEIGHT, "y2": AXIS_HEIGHT})
        + "/>"
    ]
    for tick in drawing.ticks:
        out.append(
            "<line "
            + _attrs(
                {
                    "class": "grid",
                    "x1": f"{tick.x:.1f}",
                    "x2": f"{tick.x:.1f}",
                    "y1": AXIS_HEIGHT - 4,
                    "y2": f"{drawing.height:.0f}",
                }
            )
            + "/><text "
            + _attrs({"x": f"{tick.x:.1f}", "y": AXIS_HEIGHT - 8, "text-anchor": "middle"})
            + f">{_escape(tick.label)}</text>"
        )
    out.append("</g>")
    return "".join(out)


def _shape(shape: Shape) -> str:
    # A deployment's mode is drawn too (site.css: a ring, a square, a filled dot).
    mode = f" deploy-{shape.kind}" if shape.kind in APPLY_MODES else ""
    link = {
        "href": shape.href,
        "class": f"mark {shape.tone}{mode}" + (" cluster" if shape.count > 1 else ""),
        "data-kind": shape.kind,
        "data-at": iso(shape.at),
    }
    title = f"<title>{_escape(shape.title)}</title>"
    if shape.dot and shape.count == 1 and shape.kind == FILE_ONLY:
        square = {"x": f"{shape.x:.1f}", "y": f"{shape.y:.1f}", "width": 2 * DOT_RADIUS}
        body = f"<rect {_attrs(square | {'height': 2 * DOT_RADIUS})}>{title}</rect>"
    elif shape.dot and shape.count == 1:
        centre = {"cx": f"{shape.x + DOT_RADIUS:.1f}", "cy": f"{shape.y + DOT_RADIUS:.1f}"}
        body = f"<circle {_attrs(centre | {'r': DOT_RADIUS})}>{title}</circle>"
    else:
        box = {
            "x": f"{shape.x:.1f}",
            "y": f"{shape.y:.1f}",
            "width": f"{shape.width:.1f}",
            "height": f"{shape.height:.1f}",
            "rx": DOT_RADIUS if shape.dot else 2,
        }
        body = f"<rect {_attrs(box)}>{title}</rect>"
    text = shape.caption if not shape.dot else (str(shape.count) if shape.count > 1 else "")
    text = fit(text, shape.width - 6) if not shape.dot else text
    if text and shape.width >= CHAR_WIDTH * len(text) + 6:
        anchor = {"class": "caption", "x": f"{shape.x + 3:.1f}", "y": f"{shape.y + 9.5:.1f}"}
        if shape.dot:
            anchor = {
                "class": "caption count",
                "x": f"{shape.x + 2:.1f}",
                "y": f"{shape.y + 7:.1f}",
            }
        body += f"<text {_attrs(anchor)}>{_escape(text)}</text>"
    return f"<a {_attrs(link)}>{body}</a>"
