"""Which per-position figures of a stored level comparisons pair on."""

from __future__ import annotations

import pytest

from autospec.metrics.paired import Side, compare
from autospec.records.launches import RAMP_WAVE, level_series


def _level(waves: dict[str, float]) -> dict[str, object]:
    return {"concurrency": 32, "agg_output_tok_s": 2000.0, "wave_speeds": waves}


def test_c32_pairs_by_wave_without_the_ramp_wave() -> None:
    found = level_series(_level({"0": 2500.0, "1": 2000.0, "2": 2010.0, "3": 1990.0, "4": 2005.0}), "agg_output_tok_s")
    assert found == ({"1": 2000.0, "2": 2010.0, "3": 1990.0, "4": 2005.0}, "waves") and RAMP_WAVE == "0"
    assert level_series(_level({"0": 2500.0}), "agg_output_tok_s") is None  # nothing steady to pair


def test_a_ramp_that_differs_by_configuration_does_not_move_the_ratio() -> None:
    """A's first wave reads 25% above its steady rate, B's 9% (as top-k 1 and 2 about did on an
    H100); their steady waves are equal, and so is the ratio."""
    steady = {str(w): 2000.0 * (1 + 0.01 * (w % 3)) for w in range(1, 8)}
    a = level_series(_level({"0": 2500.0, **steady}), "agg_output_tok_s")
    b = level_series(_level({"0": 2180.0, **steady}), "agg_output_tok_s")
    assert a is not None and b is not None
    c = compare(Side(2000.0, 40.0, 1, (a[0],), unit="waves"), Side(2000.0, 40.0, 1, (b[0],), unit="waves"), None)
    assert c is not None and c.paired and c.matched == 7 and c.ratio == pytest.approx(1.0, abs=1e-9)
