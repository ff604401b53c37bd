"""GLAD (Whitehill et al. 2009), multi-class: annotator ability times item easiness."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
from scipy.special import expit

from ...data.crowd import CrowdData
from ...data.scale import Scale
from ...errors import InputError
from ...numerics import libm
from ..base import CrowdEstimator
from ._common import normalize_log, posterior_frame


def log_sigmoids(s: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """``log sigmoid(s)`` and ``log sigmoid(-s)`` for (L,) ``s``, stable for any sign."""
    t = libm.log1p(libm.exp(-np.abs(s)))
    return -(np.maximum(-s, 0.0) + t), -(np.maximum(s, 0.0) + t)


def glad_e_step(
    alpha: np.ndarray, log_beta: np.ndarray, log_prior: np.ndarray, data: CrowdData
) -> tuple[np.ndarray, float]:
    """Class posteriors (M, K) and the log-likelihood of the ratings.

    ``alpha`` (N,), ``log_beta`` (M,), ``log_prior`` (K,). A wrong label is uniform over the
    other K-1 levels.
    """
    k, m = data.scale.k, data.n_instances
    lc, lw = log_sigmoids(alpha[data.ann] * libm.exp(log_beta[data.inst]))
    lw = lw - libm.log(k - 1)
    base = np.bincount(data.inst, weights=lw, minlength=m)  # (M,) all ratings wrong
    hit = np.bincount(data.inst * k + data.level, weights=lc - lw, minlength=m * k)
    return normalize_log(base[:, None] + hit.reshape(m, k) + log_prior[None, :])


def _newton_block(
    x: np.ndarray,
    prior: float,
    group: np.ndarray,
    coef: np.ndarray,
    p: np.ndarray,
    exp_link: bool,
    max_halvings: int = 20,
) -> np.ndarray:
    """One safeguarded Newton (Fisher scoring) step on every coordinate of ``x`` (G,) at once.

    Per rating (L,): ``s = coef * x[group]`` (``coef * exp(x[group])`` if ``exp_link``). The
    objective separates over groups: ``Q_g(x_g) = sum_{l in g} [p_l log sig(s_l) + (1 - p_l)
    log sig(-s_l)] - (x_g - prior)^2 / 2``. Each coordinate's step is halved until its ``Q_g``
    does not decrease (else the coordinate stays), so the step never lowers the objective.
    """
    g = x.size

    def q_of(xx: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        s = coef * (libm.exp(xx) if exp_link else xx)[group]
        lc, lw = log_sigmoids(s)
        q = np.bincount(group, weights=p * lc + (1.0 - p) * lw, minlength=g)
        return q - 0.5 * (xx - prior) ** 2, s

    q0, s = q_of(x)
    sig = expit(s)
    d = s if exp_link else coef  # ds/dx, (L,)
    grad = np.bincount(group, weights=(p - sig) * d, minlength=g) - (x - prior)
    info = np.bincount(group, weights=sig * (1.0 - sig) * d * d, minlength=g) + 1.0
    step = grad / info
    todo = np.ones(g, dtype=bool)
    out = x.copy()
    for _ in range(max_halvings):
        trial = np.where(todo, x + step, out)
        q1, _ = q_of(trial)
        ok = todo & (q1 >= q0 - 1e-12 * np.abs(q0))
        out[ok] = trial[ok]
        todo &= ~ok
        if not todo.any():
            break
        step *= 0.5
    return out


class GLAD(CrowdEstimator):
    """Multi-class GLAD: ``p(label = true) = sigmoid(alpha_n * beta_m)``, else uniform.

    ``beta_m = exp(log_beta_m) > 0`` is the item's inverse difficulty. Priors (as Whitehill et
    al. and crowd-kit): ``alpha_n ~ N(prior_alpha, 1)``, ``log beta_m ~ N(prior_log_beta, 1)``;
    uniform, fixed class priors. EM: the E-step gives class posteriors, the M-step maximises the
    expected complete log-likelihood plus log-priors over (alpha, log beta) by safeguarded
    block Newton (Fisher scoring) sweeps (at most ``m_step_max_iter``). Starts at the prior
    means. Stops when log-likelihood + log-priors change by less than ``tol`` per rating.
    Estimate: posterior expected level value.

    Learned: ``posterior_`` (M, K) DataFrame, ``map_level_`` (M,), ``alpha_`` (N,),
    ``beta_`` (M,), ``log_likelihood_``, ``n_iter_``.
    """

    name = "glad"

    def __init__(
        self,
        scale: Scale | Sequence[float] | str | None = None,
        max_iter: int = 100,
        tol: float = 1e-5,
        prior_alpha: float = 1.0,
        prior_log_beta: float = 1.0,
        m_step_max_iter: int = 2,
    ) -> None:
        self.scale = scale
        self.max_iter = max_iter
        self.tol = tol
        self.prior_alpha = prior_alpha
        self.prior_log_beta = prior_log_beta
        self.m_step_max_iter = m_step_max_iter

    def _fit(self, data: CrowdData) -> np.ndarray:
        """Returns (M,) posterior expected values."""
        if self.max_iter < 1 or self.tol < 0 or self.m_step_max_iter < 1:
            raise InputError("GLAD needs max_iter >= 1, tol >= 0 and m_step_max_iter >= 1")
        k, m, n = data.scale.k, data.n_instances, data.n_annotators
        alpha = np.full(n, float(self.prior_alpha))
        log_beta = np.full(m, float(self.prior_log_beta))
        self.n_iter_, ll = 0, 0.0
        if k == 1:  # nothing to infer: every item is on the only level
            post = np.ones((m, 1))
        else:
            log_prior = np.full(k, -libm.log(k))
            post, ll = glad_e_step(alpha, log_beta, log_prior, data)
            obj = ll - self._penalty(alpha, log_beta)
            for it in range(1, self.max_iter + 1):
                alpha, log_beta = self._m_step(alpha, log_beta, post, data)
                post, ll = glad_e_step(alpha, log_beta, log_prior, data)
                new_obj = ll - self._penalty(alpha, log_beta)
                gain, obj, self.n_iter_ = (new_obj - obj) / data.n_ratings, new_obj, it
                if abs(gain) < self.tol:
                    break
        self.alpha_, self.beta_ = alpha, libm.exp(log_beta)
        self.log_likelihood_ = ll
        self.map_level_ = np.argmax(post, axis=1)
        self.posterior_ = posterior_frame(post, data)
        return post @ data.scale.values

    def _penalty(self, alpha: np.ndarray, log_beta: np.ndarray) -> float:
        """Minus the log-priors of ``alpha`` (N,) and ``log_beta`` (M,), up to a constant."""
        return 0.5 * float(
            np.sum((alpha - self.prior_alpha) ** 2) + np.sum((log_beta - self.prior_log_beta) ** 2)
        )

    def _m_step(
        self, alpha: np.ndarray, log_beta: np.ndarray, post: np.ndarray, data: CrowdData
    ) -> tuple[np.ndarray, np.ndarray]:
        """Raise Q + log-priors over ``alpha`` (N,) and ``log_beta`` (M,).

        ``m_step_max_iter`` sweeps of block Newton steps (annotators, then items); each sweep
        never lowers the objective, so EM stays monotone in the MAP objective.
        """
        p = post[data.inst, data.level]  # (L,) posterior that the label is correct
        ann, inst = data.ann, data.inst
        for _ in range(self.m_step_max_iter):
            b = libm.exp(log_beta)[inst]  # (L,)
            new_alpha = _newton_block(alpha, self.prior_alpha, ann, b, p, exp_link=False)
            a = new_alpha[ann]  # (L,)
            new_lb = _newton_block(log_beta, self.prior_log_beta, inst, a, p, exp_link=True)
            moved = max(np.max(np.abs(new_alpha - alpha)), np.max(np.abs(new_lb - log_beta)))
            alpha, log_beta = new_alpha, new_lb
            if moved < 1e-6:
                break
        return alpha, log_beta
