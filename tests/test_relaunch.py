"""Between-launch variance: estimating it from relaunches and pooling launches."""

from __future__ import annotations

import math
import random

import pytest
from scipy import stats

from autospec.metrics.paired import PRIOR_DF, PRIOR_SD
from autospec.metrics.relaunch import LaunchFigure, between_launch_spread, pool_launches


def test_spread_is_the_scatter_of_launch_means_beyond_their_measuring_error():
    # Launch means 90, 100, 110 (sample sd 10 around 100) measured without error: cv = 10%.
    exact = between_launch_spread([[LaunchFigure(90.0, 0.0), LaunchFigure(100.0, 0.0), LaunchFigure(110.0, 0.0)]])
    assert exact is not None and exact.cv == pytest.approx(0.10) and exact.df == 2 and exact.configurations == 1
    # The same means, each with a standard error of 6 (half-width 1.96 x 6): 100 - 36 = 64 of
    # the variance 100 is between launches.
    noisy = between_launch_spread([[LaunchFigure(v, 1.959964 * 6.0) for v in (90.0, 100.0, 110.0)]])
    assert noisy is not None and noisy.cv == pytest.approx(0.08, rel=1e-4)


def test_scatter_within_the_measuring_error_counts_as_none_and_single_launches_as_nothing():
    assert between_launch_spread([[LaunchFigure(100.0, 20.0), LaunchFigure(101.0, 20.0)]]).cv == 0.0
    assert between_launch_spread([[LaunchFigure(100.0, 1.0)], [LaunchFigure(50.0, 1.0)]]) is None
    assert between_launch_spread([]) is None


def test_configurations_are_pooled_by_their_degrees_of_freedom():
    # cv 10% from 3 launches (df 2) and 0% from 2 launches (df 1): (2 x 0.01 + 1 x 0) / 3.
    spread = between_launch_spread(
        [
            [LaunchFigure(90.0, 0.0), LaunchFigure(100.0, 0.0), LaunchFigure(110.0, 0.0)],
            [LaunchFigure(500.0, 0.0), LaunchFigure(500.0, 0.0)],
        ]
    )
    assert spread is not None and spread.df == 3 and spread.configurations == 2
    assert spread.cv == pytest.approx(math.sqrt(0.02 / 3))


def test_pooling_recovers_a_known_spread_from_simulated_launches():
    rng = random.Random(7)
    true_cv, se = 0.04, 0.01  # relative: 4% between launches, 1% measuring error per launch
    groups = []
    for mu in (rng.uniform(500, 5000) for _ in range(200)):
        groups.append([LaunchFigure(rng.gauss(mu * (1 + rng.gauss(0, true_cv)), se * mu), 1.96 * se * mu) for _ in range(3)])
    spread = between_launch_spread(groups)
    assert spread is not None and spread.df == 400
    assert spread.cv == pytest.approx(true_cv, rel=0.1)


def test_one_launch_without_a_known_spread_keeps_its_own_interval():
    pooled = pool_launches([LaunchFigure(1000.0, 20.0)], None)
    assert (pooled.value, pooled.half, pooled.launches) == (1000.0, pytest.approx(20.0), 1)
    assert pooled.between_half is None and not pooled.between_dominates


def test_a_known_spread_widens_every_configuration_and_relaunches_narrow_it_again():
    from autospec.metrics.relaunch import Spread

    spread = Spread(cv=0.03, df=4, configurations=2)
    once = pool_launches([LaunchFigure(1000.0, 10.0)], spread)
    cv, df = spread.shrunk()
    assert PRIOR_SD < cv < 0.03 and df == 4 + PRIOR_DF  # between the prior and the measurement
    t = stats.t.ppf(0.975, df)
    assert once.between_half == pytest.approx(t * cv * 1000.0)
    assert once.half == pytest.approx(math.hypot(t * cv * 1000.0, 10.0))
    assert once.between_dominates  # 3% between launches against +-1% within one
    thrice = pool_launches([LaunchFigure(v, 10.0) for v in (980.0, 1000.0, 1020.0)], spread)
    assert thrice.value == pytest.approx(1000.0) and thrice.launches == 3
    assert thrice.between_half == pytest.approx(t * cv * 1000.0 / math.sqrt(3))
    assert thrice.within_half == pytest.approx(10.0 / math.sqrt(3))
    assert thrice.half < once.half


def test_one_relaunch_widens_intervals_by_a_few_spreads_not_by_t_with_one_degree_of_freedom():
    """One relaunch pair (df 1) says little about the spread; the prior keeps a
    single launch's interval within a few spreads of its value, where t(1) = 12.7 would
    make it +-74% at a measured 5.8%."""
    from autospec.metrics.relaunch import Spread

    spread = between_launch_spread([[LaunchFigure(230.7, 2.0), LaunchFigure(209.2, 2.0)]])
    assert spread is not None and spread.df == 1 and spread.cv > 0.05
    once = pool_launches([LaunchFigure(200.0, 2.0)], spread)
    assert once.half is not None and 0.05 * 200.0 < once.half < 0.25 * 200.0
    # many relaunches: the data decide, the prior no longer matters
    many = Spread(cv=0.10, df=400, configurations=200).shrunk()
    assert many[0] == pytest.approx(0.10, rel=0.01)
