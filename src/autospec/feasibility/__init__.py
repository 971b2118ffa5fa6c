"""Feasibility: should a candidate configuration be launched at all?

Static rules per SGLang version (``rules``), SGLang's own resolver run on the exact argv
(``preflight``; its probe script is ``resolver_probe``), rules learned from failures
(``learned``) and deduplication (``gate``); every step answers with one
:class:`Verdict`. A preflight is anything that implements :class:`PreflightOracle`
(``oracle``): :class:`Preflight` for SGLang, ``sim_preflight.SimPreflight`` for the
simulator. Nothing here launches or benchmarks a server.
"""

from __future__ import annotations

from autospec.feasibility import rules
from autospec.feasibility.oracle import ArgvBuilder, PreflightOracle
from autospec.feasibility.preflight import HARDWARE_MARKERS, Preflight, PreflightError
from autospec.feasibility.rules import *  # noqa: F403  (the names of rules.__all__, re-exported below)
from autospec.feasibility.verdict import Verdict

__all__ = [
    "Verdict",
    "PreflightOracle",
    "ArgvBuilder",
    "Preflight",
    "PreflightError",
    "HARDWARE_MARKERS",
]
__all__ += rules.__all__
