"""Which mirrored render-warning Events describe the last render (pure).

The leader reports a render's warnings twice (controller/render/warnings.py): one Event per
warning, emitted once per term while the warning persists, and `status.renderWarnings` of
the HAProxyTemplateConfig, rewritten after every render whose warnings changed (the count,
the count per reason and the first ten as text). The summary is the source of truth for
*whether* a warning is current; the Event is the source of its object, reason, message and
of when it was last seen. An Event is current when:

- its reason has a non-zero count in the last summary of any template config, and
- when the summary lists every warning (count <= the texts it carries), its text is listed;
- and it is the newest Event of the same warning (object, reason and message): a new term
  reports a persisting warning again, and the older copies are history.

The summary's text has no reason; messages name their problem (every one in
controller/render does), so a text matches one warning. An Event older than the summary is
still current when the summary names it: a warning that persists is not reported again.
Beyond the first ten the rule can only check the reason, so a warning that went away is
shown while others of its reason remain (the page says so). No summary mirrored means no
current warning.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from controller.render.model import REASONS, RenderWarning


@dataclass(frozen=True)
class WarningEvent:
    """The fields of a mirrored Event that the rule reads."""

    id: int
    kind: str
    namespace: str
    name: str
    reason: str
    message: str
    last_timestamp: datetime | None


@dataclass(frozen=True)
class Summary:
    """The last renders' summaries, merged over template configs."""

    count: int
    reasons: dict[str, int]
    texts: frozenset[str]

    @property
    def complete(self) -> bool:
        """Whether the texts name every warning (so a text absent from them is not current)."""
        return self.count <= len(self.texts)


def merge_summaries(summaries: Iterable[Mapping[str, Any]]) -> Summary:
    count, reasons, texts = 0, {}, set()
    for summary in summaries:
        count += int(summary.get("count") or 0)
        for entry in summary.get("reasons") or []:
            reason = str(entry.get("reason", ""))
            reasons[reason] = reasons.get(reason, 0) + int(entry.get("count") or 0)
        texts.update(str(text) for text in summary.get("first") or [])
    return Summary(count, reasons, frozenset(texts))


def text_of(event: WarningEvent) -> str:
    """The summary's text for the warning an Event reports (RenderWarning.__str__)."""
    return str(RenderWarning(event.kind, event.namespace, event.name, event.reason, event.message))


def current_ids(summary: Summary, events: Sequence[WarningEvent]) -> list[int]:
    """Ids of the Events describing a warning of the last render (the rule above)."""
    newest: dict[tuple[str, ...], WarningEvent] = {}
    for event in events:
        if event.reason not in REASONS or summary.reasons.get(event.reason, 0) <= 0:
            continue
        if summary.complete and text_of(event) not in summary.texts:
            continue
        key = (event.kind, event.namespace, event.name, event.reason, event.message)
        held = newest.get(key)
        if held is None or _order(event) > _order(held):
            newest[key] = event
    return sorted(e.id for e in newest.values())


def _order(event: WarningEvent) -> tuple[float, int]:
    stamp = event.last_timestamp.timestamp() if event.last_timestamp else float("-inf")
    return stamp, event.id
