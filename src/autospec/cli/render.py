"""Terminal rendering: live progress of a study and plain-text tables. No logic."""

from __future__ import annotations

import shutil
import sys
import time
from typing import Any, Mapping, Sequence, TextIO

from autospec.report.table import compact as compact_params

__all__ = ["Progress", "table"]

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


class Progress:
    """Observer for `autospec.study.optimize`: trial k/N, configuration, phase, elapsed,
    ETA and best-so-far. On a terminal the phase line is redrawn in place; elsewhere
    (logs, pipes) each event is one line."""

    def __init__(self, objectives: Sequence[tuple[str, str]], stream: TextIO | None = None, quiet: bool = False) -> None:
        """`objectives`: (name, "maximize" | "minimize") pairs, in the study's order."""
        self.names = [n for n, _ in objectives]
        self.signs = [1.0 if d == "maximize" else -1.0 for _, d in objectives]
        self.out = stream or sys.stdout
        self.tty = self.out.isatty()
        self.quiet = quiet
        self.t_start = time.monotonic()
        self.t_trial = self.t_start
        self.launched_times: list[float] = []
        self.best: list[float | None] = [None] * len(self.names)
        self.current = ""
        self.done = 0
        self.target = 0
        self.not_launched: dict[str, int] = {}

    def _elapsed(self, since: float) -> str:
        s = int(time.monotonic() - since)
        return f"{s // 3600}:{s // 60 % 60:02d}:{s % 60:02d}" if s >= 3600 else f"{s // 60}:{s % 60:02d}"

    def _eta(self) -> str:
        if not self.launched_times:
            return "?"
        remaining = max(self.target - self.done, 0)
        s = int(sum(self.launched_times) / len(self.launched_times) * remaining)
        return f"{s // 60}m{s % 60:02d}s"

    def _line(self, text: str, final: bool = False) -> None:
        if self.quiet:
            return
        if self.tty:
            width = shutil.get_terminal_size((100, 20)).columns
            self.out.write("\r\033[K" + text[: width - 1] + ("\n" if final else ""))
        elif final:
            self.out.write(text + "\n")
        self.out.flush()

    def study_started(self, study_name: str, done: int, target: int, measured: Sequence[Sequence[float]] = ()) -> None:
        self.done, self.target = done, target
        for values in measured:  # a resumed study: best so far includes earlier runs
            self._update_best(values)
        if done:
            self._line(f"study {study_name}: {done}/{target} trials already measured; continuing", final=True)
        else:
            self._line(f"study {study_name}: measuring {target} configurations", final=True)

    def trial_started(self, number: int, index: int, target: int, candidate: Mapping[str, Any]) -> None:
        self.t_trial = time.monotonic()
        self.current = f"trial {index}/{target} (#{number}) {compact_params(candidate)}"
        self._line(f"{self.current} | starting")

    def phase(self, name: str) -> None:
        self._line(
            f"{self.current} | {name} {self._elapsed(self.t_trial)} | total {self._elapsed(self.t_start)} eta {self._eta()}"
        )

    def trial_finished(self, number: int, record: Any, done: int, target: int) -> None:
        self.done = done
        took = time.monotonic() - self.t_trial
        if not record.launched:
            # Answered without a launch (rejected / skipped / duplicate): seconds, not minutes.
            # On a terminal it only flashes on the status line; logs get a line each.
            self.not_launched[record.outcome] = self.not_launched.get(record.outcome, 0) + 1
            self._line(f"{self.current} | {record.outcome}: {record.reason}", final=not self.tty)
            return
        self.launched_times.append(took)
        if record.values is not None and record.outcome == "ok":
            self._update_best(record.values)
        values = "" if record.values is None else " ".join(f"{n}={v:.1f}" for n, v in zip(self.names, record.values))
        what = record.outcome if record.outcome == "ok" else f"{record.outcome}: {record.reason}"
        best = " ".join(f"{n}={b:.1f}" for n, b in zip(self.names, self.best) if b is not None)
        skipped = ", ".join(f"{n} {k}" for k, n in sorted(self.not_launched.items()))
        self._line(
            f"{self.current} | {what} {values} ({took:.0f}s) | {done}/{target} done, best {best or '-'}"
            + (f" | without launch: {skipped}" if skipped else ""),
            final=True,
        )

    def _update_best(self, values: Sequence[float]) -> None:
        for i, v in enumerate(values):
            if self.best[i] is None or self.signs[i] * (v - self.best[i]) > 0:
                self.best[i] = v

    def message(self, text: str) -> None:
        self._line(text, final=True)
