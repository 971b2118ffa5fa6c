"""Speculative flags of sglang 0.5.23 the simulator takes as that release does:
--speculative-attention-mode (prefill | decode, default prefill; no effect the simulator
models) and --speculative-draft-kv-cache-dtype (a smaller draft pool, its saving left free)."""

from __future__ import annotations

import pytest

from autospec.launcher import parse_startup
from autospec.model.memory import MemoryModel
from autospec.model.observation import Observation
from autospec.model.shape import shape_of
from autospec.sim import ArgumentRejected, init_outcome, load_profile, resolve_args
from autospec.sim.args import parse_command_line
from autospec.sim.memory import draft_kv_gb
from autospec.sim.server_args import build_server_args

CHAIN = [
    "--model-path",
    "m",
    "--tp-size",
    "8",
    "--speculative-algorithm",
    "NEXTN",
    "--speculative-num-steps",
    "3",
    "--speculative-eagle-topk",
    "1",
]


def _reported(*extra: str) -> dict:
    profile = load_profile("deepseek-v3-mtp-8x-h200")  # a 0.5.23 profile
    command = parse_command_line([*CHAIN, *extra], environ={})
    return build_server_args(profile, resolve_args(profile, command.flags), command, seed=0)


def test_the_attention_mode_is_reported_as_given_and_prefill_when_unset():
    assert _reported()["speculative_attention_mode"] == "prefill"
    assert _reported("--speculative-attention-mode", "decode")["speculative_attention_mode"] == "decode"


def test_an_attention_mode_outside_sglangs_choices_exits_2_with_argparses_line(capsys):
    with pytest.raises(SystemExit) as exc:
        parse_command_line([*CHAIN, "--speculative-attention-mode", "verify"], environ={})
    assert exc.value.code == 2
    assert "argument --speculative-attention-mode: invalid choice: 'verify'" in capsys.readouterr().err


EAGLE3 = {
    "model_path": "m",
    "speculative_algorithm": "EAGLE3",
    "speculative_num_steps": 3,
    "speculative_eagle_topk": 1,
    "speculative_num_draft_tokens": 4,
}
H200_0523 = "llama33-70b-eagle3-1x-h200"  # a 0.5.23 profile with an EAGLE-3 draft


def _outcome(mem: float, dtype: str | None = None):
    profile = load_profile(H200_0523)
    flags = {**EAGLE3, "mem_fraction_static": mem}
    if dtype is not None:
        flags["speculative_draft_kv_cache_dtype"] = dtype
    cfg = resolve_args(profile, flags)
    return profile, cfg, init_outcome(profile, cfg)


def test_an_fp8_draft_pool_keeps_the_kv_pool_and_leaves_half_the_draft_share_free():
    profile, cfg, auto = _outcome(0.85)
    fp8 = _outcome(0.85, "fp8_e4m3")[2]
    assert fp8.max_total_num_tokens == auto.max_total_num_tokens and fp8.kv_cache_gb == auto.kv_cache_gb
    freed = draft_kv_gb(profile, cfg, auto.kv_cache_gb) / 2
    assert freed > 0.5
    assert fp8.available_gpu_mem_gb == pytest.approx(auto.available_gpu_mem_gb + freed, abs=0.011)
    assert fp8.gpu_mem_used_gb == pytest.approx(auto.gpu_mem_used_gb - freed, abs=0.011)
    assert _outcome(0.85, "bf16")[2] == auto  # the target's dtype: nothing changes


def test_the_freed_memory_can_save_a_launch_from_a_graph_oom():
    mems = [m / 200 for m in range(160, 200)]
    saved = [m for m in mems if _outcome(m, "fp8_e4m3")[2].ok and _outcome(m)[2].status == "cuda_graph_oom"]
    assert saved, "no memory fraction where only the fp8 draft pool leaves the graphs enough"


def test_an_older_profile_still_refuses_a_draft_kv_dtype_in_one_line():
    profile = load_profile()  # sglang 0.5.10
    with pytest.raises(ArgumentRejected, match=r"does not model --speculative-draft-kv-cache-dtype fp8_e4m3 with a profile"):
        resolve_args(profile, {**EAGLE3, "speculative_algorithm": "NEXTN", "speculative_draft_kv_cache_dtype": "fp8_e4m3"})


def test_the_simulated_log_shows_the_draft_pool_in_fp8_and_the_memory_model_predicts_the_saving(sim_factory):
    argv = ["--sim-profile", H200_0523, "--sim-noise", "off", "--sim-load-seconds", "0.2", "--sim-time-scale", "0.05"]
    for key, value in EAGLE3.items():
        argv += ["--" + key.replace("_", "-"), str(value)]
    observations = []
    for mem, dtype in ((0.80, "auto"), (0.84, "auto"), (0.88, "auto"), (0.84, "fp8_e4m3")):
        sim = sim_factory(*argv, "--mem-fraction-static", str(mem), "--speculative-draft-kv-cache-dtype", dtype)
        sim.wait_ready()
        facts = parse_startup(sim.log())
        observations.append((mem, dtype, facts))
    *autos, (_, _, fp8) = observations
    assert fp8.draft_kv_cache_dtype == "torch.float8_e4m3fn" and autos[1][2].draft_kv_cache_dtype == "torch.bfloat16"
    assert fp8.draft_kv_cache_gb == pytest.approx(autos[1][2].draft_kv_cache_gb / 2, abs=0.011)
    assert fp8.max_total_num_tokens == autos[1][2].max_total_num_tokens
    model = MemoryModel(
        [
            Observation(
                flags={**EAGLE3, "mem_fraction_static": mem, "speculative_draft_kv_cache_dtype": dtype},
                outcome="ok",
                **{k: v for k, v in facts.as_dict().items() if k in _OBSERVED},
            )
            for mem, dtype, facts in autos
        ],
        [""] * len(autos),
    )
    shape = shape_of({**EAGLE3, "mem_fraction_static": 0.84, "speculative_draft_kv_cache_dtype": "fp8_e4m3"})
    predicted = model.predict([shape], [""])
    assert float(predicted.headroom_mean[0]) == pytest.approx(fp8.available_gpu_mem_gb, abs=0.1)
    assert float(predicted.pool_mean[0]) == pytest.approx(fp8.max_total_num_tokens, rel=0.01)


_OBSERVED = (
    "max_total_num_tokens",
    "max_running_requests",
    "available_gpu_mem_gb",
    "gpu_mem_before_load_gb",
    "kv_cache_gb",
    "kv_cache_dtype",
    "draft_kv_cache_gb",
    "draft_kv_cache_dtype",
)
