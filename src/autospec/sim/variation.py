"""What makes measurements differ from the noiseless model, in three parts that a real
server shows too (issue 37; SGLang 0.5.16 on H200s, docs/simulator.md section 15):

- **per request**, the same in every launch: a request's accept length moves with its
  prompt and with its position in the launch (`request_shift`). Two launches sent the
  same request stream see the same effects, so comparisons over matched requests cancel
  them. With NGRAM the n-gram cache also learns from what the server generated, so its
  accept length climbs over the first requests of a launch (`climb`);
- **per launch**: a lognormal speed factor drawn from the launch's seed (`[noise]
  run_sigma`; `engine.StepDurations`) and per-step jitter (`step_sigma`);
- **per machine**: a lognormal speed factor that is a deterministic function of the
  machine's name (`machine_factor`; ``--sim-machine NAME`` or ``AUTOSPEC_SIM_MACHINE``),
  1.0 when no machine is named.

The noiseless figures (`predict`, `acceptance.accept_length`) are the mean over these:
a request's accept length is ``E + shift``, where E is the model's accept length and the
shift has mean zero over prompts (a symmetric, bounded draw from a hash of the prompt
and position) and, for the climb, over the first ``climb_window`` positions of a launch.
So E is the mean accept length over prompts and over those positions (requests later in
a launch run at the settled, higher rate). The shift stays within the accept length's
range (1 .. draft tokens), so no draw is clipped and that mean is exact. Speed is not
linear in the accept length, so the mean *speed* over requests is not exactly the
noiseless speed; the pairing of two launches does not depend on that.

Everything here is pure: no clock, no I/O, no global random state.
"""

from __future__ import annotations

import hashlib
import math
from collections.abc import Sequence
from dataclasses import dataclass
from functools import lru_cache
from statistics import NormalDist

__all__ = ["RequestVariation", "climb", "machine_factor", "shifted_distribution", "unit_hash"]

#: how close to the ends of the accept length's range (1 .. draft tokens) a shift may go
_MARGIN = 0.95
_SQRT3 = math.sqrt(3.0)


def unit_hash(*parts: object) -> float:
    """A number in [0, 1) that is a fixed function of `parts` (blake2b of their repr)."""
    digest = hashlib.blake2b(repr(parts).encode(), digest_size=8).digest()
    return int.from_bytes(digest, "big") / 2.0**64


def machine_factor(name: str | None, sigma: float) -> float:
    """The speed factor of the machine `name`: exp(sigma * z), z a standard normal fixed by
    the name; 1.0 when no machine is named or sigma is 0."""
    if not name or sigma <= 0:
        return 1.0
    u = min(max(unit_hash("machine", name), 1e-12), 1 - 1e-12)
    return math.exp(sigma * NormalDist().inv_cdf(u))


@lru_cache(maxsize=64)
def _climb_offset(tau: float, window: int) -> float:
    """Mean of 1 - exp(-(n - 1) / tau) over positions n = 1 .. window."""
    return sum(1.0 - math.exp(-(n - 1) / tau) for n in range(1, window + 1)) / window


def climb(position: int, tau: float, window: int) -> float:
    """The shape of NGRAM's climb at a launch's `position` (1 = its first request):
    1 - exp(-(position - 1) / tau) less its mean over positions 1 .. window, so it averages
    0 there, starts at about -0.8 (tau 8, window 40) and settles at about +0.2."""
    if tau <= 0 or window <= 0:
        return 0.0
    return 1.0 - math.exp(-(max(position, 1) - 1) / tau) - _climb_offset(tau, window)


@dataclass(frozen=True)
class RequestVariation:
    """The per-request effect on the accept length (the module docstring).

    ``request_sigma``: the prompt's part, as a share of the mean accept length (its sd);
    ``ngram_climb``: NGRAM's climb, as a share of the mean accept length per unit of
    `climb` (about the rise from the first request to the settled rate);
    ``climb_requests``: the climb's time constant in requests; ``climb_window``: the
    positions over which the climb averages zero."""

    request_sigma: float = 0.0
    ngram_climb: float = 0.0
    climb_requests: float = 8.0
    climb_window: int = 40

    def shift(self, *, mean: float, draft_tokens: int, ngram: bool, prompt: str, position: int) -> float:
        """How far this request's accept length lies from `mean` (the model's E).

        The climb's part first (NGRAM only), then the prompt's: uniform on [-a, a] with
        a = sqrt(3) * request_sigma * mean, from a hash of (prompt, position); both shrink
        where the range 1 .. draft_tokens leaves less room, so no draw needs clipping."""
        room = _MARGIN * min(mean - 1.0, draft_tokens - mean)
        if room <= 0:
            return 0.0
        shape = climb(position, self.climb_requests, self.climb_window) if ngram and self.ngram_climb > 0 else 0.0
        worst = max(abs(climb(1, self.climb_requests, self.climb_window)), 1e-9)
        amplitude = min(self.ngram_climb * mean, room / worst) if shape else 0.0
        climbed = amplitude * shape
        spread = min(_SQRT3 * self.request_sigma * mean, room - abs(climbed))
        if spread <= 0:
            return climbed
        return climbed + spread * (2.0 * unit_hash("request", prompt, position) - 1.0)


def shifted_distribution(probs: Sequence[float], mean: float, shift: float) -> list[float]:
    """P(k tokens per step), k = 1 .. len(probs), moved so that its mean is mean + shift:
    mixed with "every draft accepted" (k = len(probs)) for a positive shift, with "none
    accepted" (k = 1) for a negative one. `mean` is the mean of `probs`."""
    size = len(probs)
    if shift == 0 or size < 2:
        return list(probs)
    if shift > 0:
        w = min(shift / max(size - mean, 1e-12), 1.0)
        target = size - 1
    else:
        w = min(-shift / max(mean - 1.0, 1e-12), 1.0)
        target = 0
    moved = [(1.0 - w) * p for p in probs]
    moved[target] += w
    return moved
