"""benchmarks/gpu_teardown.py must say clearly that it cannot run where there is no GPU."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

SCRIPT = Path(__file__).resolve().parents[2] / "benchmarks" / "gpu_teardown.py"


def test_exits_with_a_clear_message_without_an_nvidia_gpu(tmp_path):
    # A stand-in pynvml whose NVML cannot start, as on a host without the NVIDIA driver.
    (tmp_path / "pynvml.py").write_text("def nvmlInit():\n    raise RuntimeError('NVML Shared Library Not Found')\n")
    env = dict(os.environ, PYTHONPATH=str(tmp_path))
    done = subprocess.run([sys.executable, str(SCRIPT)], env=env, capture_output=True, text=True, timeout=60)
    assert done.returncode == 2
    assert "no NVIDIA GPU usable here" in done.stderr
    assert "NVML Shared Library Not Found" in done.stderr
    assert done.stdout == ""
