"""What the feasibility gate needs from a preflight: the `PreflightOracle` protocol.

Two implementations: :class:`~autospec.feasibility.preflight.Preflight` (SGLang's own
resolver, run with the server's Python) and
:class:`~autospec.feasibility.sim_preflight.SimPreflight` (the simulator's resolver).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import Any, Protocol, runtime_checkable

from autospec.feasibility.verdict import Verdict

__all__ = ["PreflightOracle", "ArgvBuilder"]

#: Server flags (``ServerArgs`` field names) -> the flag words of the server argv, without
#: the command and without ``--host``/``--port`` (e.g. ``autospec.launcher.flag_words``).
ArgvBuilder = Callable[[Mapping[str, Any]], list[str]]


@runtime_checkable
class PreflightOracle(Protocol):
    """The server's own argument resolver, asked about exact argvs before a launch.

    Contract:

    - ``argv`` is the server's flag words only (``--kebab-case VALUE ...``, as an
      :data:`ArgvBuilder` makes them); no command. ``--host``/``--port`` do not change
      the answer.
    - :meth:`check` and :meth:`check_many` answer with verdicts *about the configuration*,
      ``source="preflight"``: ``"ok"`` with the resolved flag values, or ``"rejected"``
      with the resolver's own message as the reason. ``check_many`` answers in the order
      of ``argvs``, one verdict each; answers may be cached, so asking again is cheap.
    - Raising :class:`~autospec.feasibility.preflight.PreflightError` means the resolver
      itself could not be run (interpreter missing, not importable, timeout, crash). It
      is never a verdict: callers fall back to the static rules.
    - :meth:`available` says once, without raising, whether checks can run:
      ``(True, "")`` or ``(False, one-line reason)``. :meth:`sglang_version` is the
      SGLang version the resolver speaks for, or None when it is not known.
    - :attr:`batch_saves_time` is True when ``check_many`` of N argvs costs much less
      than N calls of ``check`` (one interpreter start for all of them). Only then is
      resolving a whole space up front worth it (``FeasibilityGate.prefetch``).
    """

    batch_saves_time: bool

    def available(self) -> tuple[bool, str]:
        """``(True, "")`` when checks can run, else ``(False, one-line reason)``."""
        ...

    def sglang_version(self) -> str | None:
        """The SGLang version whose resolver answers, or None when unknown."""
        ...

    def check(self, argv: Sequence[str]) -> Verdict:
        """The verdict on one server argv (flag words only)."""
        ...

    def check_many(self, argvs: Sequence[Sequence[str]]) -> list[Verdict]:
        """Verdicts on several argvs, in their order (one resolver start where possible)."""
        ...
