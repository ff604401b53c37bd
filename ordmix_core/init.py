"""Random starts of a restart, per block of entities, so any partition of the data agrees.

Restart 0 starts from the per-item means; restart r > 0 adds noise keyed on the instance
and annotator IDs (``rand.py``) and on the restart's key, drawn from the fit's Generator.
The Dask engine calls the same functions on each partition's instances.
"""

from __future__ import annotations

from typing import NamedTuple

import numpy as np

from .rand import keyed_normal, keyed_uniform

#: start of eps in every warm-started mixture (model-notes.md: eps0 = 0.99)
EPS0 = 0.99


def init_instances(
    sum_m: np.ndarray,
    n_m: np.ndarray,
    hashes: np.ndarray,
    key: int,
    restart: int,
    mu: float,
    lam: float,
    thresholds: np.ndarray,
    step: float,
) -> tuple[np.ndarray, np.ndarray]:
    """(mu_m, lam_m) of q(z), each (M,): shrunk per-item means, plus noise for restart > 0.

    ``sum_m``: sum of rating values per instance; ``n_m``: ratings per instance.
    """
    tau0 = 1.0 / step**2
    mu_m = (mu * lam + sum_m) / (lam + n_m)
    if restart > 0:
        noise = 0.5 * step * keyed_normal(hashes, key, stream=0)
        mu_m = np.clip(mu_m + noise, thresholds[0], thresholds[-1])
    return mu_m, lam + n_m * tau0


def init_annotators(
    n_n: np.ndarray,
    hashes: np.ndarray,
    key: int,
    restart: int,
    step: float,
    spam: bool,
    random_eps: bool,
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(tau_shape, tau_rate, eps), each (N,): E[tau] = 1/step^2, times noise for restart > 0.

    ``random_eps``: eps ~ U(0.5, 0.99) (the paper-style random restart) instead of EPS0.
    """
    tau_e = np.full(n_n.shape, 1.0 / step**2)
    eps = np.full(n_n.shape, EPS0 if spam else 1.0)
    if restart > 0:
        tau_e = tau_e * np.exp(keyed_normal(hashes, key, stream=1))
        if spam and random_eps:
            eps = 0.5 + 0.49 * keyed_uniform(hashes, key, stream=2)
    shape = 1.0 + 0.5 * n_n
    return shape, shape / tau_e, eps


def init_categories(n_c: np.ndarray, phi: float, eta: float) -> tuple[np.ndarray, np.ndarray]:
    """(delta_shape, delta_rate), each (C,), with E[delta] at the prior mean phi/eta."""
    shape = phi + 0.5 * n_c
    return shape, shape * eta / phi


class Globals(NamedTuple):
    """A restart's start of the factors that are not per instance (names as ``problem.State``'s):
    q(tau) and eps (N,), q(delta) (C,) and the expertise prior Gamma(alpha, beta)."""

    tau_shape: np.ndarray
    tau_rate: np.ndarray
    eps: np.ndarray
    delta_shape: np.ndarray
    delta_rate: np.ndarray
    alpha: float
    beta: float


def init_globals(
    n_n: np.ndarray,
    ann_hashes: np.ndarray,
    n_c: np.ndarray,
    key: int,
    restart: int,
    step: float,
    spam: bool,
    random_eps: bool,
    phi: float,
    eta: float,
) -> Globals:
    """``init_annotators`` and ``init_categories`` (``n_c``: ratings per category, (C,)), and
    the prior of tau at ``alpha = 1, beta = step^2`` (both engines start every restart so)."""
    ann = init_annotators(n_n, ann_hashes, key, restart, step, spam, random_eps)
    return Globals(*ann, *init_categories(n_c, phi, eta), 1.0, step**2)
