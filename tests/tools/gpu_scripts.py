"""Load a script of tools/gpu/ as a module, as the GPU machine runs it (its folder on sys.path)."""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path
from types import ModuleType

GPU_TOOLS = Path(__file__).resolve().parents[2] / "tools" / "gpu"


def load(name: str) -> ModuleType:
    """tools/gpu/`name`.py, registered as module `name` (its dataclasses and its imports of
    the scripts beside it resolve)."""
    spec = importlib.util.spec_from_file_location(name, GPU_TOOLS / f"{name}.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    sys.path.insert(0, str(GPU_TOOLS))
    try:
        spec.loader.exec_module(module)
    finally:
        sys.path.remove(str(GPU_TOOLS))
    return module
