"""Expected tokens per verify step (accept length) for chains, trees and NGRAM (pure numpy,
vectorised over parameter draws).

**Per-position acceptance.** ``a_j`` is the probability that the draft's top candidate at
depth j is the target's token, given that the path up to j - 1 was accepted. Draft heads
are conditioned on their own earlier guesses, so a_j falls with depth; how fast depends on
how the head was trained (an MTP head trained for one step and reused compounds its error
faster than an EAGLE-3 head trained on its own outputs). The data decide, through a logit
quadratic in depth::

    logit a_j = u0 - u1 * (j - 1) - u2 * (j - 1)^2,    u1, u2 >= 0

(u2 = 0: a constant decline per position on the logit scale; u2 > 0: a decline that
accelerates with depth). u1 and u2 are positive (fitted on a log scale): a deeper position
is never easier than the one before it, so a chain's extrapolation to more steps cannot
promise acceptance that rises again. A chain of S steps emits ``E = 1 + sum_{i<=S} prod_{j<=i} a_j``
tokens per verify pass (the bonus token plus every accepted draft token).

**Trees** (topk > 1). Given that the top candidate misses, the rank of the target's token
among the draft's other candidates follows a discrete Lomax (Pareto II) law: it is beyond
rank m with probability ``(1 + (m - 1) / beta)^(-gamma)``. Small beta gives a power law
(heavy tail: wide trees keep paying), large beta a geometric tail (the first few
alternatives catch what can be caught); both are fitted. SGLang (0.5.23
``eagle_utils.organize_draft_results``) expands the topk best paths of each depth by their
topk children, keeps the topk best of those topk^2 as the next depth's paths, and verifies
the ``draft - 1`` best-scored of all ``topk + (steps - 1) * topk^2`` candidates. With a
calibrated draft a node's score is the probability that its whole path is right, so the
expected accept length is 1 + the sum of the ``draft - 1`` largest path probabilities.
A path that left the draft's top-1 line continues less well than the line itself (the
draft's features after its own lower-ranked guess are worse): every depth beyond such a
branch point multiplies the path's probability by lambda in (0, 1], fitted (lambda = 1:
every branch is as good as the main line; lambda -> 0: only the alternatives to the main
line's next token count). With topk 1 all of this is the chain formula.

That static beam is one end of what trees achieve. The other end: at every depth the
tree's candidates hang under whichever prefix turned out right, as if the tree were
re-centred on the accepted path (dynamic trees such as EAGLE-2's confidence-driven
expansion approach it when the draft is confident, since the beams then concentrate
under the likely prefix). Then m_i candidates at depth i catch the right token with
``p_i(m_i) = 1 - (1 - a_i) * P(rank > m_i | top-1 missed)``, the accept length is
``1 + sum_i prod_{j<=i} p_j(m_j)``, and the ``draft - 1`` nodes go, one at a time, to the
depth where they add most (at most topk per depth, depths filled in order). The model's
tree accept length is ``(1 - w) * beam + w * re-centred``, w in [0, 1] fitted: the data say
where between the two a server's trees sit.

**NGRAM**: no draft model; the matcher proposes continuations of the longest suffix that
matched earlier text, up to ``draft - 1`` tokens, as a trie at most
``speculative_ngram_max_bfs_breadth`` wide (sglang 0.5.16-0.5.23: the breadth is stored as
the verify tree's topk; 1 makes the draft a single chain). Modelled as a tree of depth
``draft - 1`` and that width, with the same logit form, but u1 and u2 may take either sign: a
match that has survived i tokens is likely inside a repeated span, so later positions can be
*easier* than earlier ones (the opposite of a draft model). The rank tail then says how often
a sibling continuation seen earlier in the text is the right one where the most frequent one
missed: under top-k sampling it often is (measured on an H200: a breadth-10 trie accepted
more than a chain at every draft length beyond 2, tests/fixtures/real_8b_ngram_grid.json).
Each study fits its own parameters.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from autospec.model.parameters import Group, Layout, Prior
from autospec.model.shape import Shape

__all__ = [
    "AcceptancePrior",
    "position_acceptance",
    "tree_accept",
    "accept_length",
    "accept_lengths",
    "ACCEPTANCE",
    "ACCEPT_PRIORS",
    "NGRAM_PRIORS",
    "TREE_PARAMS",
]

#: The parameters, on the fit's scale: u0 as is, u1 and u2 as logs (as they are for NGRAM),
#: gamma and beta as logs, lambda and w as logits.
ACCEPTANCE = Group(
    "acceptance",
    ("first_logit", "decline", "acceleration", "tail_power", "tail_scale", "branch_quality", "recentred_share"),
)
_LAYOUT = Layout([ACCEPTANCE])
#: The parameters only trees inform (a chain's launches leave them at their priors).
TREE_PARAMS = ("tail_power", "tail_scale", "branch_quality", "recentred_share")
#: The priors of the parameters `AcceptancePrior` does not set: for trees a rank tail between
#: power law and geometric, and branches about as good as the main line.
ACCEPT_PRIORS = (
    Prior("tail_power", 0.0, 0.8, "log gamma, the rank tail's power: gamma about 1 (a factor of 2.2 either way)"),
    Prior("tail_scale", float(np.log(2.0)), 1.5, "log beta, the rank tail's scale: about 2 (power law below, geometric above)"),
    Prior("branch_quality", 0.0, 1.5, "logit lambda, how well a path off the top-1 line continues: about 0.5"),
    Prior("recentred_share", 0.0, 1.5, "logit w, the re-centred tree's share of a tree's accept length: about 0.5"),
)
#: NGRAM's priors of the position form: u1 and u2 on their own scale, either sign.
NGRAM_PRIORS = (
    Prior("first_logit", 1.1, 2.0, "u0, the logit of the first position's acceptance: about 0.75, wide"),
    Prior("decline", 0.3, 0.6, "u1, the logit decline per position: about 0.3, or a rise (negative)"),
    Prior("acceleration", 0.0, 0.2, "u2, the change of the decline with depth: about none"),
)


@dataclass(frozen=True)
class AcceptancePrior:
    """What is known about acceptance before any launch measured it, for draft models:
    top-1 acceptance at depth 1 (``first``, with a standard deviation on the logit scale),
    the decline per position (``decline``, logit per position, with a standard deviation on
    its log) and its acceleration. The default knows nothing about the workload (about 0.75
    at depth 1, wide; a decline of about 0.3 logit per position, a factor of 3 either way; a
    small acceleration, 0.03, a factor of 7 either way); a caller that knows it (temperature
    0 on a repeated prompt accepts nearly everything) says so."""

    first: float = 0.75
    first_sd: float = 2.0
    decline: float = 0.3
    decline_sd: float = 1.1
    acceleration: float = 0.03
    acceleration_sd: float = 2.0

    def priors(self, *, ngram: bool = False) -> tuple[Prior, ...]:
        """Every acceptance parameter's prior; `ngram`: NGRAM's position form (`NGRAM_PRIORS`)."""
        if ngram:
            return NGRAM_PRIORS + ACCEPT_PRIORS
        return (
            Prior("first_logit", float(np.log(self.first / (1.0 - self.first))), self.first_sd, "u0, the logit of a_1"),
            Prior("decline", float(np.log(self.decline)), self.decline_sd, "log u1, the logit decline per position"),
            Prior("acceleration", float(np.log(self.acceleration)), self.acceleration_sd, "log u2, the decline's growth"),
        ) + ACCEPT_PRIORS


#: Where each acceptance parameter sits in a row of acceptance parameters (M, 7), by name.
_AT = {name: _LAYOUT.index(name) for name in ACCEPTANCE.names}
_COLUMN = {name: slice(i, i + 1) for name, i in _AT.items()}


def position_acceptance(params: np.ndarray, depth: int, monotone: bool = True) -> np.ndarray:
    """(M, depth) top-1 acceptance a_j for acceptance parameter rows ``params`` (M, 7); u1 and u2
    as logs (`monotone`, draft models) or as they are (NGRAM)."""
    params = np.atleast_2d(params)
    j = np.arange(depth, dtype=float)  # j - 1
    if monotone:
        u1 = np.exp(np.clip(params[:, _COLUMN["decline"]], -30.0, 5.0))
        u2 = np.exp(np.clip(params[:, _COLUMN["acceleration"]], -30.0, 5.0))
    else:
        u1, u2 = params[:, _COLUMN["decline"]], params[:, _COLUMN["acceleration"]]
    logit = params[:, _COLUMN["first_logit"]] - u1 * j[None, :] - u2 * j[None, :] ** 2
    return 1.0 / (1.0 + np.exp(-np.clip(logit, -30.0, 30.0)))


def _beyond(params: np.ndarray, width: int) -> np.ndarray:
    """(M, width): P(rank > m | top-1 missed) for m = 1..width (1 at m = 1)."""
    gamma = np.exp(np.clip(params[:, _AT["tail_power"]], -30.0, 10.0))[:, None]
    beta = np.exp(np.clip(params[:, _AT["tail_scale"]], -30.0, 30.0))[:, None]
    m = np.arange(1, width + 1, dtype=float)[None, :]
    return (1.0 + (m - 1.0) / beta) ** (-gamma)


def _rank_mass(params: np.ndarray, a: np.ndarray, width: int) -> np.ndarray:
    """(M, depth, width): P(target is the rank-r candidate | path so far right)."""
    beyond = _beyond(params, width)
    share = np.concatenate([np.zeros((params.shape[0], 1)), -np.diff(beyond, axis=1)], axis=1)  # rank r >= 2
    mass = (1.0 - a)[:, :, None] * share[:, None, :]
    mass[:, :, 0] = a
    return mass


def tree_accept(params: np.ndarray, depth: int, width: int, draft: int, monotone: bool = True) -> np.ndarray:
    """(M,) expected tokens per verify pass of a tree of `depth` draft steps, `width`
    (topk) candidates per kept path and `draft` verified tokens (module docstring);
    `monotone`: see `position_acceptance`."""
    params = np.atleast_2d(params)
    m = params.shape[0]
    if depth <= 0 or draft <= 1:
        return np.ones(m)
    a = position_acceptance(params, depth, monotone)  # (M, depth)
    if width <= 1:
        survive = np.cumprod(a, axis=1)
        return 1.0 + survive[:, : min(depth, draft - 1)].sum(axis=1)
    w = 1.0 / (1.0 + np.exp(-np.clip(params[:, _AT["recentred_share"]], -30.0, 30.0)))
    return (1.0 - w) * _beam_accept(params, a, width, draft) + w * _recentred_accept(params, a, width, draft)


def _recentred_accept(params: np.ndarray, a: np.ndarray, width: int, draft: int) -> np.ndarray:
    """The re-centred tree's accept length: per-depth candidate counts m_i, filled greedily."""
    m_draws, depth = a.shape
    beyond = np.concatenate([np.ones((m_draws, 1)), _beyond(params, width)], axis=1)  # index m = 0..width
    p_all = 1.0 - (1.0 - a)[:, :, None] * beyond[:, None, :]  # (M, depth, width + 1)
    p_all[:, :, 0] = 0.0
    counts = np.zeros((m_draws, depth), dtype=int)
    rows = np.arange(m_draws)
    cols = np.arange(depth)
    for _ in range(min(draft - 1, depth * width)):
        p = p_all[rows[:, None], cols[None, :], counts]  # (M, depth)
        nxt = p_all[rows[:, None], cols[None, :], np.minimum(counts + 1, width)]
        c = np.cumprod(p, axis=1)
        tail = np.cumsum(c[:, ::-1], axis=1)[:, ::-1]  # sum_{l >= i} c_l
        before = np.concatenate([np.ones((m_draws, 1)), c[:, :-1]], axis=1)  # prod_{j < i} p_j
        with np.errstate(divide="ignore", invalid="ignore"):
            gain = np.where(p > 0, (nxt - p) * tail / np.where(p > 0, p, 1.0), before * nxt)
        allowed = counts < width
        allowed[:, 1:] &= counts[:, :-1] > 0  # depths are filled in order
        gain = np.where(allowed, gain, -1.0)
        best = np.argmax(gain, axis=1)
        take = gain[rows, best] > 0
        counts[rows[take], best[take]] += 1
    p = p_all[rows[:, None], cols[None, :], counts]
    return 1.0 + np.cumprod(p, axis=1).sum(axis=1)


def _beam_accept(params: np.ndarray, a: np.ndarray, width: int, draft: int) -> np.ndarray:
    """The static beam tree's accept length (SGLang's construction, module docstring)."""
    m, depth = a.shape
    lam = 1.0 / (1.0 + np.exp(-np.clip(params[:, _AT["branch_quality"]], -30.0, 30.0)))  # (M,)
    mass = _rank_mass(params, a, width)
    top1 = np.zeros(width, dtype=bool)
    top1[0] = True
    beam = mass[:, 0, :]  # depth 1: the topk children of the root
    on_line = np.broadcast_to(top1, (m, width))
    scores = [beam]
    rows = np.arange(m)[:, None]
    for j in range(1, depth):
        factor = np.where(on_line, 1.0, lam[:, None])  # continuing a branch off the top-1 line
        children = (beam * factor)[:, :, None] * mass[:, j, None, :]  # (M, parents, ranks)
        child_line = on_line[:, :, None] & top1[None, None, :]
        children = children.reshape(m, width * width)
        child_line = child_line.reshape(m, width * width)
        scores.append(children)
        keep = np.argpartition(children, width * width - width, axis=1)[:, -width:]
        beam = children[rows, keep]
        on_line = child_line[rows, keep]
    every = np.concatenate(scores, axis=1)
    n = min(draft - 1, every.shape[1])
    best = np.partition(every, every.shape[1] - n, axis=1)[:, -n:]
    return 1.0 + best.sum(axis=1)


def accept_length(params: np.ndarray, shape: Shape) -> np.ndarray:
    """(M,) tokens per verify pass of a configuration: 1 without speculation, NGRAM as a
    tree of draft - 1 positions as wide as its trie (either slope), draft models as
    monotone trees."""
    params = np.atleast_2d(params)
    if not shape.speculative:
        return np.ones(params.shape[0])
    if shape.family == "ngram":
        return tree_accept(params, shape.depth, shape.width, shape.draft, monotone=False)
    return tree_accept(params, shape.depth, shape.width, shape.draft)


def accept_lengths(params: np.ndarray, shapes: Sequence[Shape]) -> np.ndarray:
    """(M, len(shapes)): `accept_length` of every shape, each draft shape once; the chains
    of one form (draft model or NGRAM) share their positions' acceptance, computed once to
    the deepest (a chain's accept length only reads its first positions)."""
    params = np.atleast_2d(params)
    out = np.ones((params.shape[0], len(shapes)))
    columns: dict[tuple[str, int, int, int, int], list[int]] = {}
    for j, s in enumerate(shapes):
        if s.speculative and s.depth > 0 and s.draft > 1:
            columns.setdefault(s.key, []).append(j)
    chains: dict[bool, list[Shape]] = {}
    for idx in columns.values():
        s = shapes[idx[0]]
        if s.width <= 1:
            chains.setdefault(s.family != "ngram", []).append(s)
        else:
            out[:, idx] = accept_length(params, s)[:, None]
    for monotone, chain_shapes in chains.items():
        survive = np.cumprod(position_acceptance(params, max(s.depth for s in chain_shapes), monotone), axis=1)
        for s in chain_shapes:
            out[:, columns[s.key]] = (1.0 + survive[:, : min(s.depth, s.draft - 1)].sum(axis=1))[:, None]
    return out
