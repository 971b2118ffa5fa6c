"""Maximum a posteriori under Gaussian priors, with the Laplace approximation (scipy)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np
from scipy.optimize import least_squares

__all__ = ["laplace_fit"]


def laplace_fit(
    theta0: np.ndarray,
    free: np.ndarray,
    prior_mean: np.ndarray,
    prior_sd: np.ndarray,
    residuals: Callable[[np.ndarray], np.ndarray],
    *,
    batch_residuals: Callable[[np.ndarray], np.ndarray] | None = None,
) -> tuple[np.ndarray, np.ndarray]:
    """MAP of the `free` parameters of `theta0` (the others held) under the data's
    `residuals` (parameters (p,) -> (k,), each scaled by its noise) and the Gaussian prior;
    returns (theta, Laplace covariance of the free parameters). `batch_residuals`
    (parameter rows (m, p) -> (m, k)), when given, computes the Jacobian's finite
    differences in one vectorised pass; otherwise least_squares takes them one by one."""

    def full(x: np.ndarray) -> np.ndarray:
        theta = theta0.copy()
        theta[free] = x
        return theta

    def fun(x: np.ndarray) -> np.ndarray:
        return np.concatenate([residuals(full(x)), (x - prior_mean[free]) / prior_sd[free]])

    jac: Any = "2-point"
    if batch_residuals is not None:
        batch = batch_residuals

        def jac(x: np.ndarray) -> np.ndarray:  # all finite differences in one vectorised pass
            h = 1e-6 * np.maximum(1.0, np.abs(x))
            rows = np.repeat(full(x)[None, :], len(x) + 1, axis=0)
            idx = np.flatnonzero(free)
            rows[np.arange(1, len(x) + 1), idx] += h
            r = batch(rows)
            d = (r[1:] - r[0]) / h[:, None]
            return np.concatenate([d.T, np.diag(1.0 / prior_sd[free])], axis=0)

    res = least_squares(fun, theta0[free].copy(), jac=jac, method="trf", x_scale=prior_sd[free], max_nfev=200)
    theta = full(res.x)
    data = residuals(theta)
    s2 = (2.0 + float(data @ data)) / (2.0 + len(data))
    # A fit worse than the stated noise weakens what the data say (their precision over
    # s2), never the prior's: the covariance stays within the prior's.
    J = np.asarray(res.jac)
    J_data, J_prior = J[: len(data)], J[len(data) :]
    precision = J_data.T @ J_data / max(s2, 1.0) + J_prior.T @ J_prior
    try:
        cov_free = np.linalg.inv(precision)
    except np.linalg.LinAlgError:
        cov_free = np.linalg.pinv(precision)
    return theta, cov_free
