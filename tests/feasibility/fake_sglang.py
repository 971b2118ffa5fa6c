"""A tiny stand-in `sglang` package, written to a folder, for preflight tests without sglang.

`flavour="0.5.23"` resolves in `resolve_once()` and answers `resolved_dict()`;
`flavour="0.5.16"` resolves in `__post_init__` and has neither (the probe falls back to
`dataclasses.asdict`). Special algorithm names drive the probe's error paths:
BAD (ValueError), HOPPER (a hardware message), CRASH (the process dies), SLEEP (hangs),
LEAK (fails when a previous resolution leaked an environment variable), NOISE (prints).
"""

from __future__ import annotations

import sys
from pathlib import Path

SERVER_ARGS = """
import argparse, dataclasses, os, sys, time
from typing import Optional

FLAVOUR = {flavour!r}
print("fake sglang imported")  # noise on stdout, outside the probe's answer lines

_INTS = {{"speculative_num_steps", "speculative_eagle_topk", "speculative_num_draft_tokens",
          "page_size", "pp_size", "tp_size", "random_seed"}}


@dataclasses.dataclass
class ServerArgs:
    model_path: Optional[str] = None
    speculative_algorithm: Optional[str] = None
    speculative_num_steps: Optional[int] = None
    speculative_eagle_topk: Optional[int] = None
    speculative_num_draft_tokens: Optional[int] = None
    page_size: Optional[int] = None
    attention_backend: Optional[str] = None
    pp_size: int = 1
    tp_size: int = 1
    random_seed: Optional[int] = None
    device: Optional[str] = None

    def __post_init__(self):
        if FLAVOUR != "0.5.23":  # older SGLang resolves while constructing
            self._resolve()

    @staticmethod
    def add_cli_args(parser):
        for f in dataclasses.fields(ServerArgs):
            parser.add_argument("--" + f.name.replace("_", "-"),
                                type=int if f.name in _INTS else str, default=f.default)

    @classmethod
    def from_cli_args(cls, ns):
        return cls(**vars(ns))

    def _resolve(self):
        algo = self.speculative_algorithm
        if algo == "NEXTN":
            self.speculative_algorithm = "EAGLE"
        if self.page_size is None:
            self.page_size = 1
        if self.random_seed is None:
            self.random_seed = 1234
        if algo == "BAD":
            raise ValueError("bad algorithm")
        if algo == "HOPPER":
            raise ValueError("This backend requires Hopper (SM90) GPUs.")
        if algo == "CRASH":
            os._exit(3)
        if algo == "SLEEP":
            time.sleep(60)
        if algo == "NOISE":
            print("resolution chatter on stdout")
        if algo == "LEAK":
            if os.environ.get("FAKE_SGLANG_LEAK"):
                raise RuntimeError("environment leaked from an earlier resolution")
            os.environ["FAKE_SGLANG_LEAK"] = "1"
        if self.speculative_eagle_topk == 1 and self.speculative_num_steps is not None:
            self.speculative_num_draft_tokens = self.speculative_num_steps + 1

    def check_server_args(self):
        if self.pp_size > 1:
            assert self.speculative_algorithm is None, "pp and speculation do not mix"


if FLAVOUR == "0.5.23":
    def _resolve_once(self):
        self._resolve()
    ServerArgs.resolve_once = _resolve_once
    ServerArgs.resolved_dict = lambda self: dataclasses.asdict(self)


def prepare_server_args(argv):
    parser = argparse.ArgumentParser()
    ServerArgs.add_cli_args(parser)
    return ServerArgs.from_cli_args(parser.parse_args(argv))
"""


def write_fake_sglang(root: Path, *, flavour: str = "0.5.23", version: str | None = "0.5.99") -> Path:
    """Write the package under ``root``; with ``version``, also a dist-info for metadata."""
    srt = root / "sglang" / "srt"
    srt.mkdir(parents=True, exist_ok=True)
    (root / "sglang" / "__init__.py").write_text(f"__version__ = {flavour!r}\n")
    (srt / "__init__.py").write_text("")
    (srt / "server_args.py").write_text(SERVER_ARGS.format(flavour=flavour))
    if version is not None:
        info = root / f"sglang-{version}.dist-info"
        info.mkdir(exist_ok=True)
        (info / "METADATA").write_text(f"Metadata-Version: 2.1\nName: sglang\nVersion: {version}\n")
    return root


def python_with(root: Path) -> tuple[str, ...]:
    """A command prefix that runs this interpreter with the fake package importable."""
    return ("env", f"PYTHONPATH={root}", sys.executable)
