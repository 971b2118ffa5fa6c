"""Print GPU memory in use and the PIDs holding it, every INTERVAL seconds, until killed.

    python3 nvml_watch.py [INTERVAL] > nvml.csv

One CSV line per sample: ``unix_time,gpu,used_mib,pids`` (pids joined by ``;``, empty
when no process holds memory). Runs beside a study so that the timeline shows each
server's memory appear and go back to the baseline before the next launch. Needs
nvidia-ml-py (module ``pynvml``); it allocates nothing on the GPU.
"""

from __future__ import annotations

import sys
import time

import pynvml


def sample(handles: list) -> list[str]:
    now = time.time()
    rows = []
    for index, handle in enumerate(handles):
        used = pynvml.nvmlDeviceGetMemoryInfo(handle).used / 2**20
        try:
            procs = pynvml.nvmlDeviceGetComputeRunningProcesses(handle)
        except pynvml.NVMLError:
            procs = []
        pids = ";".join(str(p.pid) for p in procs)
        rows.append(f"{now:.2f},{index},{used:.0f},{pids}")
    return rows


def main() -> int:
    interval = float(sys.argv[1]) if len(sys.argv) > 1 else 1.0
    pynvml.nvmlInit()
    handles = [pynvml.nvmlDeviceGetHandleByIndex(i) for i in range(pynvml.nvmlDeviceGetCount())]
    print("unix_time,gpu,used_mib,pids", flush=True)
    try:
        while True:
            print("\n".join(sample(handles)), flush=True)
            time.sleep(interval)
    except (KeyboardInterrupt, BrokenPipeError):
        return 0


if __name__ == "__main__":
    sys.exit(main())
