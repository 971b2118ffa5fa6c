"""`autospec optimize --sim` on an 80-column terminal: every finished trial's line shows
both objective values whole. The tuner runs in a real pseudo-terminal; its output is fed
to a terminal emulator (pyte) and the final screen is read."""

from __future__ import annotations

import fcntl
import os
import pty
import re
import select
import struct
import subprocess
import sys
import termios
import time
from pathlib import Path

import optuna
import pyte
import pytest

from simspace import sim_space_text

COLUMNS, ROWS = 80, 400
VALUE = r"\d+\.\d"


def run_in_pty(argv: list[str], cwd: Path, timeout_s: float = 240.0) -> tuple[int, pyte.Screen]:
    screen = pyte.Screen(COLUMNS, ROWS)
    stream = pyte.ByteStream(screen)
    master, slave = pty.openpty()
    fcntl.ioctl(slave, termios.TIOCSWINSZ, struct.pack("HHHH", ROWS, COLUMNS, 0, 0))
    env = {**os.environ, "TERM": "xterm-256color", "COLUMNS": str(COLUMNS), "LINES": str(ROWS)}
    proc = subprocess.Popen(
        [sys.executable, "-m", "autospec.cli.main", *argv],
        cwd=cwd,
        env=env,
        stdin=slave,
        stdout=slave,
        stderr=slave,
        start_new_session=True,
    )
    os.close(slave)
    deadline = time.monotonic() + timeout_s
    try:
        while time.monotonic() < deadline:
            ready, _, _ = select.select([master], [], [], 0.2)
            if ready:
                try:
                    data = os.read(master, 65536)
                except OSError:  # the tuner closed the terminal
                    break
                if not data:
                    break
                stream.feed(data)
            elif proc.poll() is not None:
                break
        return proc.wait(timeout=30), screen
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
        os.close(master)


@pytest.mark.slow
@pytest.mark.usefixtures("no_leftover_sims")
def test_every_finished_trial_shows_both_objective_values_whole_at_80_columns(tmp_path):
    space = tmp_path / "space.toml"
    space.write_text(sim_space_text())
    studies = tmp_path / "studies"
    code, screen = run_in_pty(
        [
            "optimize",
            "--space",
            str(space),
            "--study",
            "pty",
            "--studies-dir",
            str(studies),
            "--trials",
            "4",
            "--seed",
            "2",
            "--sim",
            "--sim-load-seconds",
            "0.1",
            "--sim-time-scale",
            "0.2",
        ],
        tmp_path,
    )
    lines = [line.rstrip() for line in screen.display]
    text = "\n".join(lines).strip()
    assert code == 0, text
    assert max(len(line) for line in lines) <= COLUMNS
    study = optuna.load_study(study_name="pty", storage=f"sqlite:///{studies / 'pty.db'}")
    launched = [t for t in study.trials if t.user_attrs.get("launched")]
    assert len(launched) == 4
    # A finished trial's line may wrap, never cut: rejoin each trial's lines, then look for both values.
    joined = re.sub(r"\n(?!\[\d+/\d+\] trial |study |best so far|preflight)", " ", text)
    for t in launched:
        (line,) = [x for x in joined.splitlines() if re.match(rf"\[\d+/\d+\] trial {t.number} ", x)]
        shown = re.search(rf"out@c1 ({VALUE}) agg@c4 ({VALUE}) \(", line)
        assert shown, line
        assert [float(v) for v in shown.groups()] == pytest.approx([round(v, 1) for v in t.values], abs=0.051)
