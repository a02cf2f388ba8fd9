"""Capped exponential backoff with jitter (pure; the caller does the sleeping).

The one backoff of every list+watch loop (kubewatch.reflector) and its callers."""

from __future__ import annotations

import random
from dataclasses import dataclass, field


@dataclass
class Backoff:
    """Delays initial, 2x, 4x ... up to `maximum`, each scaled by a random factor in
    [1 - jitter, 1]. Jitter spreads the reconnects of many replicas after an API outage."""

    initial: float = 0.5
    maximum: float = 30.0
    factor: float = 2.0
    jitter: float = 0.2
    rng: random.Random = field(default_factory=random.Random, repr=False)
    failures: int = 0

    def next_delay(self) -> float:
        base = min(self.maximum, self.initial * self.factor**self.failures)
        self.failures += 1
        return base * (1.0 - self.jitter * self.rng.random())

    def reset(self) -> None:
        self.failures = 0
