from __future__ import annotations

import dataclasses
import itertools
import json
import re
import signal
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from autospec.bench import LevelResult, RequestRecord
from autospec.cli.bench import render_table
from autospec.cli.main import main
from autospec.metrics import summarize
from autospec.metrics.steady import steady_window

from .fake_server import Reply

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "benchmarks"))
import sim_speed


@pytest.fixture(autouse=True)
def keep_signal_handlers() -> Iterator[None]:
    """main() turns SIGTERM/SIGHUP into KeyboardInterrupt; undo that after each test."""
    saved = {sig: signal.getsignal(sig) for sig in (signal.SIGTERM, signal.SIGHUP)}
    yield
    for sig, handler in saved.items():
        signal.signal(sig, handler)


def test_bench_a_running_server_prints_a_table_and_writes_json(fake_server, tmp_path: Path, capsys) -> None:
    server = fake_server(lambda n, body: Reply(tokens=6, per_event=2))
    out_json, out_records = tmp_path / "bench.json", tmp_path / "records.jsonl"
    rc = main(
        [
            "bench",
            "--url",
            server.url,
            "--concurrency",
            "1,3",
            "--output-len",
            "6",
            "--warmup",
            "1",
            "--json",
            str(out_json),
            "--records",
            str(out_records),
            "--quiet",
        ]
    )
    assert rc == 0
    printed = capsys.readouterr().out
    assert "per-req tok/s" in printed and "agg tok/s" in printed and "FAILED" not in printed
    payload = json.loads(out_json.read_text())
    assert payload["workload"]["kind"] == "synthetic" and payload["server"]["url"] == server.url
    assert [level["summary"]["concurrency"] for level in payload["levels"]] == [1, 3]
    assert payload["levels"][1]["summary"]["n_requests"] == 6
    assert payload["levels"][1]["summary"]["completion_tokens"] == 36
    records = [json.loads(line) for line in out_records.read_text().splitlines()]
    assert len(records) == (1 + 4) + (1 + 6) and sum(r["warmup"] for r in records) == 2


def test_warmup_waves_send_c_short_requests_before_each_level(fake_server, tmp_path: Path) -> None:
    asked: list[dict] = []
    server = fake_server(lambda n, body: (asked.append(body), Reply(tokens=6, per_event=2))[1])
    out_records = tmp_path / "records.jsonl"
    argv = ["bench", "--url", server.url, "--concurrency", "1,3", "--output-len", "6", "--warmup-waves", "1"]
    rc = main([*argv, "--warmup-output-len", "2", "--records", str(out_records), "--quiet"])
    assert rc == 0
    records = [json.loads(line) for line in out_records.read_text().splitlines()]
    assert [r["concurrency"] for r in records if r["warmup"]] == [1, 3, 3, 3]
    lengths = sorted(b.get("sampling_params", b).get("max_new_tokens", b.get("max_tokens")) for b in asked)
    assert lengths == [2] * 4 + [6] * (4 + 6)
    with pytest.raises(SystemExit) as refused:  # one way of warming up at a time
        main([*argv, "--warmup", "2"])
    assert refused.value.code == 2


def test_top_k_is_sent_with_every_request_and_recorded_with_the_workload(fake_server, tmp_path: Path) -> None:
    server = fake_server(lambda n, body: Reply(tokens=4, per_event=2))
    out_json = tmp_path / "bench.json"
    rc = main(
        [
            "bench",
            "--url",
            server.url,
            "--concurrency",
            "1",
            "--num-requests",
            "2",
            "--output-len",
            "4",
            "--temperature",
            "1",
            "--top-k",
            "4",
            "--warmup",
            "1",
            "--json",
            str(out_json),
            "--quiet",
        ]
    )
    assert rc == 0
    assert len(server.bodies) == 3 and all(b["sampling_params"]["top_k"] == 4 for b in server.bodies)
    payload = json.loads(out_json.read_text())
    assert payload["workload"]["top_k"] == 4 and payload["workload"]["temperature"] == 1.0


def test_a_failing_level_exits_1_with_the_reason(fake_server, capsys) -> None:
    server = fake_server(lambda n, body: Reply(kind="status") if n % 2 else Reply(tokens=4))
    rc = main(["bench", "--url", server.url, "--concurrency", "2", "--num-requests", "4", "--quiet"])
    assert rc == 1
    captured = capsys.readouterr()
    assert "FAILED" in captured.out
    assert "autospec: level C=2 failed: 2 of 4 requests failed (50.0% > 5.0% allowed): http_status x2" in captured.err


@pytest.mark.parametrize(
    ("argv", "fragment"),
    [
        (["--url", "http://127.0.0.1:1", "--concurrency", "1,x"], "is not a comma-separated list"),
        (["--url", "http://127.0.0.1:1", "--concurrency", "4,4"], "lists a level twice"),
        (["--url", "http://127.0.0.1:1", "--concurrency", "0,4"], "needs positive levels"),
        (["--sim", "--sim-profile", "no-such-profile"], "neither a file nor a bundled profile"),
        (["--sim", "--sim-time-scale", "-1"], "--sim-time-scale -1 must be > 0"),
        (["--url", "127.0.0.1:1"], "is not an http(s) URL"),
        (["--url", "http://127.0.0.1:1", "--prompts", "/nonexistent.jsonl"], "cannot read prompt file"),
        (["--url", "http://127.0.0.1:1", "--output-len", "0"], "output_len must be >= 1"),
        (["--url", "http://127.0.0.1:1", "--top-k", "0"], "top_k must be a positive integer, got 0"),
        (["--url", "http://127.0.0.1:1", "--max-error-rate", "2"], "must be within 0..1"),
        (["--server-command", "python -m sglang.launch_server"], "needs --model-path"),
    ],
)
def test_bad_input_is_one_line_and_exit_2(argv: list[str], fragment: str, capsys) -> None:
    assert main(["bench", *argv, "--quiet"]) == 2
    err = capsys.readouterr().err.strip()
    assert err.startswith("autospec: error: ") and fragment in err and "\n" not in err


def test_bench_launches_the_simulator(tmp_path: Path, capsys) -> None:
    out_json = tmp_path / "sim.json"
    rc = main(
        [
            "bench",
            "--sim",
            "--sim-noise",
            "off",
            "--sim-load-seconds",
            "0.1",
            "--sim-time-scale",
            "0.2",
            "--flag",
            "speculative_algorithm=NEXTN",
            "--flag",
            "speculative_num_steps=2",
            "--flag",
            "speculative_eagle_topk=1",
            "--flag",
            "speculative_num_draft_tokens=3",
            "--concurrency",
            "1",
            "--output-len",
            "16",
            "--server-log",
            str(tmp_path / "server.log"),
            "--json",
            str(out_json),
            "--quiet",
        ]
    )
    assert rc == 0, capsys.readouterr()
    payload = json.loads(out_json.read_text())
    assert "autospec.sim" in payload["server"]["argv"]
    assert "--speculative-num-steps" in payload["server"]["argv"]
    summary = payload["levels"][0]["summary"]
    assert summary["n_ok"] == 4 and summary["accept_length"] > 1
    assert (tmp_path / "server.log").read_text()


def test_precise_levels_record_why_they_stopped(fake_server, tmp_path: Path, capsys) -> None:
    server = fake_server(lambda n, body: Reply(tokens=6, per_event=2))
    out_json = tmp_path / "bench.json"
    rc = main(
        [
            "bench",
            "--url",
            server.url,
            "--concurrency",
            "1,2",
            "--output-len",
            "6",
            "--precise",
            "--target-ci",
            "0.000001",
            "--max-seconds",
            "0",
            "--json",
            str(out_json),
            "--quiet",
        ]
    )
    assert rc == 0
    printed = capsys.readouterr().out
    assert "steady" in printed and "whole tok/s" in printed and "ok, cap" in printed
    payload = json.loads(out_json.read_text())
    for level in payload["levels"]:
        summary = level["summary"]
        assert summary["stop_reason"] == "cap" and summary["precision"]["stop"] == "cap"
        assert summary["n_requests"] == 4  # the default counts (4 at C=1, 2 x C) are the floor
        assert level["precision"].startswith("cap: ")
        assert {"agg_output_tok_s_whole", "steady_share", "steady_short", "accept_length_source"} <= set(summary)


@pytest.mark.parametrize(
    ("argv", "fragment"),
    [
        (["--precise", "--adaptive"], "drop --adaptive and --duration"),
        (["--precise", "--duration", "5"], "drop --adaptive and --duration"),
        (["--precise", "--target-ci", "0"], "--target-ci 0.0 must be within (0, 1)"),
        (["--precise", "--max-requests", "2", "--concurrency", "4"], "--max-requests 2 is below the level's 8"),
    ],
)
def test_bad_precise_options(fake_server, argv: list[str], fragment: str, capsys) -> None:
    server = fake_server()
    assert main(["bench", "--url", server.url, *argv, "--quiet"]) == 2
    err = capsys.readouterr().err.strip()
    assert err.startswith("autospec: error: ") and fragment in err


def test_bench_takes_accept_length_from_the_simulator_on_the_openai_api(tmp_path: Path, capsys) -> None:
    out_json = tmp_path / "sim.json"
    rc = main(
        [
            "bench",
            "--sim",
            "--sim-noise",
            "off",
            "--sim-load-seconds",
            "0.1",
            "--sim-time-scale",
            "0.2",
            "--flag",
            "speculative_algorithm=NEXTN",
            "--flag",
            "speculative_num_steps=2",
            "--flag",
            "speculative_eagle_topk=1",
            "--flag",
            "speculative_num_draft_tokens=3",
            "--concurrency",
            "1",
            "--output-len",
            "16",
            "--api",
            "completions",
            "--json",
            str(out_json),
            "--quiet",
        ]
    )
    assert rc == 0, capsys.readouterr()
    summary = json.loads(out_json.read_text())["levels"][0]["summary"]
    assert summary["accept_length"] > 1 and summary["accept_length_source"] == "server_info"


@pytest.mark.alone  # under a second busy worker, stalls of its own make the level run to its ceiling
def test_a_one_off_stall_is_left_out_of_a_precise_level(tmp_path: Path, capsys, monkeypatch) -> None:
    # The simulator holds one prefill for 4 simulated s (2 s here) after 16 requests, as a
    # real server does when it meets a batch shape for the first time: the level measures
    # on past it and takes its figure from after it. (How close that figure comes to the
    # same level without the stall is benchmarks/sim_speed.py's one-off stall table.)
    monkeypatch.setenv("AUTOSPEC_SIM_FAULTS", "stall_after_requests=16:4")
    out_json, out_records = tmp_path / "stalled.json", tmp_path / "records.jsonl"
    rc = main(
        [
            "bench",
            *sim_speed.STALL_LEVEL,  # the level benchmarks/sim_speed.py's stall table measures
            "--json",
            str(out_json),
            "--records",
            str(out_records),
            "--quiet",
        ]
    )
    assert rc == 0
    out = capsys.readouterr().out
    stalled = json.loads(out_json.read_text())["levels"][0]["summary"]
    assert re.search(r"after \d+\.\d s stall", out), {k: stalled[k] for k in ("n_requests", "steady_share", "precision")}
    assert stalled["stop_reason"] == "target" and stalled["steady_transient_s"] >= 2.0

    records = [
        RequestRecord.from_dict({k: v for k, v in row.items() if k not in ("concurrency", "repeat")})
        for row in map(json.loads, out_records.read_text().splitlines())
    ]
    measured = [r for r in records if not r.warmup]
    # the stall happened while measuring (a level of 10 waves or more dilutes it below the p99)
    assert max(r.t_first - r.t_sent for r in measured if r.t_first is not None) >= 2.0
    window = steady_window(measured, 8)
    assert window is not None and window.seconds == pytest.approx(stalled["steady_window_s"])
    # The stall is the one stretch of at least 2 s in which no output arrived at all (the
    # prefill held every running request): it lies in the run, and the window starts past
    # most of it (slices of one wave cut the window; the one holding the stall's end may
    # read as steady).
    events = sorted(t for r in measured for t in r.chunk_times)
    gap, gap_start = max((b - a, a) for a, b in itertools.pairwise(events))
    assert gap >= 2.0 and window.run_start < gap_start
    assert window.start >= gap_start + gap / 2


def test_the_table_names_a_stall_only_where_one_was_left_out() -> None:
    record = RequestRecord(
        ok=True,
        error_kind=None,
        t_sent=0.0,
        t_first=0.1,
        t_done=1.0,
        chunk_times=(0.1, 1.0),
        chunk_tokens=(1, 9),
        completion_tokens=10,
    )
    clean = summarize(LevelResult(records=(record,), wall_s=1.0))
    stalled = dataclasses.replace(clean, steady_transient_s=2.34)
    rows = [line for line in render_table([{"summary": clean}, {"summary": stalled}]).splitlines() if line.startswith("1 ")]
    assert len(rows) == 2 and "stall" not in rows[0] and "after 2.3 s stall" in rows[1]
