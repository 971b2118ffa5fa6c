"""Bayesian linear regression with Gaussian priors per coefficient (pure numpy).

``y = X b + e``, ``e_i ~ N(0, (s * sd_i)^2)``, ``b_j ~ N(m_j, p_j^2)``. The posterior of b is
Gaussian; ``s`` (how much worse than the stated noise the fit is) is estimated from the
residuals and never taken below 1, so a model that does not fit says so in its spread.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

__all__ = ["LinearFit", "fit_linear"]


@dataclass(frozen=True)
class LinearFit:
    mean: np.ndarray  # (p,)
    cov: np.ndarray  # (p, p)
    scale: float  # the residual scale s (>= 1)
    n: int  # observations used

    def predict(self, X: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """Mean and standard deviation of ``X b`` (the noiseless value) for rows of X."""
        X = np.atleast_2d(np.asarray(X, dtype=float))
        mean = X @ self.mean
        var = np.einsum("ij,jk,ik->i", X, self.cov, X)
        return mean, np.sqrt(np.maximum(var, 0.0))

    def draws(self, rng: np.random.Generator, m: int) -> np.ndarray:
        """(m, p) coefficient draws from the posterior."""
        return rng.multivariate_normal(self.mean, self.cov, size=m, method="eigh")


def fit_linear(
    X: np.ndarray, y: np.ndarray, sd: np.ndarray, prior_mean: np.ndarray, prior_sd: np.ndarray, *, prior_dof: float = 2.0
) -> LinearFit:
    """The posterior of a linear model (module docstring). `sd`: per-row noise standard
    deviations; `prior_dof`: pseudo-observations behind the prior that s = 1."""
    X = np.atleast_2d(np.asarray(X, dtype=float))
    y = np.asarray(y, dtype=float)
    sd = np.asarray(sd, dtype=float)
    m0 = np.asarray(prior_mean, dtype=float)
    p0 = np.asarray(prior_sd, dtype=float)
    Xw = X / sd[:, None]
    yw = y / sd
    precision = Xw.T @ Xw + np.diag(1.0 / p0**2)
    rhs = Xw.T @ yw + m0 / p0**2
    cov = np.linalg.inv(precision)
    mean = cov @ rhs
    n = len(y)
    if n:
        z = yw - Xw @ mean
        s2 = (prior_dof + float(z @ z)) / (prior_dof + n)
    else:
        s2 = 1.0
    scale = float(np.sqrt(max(s2, 1.0)))
    return LinearFit(mean, cov * scale**2, scale, n)
