from __future__ import annotations

import json
import os
import subprocess
import sys
from types import SimpleNamespace

import pytest

from autospec.launcher import GpuSnapshot, NullGpuProbe, NvmlGpuProbe, ProbeUnavailable, SimGpuProbe
from autospec.launcher.probes import memory_returned


def write_record(directory, pid, mem_mb, gpus=(0,)):
    (directory / f"{pid}.json").write_text(
        json.dumps({"pid": pid, "gpus": list(gpus), "mem_mb": mem_mb, "cmdline": f"proc {pid}"})
    )


def dead_pid() -> int:
    proc = subprocess.Popen([sys.executable, "-c", "pass"])
    proc.wait()
    return proc.pid


def test_sim_probe_counts_only_live_holders(tmp_path):
    write_record(tmp_path, os.getpid(), 1000.0, gpus=(0, 1))
    write_record(tmp_path, dead_pid(), 5000.0)
    (tmp_path / "999.json").write_text("{not json")
    (tmp_path / "notes.txt").write_text("ignored")
    snap = SimGpuProbe(tmp_path).snapshot()
    assert snap.used_mb == {0: 1000.0, 1: 1000.0}
    assert snap.pids == frozenset({os.getpid()})
    assert {p.gpu for p in snap.processes} == {0, 1}
    assert snap.processes[0].cmdline == f"proc {os.getpid()}"


def test_sim_probe_on_missing_directory_is_empty(tmp_path):
    assert SimGpuProbe(tmp_path / "absent").snapshot() == GpuSnapshot(used_mb={}, pids=frozenset())


def test_null_probe_sees_nothing():
    probe = NullGpuProbe()
    assert probe.observes_memory is False
    assert probe.snapshot().used_mb == {}


class FakeNvml:
    """The subset of pynvml the probe calls, with two GPUs."""

    def __init__(self, count=2, fail_init=False):
        self.count, self.fail_init = count, fail_init

    def nvmlInit(self):
        if self.fail_init:
            raise RuntimeError("NVML Shared Library Not Found")

    def nvmlDeviceGetCount(self):
        return self.count

    def nvmlDeviceGetHandleByIndex(self, index):
        return index

    def nvmlDeviceGetMemoryInfo(self, handle):
        return SimpleNamespace(used=(handle + 1) * 1024 * 1024 * 1024, total=140 * 1024**3)

    def nvmlDeviceGetName(self, handle):
        return b"NVIDIA H200"

    def nvmlDeviceGetUUID(self, handle):
        return f"GPU-0000000{handle}" if handle else b"GPU-00000000"

    def nvmlDeviceGetComputeRunningProcesses(self, handle):
        return [SimpleNamespace(pid=100 + handle, usedGpuMemory=512 * 1024 * 1024), SimpleNamespace(pid=200, usedGpuMemory=None)]


def test_nvml_probe_reads_memory_processes_and_names():
    snap = NvmlGpuProbe(nvml=FakeNvml()).snapshot()
    assert snap.used_mb == {0: 1024.0, 1: 2048.0}
    assert snap.total_mb == {0: 140 * 1024.0, 1: 140 * 1024.0}
    assert snap.names == {0: "NVIDIA H200", 1: "NVIDIA H200"}
    assert snap.pids == frozenset({100, 101, 200})
    assert sorted((p.pid, p.gpu, p.mem_mb) for p in snap.processes)[:2] == [(100, 0, 512.0), (101, 1, 512.0)]


def test_nvml_probe_names_its_gpus_by_uuid_in_index_order():
    assert NvmlGpuProbe(nvml=FakeNvml()).uuids() == ("GPU-00000000", "GPU-00000001")
    assert NvmlGpuProbe(gpus=[1], nvml=FakeNvml()).uuids() == ("GPU-00000001",)
    assert NullGpuProbe().uuids() == ()


def test_nvml_probe_limited_to_some_gpus():
    assert set(NvmlGpuProbe(gpus=[1], nvml=FakeNvml()).snapshot().used_mb) == {1}


@pytest.mark.parametrize(
    "nvml, message",
    [
        (FakeNvml(fail_init=True), "NVML could not start"),
        (FakeNvml(count=0), "no GPU"),
    ],
)
def test_nvml_probe_unavailable(nvml, message):
    with pytest.raises(ProbeUnavailable, match=message):
        NvmlGpuProbe(nvml=nvml)


def test_nvml_probe_without_the_library(monkeypatch):
    monkeypatch.setitem(sys.modules, "pynvml", None)  # makes `import pynvml` fail
    with pytest.raises(ProbeUnavailable, match="nvidia-ml-py"):
        NvmlGpuProbe()


def test_memory_returned_with_tolerance():
    base = GpuSnapshot(used_mb={0: 1000.0}, pids=frozenset())
    assert memory_returned(GpuSnapshot({0: 1400.0}, frozenset()), base, 512)
    assert not memory_returned(GpuSnapshot({0: 1600.0}, frozenset()), base, 512)
    assert not memory_returned(GpuSnapshot({0: 1000.0, 1: 900.0}, frozenset()), base, 512)
