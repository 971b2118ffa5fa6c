"""tools/gpu/warm_up.py: the bench command that warms a fresh GPU machine for a space."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

from autospec.search_spaces import __path__ as spaces_path

from .gpu_scripts import load

warm_up = load("warm_up")
SPACES = Path(next(iter(spaces_path)))


def flags_of(cmd: list[str]) -> dict[str, str]:
    return dict(cmd[i + 1].split("=", 1) for i, word in enumerate(cmd) if word == "--flag")


def test_a_standalone_space_warms_up_a_tree_with_its_fixed_flags_on_a_server_that_starts(tmp_path):
    cmd = warm_up.warm_up_command(str(SPACES / "real-8b-standalone-sampled.toml"))
    flags = flags_of(cmd)
    assert cmd[cmd.index("--model-path") + 1] == "/tmp/sgmodels/t8b"
    assert flags["speculative_draft_model_path"] == "/tmp/sgmodels/ds"
    assert (flags["speculative_num_steps"], flags["speculative_eagle_topk"], flags["speculative_num_draft_tokens"]) == (
        "2",
        "2",
        "4",
    )
    # the same command, the simulator in SGLang's place: it starts, answers and stops
    server = cmd.index("--server-command") + 1
    cmd[server] = f"{sys.executable} -m autospec.sim --sim-load-seconds 0 --sim-warmup-seconds 0 --sim-time-scale 0.05"
    cmd[server] += " --sim-profile llama31-8b-eagle3-1x-h100"
    log = tmp_path / "server.log"
    done = subprocess.run([sys.executable, *cmd[1:], "--server-log", str(log)], capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    assert re.search(r"^1\s+2\s+2\s+0\s", done.stdout, re.M), done.stdout  # C=1: 2 requests, 2 ok, 0 errors
    served = log.read_text()
    assert "speculative_num_steps=2, speculative_eagle_topk=2, speculative_num_draft_tokens=4" in served
    assert "attention_backend='triton'" in served and "mem_fraction_static=0.5" in served


def test_pages_over_one_token_warm_up_a_chain_and_ngram_adds_no_draft_settings(tmp_path):
    paged = tmp_path / "paged.toml"
    paged.write_text((SPACES / "real-8b-standalone.toml").read_text().replace("page_size = 1", "page_size = 16"))
    flags = flags_of(warm_up.warm_up_command(str(paged)))
    assert (flags["speculative_eagle_topk"], flags["speculative_num_draft_tokens"]) == ("1", "3")
    ngram = flags_of(warm_up.warm_up_command(str(SPACES / "real-8b-ngram.toml")))
    assert ngram["speculative_algorithm"] == "NGRAM"
    assert not {"speculative_num_steps", "speculative_eagle_topk"} & set(ngram)
