"""The benchmarks' in-process chain (benchmarks/_simulated_chain.py): the product's
TrialChain with a simulated launcher, bench and clock. Noiseless, a level's per-request
figure is the simulator's own prediction; the record carries the product's intervals and
precision-loop stops; the noise keeps the replay's schedule."""

from __future__ import annotations

import itertools
import random
import sys
import warnings
from pathlib import Path

import pytest

BENCHMARKS = Path(__file__).resolve().parents[2] / "benchmarks"
sys.path.insert(0, str(BENCHMARKS))

from _simulated import InProcessSimPreflight, PredictedOracle, sim_command  # noqa: E402
from _simulated_chain import SimClock, SimulatedBench, SpeedWarp, closed_loop, simulated_chain  # noqa: E402

from autospec.cli.common import load_space  # noqa: E402
from autospec.feasibility.gate import FeasibilityGate  # noqa: E402
from autospec.launcher import flag_words  # noqa: E402
from autospec.sim import load_profile, predict  # noqa: E402
from autospec.space import grid  # noqa: E402
from autospec.study.files import StudyLayout  # noqa: E402

STOPS = {"target", "cap", "ceiling", "failed", "external"}


def chain_for(tmp_path: Path, noise: float = 0.0, launch_noise: float = 0.0):
    space, profile = load_space("default"), load_profile()
    command = sim_command(profile)
    gate = FeasibilityGate(
        sglang_version=profile.sglang_version, preflight=InProcessSimPreflight(profile, command), to_argv=flag_words
    )
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        chain = simulated_chain(
            profile=profile,
            noise=noise,
            launch_noise=launch_noise,
            seed=1,
            space=space,
            gate=gate,
            command=command,
            layout=StudyLayout(folder=tmp_path, name="s", studies_dir=tmp_path),
        )
    return chain, space, profile


def grid_point(space, mem: float) -> dict:
    """The default space's 3-step chain at memory fraction `mem`."""
    return next(c for c in grid(space) if c["speculative_num_steps"] == 3 and c["mem_fraction_static"] == mem)


def test_noiseless_c1_speed_is_the_simulators_prediction(tmp_path: Path) -> None:
    chain, space, profile = chain_for(tmp_path)
    candidate = grid_point(space, 0.88)
    record = chain.run(0, candidate)

    assert record.outcome == "ok", record.reason
    flags = {**space.server.flags, **candidate}
    kind, tokens = PredictedOracle(profile, space).prompt_workload(space.bench.num_requests(1))
    expected = predict(profile, flags, 1, kind, input_len=tokens, output_len=space.workload.output_len, num_requests=4)
    assert record.values[0] == pytest.approx(expected.per_request_tok_s, rel=1e-9)
    # the product's chain: intervals per objective, each level's precision loop stopped for a reason
    assert set(record.intervals) == {spec.name for spec in space.measured_specs}
    assert {level["stop_reason"] for level in record.bench.values()} <= STOPS
    # modelled seconds: load + warmup of the profile, the levels, a teardown
    assert record.seconds["launch"] == pytest.approx(profile.load_seconds + profile.warmup_seconds)
    assert record.seconds["total"] == pytest.approx(sum(v for k, v in record.seconds.items() if k != "total"))
    # the simulator's start-up log, where the chain said the server log goes
    assert "The server is fired up and ready to roll!" in Path(record.log_path).read_text()


def test_a_configuration_that_cannot_start_is_a_launch_failure_the_gate_learns(tmp_path: Path) -> None:
    chain, space, _ = chain_for(tmp_path)
    record = chain.run(0, grid_point(space, 0.94))

    assert record.launched and record.outcome == "cuda_graph_oom", record.outcome
    assert record.teardown is not None and record.values is None
    again = chain.run(1, grid_point(space, 0.94))
    assert not again.launched  # the gate learned it


def test_speed_warp_is_monotone_and_identity_without_noise() -> None:
    still = SpeedWarp(random.Random(0), 0.0, speed=2.0)
    assert [still(t) for t in (0.0, 1.5, 3.0)] == [0.0, 0.75, 1.5]
    warp = SpeedWarp(random.Random(0), 0.2)
    times = [i * 0.37 for i in range(100)]
    warped = [warp(t) for t in times]
    assert all(b > a for a, b in itertools.pairwise(warped))
    assert warped != times


def test_closed_loop_keeps_the_replays_schedule_at_scale_one_and_stretches_decode_otherwise() -> None:
    replay = [(0.0, 0.1, 1.0), (1.0, 1.1, 2.0), (2.0, 2.1, 3.0)]  # C=1: each sent when the last is done
    assert closed_loop(replay, [1.0, 1.0, 1.0], 1) == replay
    slower = closed_loop(replay, [2.0, 1.0, 1.0], 1)
    assert slower[0] == (0.0, 0.1, pytest.approx(1.9))  # decode 0.9 s doubled, time to first token kept
    assert slower[1][0] == pytest.approx(1.9) and slower[2][2] == pytest.approx(3.9)  # the loop waits for it


def most_at_once(schedule: list[tuple[float, float, float]]) -> int:
    """The most requests between their first token and their end at any time."""
    events = sorted([(first, 1) for _, first, _ in schedule] + [(done, -1) for _, _, done in schedule])
    return max(itertools.accumulate(step for _, step in events))


def test_closed_loop_of_a_queueing_server_runs_no_more_requests_at_once_than_its_slots() -> None:
    # 4 workers, a server that runs 2 at once: the replay's second pair waits for the first
    replay = [(0.0, 0.1, 1.0), (0.0, 0.1, 1.0), (0.0, 1.1, 2.0), (0.0, 1.1, 2.0)] * 10
    rng = random.Random(3)
    scales = [rng.uniform(0.5, 2.0) for _ in replay]
    assert most_at_once(closed_loop(replay, scales, 4)) > 2  # without the limit the workers overrun the server
    queued = closed_loop(replay, scales, 4, slots=2)
    assert most_at_once(queued) == 2
    assert all(first - sent >= 0.1 - 1e-9 for sent, first, _ in queued)  # each still pays the shortest prefill


def test_noisy_launches_repeat_each_requests_effect_and_name_their_requests() -> None:
    """With noise on, a request's speed carries the simulator's per-request effect (a function
    of its prompt and position), so two launches of one configuration agree request by
    request far more closely than the requests of one launch agree with each other."""
    import statistics
    from types import SimpleNamespace

    from efficiency import CASES, load_case

    from autospec.metrics.series import request_speeds

    space, profile = load_case(CASES["qwen25-coder-7b-ngram-1x-l4"])  # NGRAM: the prompt's part and the climb
    flags = {**space.server.flags, "speculative_num_draft_tokens": 7, "mem_fraction_static": 0.9}
    bench = SimulatedBench(PredictedOracle(profile, space), SimClock(), random.Random(1), noise=0.002)
    launches = []
    for _ in range(2):
        server = SimpleNamespace(speed=1.0, requests=0)
        records = list(bench._records(server, flags, 1, 12, space.workload.output_len))
        assert [r.position for r in records] == list(range(12)) and server.requests == 12
        launches.append(request_speeds(records))
    first, second = launches
    assert set(first) == set(second) and len(first) == 12  # the same request ids: they pair
    spread = statistics.pstdev(first.values()) / statistics.fmean(first.values())
    between = max(abs(first[k] / second[k] - 1) for k in first)
    assert spread > 0.03 and between < spread / 5
