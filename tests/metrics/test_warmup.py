"""The warm-up cut: MSER truncation over a level's first rates."""

from __future__ import annotations

import gzip
import json
import random
from functools import cache
from pathlib import Path

from autospec.metrics.warmup import MIN_POINTS, mser_cut, settled

FIXTURE = Path(__file__).parent.parent / "fixtures" / "real_c32_fresh_and_warm.json.gz"


@cache
def wave_rates(name: str, concurrency: int = 32) -> list[float]:
    """Per wave of 32 requests (in send order), 32 x tokens / latency, as `metrics.series` forms it."""
    rows = sorted(json.loads(gzip.decompress(FIXTURE.read_bytes()))[name])
    waves = [rows[i : i + concurrency] for i in range(0, len(rows) - concurrency + 1, concurrency)]
    return [concurrency * sum(r[3] for r in w) / sum(r[2] - r[0] for r in w) for w in waves]


def test_the_warm_up_cut_on_the_recorded_fresh_machine_launch():
    """Recorded on SGLang 0.5.16 / H200 (NGRAM, C=32, after a fixed warm-up of one wave): the
    fresh server's first measured wave ran at half speed (14.6k tok/s, then 26-30k); MSER cuts
    it, the rest is steady and reads what the same server read warm (within 1%); the warm
    level is not cut. The fresh launch's first 8 waves alone still climb: a level that ended
    there is flagged as never settled."""
    fresh, warm = wave_rates("fresh"), wave_rates("warm")
    cut = mser_cut(fresh)
    assert cut.settled and 1 <= cut.cut <= 3 and fresh[0] < 0.6 * sorted(fresh)[len(fresh) // 2]
    kept = fresh[cut.cut :]
    warm_mean = sum(warm) / len(warm)
    assert abs(sum(kept) / len(kept) / warm_mean - 1) < 0.01
    assert abs(sum(fresh[:20]) / 20 / warm_mean - 1) > abs(sum(kept[:20]) / 20 / warm_mean - 1)  # the cut moves it closer
    assert mser_cut(warm) == mser_cut(warm).__class__(0, len(warm), True)
    assert not settled(fresh[:8])


def test_a_steady_rate_settles_and_a_climbing_one_does_not():
    rng = random.Random(1)
    flat = [300 * (1 + rng.gauss(0, 0.1)) for _ in range(14)]
    assert settled(flat)
    climbing = [296 + 134 * i / 25 + rng.gauss(0, 5) for i in range(14)]  # NGRAM's climb over its first 25
    assert not settled(climbing)
    assert settled([*climbing, *(430 + rng.gauss(0, 5) for _ in range(30))])
    assert not settled(flat[: MIN_POINTS - 1])
