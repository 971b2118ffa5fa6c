"""One trial: candidate -> verdict -> launch -> benchmark -> metrics -> teardown.

`TrialChain.run` never lets a server outlive it: every path that started a process
stops it (TERM to the group, KILL after a timeout, wait for GPU memory and port)
before returning or re-raising. Failures of the *configuration* (rejected, OOM at
init, crash, too many request errors) become a `TrialRecord` with an outcome;
only KeyboardInterrupt (after teardown) and bugs propagate.
"""

from __future__ import annotations

import json
import math
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from autospec.bench import LevelPlan, Workload, run_levels
from autospec.config import SearchSpace
from autospec.feasibility.gate import FeasibilityGate
from autospec.launcher import Launcher, LaunchError, LaunchRequest
from autospec.metrics import metric_value, summarize
from autospec.records import DUPLICATE, OK, TrialRecord
from autospec.study.layout import StudyLayout

__all__ = ["TrialChain", "ChainHooks"]


@dataclass
class ChainHooks:
    """Observer callbacks; all optional. `phase` names: preflight, launch, bench c=N,
    teardown. `measured(record)` is called when the benchmark is over and before the
    server is torn down (the record holds the trial's values by then), so that work for
    the next trial can overlap the teardown."""

    phase: Callable[[str], None] = lambda name: None
    spawned: Callable[[dict[str, Any]], None] = lambda info: None
    measured: Callable[[TrialRecord], None] = lambda record: None


@dataclass
class TrialChain:
    space: SearchSpace
    launcher: Launcher
    gate: FeasibilityGate
    command: Sequence[str]
    layout: StudyLayout
    env: Mapping[str, str] = field(default_factory=dict)
    ready_timeout_s: float | None = None

    def workload(self) -> Workload:
        return self.space.workload

    def plans(self) -> list[LevelPlan]:
        b = self.space.bench
        return [
            LevelPlan(concurrency=c, num_requests=b.num_requests(c), warmup_requests=b.warmup_requests if i == 0 else 0)
            for i, c in enumerate(b.concurrency)
        ]

    def run(self, number: int, candidate: Mapping[str, Any], hooks: ChainHooks | None = None) -> TrialRecord:
        hooks = hooks or ChainHooks()
        t0 = time.monotonic()
        flags = {**self.space.server.flags, **candidate}
        hooks.phase("preflight")
        verdict = self.gate.verdict(flags)
        seconds = {"preflight": time.monotonic() - t0}
        if not verdict.ok:
            record = TrialRecord(
                outcome=verdict.status, candidate=dict(candidate), reason=verdict.reason,
                resolved=dict(verdict.resolved), seconds=seconds,
            )
            if verdict.status == DUPLICATE:
                source = self.gate.measurement_of(verdict.resolved)
                if source is not None:
                    record.values = list(source.values) if source.values is not None else None
                    record.constraints = dict(source.constraints)
                    record.duplicate_of = source.number
                    record.bench = source.bench
            seconds["total"] = time.monotonic() - t0
            return record

        self.layout.trial_dir(number).mkdir(parents=True, exist_ok=True)
        request = LaunchRequest(
            command=tuple(self.command),
            flags=flags,
            log_path=self.layout.server_log(number),
            env=dict(self.env),
            ready_timeout_s=self.ready_timeout_s or self.space.server.ready_timeout_s,
        )
        record = TrialRecord(
            outcome=OK, candidate=dict(candidate), resolved=dict(verdict.resolved), launched=True,
            seconds=seconds, log_path=str(request.log_path),
        )
        hooks.phase("launch")
        t_launch = time.monotonic()
        server = None
        spawned: dict[str, Any] = {}

        def on_spawn(pid: int, pgid: int, argv: list, port: int) -> None:
            spawned.update(pid=pid, pgid=pgid, argv=argv, port=port)
            hooks.spawned(dict(spawned))

        try:
            try:
                server = self.launcher.start(request, on_spawn=on_spawn)
            except LaunchError as err:
                record.seconds["launch"] = time.monotonic() - t_launch
                record.outcome = err.kind
                record.reason = str(err)
                record.server_args = spawned.get("argv")
                if err.teardown is not None:
                    record.teardown = err.teardown.as_dict()
                    record.seconds["teardown"] = err.teardown.seconds
                self.gate.learn_failure(verdict.resolved, err.kind)
                return self._finish(record, t0)
            record.seconds["launch"] = time.monotonic() - t_launch
            record.server_args = list(server.argv)
            record.startup = server.startup.as_dict()
            self._bench(server, record, hooks)
            hooks.measured(record)
        finally:
            if server is not None:
                hooks.phase("teardown")
                report = server.stop()
                record.teardown = report.as_dict()
                record.seconds["teardown"] = report.seconds
        if record.outcome == OK:
            self.gate.learn_success(verdict.resolved, record.startup or {})
        return self._finish(record, t0)

    def _bench(self, server: Any, record: TrialRecord, hooks: ChainHooks) -> None:
        t_bench = time.monotonic()
        summaries = {}
        workload = self.workload()
        for plan in self.plans():
            hooks.phase(f"bench c={plan.concurrency}")
            result = run_levels(server.url, workload, [plan], timeout_s=self.space.bench.request_timeout_s)[plan.concurrency]
            summary = summarize(result, max_error_rate=self.space.bench.max_error_rate)
            summaries[plan.concurrency] = summary
            record.bench[plan.concurrency] = summary.as_dict()
            try:
                server.check_alive()
            except LaunchError as err:
                record.outcome, record.reason = err.kind, str(err)
                break
            if summary.failed_reason:
                record.outcome, record.reason = "bench_failed", f"c={plan.concurrency}: {summary.failed_reason}"
                break
        record.seconds["bench"] = time.monotonic() - t_bench
        events = server.runtime_events()
        if events:
            record.startup = {**(record.startup or {}), "runtime_events": dict(events)}
        bench_json = Path(record.log_path).parent / "bench.json" if record.log_path else None
        if bench_json is not None:
            bench_json.write_text(json.dumps(record.bench, indent=1, default=str))
        if record.outcome != OK:
            return
        measured = {spec.name: metric_value(summaries[spec.concurrency], spec.metric) for spec in self.space.measured_specs}
        missing = [name for name, v in measured.items() if not math.isfinite(v)]
        if missing:
            record.outcome = "bench_failed"
            record.reason = f"{', '.join(missing)} could not be measured (no successful request reported it)"
            return
        record.values = [measured[o.name] for o in self.space.objectives]
        for c in self.space.constraints:
            record.constraints[c.name] = c.violation(measured[c.name])
        if any(v > 0 for v in record.constraints.values()):
            record.outcome = "constraint_violated"
            broken = [k for k, v in record.constraints.items() if v > 0]
            record.reason = f"violates {', '.join(broken)}"

    def _finish(self, record: TrialRecord, t0: float) -> TrialRecord:
        record.seconds["total"] = time.monotonic() - t0
        return record
