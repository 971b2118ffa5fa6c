"""The exception tree of autospec.errors: every exception class of the package is in it,
and its docstring draws each one with the module that defines it."""

from __future__ import annotations

import importlib
import inspect
import pkgutil

import pytest

import autospec
from autospec import errors
from autospec.errors import AutospecError, BenchError, RuntimeFailure

# autospec.sim is a separate server process that imports nothing from autospec.
OUTSIDE = ("autospec.sim",)


def package_exceptions() -> dict[str, type[BaseException]]:
    """Public exception classes defined in autospec's modules (outside the simulator)."""
    found: dict[str, type[BaseException]] = {}
    for module_info in pkgutil.walk_packages(autospec.__path__, "autospec."):
        if module_info.name.startswith(OUTSIDE):
            continue
        module = importlib.import_module(module_info.name)
        for name, cls in inspect.getmembers(module, inspect.isclass):
            if issubclass(cls, BaseException) and cls.__module__ == module.__name__ and not name.startswith("_"):
                found[name] = cls
    return found


EXCEPTIONS = package_exceptions()


def drawn_lines(name: str) -> list[str]:
    return [line for line in (errors.__doc__ or "").splitlines() if f" {name} " in f" {line} "]


@pytest.mark.parametrize("name", sorted(EXCEPTIONS))
def test_every_exception_is_in_the_tree_and_drawn_with_its_module(name):
    cls = EXCEPTIONS[name]
    assert issubclass(cls, AutospecError), f"{cls.__module__}.{name} is outside the tree"
    assert drawn_lines(name), f"{name} is not drawn in the autospec.errors docstring"
    # The LaunchError kinds are drawn under LaunchError, whose line names their module.
    owner = "LaunchError" if name != "LaunchError" and "LaunchError" in [b.__name__ for b in cls.__mro__] else name
    if cls.__module__ != "autospec.errors":
        package = cls.__module__.rsplit(".", 1)[0]
        assert any(f"({cls.__module__})" in line or f"({package})" in line for line in drawn_lines(owner))


def test_the_tree_holds_what_used_to_be_outside_it():
    from autospec.bench.protocol import StreamError
    from autospec.feasibility import PreflightError
    from autospec.launcher import ProbeUnavailable

    assert issubclass(ProbeUnavailable, RuntimeFailure) and issubclass(PreflightError, RuntimeFailure)
    assert issubclass(StreamError, BenchError)
    assert {"ProbeUnavailable", "StreamError", "PreflightError", "StudyInterrupted"} <= set(EXCEPTIONS)
