"""What gold items teach about every other item's level: a map from the fit's evidence about an
item to its gold level, learned on the gold items and applied to the rest.

The evidence about an item (``evidence``, (M, F)): the log level posterior of the confusion
model with each rating counting for its omega (``base``), the same with every rating counting
1, the continuous fit's estimate (standardised) and a constant. The map (``fit``) gives level
probabilities ``softmax(base + X W)`` with ``W`` (F, K) fitted by ridge-penalised maximum
likelihood on the gold items, whose evidence must come from their ratings alone (gold not
imposed). The ridge pulls ``W`` to 0, which is the model's own posterior. So gold corrects
where the crowd's levels sit against the gold's, how far each kind of evidence is to be
trusted, and how the continuous fit's reading of an item (its raters' expertise, bias and
spam) should move the label.

The map has ``F * K`` weights: it needs ``GOLD_PER_WEIGHT`` gold items per weight and
``MIN_PER_LEVEL`` at every level (``uses_map``). With fewer, only a temperature is learned: it
calibrates the probabilities and keeps every label. Measured (``docs/results.md``): on TREC
RF10, Web and simulated crowds, with 1.7-2.2 gold items per weight (100-132 items, 5 levels)
the map was no better than the temperature on average and raised the label error by up to
0.06 on one crowd; from 4.4 per weight (TREC's 5% and 10%, Web's 10%, 400 items of a
simulated crowd) it was as good or better every time.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from ..numerics import libm
from ..numerics.fixed_order import log_softmax

#: the ridge on the map's weights (in log-likelihood units): chosen on TREC RF10 and Web with
#: 5% and 10% of their gold (1, 3 and 10 tried: 1 and 3 alike, 3 better than 10 on TREC by
#: 0.005 on average, alike on Web)
RIDGE = 3.0
#: the fewest gold items per weight of the map, and at each level, for the full map (else a
#: temperature only)
GOLD_PER_WEIGHT = 4.0
MIN_PER_LEVEL = 10


@dataclass(frozen=True)
class GoldMap:
    """A learned map: ``weights`` (F, K), or None for a temperature only
    (``log_temperature``); ``n_gold`` gold items taught it, the full map has ``n_weights``."""

    weights: np.ndarray | None
    log_temperature: float = 0.0
    n_gold: int = 0
    n_weights: int = 0

    def describe(self) -> str:
        """What the gold did to the labels, in a sentence (``model_["gold_labels"]``)."""
        if self.weights is not None:
            return (
                f"{self.n_gold:,} gold items taught every other item's label and level "
                f"probabilities (a map of {self.n_weights} weights)"
            )
        need = int(np.ceil(GOLD_PER_WEIGHT * self.n_weights))
        return (
            f"{self.n_gold:,} gold items calibrated the level probabilities but move no label: "
            f"the map of {self.n_weights} weights needs {need:,} gold items, "
            f"{MIN_PER_LEVEL} of them at each level"
        )

    def log_proba(self, base: np.ndarray, x: np.ndarray) -> np.ndarray:
        """Log level probabilities (M, K) from ``base`` (M, K) and ``evidence`` ``x`` (M, F)."""
        if self.weights is None:
            return log_softmax(base * libm.exp(self.log_temperature))
        return log_softmax(base + _times(x, self.weights))


def evidence(
    base: np.ndarray, unweighted: np.ndarray | None = None, estimate: np.ndarray | None = None
) -> np.ndarray:
    """The evidence about each item, (M, F): ``base`` (M, K), ``unweighted`` (M, K; None when
    it would repeat ``base``), ``estimate`` (M,; standardised over the items; None: left
    out) and a constant column."""
    cols = [base]
    if unweighted is not None:
        cols.append(unweighted)
    if estimate is not None:
        e = np.asarray(estimate, dtype=float)
        sd = float(e.std())
        cols.append(((e - e.mean()) / sd if sd > 0 else np.zeros_like(e))[:, None])
    cols.append(np.ones((base.shape[0], 1)))
    return np.hstack(cols)


def fit(base: np.ndarray, x: np.ndarray, gold: np.ndarray, ridge: float = RIDGE) -> GoldMap:
    """The map learned from gold items: ``base`` (G, K) their log posteriors from their own
    ratings, ``x`` (G, F) their ``evidence``, ``gold`` (G,) their level indices. The full map
    with enough gold (``uses_map``), else a temperature."""
    k = base.shape[1]
    size = {"n_gold": len(gold), "n_weights": x.shape[1] * k}
    if not uses_map(np.bincount(gold, minlength=k), x.shape[1]):
        return GoldMap(None, _fit_temperature(base, gold), **size)
    onehot = np.eye(k)[gold]

    def loss(w: np.ndarray) -> tuple[float, np.ndarray]:
        w = w.reshape(x.shape[1], k)
        logp = log_softmax(base + _times(x, w))
        grad = _times_t(x, libm.exp(logp) - onehot) + ridge * w
        return float(-(logp * onehot).sum() + 0.5 * ridge * (w * w).sum()), grad.ravel()

    w0 = np.zeros(x.shape[1] * k)
    w = _lbfgs(loss, w0, jac=True)
    return GoldMap(w.reshape(x.shape[1], k), **size)


def uses_map(per_level: np.ndarray, n_features: int) -> bool:
    """Whether gold items, ``per_level`` (K,) of them at each level, are enough for the full map
    over ``n_features`` columns of evidence: ``GOLD_PER_WEIGHT`` per weight (``n_features *
    K``) and ``MIN_PER_LEVEL`` at every level."""
    k = len(per_level)
    return bool(
        per_level.sum() >= GOLD_PER_WEIGHT * n_features * k and per_level.min() >= MIN_PER_LEVEL
    )


#: the ridge on the log-temperature (pulls it to 0: the posterior as it is)
TEMPERATURE_RIDGE = 1.0


def _lbfgs(loss, start: np.ndarray, jac: bool = False) -> np.ndarray:
    """The minimiser of ``loss`` from ``start`` by L-BFGS. scipy.optimize is imported here, not
    at the top: it is a tenth of a second of every process's import, and only fits with gold
    use it."""
    from scipy.optimize import minimize

    return minimize(loss, start, jac=jac, method="L-BFGS-B").x


def _fit_temperature(base: np.ndarray, gold: np.ndarray) -> float:
    """The log-temperature that makes ``softmax(base * t)`` fit the gold levels best."""
    rows = np.arange(len(gold))

    def loss(t: np.ndarray) -> float:
        logp = log_softmax(base * libm.exp(float(t[0])))
        return float(-logp[rows, gold].sum() + 0.5 * TEMPERATURE_RIDGE * t[0] * t[0])

    return float(_lbfgs(loss, np.zeros(1))[0])


# No BLAS, as in ``label_model``: its summation order depends on the CPU and the library build.


def _times(x: np.ndarray, w: np.ndarray) -> np.ndarray:
    """``x @ w``, (M, F) by (F, K), feature by feature."""
    out = np.zeros((x.shape[0], w.shape[1]))
    for f in range(x.shape[1]):
        out += x[:, f, None] * w[f][None, :]
    return out


def _times_t(x: np.ndarray, r: np.ndarray) -> np.ndarray:
    """``x.T @ r``, (M, F) and (M, K) to (F, K), feature by feature (the gradient of ``fit``)."""
    out = np.empty((x.shape[1], r.shape[1]))
    for f in range(x.shape[1]):
        out[f] = (x[:, f, None] * r).sum(axis=0)
    return out
