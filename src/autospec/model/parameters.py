"""Named parameters: where each sits in an optimiser's flat vector, and its prior (pure numpy).

A fit hands scipy one flat vector; everything else in the model addresses a parameter by its
name. `Layout` is the one place that maps names to positions: groups of named parameters,
laid out in order, each group seen by the fit on one scale (``log`` for positive rates,
``logit`` for shares, ``as is`` otherwise). `Prior` is a parameter's Gaussian prior on that
scale, with what it means; a table of them is the model's stated belief before any launch
(docs/model.md, "Priors").
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass

import numpy as np

__all__ = ["Prior", "Group", "Layout"]


@dataclass(frozen=True)
class Prior:
    """A Gaussian prior on the fit's scale: `mean` and `sd` there; `meaning` says what the
    parameter is and what the mean stands for on the natural scale."""

    name: str
    mean: float
    sd: float
    meaning: str


@dataclass(frozen=True)
class Group:
    """Parameters that share the scale the fit sees them on (``log``, ``logit`` or ``as is``)."""

    name: str
    names: tuple[str, ...]
    scale: str = "as is"

    def __post_init__(self) -> None:
        if self.scale not in ("log", "logit", "as is"):
            raise ValueError(f"group {self.name!r}: scale {self.scale!r} is not log, logit or 'as is'")

    def natural(self, block: np.ndarray) -> np.ndarray:
        """The group's columns (m, len(names)) from the fit's scale to the natural one."""
        if self.scale == "log":
            return np.exp(block)
        if self.scale == "logit":
            return 1.0 / (1.0 + np.exp(-block))
        return block


class Layout:
    """Groups of named parameters laid out, in order, in one flat vector."""

    def __init__(self, groups: Sequence[Group]) -> None:
        self.groups = tuple(groups)
        self.names = tuple(n for g in self.groups for n in g.names)
        if len(set(self.names)) != len(self.names):
            raise ValueError(f"parameter names repeat in {self.names}")
        self._index = {n: i for i, n in enumerate(self.names)}
        self._groups = {g.name: g for g in self.groups}
        self._blocks: dict[str, slice] = {}
        start = 0
        for g in self.groups:
            self._blocks[g.name] = slice(start, start + len(g.names))
            start += len(g.names)

    def __len__(self) -> int:
        return len(self.names)

    def index(self, name: str) -> int:
        return self._index[name]

    def block(self, group: str) -> slice:
        """Where a group's parameters sit."""
        return self._blocks[group]

    def mask(self, names: Iterable[str]) -> np.ndarray:
        """(p,) True at the named parameters."""
        out = np.zeros(len(self), dtype=bool)
        out[[self._index[n] for n in names]] = True
        return out

    def vector(self, values: Mapping[str, float]) -> np.ndarray:
        """(p,) from a value per name (every name once)."""
        missing = set(self.names) - set(values)
        if missing:
            raise ValueError(f"no value for {sorted(missing)}")
        return np.array([values[n] for n in self.names], dtype=float)

    def columns(self, theta: np.ndarray, groups: Sequence[str]) -> list[np.ndarray]:
        """The named groups' parameters on the natural scale, in order, each a column (m, 1),
        from parameter rows `theta` (m, p) or (p,)."""
        theta = np.atleast_2d(theta)
        out: list[np.ndarray] = []
        for name in groups:
            block = self._groups[name].natural(theta[:, self._blocks[name]])
            out += [block[:, i : i + 1] for i in range(block.shape[1])]
        return out
