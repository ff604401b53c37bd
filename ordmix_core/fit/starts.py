"""Random starts of a restart, per block of entities, so any partition of the data agrees.

Restart 0 starts from the per-item means; restart r > 0 adds noise keyed on the instance
and annotator IDs (``numerics/keyed_random.py``) and on the restart's key, drawn from the fit's
Generator. With the shared warm-up a restart adds the same noise to the warm-up's fit instead
(``branch_instances``, ``branch_annotators``).
The Dask engine calls the same functions on each partition's instances.
"""

from __future__ import annotations

from typing import NamedTuple

import numpy as np

from ..numerics import libm
from ..numerics.keyed_random import keyed_normal, keyed_uniform

#: start of eps in every warm-started mixture (docs/model.md: eps0 = 0.99)
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
        tau_e = tau_e * libm.exp(keyed_normal(hashes, key, stream=1))
        if spam and random_eps:
            eps = 0.5 + 0.49 * keyed_uniform(hashes, key, stream=2)
    shape = 1.0 + 0.5 * n_n
    return shape, shape / tau_e, eps


def branch_instances(
    mu_m: np.ndarray, hashes: np.ndarray, key: int, thresholds: np.ndarray, step: float
) -> np.ndarray:
    """(M,) q(z)'s means of a restart that branches from the shared warm-up: the
    warm-up's ``mu_m`` plus the restart's own noise, as ``init_instances`` adds to the data
    means (same stream and scale), clipped to the outer thresholds."""
    noise = 0.5 * step * keyed_normal(hashes, key, stream=0)
    return np.clip(mu_m + noise, thresholds[0], thresholds[-1])


def branch_annotators(tau_rate: np.ndarray, hashes: np.ndarray, key: int) -> np.ndarray:
    """(N,) q(tau)'s rates of a branching restart: E[tau] of the warm-up times the restart's
    own log-normal factor, as ``init_annotators`` draws it."""
    return tau_rate * libm.exp(-keyed_normal(hashes, key, stream=1))


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
    bias_mean: np.ndarray | None = None
    bias_prec: np.ndarray | None = None
    lam_b: float = 0.0
    pi: np.ndarray | None = None
    dir_a: np.ndarray | None = None
    kappa: float = 0.0


#: start of the bias prior's precision: bias sd a quarter of a step (the first sweep replaces it)
BIAS_SD0 = 0.25
#: start of the bias posterior's precision: the bias starts at 0, nearly certain
BIAS_PREC0 = 1e6
#: start of the per-annotator Dirichlet's concentration kappa
KAPPA0 = 50.0


def init_extensions(
    n_annotators: int, step: float, bias: bool, spam_dist: str, pi: np.ndarray
) -> dict:
    """Starts of the extensions' factors: q(b) at 0 (precision ``BIAS_PREC0``) and
    lambda_b = 1/(``BIAS_SD0`` step)^2 with the bias; the learned spam distribution at the
    fixed one ``pi`` (K,), and q(pi_n) = Dirichlet(``KAPPA0`` pi) per annotator."""
    out: dict = {}
    if bias:
        out.update(
            bias_mean=np.zeros(n_annotators),
            bias_prec=np.full(n_annotators, BIAS_PREC0),
            lam_b=1.0 / (BIAS_SD0 * step) ** 2,
        )
    if spam_dist != "uniform":
        out.update(pi=np.asarray(pi, dtype=float).copy(), kappa=KAPPA0)
        if spam_dist == "annotator":
            out["dir_a"] = np.tile(KAPPA0 * out["pi"], (n_annotators, 1))
    return out


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
    bias: bool = False,
    spam_dist: str = "uniform",
    pi: np.ndarray | None = None,
) -> Globals:
    """``init_annotators`` and ``init_categories`` (``n_c``: ratings per category, (C,)), the
    prior of tau at ``alpha = 1, beta = step^2`` (both engines start every restart so) and
    ``init_extensions``."""
    ann = init_annotators(n_n, ann_hashes, key, restart, step, spam, random_eps)
    ext = (
        init_extensions(n_n.size, step, bias, spam_dist, pi)
        if (bias or spam_dist != "uniform")
        else {}
    )
    return Globals(*ann, *init_categories(n_c, phi, eta), 1.0, step**2, **ext)
