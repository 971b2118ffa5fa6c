"""Terminal rendering: live progress of a study and plain-text tables. No logic.

The progress display uses rich: on a terminal, a status line (current trial, phase,
elapsed time, ETA, the best single launch so far on each objective, with its trial) is
redrawn in place below the finished trials, and each
finished trial is printed as its own line, wrapped at the terminal's width rather than
cut, so both objective values and any reason always show whole. Elsewhere (logs, pipes)
every event is one plain line.
"""

from __future__ import annotations

import sys
import time
from collections.abc import Mapping, Sequence
from typing import Any, TextIO

from rich.console import Console
from rich.live import Live
from rich.text import Text

from autospec.records import TrialRecord
from autospec.report.table import compact as compact_params

__all__ = ["Progress", "table", "short_label", "describe_candidate"]

# Short names of common metrics for the progress lines (the study keeps the full names).
_SHORT_METRICS = {
    "output_tok_s": "out",
    "agg_output_tok_s": "agg",
    "decode_tok_s": "decode",
    "accept_length": "accept",
}


def short_label(objective: str) -> str:
    """'agg_output_tok_s@c32' -> 'agg@c32'; unknown metrics keep their name."""
    metric, _, level = objective.partition("@")
    short = _SHORT_METRICS.get(metric, metric)
    return f"{short}@{level}" if level else short


def table(headers: Sequence[str], rows: Sequence[Sequence[Any]], *, align_right: Sequence[bool] | None = None) -> str:
    cells = [[str(h) for h in headers]] + [[("" if c is None else str(c)) for c in row] for row in rows]
    widths = [max(len(r[i]) for r in cells) for i in range(len(headers))]
    right = align_right or [False] * len(headers)
    lines = []
    for n, row in enumerate(cells):
        line = "  ".join(c.rjust(w) if right[i] else c.ljust(w) for i, (c, w) in enumerate(zip(row, widths)))
        lines.append(line.rstrip())
        if n == 0:
            lines.append("  ".join("-" * w for w in widths))
    return "\n".join(lines)


_MAX_REASON = 160


def _shown_path(path: str) -> str:
    """`path` relative to the working directory when it lies below it."""
    import os

    relative = os.path.relpath(path)
    return path if relative.startswith("..") else relative


def describe_candidate(candidate: Mapping[str, Any]) -> str:
    """A candidate in a few words: a reference by its name (its candidate leaves every
    tuned flag to SGLang, `autospec.study.proposing.references.reference_candidate`),
    else its parameters, compacted."""
    values = dict(candidate)
    rest = [v for k, v in values.items() if k != "speculative_adaptive"]
    if values and all(v is None for v in rest):
        if values.get("speculative_adaptive") is True:
            return "reference: --speculative-adaptive"
        if "speculative_algorithm" in values:
            return "reference: no speculation"
        return "reference: SGLang's defaults"
    return compact_params(candidate)


def _clock(seconds: float) -> str:
    s = int(seconds)
    return f"{s // 3600}:{s // 60 % 60:02d}:{s % 60:02d}" if s >= 3600 else f"{s // 60}:{s % 60:02d}"


class Progress:
    """Observer for `autospec.study.optimize`: trial k/N, configuration, phase, elapsed,
    ETA and best-so-far (see the module docstring)."""

    def __init__(
        self,
        objectives: Sequence[tuple[str, str]],
        stream: TextIO | None = None,
        quiet: bool = False,
        simulated: bool = False,
    ) -> None:
        """`objectives`: (name, "maximize" | "minimize") pairs, in the study's order;
        `simulated`: the servers are the bundled simulator (its failures say so)."""
        self.simulated = simulated
        self.labels = [short_label(n) for n, _ in objectives]
        self.signs = [1.0 if d == "maximize" else -1.0 for _, d in objectives]
        out = stream or sys.stdout
        self.tty = out.isatty()
        self.console = Console(file=out, highlight=False, soft_wrap=not self.tty)
        self.quiet = quiet
        self.t_start = time.monotonic()
        self.t_trial = self.t_start
        self.launched_times: list[float] = []
        self.best: list[float | None] = [None] * len(self.labels)
        self.best_trial: list[int | None] = [None] * len(self.labels)  # the trial behind each best figure
        self.current = ""
        self.index = 0
        self.phase_name = ""
        self.done = 0
        self.target = 0
        self.skipped_counts: dict[str, int] = {}
        self._live: Live | None = None

    # ------------------------------------------------------------------ output
    def _print(self, text: str) -> None:
        if not self.quiet:
            self.console.print(Text(text))

    def _status(self) -> Text:
        parts = [self.current or "starting"]
        if self.phase_name:
            parts.append(f"{self.phase_name} {_clock(time.monotonic() - self.t_trial)}")
        parts.append(f"total {_clock(time.monotonic() - self.t_start)} eta {self._eta()}")
        best = self._best()
        if best:
            parts.append(f"best so far {best}")
        if self.skipped_counts:
            parts.append("without launch: " + ", ".join(f"{n} {k}" for k, n in sorted(self.skipped_counts.items())))
        return Text(" | ".join(parts), no_wrap=True, overflow="ellipsis")

    def _refresh(self) -> None:
        if self.quiet or not self.tty:
            return
        if self._live is None:
            self._live = Live(
                self._status(), console=self.console, transient=True, refresh_per_second=2, get_renderable=self._status
            )
            self._live.start()
        else:
            self._live.refresh()

    def _values(self, values: Sequence[float | None]) -> str:
        return " ".join(f"{label} {v:.1f}" for label, v in zip(self.labels, values) if v is not None)

    def _best(self) -> str:
        """'out@c1 282.4 (trial 6), agg@c32 2116.5 (trial 9)': each figure names its launch."""
        return ", ".join(
            f"{label} {v:.1f} (trial {n})" for label, v, n in zip(self.labels, self.best, self.best_trial) if v is not None
        )

    def _eta(self) -> str:
        if not self.launched_times:
            return "?"
        remaining = max(self.target - self.done, 0)
        s = int(sum(self.launched_times) / len(self.launched_times) * remaining)
        return f"{s // 60}m{s % 60:02d}s"

    # ------------------------------------------------------------------ observer
    def study_started(
        self, study_name: str, done: int, target: int, measured: Mapping[int, Sequence[float]] | None = None
    ) -> None:
        self.done, self.target = done, target
        for number, values in (measured or {}).items():  # a resumed study: best so far includes earlier runs
            self._update_best(number, values)
        if done:
            self._print(f"study {study_name}: {done}/{target} trials already measured; continuing")
        else:
            self._print(f"study {study_name}: measuring {target} configurations")
        self._refresh()

    def trial_started(self, number: int, index: int, target: int, candidate: Mapping[str, Any]) -> None:
        self.t_trial = time.monotonic()
        self.index = index
        self.current = f"[{index}/{target}] trial {number} {describe_candidate(candidate)}"
        self.phase_name = ""
        self._refresh()

    def phase(self, name: str) -> None:
        self.phase_name = name
        self._refresh()

    def trial_finished(self, number: int, record: TrialRecord, done: int, target: int) -> None:
        self.done = done
        took = time.monotonic() - self.t_trial
        if not record.launched:
            self._answered(self.current, record.outcome, record.reason)
            return
        self.launched_times.append(took)
        if record.values is not None and record.outcome == "ok":
            self._update_best(number, record.values)
        values = "" if record.values is None else " " + self._values(record.values)
        what = record.outcome if record.outcome == "ok" else self._failure(record)
        count = "" if done == self.index else f" | {done}/{target} done"  # trials of other slots finished meanwhile
        self._print(f"{self.current} | {what}{values} ({took:.0f}s){count}")
        self.phase_name = ""
        self._refresh()

    def _failure(self, record: TrialRecord) -> str:
        """One short line for a launched trial that did not serve: the failure kind, whether
        it was simulated, the problem without SGLang's log lines (the study keeps them), and
        the log."""
        from autospec.launcher.errors import ERROR_BY_KIND

        kind = record.outcome + (" (simulated)" if self.simulated else "")
        error = ERROR_BY_KIND.get(record.outcome)
        if error is None:
            reason = record.reason if len(record.reason) <= _MAX_REASON else record.reason[: _MAX_REASON - 3] + "..."
            return f"{kind}: {reason}"
        log = f"; log {_shown_path(record.log_path)}" if record.log_path else ""
        return f"{kind}: {error.problem}{log}"

    def not_launched(self, candidate: Mapping[str, Any], outcome: str, reason: str) -> None:
        self._answered(f"proposal {compact_params(candidate)}", outcome, reason)

    def _answered(self, what: str, outcome: str, reason: str) -> None:
        """Answered without a launch (rejected / skipped / duplicate): seconds, not minutes.
        On a terminal it is counted on the status line; logs get a line each."""
        self.skipped_counts[outcome] = self.skipped_counts.get(outcome, 0) + 1
        if not self.tty:
            self._print(f"{what} | {outcome}: {reason}")
        self._refresh()

    def _update_best(self, number: int, values: Sequence[float]) -> None:
        for i, v in enumerate(values[: len(self.best)]):
            best = self.best[i]
            if best is None or self.signs[i] * (v - best) > 0:
                self.best[i], self.best_trial[i] = v, number

    def message(self, text: str) -> None:
        self._print(text)
        self._refresh()

    def finished(self) -> None:
        """The run ended (any way): take the status line down, say how far it got. What to
        deploy comes after, from the pooled front (`autospec.report.answer`), not from the
        single launches this display saw."""
        if self._live is not None:
            self._live.stop()
            self._live = None
        if self.done and not self.quiet:
            self._print(f"{self.done}/{self.target} trials in {_clock(time.monotonic() - self.t_start)}")
