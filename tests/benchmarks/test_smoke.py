"""Every script under benchmarks/ runs on a tiny case: its main path, in a subprocess (as
a user runs it), with its output's structure checked (a ratio line, a table's header and
rows), never its figures or its timing.

Scripts whose job needs hardware this machine lacks run the part that does not:
`gpu_teardown.py` (an NVIDIA GPU and PyTorch with CUDA) refuses in one line without
one, and its summary of results is checked on rows made up here; `stall_probe.py` (reads
what tools/gpu/stall_probe.sh wrote on a GPU host) reads a small folder made up here.
`chaos.py`'s kill rounds are tests/study/test_chaos.py; here it runs with no kill.

Temporary folders of the scripts go under the test's `tmp_path` (TMPDIR), so the
`no_leftover_sims` check sees any simulator they leave running.
"""

from __future__ import annotations

import datetime
import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

pytestmark = [pytest.mark.slow, pytest.mark.usefixtures("no_leftover_sims")]

ROOT = Path(__file__).resolve().parents[2]
BENCHMARKS = ROOT / "benchmarks"
SEED = "seed-qwen35-122b-4x-rtxpro6000"


def run_script(tmp_path: Path, name: str, *args: str, ok: bool = True) -> str:
    """Run benchmarks/`name` with `args`; its stdout (and stderr) as text. `ok`: the exit
    status must be 0 (else it must not be)."""
    env = {
        **os.environ,
        "TMPDIR": str(tmp_path),
        "PYTHONPATH": os.pathsep.join([str(ROOT / "src"), os.environ.get("PYTHONPATH", "")]),
    }
    proc = subprocess.run(
        [sys.executable, str(BENCHMARKS / name), *args],
        cwd=tmp_path,
        env=env,
        capture_output=True,
        text=True,
        timeout=600,
    )
    out = proc.stdout + proc.stderr
    assert (proc.returncode == 0) == ok, f"{name} exited {proc.returncode}:\n{out[-3000:]}"
    return out


def table_rows(text: str, header_start: str) -> list[list[str]]:
    """The rows (cells) of the markdown table whose header starts with `header_start`."""
    lines = text.splitlines()
    start = next(i for i, line in enumerate(lines) if line.startswith(header_start))
    assert set(lines[start + 1]) <= set("|-: "), lines[start + 1]
    rows = []
    for line in lines[start + 2 :]:
        if not line.startswith("|"):
            break
        rows.append([cell.strip() for cell in line.strip("|").split("|")])
    return rows


RATIO = r"\d+\.\d{3}"


# ----------------------------------------------------------------------------- in-process studies


def test_proposal_order_writes_every_trial_and_compares(tmp_path: Path) -> None:
    out = run_script(tmp_path, "proposal_order.py", "--seeds", "1", "--trials", "3", "--sampler", "tpe", "--out", "a.json")
    assert re.search(r"seed 1: \d+ trials \(3 launched\)", out), out
    data = json.loads((tmp_path / "a.json").read_text())
    rows = data["seeds"]["1"]
    assert sum(1 for r in rows if r[3]) == 3 and [r[0] for r in rows] == sorted(r[0] for r in rows)
    compared = run_script(tmp_path, "proposal_order.py", "--compare", "a.json", "a.json")
    assert f"seed 1: {len(rows)} leading trials agree" in compared


def test_optimum_gap_simulated_prints_the_ratio_table(tmp_path: Path) -> None:
    out = run_script(
        tmp_path,
        "optimum_gap.py",
        "--chain",
        "simulated",
        "--profiles",
        SEED,
        "--seeds",
        "1",
        "--modes",
        "precise",
        "--trials",
        "3",
    )
    assert re.search(rf"{SEED} precise seed 1: .*front {RATIO} launched {RATIO} pick {RATIO}", out), out
    rows = table_rows(out, "| profile | measuring | objective |")
    assert len(rows) == 2 and all(r[0] == SEED and r[1] == "precise" for r in rows)
    assert all(re.fullmatch(RATIO, r[3]) for r in rows)


def test_pick_decisions_reads_each_picks_paired_ratio_and_tallies_it(tmp_path: Path) -> None:
    out = run_script(tmp_path, "pick_decisions.py", "--profiles", SEED, "--seeds", "1", "--trials", "4")
    lines = re.findall(
        rf"{SEED} seed 1 (latency|throughput): trial \d+ / runner-up \d+: reported x({RATIO}) "
        rf"\(95% ({RATIO})-({RATIO}), (?:un)?paired\) (?:separated|tied); noiseless x{RATIO} \((?:NOT )?covered\); "
        r"launches [1-9]\d* and [1-9]\d*;",
        out,
    )
    assert lines and all(float(lo) <= float(r) <= float(hi) for _, r, lo, hi in lines), out
    rows = table_rows(out, "| profile | studies | decisions |")
    assert [r[0] for r in rows] == [SEED, "overall"]
    assert all(r[1] == "1" and r[2] == str(len(lines)) for r in rows)
    assert all(re.fullmatch(r"\d+/\d+ \(\d+%\)", r[4]) for r in rows)
    assert all(re.fullmatch(r"\d+% of \d+|-", r[8]) for r in rows)  # attainable, over the separated decisions
    one = rf"\S+ front ({RATIO}) pick ({RATIO}|-)"
    gaps = re.findall(rf"^{SEED} seed 1 gap: {one}; {one}$", out, re.M)
    assert len(gaps) == 1 and all(0 < float(g) <= 1.0 for g in gaps[0] if g != "-"), out  # nothing beats the optimum
    gap_table = table_rows(out, "| profile | objective | studies |")
    assert len(gap_table) == 2 and all(r[0] == SEED and r[2] == "1" for r in gap_table)
    (tmp_path / "run.log").write_text(out)
    tallied = run_script(tmp_path, "pick_decisions.py", "--tally", "run.log")
    assert table_rows(tallied, "| profile | studies | decisions |") == rows  # the same table from the printed lines
    assert sorted(table_rows(tallied, "| profile | objective | studies |")) == sorted(gap_table)


def test_efficiency_runs_strategies_and_self_test(tmp_path: Path) -> None:
    assert "self-test: ok" in run_script(tmp_path, "efficiency.py", "--self-test")
    out = run_script(
        tmp_path,
        "efficiency.py",
        "--profiles",
        SEED,
        "--strategies",
        "random",
        "study-tpe",
        "--seeds",
        "1",
        "--budgets",
        "3",
        "--json",
        "runs.json",
    )
    assert re.search(rf"\| {SEED} \|", out), out
    runs = json.loads((tmp_path / "runs.json").read_text())["runs"]
    assert {r["strategy"] for r in runs} == {"random", "study-tpe"}
    assert all(len(r["launches_detail"]) <= 3 for r in runs)


# ----------------------------------------------------------------------------- studies of `optimize --sim`


def test_scaling_prints_a_row_per_slot_count(tmp_path: Path) -> None:
    out = run_script(tmp_path, "scaling.py", "--trials", "2", "--slots", "1", "--time-scale", "0.02")
    rows = table_rows(out, "| slots | wall s |")
    assert [r[0] for r in rows] == ["1"] and re.fullmatch(RATIO, rows[0][5])


def test_feasibility_table_tallies_a_study(tmp_path: Path) -> None:
    out = run_script(
        tmp_path, "feasibility_table.py", "--seeds", "1", "--samplers", "tpe", "--trials", "2", "--time-scale", "0.02"
    )
    rows = table_rows(out, "| sampler | learned infeasibility |")
    assert rows and all(r[0] == "tpe" for r in rows)


def test_measurement_cost_prints_launch_and_measure_seconds(tmp_path: Path) -> None:
    out = run_script(tmp_path, "measurement_cost.py", "--trials", "2", "--time-scale", "0.02", "--load-seconds", "0.2")
    rows = table_rows(out, "| trial | launch s | measure s |")
    assert rows and all(len(r) == 4 for r in rows)


def test_chaos_without_kills_ends_with_the_target(tmp_path: Path) -> None:
    out = run_script(tmp_path, "chaos.py", "--kills", "0", "--trials", "2", "--workdir", str(tmp_path / "chaos"))
    assert re.search(r"kills survived:\s+0", out) and out.strip().endswith("OK"), out


# ----------------------------------------------------------------------------- a simulator server


def test_sim_capacity_measures_a_level(tmp_path: Path) -> None:
    out = run_script(
        tmp_path, "sim_capacity.py", "--scale", "0.02", "--concurrency", "2", "--output-len", "16", "--requests", "4"
    )
    assert re.search(r"client-measured aggregate\s+[\d.]+ tok/s", out), out


def test_client_capacity_measures_both_settings(tmp_path: Path) -> None:
    out = run_script(tmp_path, "client_capacity.py", "--concurrency", "2", "--seconds", "0.5", "--output-len", "16")
    assert "tok/s, chunks/s" in out, out


def test_sim_speed_one_round(tmp_path: Path) -> None:
    out = run_script(tmp_path, "sim_speed.py", "--repeats", "1", "--stall-runs", "0", "--time-scale", "0.05")
    assert re.search(r"cases within \d+% in every repeat: \d+ of \d+", out), out


def test_sim_spreads_two_machines(tmp_path: Path) -> None:
    out = run_script(tmp_path, "sim_spreads.py", "--machines", "2", "--launches", "2", "--requests", "4", "--output-len", "16")
    assert "spread              measured  target  ratio" in out, out
    for row in ("per request", "between launches", "between machines"):
        assert re.search(rf"{row}\s+[\d.]+%\s+[\d.]+%\s+[\d.]+", out), out


def test_interval_calibration_two_runs(tmp_path: Path) -> None:
    out = run_script(tmp_path, "interval_calibration.py", "--runs", "2", "--requests", "64")
    assert re.search(r"2 runs of 64 requests at C=32", out), out
    assert {"shipped", "slices-t", "bootstrap"} <= {line.split()[0] for line in out.splitlines() if line.strip()}


# ----------------------------------------------------------------------------- fixtures and made-up data


def test_real_landscape_replays_the_tiny_grid(tmp_path: Path) -> None:
    out = run_script(tmp_path, "real_landscape.py")
    rows = table_rows(out, "| launches |")
    assert rows and all(re.fullmatch(RATIO, r[2]) for r in rows)


def test_paired_launches_checks_both_levels_of_the_fixture(tmp_path: Path) -> None:
    out = run_script(tmp_path, "paired_launches.py")
    assert re.search(r"^C=1 output_tok_s by requests: spread s .* floor 1\.96 x sqrt\(2\) x s = \+-", out, re.MULTILINE), out
    assert "C=32 by requests: no per-position figures on both sides" in out  # recorded before C>1 kept them
    assert len(re.findall(r"^  machine 1, trials 0/1 \(measuring \d+%/\d+%\): x\d\.\d{4} \(95% ", out, re.MULTILINE)) == 2, out
    assert len(re.findall(r"^  machine 2 over machine 1, [AB]'s launches paired: x\d\.\d{4}", out, re.MULTILINE)) == 4, out
    assert "measuring share per launch: trial " in out
    other = ("--fixture", "real_8b_standalone_study.db.gz", "--study", "real-8b-standalone")  # six configurations
    bad = run_script(tmp_path, "paired_launches.py", *other, ok=False)
    assert "they need exactly two" in bad


def test_paired_launches_joins_two_fixtures_and_compares_the_relaunched_pair(tmp_path: Path) -> None:
    first, then = "real_8b_standalone_default_first_h100.db.gz", "real_8b_standalone_default_h100.db.gz"
    study = ("--study", "real-8b-standalone-default")
    out = run_script(tmp_path, "paired_launches.py", *study, "--fixture", first, "--fixture", then, "--pair", "0", "1")
    # 3/1/4 and 1/1/2 ran once in each fixture, the second's launches renumbered from 100
    assert re.search(r"\(trials \[0, 100\]\); B = .* \(trials \[1, 101\]\)", out), out
    for unit in ("requests", "waves"):
        found = re.search(rf"^C=32 agg_output_tok_s by {unit}: .*\n  machine 1, trials 0/1 .* \d+ {unit} matched", out, re.M)
        assert found, out
    # its confirmations relaunched more configurations: which two to compare must be named
    both = (*study, "--fixture", first, "--fixture", then)
    bad = run_script(tmp_path, "paired_launches.py", *both, ok=False)
    assert "name them with --pair A B" in bad
    bad = run_script(tmp_path, "paired_launches.py", *both, "--pair", "0", "100", ok=False)
    assert "must name measured launches of two configurations" in bad


def test_paired_launches_reads_the_intervals_with_another_prior(tmp_path: Path) -> None:
    """topk-1-2c's C=1 pairs as reported: the 2% prior on a launch's shift sits above the 0.7% its
    relaunches measured, so a 1% prior reads every pair narrower, closer to the floor."""
    study = ("--fixture", "real_8b_standalone_topk_1_2c_h100.db.gz", "--study", "topk-1-2c")
    as_reported = r"^  machine \d, trials \d/\d .*?; (\d\.\d\d) x the floor as reported"

    def c1_readings(out: str) -> list[float]:
        c1 = out.split("C=32 ", 1)[0]
        return [float(x) for x in re.findall(as_reported, c1, re.MULTILINE)]

    default, narrower = (
        c1_readings(run_script(tmp_path, "paired_launches.py", *study, *extra)) for extra in ((), ("--prior-sd", "0.01"))
    )
    assert len(default) == len(narrower) == 3
    assert all(n < d for n, d in zip(narrower, default, strict=True)), (default, narrower)
    bad = run_script(tmp_path, "paired_launches.py", *study, "--prior-sd", "2", ok=False)
    assert "--prior-sd 2 must lie between 0 and 1" in bad


def test_seed_predictions_prints_the_seed_table(tmp_path: Path) -> None:
    out = run_script(tmp_path, "seed_predictions.py")
    rows = table_rows(out, "| fitted on steps |")
    assert rows and all(r[-1] in ("yes", "no") for r in rows)


def test_gpu_teardown_refuses_without_a_gpu_and_summarises(tmp_path: Path) -> None:
    if os.path.exists("/dev/nvidiactl"):
        pytest.skip("a GPU is present: the refusal is not this host's path")
    out = run_script(tmp_path, "gpu_teardown.py", "--repeats", "1", ok=False)
    assert "GPU" in out.strip().splitlines()[-1], out
    sys.path.insert(0, str(BENCHMARKS))
    try:
        import gpu_teardown
    finally:
        sys.path.remove(str(BENCHMARKS))
    rows = [
        {"scenario": "launcher", "seconds_until_free": 1.0, "freed": True},
        {"scenario": "bare-kill", "seconds_until_free": None, "freed": False},
    ]
    lines = gpu_teardown.summarize(rows, bare_wait=20.0)
    assert lines[1].startswith("launcher ") and "1/1" in lines[1]
    assert "still held after 20 s" in lines[2]
    assert lines[-1] == "bare-kill / launcher: more than 20x (bare kill never freed it)"


def test_stall_probe_reads_a_probe_folder(tmp_path: Path) -> None:
    folder = tmp_path / "probe"
    folder.mkdir()
    wall0 = 1_700_000_000.0
    (folder / "clock").write_text(f"{wall0} 0.0")
    records = [
        {"warmup": False, "chunk_times": [s + 0.1 * k for k in range(10)], "chunk_tokens": [1 + (s % 2)] * 10} for s in range(8)
    ]
    (folder / "one-client.jsonl").write_text("\n".join(json.dumps(r) for r in records) + "\n")
    log = []
    for s in range(8):
        when = datetime.datetime.fromtimestamp(wall0 + s, datetime.timezone.utc).strftime("%Y-%m-%d %H:%M:%S")
        for _ in range(1 + s % 2):  # the server steps less in the seconds the client sees less
            log.append(f"[{when}] Decode batch. #running-req: 32, gen throughput (token/s): {1000 + s:.2f}")
        log.append(f"[{when}] Prefill batch. #new-seq: 1")
    (folder / "server.log").write_text("\n".join(log) + "\n")
    (folder / "split").write_text(str(len(log)))
    out = run_script(tmp_path, "stall_probe.py", str(folder))
    assert re.search(r"6 whole seconds of the one-client C=32 run", out), out
    assert "correlation of client tokens/s with server decode steps/s" in out


def test_accept_by_depth_prints_measured_and_predicted_acceptance(tmp_path: Path) -> None:
    out = run_script(tmp_path, "accept_by_depth.py")
    rows = table_rows(out, "| steps | top-k |")
    assert len(rows) >= 10 and all(len(r[5].split()) == int(r[0]) for r in rows)  # one share per depth
    assert re.search(r"^accept length, predicted over measured: median \|log\| \d\.\d{3}, worst \d\.\d{3}$", out, re.M), out


def test_the_attainable_share_is_the_oracle_chance_of_separating_with_the_launches_behind_each_side() -> None:
    """1.05 over one launch each, at a 2% between-launch spread: 1.73 sd from 1, 41%; four
    launches each: 93%; launches unknown (older logs): none."""
    sys.path.insert(0, str(BENCHMARKS))
    try:
        from pick_decisions import Decision, attainable
    finally:
        sys.path.remove(str(BENCHMARKS))

    def at(launches: tuple[int, int] | None) -> float | None:
        return attainable(Decision("p", 1, "latency", 1, 2, 1.05, 1.0, 1.1, False, True, 1.05, "", launches), 0.02)

    assert at((1, 1)) == pytest.approx(0.407, abs=0.002)
    assert at((4, 4)) == pytest.approx(0.932, abs=0.002)
    assert at(None) is None
