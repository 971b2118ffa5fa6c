"""The simulated server's start-up: SGLang's log lines at the profile's pace, the GPU
memory it holds at each stage, and the failure chain where ``init_outcome`` says it fails.

Order (as sglang 0.5.16 logs it, eagle.log / kvsmall.log; durations x ``--sim-time-scale``,
``load`` = the profile's ``load_seconds`` or ``--sim-load-seconds``):

0. ``too_few_gpus`` (tp_size x pp_size above the profile's GPU count): after 0.1 x load,
   the first rank without a GPU logs 0.5.23's ``Context: ...`` warning (0.5.23 profiles) and
   dies in ``set_device`` (``torch.AcceleratorError: CUDA error: invalid device ordinal``);
   nothing is loaded or held;
1. ``Load weight begin`` (the ``hang_at_start`` fault stops here; ``crash_at_start`` dies
   after 0.5 x load);
2. after 0.7 x load: ``weights_oom`` dies; else ``Load weight end`` for the target, then
   ``Load weight begin/end`` for a draft model; the ``zombie_child`` fault forks its child;
3. after 0.05 x load: ``kv_pool_too_small`` dies; else ``KV Cache is allocated`` and
   ``Memory pool end`` (target, then draft);
4. CUDA-graph capture lines (phase-wise from 0.5.16, one begin/end pair before), 0.25 x
   load; ``cuda_graph_oom`` / ``invalid_draft_tree`` die after the begin line (0.1 x load);
5. ``max_total_num_tokens=..., ..., available_gpu_mem=... GB`` and uvicorn's start lines;
6. warmup (the profile's ``warmup_seconds`` or ``--sim-warmup-seconds``, plus the
   ``slow_start`` fault's unscaled seconds): a 6-token prefill and its ``POST /generate``
   access line, then ``The server is fired up and ready to roll!`` and readiness.

Memory recorded (``GpuStateFile``, per GPU): the weights (+ runtime overhead) after
loading, everything but the free memory after the KV pool, the outcome's
``gpu_mem_used_gb`` when ready; all of the GPU at a weights OOM.
"""

from __future__ import annotations

import asyncio
import os
from collections.abc import Callable
from typing import TYPE_CHECKING

from autospec.sim import logs
from autospec.sim.faults import hang, spawn_zombie_child
from autospec.sim.gpu_state import GpuStateFile
from autospec.sim.memory import draft_kv_ratio

if TYPE_CHECKING:
    from autospec.sim.server import ServerSetup

__all__ = ["Startup", "WARMUP_PROMPT_TOKENS", "mib"]

WARMUP_PROMPT_TOKENS = 6  # "The capital city of France is" (SGLang's warmup request)
CUDA_ERROR = "RuntimeError: CUDA error: an illegal memory access was encountered"
CRASH_AT_START_ERROR = (
    f"{CUDA_ERROR}\n"
    "CUDA kernel errors might be asynchronously reported at some other API call, "
    "so the stacktrace below might be incorrect.\n"
    "For debugging consider passing CUDA_LAUNCH_BLOCKING=1"
)

Die = Callable[..., None]  # (traceback frames, error text[, rank prefix]) -> never returns


def mib(gb: float) -> float:
    """SGLang's GB (2**30 bytes, as in the profile) -> the MB (2**20) the state file records."""
    return gb * 1e9 / 2**20


def _held_gpus(count: int, visible: str | None) -> list[int]:
    """The GPUs (host indices) a server of `count` ranks holds memory on: the first `count`
    of ``CUDA_VISIBLE_DEVICES`` when it lists numbers (a GPU slot; a slot narrower than the
    ranks keeps its memory on its own GPUs), else 0..count-1."""
    listed = [int(g) for g in (visible or "").split(",") if g.strip().isdigit()]
    return listed[:count] if listed else list(range(count))


class Startup:
    """Runs the start-up sequence once (``await Startup(...).run()``); calls ``die`` on a
    failure and ``on_ready`` when the server may answer readiness with 200."""

    def __init__(
        self, setup: ServerSetup, log: logs.SglangLog, memory: GpuStateFile, *, die: Die, on_ready: Callable[[], None]
    ) -> None:
        self.setup = setup
        self.log = log
        self.memory = memory
        self.die = die
        self.on_ready = on_ready
        self.gpus = _held_gpus(setup.cfg.tp_size * max(setup.cfg.pp_size, 1), os.environ.get("CUDA_VISIBLE_DEVICES"))
        self.zombie_pid: int | None = None

    def _hold(self, gb: float) -> None:
        self.memory.write(self.gpus, mib(gb), self.setup.cmdline)

    async def run(self) -> None:
        """The phases in SGLang's order; each returns False after calling `die`."""
        load = self.setup.load_seconds * self.setup.time_scale
        if self.setup.outcome.status == "too_few_gpus":
            await self._fail_without_a_gpu(load)
            return
        weights = await self._load_weights(load)
        if weights is None:
            return
        avail, draft = weights
        free_after_pool = await self._allocate_kv_pool(load, avail, draft)
        if free_after_pool is None or not await self._capture_graphs(load, free_after_pool):
            return
        await self._serve()

    async def _fail_without_a_gpu(self, load: float) -> None:
        """A rank with no GPU of its own: before Load weight begin (ModelRunner sets its
        device first)."""
        profile, cfg = self.setup.profile, self.setup.cfg
        await asyncio.sleep(0.1 * load)
        pp = max(cfg.pp_size, 1)
        gpu_id, tp_rank, pp_rank = logs.failing_rank(profile.gpu_count, cfg.tp_size, pp)
        prefix = logs.rank_prefix(tp_rank, cfg.tp_size, pp_rank, pp)
        if logs.uses_resolve_once(profile.sglang_version):  # the Context line as 0.5.23 words it
            visible = os.environ.get("CUDA_VISIBLE_DEVICES")
            self.log.rank(logs.set_device_context(gpu_id, tp_rank, cfg.tp_size, visible), prefix)
        self.die(logs.SCHEDULER_DEVICE_FRAMES, self.setup.outcome.message, prefix)

    async def _load_weights(self, load: float) -> tuple[float, float] | None:
        """Target, then draft weights; (free memory left, draft weights) or None on a failure."""
        setup = self.setup
        profile, cfg, outcome, faults = setup.profile, setup.cfg, setup.outcome, setup.faults
        total = profile.gpu_mem_gb
        overhead = getattr(profile, "runtime_overhead_gb", 1.0)
        avail = max(total - overhead, 0.0)
        self.log.rank(logs.load_weight_begin(avail))
        if faults.hang_at_start:
            await hang(self.log.info)
        if faults.crash_at_start:
            await asyncio.sleep(0.5 * load)
            self.die(logs.SCHEDULER_INIT_FRAMES, CRASH_AT_START_ERROR)
            return None
        await asyncio.sleep(0.7 * load)
        if outcome.status == "weights_oom":
            self._hold(total)
            self.die(logs.SCHEDULER_WEIGHTS_FRAMES, outcome.message)
            return None
        # Target first, then the draft model (its own load and KV lines, as in 0.5.16's log).
        weights = outcome.weights_gb
        shards = cfg.tp_size * max(cfg.pp_size, 1)
        speculative = cfg.speculative_algorithm is not None
        draft = profile.draft_weights_gb / shards if speculative and cfg.speculative_algorithm != "NGRAM" else 0.0
        draft = min(draft, weights)
        avail = max(avail - (weights - draft), 0.0)
        self.log.rank(logs.load_weight_end(0.7 * load, setup.architecture, avail, weights - draft))
        if draft:
            self.log.rank(logs.load_weight_begin(avail))
            avail = max(avail - draft, 0.0)
            draft_arch = str(setup.extra("draft_architecture", f"{setup.architecture}Eagle"))
            self.log.rank(logs.load_weight_end(0.0, draft_arch, avail, draft))
        self._hold(weights + overhead)
        if faults.zombie_child:
            self.zombie_pid = spawn_zombie_child(
                setup.state_dir, self.gpus, mib(weights + overhead), setup.cmdline + " [scheduler]"
            )
        return avail, draft

    async def _allocate_kv_pool(self, load: float, avail: float, draft: float) -> float | None:
        """The KV pool (target, then draft); free memory after it, or None on a failure."""
        outcome = self.setup.outcome
        await asyncio.sleep(0.05 * load)
        if outcome.status == "kv_pool_too_small":
            self.die(logs.SCHEDULER_INIT_FRAMES, outcome.message)
            return None
        kv, weights = outcome.kv_cache_gb, outcome.weights_gb
        draft_kv = kv * draft / weights if draft and weights else 0.0
        ratio = draft_kv_ratio(self.setup.cfg)  # the draft pool's dtype (0.5.23 profiles)
        freed = draft_kv * (1.0 - ratio)
        # Free after the static pool: what the model leaves (its reserves count with the target's pool).
        avail_kv = (
            max(avail - kv + freed, 0.0) if outcome.status != "ok" else outcome.available_gpu_mem_gb + outcome.cuda_graph_gb
        )
        self.log.rank(logs.kv_cache_allocated(outcome.max_total_num_tokens, (kv - draft_kv) / 2, (kv - draft_kv) / 2))
        self.log.rank(logs.memory_pool_end(avail_kv + draft_kv * ratio))
        if draft_kv:
            dtype = {"fp8_e4m3": "torch.float8_e4m3fn", "fp8_e5m2": "torch.float8_e5m2"}.get(
                str(self.setup.cfg.speculative_draft_kv_cache_dtype), "torch.bfloat16"
            )
            half = draft_kv * ratio / 2
            self.log.rank(logs.kv_cache_allocated(outcome.max_total_num_tokens, half, half, dtype))
            self.log.rank(logs.memory_pool_end(avail_kv))
        self._hold(max(self.setup.profile.gpu_mem_gb - avail_kv, 0.0))
        return avail_kv

    async def _capture_graphs(self, load: float, avail_kv: float) -> bool:
        """CUDA-graph capture; False after a failure."""
        setup = self.setup
        cfg, outcome = setup.cfg, setup.outcome
        version = setup.profile.sglang_version
        graph = dict(
            speculative=cfg.speculative_algorithm is not None,
            num_tokens_per_req=cfg.speculative_num_draft_tokens or 1,
            max_bs=cfg.cuda_graph_max_bs,
        )
        if outcome.status in ("cuda_graph_oom", "invalid_draft_tree"):
            for line in logs.graph_capture_begin_only(version, avail_gb=avail_kv, **graph):
                self.log.rank(line)
            await asyncio.sleep(0.1 * load)
            self.die(logs.SCHEDULER_GRAPH_FRAMES, outcome.message.rstrip("\n"))
            return False
        if outcome.status != "ok":
            self.die(logs.SCHEDULER_INIT_FRAMES, outcome.message)
            return False
        capture_s = 0.25 * load
        if setup.disable_cuda_graph:
            await asyncio.sleep(capture_s)
        else:
            begin, end = logs.graph_capture_lines(
                version, avail_before_gb=avail_kv, avail_after_gb=outcome.available_gpu_mem_gb, elapsed_s=capture_s, **graph
            )
            for line in begin:
                self.log.rank(line)
            await asyncio.sleep(capture_s)
            for line in end:
                self.log.rank(line)
        self._hold(outcome.gpu_mem_used_gb)
        return True

    async def _serve(self) -> None:
        """The start-up summary, uvicorn's lines, the warmup request, then ready."""
        setup = self.setup
        outcome = setup.outcome
        self.log.rank(
            logs.startup_summary(
                max_total_num_tokens=outcome.max_total_num_tokens,
                chunked_prefill_size=setup.server_args.get("chunked_prefill_size") or 8192,
                max_prefill_tokens=setup.server_args.get("max_prefill_tokens") or 16384,
                max_running_requests=outcome.max_running_requests,
                context_len=outcome.context_len,
                available_gpu_mem_gb=outcome.available_gpu_mem_gb,
            )
        )
        for line in logs.uvicorn_startup(os.getpid(), setup.host, setup.port):
            self.log.info(line)
        await asyncio.sleep(setup.warmup_seconds * setup.time_scale + setup.faults.slow_start_s)
        self.log.rank(
            logs.prefill_batch(
                new_seq=1,
                new_token=WARMUP_PROMPT_TOKENS,
                token_usage=0.0,
                running=0,
                queued=0,
                cuda_graph=True,
                input_throughput=WARMUP_PROMPT_TOKENS / 0.1,
            )
        )
        self.log.info(logs.access_line(f"127.0.0.1:{setup.port + 1}", "POST", "/generate", 200))
        self.on_ready()
        self.log.info(logs.READY)
