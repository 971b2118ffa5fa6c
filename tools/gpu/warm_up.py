"""Print the `autospec bench` command that warms a fresh GPU machine for a search space.

    python3 warm_up.py SPACE.toml   ->  one shell-quoted command line on stdout

A machine's first SGLang launch is slow (ready after about 165 s on an H100 where later ones
take 55-90 s: kernels are compiled and cached once per machine). When a device command has
time left for a server start but not for a measured trial, run_study.sh spends it on this: one
server of the space's command and fixed flags, started through autospec's own launcher, asked two short
requests and stopped, so the next command's first trial starts warm. Nothing is recorded.

Speculation runs at 2 steps, top-k 2 and 4 draft tokens (legal in SGLang 0.5.16 where the
space's pages are one token, as top-k > 1 on the triton backend needs; else top-k 1 and steps + 1
draft tokens): a tree drafts through the same kernels a chain does and more.
"""

from __future__ import annotations

import shlex
import sys

from autospec.config import load_search_space


def warm_up_command(space_path: str) -> list[str]:
    """The bench command line for SPACE's fixed server flags and one small speculative setting."""
    space = load_search_space(space_path)
    flags = dict(space.server.flags)
    model_path = str(flags.pop("model_path"))
    if flags.get("speculative_algorithm") not in (None, "NGRAM"):
        tree = str(flags.get("page_size", 1)) == "1"
        flags.setdefault("speculative_num_steps", 2)
        flags.setdefault("speculative_eagle_topk", 2 if tree else 1)
        flags.setdefault("speculative_num_draft_tokens", 4 if tree else 3)
    cmd = ["python3", "-m", "autospec.cli.main", "bench", "--server-command", shlex.join(space.server.command)]
    cmd += ["--model-path", model_path, "--concurrency", "1", "--num-requests", "2", "--output-len", "32"]
    cmd += ["--ready-timeout", str(space.server.ready_timeout_s), "--quiet"]
    for name, value in flags.items():
        cmd += ["--flag", f"{name}={value}"]
    return cmd


if __name__ == "__main__":
    if len(sys.argv) != 2:
        sys.exit("usage: python3 warm_up.py SPACE.toml")
    print(shlex.join(warm_up_command(sys.argv[1])))
