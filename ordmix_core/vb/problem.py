"""What a VB sweep works on: ``Problem``, the fixed arrays of a fit, and ``State``, its
variational parameters.

``Problem.create`` builds a fit's problem from the scale, the priors and the model's switches
(``OrdinalMixture._problem`` is the one caller that maps the estimator's parameters to it);
``with_ratings`` puts ratings in (all of them in memory, one block's in the Dask engine). A
model option that changes the sweep adds a field here and reads it in the sweeps
(``reference.py``, ``phases.py`` with ``kernels.py``).
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from functools import cached_property

import numpy as np

from ..data.crowd import CrowdData
from ..data.scale import Scale
from ..numerics import libm
from . import updates


@dataclass(frozen=True)
class Problem:
    """Fixed arrays of one fit. ``L`` ratings coded as ann, inst, cat_l, level; ``K`` levels."""

    ann: np.ndarray  # (L,) int32
    inst: np.ndarray  # (L,) int32
    cat_l: np.ndarray  # (L,) int32
    level: np.ndarray  # (L,) int32 level index 0..K-1
    thresholds: np.ndarray  # (K+1,) b_0 < ... < b_K
    values: np.ndarray  # (K,) the scale's values
    log_pi: np.ndarray  # (K,) log of the spam distribution
    n_per_ann: np.ndarray  # (N,) ratings per annotator
    n_instances: int
    n_categories: int
    mu: float
    lam: float
    phi: float
    eta: float
    ordinal: bool = True
    spam: bool = True
    exact: bool = True
    tau_rate_floor: float = 0.0  # lower limit of the learned beta (updates.gamma_prior_mle)
    bias: bool = False  # annotator bias x ~ N(z_m + b_n, ...), b_n ~ N(0, 1/lambda_b)
    spam_dist: str = "uniform"  # uniform: log_pi fixed | global: pi learned | annotator
    gold: np.ndarray | None = None  # (M,) known truth of each instance, NaN where unknown

    @property
    def n_levels(self) -> int:
        return int(self.values.size)

    @cached_property
    def gold_mask(self) -> np.ndarray | None:
        """(M,) bool: instances whose truth is known (None without gold)."""
        return None if self.gold is None else np.isfinite(self.gold)

    @property
    def n_annotators(self) -> int:
        return int(self.n_per_ann.size)

    @property
    def n_ratings(self) -> int:
        return int(self.ann.size)

    def raters(self, item: int) -> np.ndarray:
        """(N,) bool: the annotators who rated instance ``item`` (a code of this problem)."""
        out = np.zeros(self.n_annotators, dtype=bool)
        out[self.ann[self.inst == item]] = True
        return out

    # per-rating views used by the numpy reference (built on first use: 8 bytes a rating each)
    @cached_property
    def lo(self) -> np.ndarray:
        """(L,) lower threshold of each rating's level."""
        return self.thresholds[self.level]

    @cached_property
    def hi(self) -> np.ndarray:
        """(L,) upper threshold of each rating's level."""
        return self.thresholds[self.level + 1]

    @cached_property
    def value(self) -> np.ndarray:
        """(L,) rating value (the observed x of the real-valued likelihood)."""
        return self.values[self.level]

    @cached_property
    def log_pi_l(self) -> np.ndarray:
        """(L,) log pi of each rating's level."""
        return self.log_pi[self.level]

    @classmethod
    def create(
        cls,
        scale: Scale,
        *,
        pi: np.ndarray,
        mu: float,
        lam: float,
        phi: float,
        eta: float,
        ordinal: bool,
        spam: bool,
        exact: bool,
        n_per_ann: np.ndarray,
        n_categories: int,
        bias: bool = False,
        spam_dist: str = "uniform",
    ) -> Problem:
        """The fit's problem without ratings (the Dask client's view): the scale (its
        ``fit_thresholds``: a fine scale's ends open), the priors, the model's switches,
        ratings per annotator (N,) and the number of categories.

        ``with_ratings`` adds ratings (all of them, or a block's).
        """
        empty = np.zeros(0, dtype=np.int32)
        return cls(
            ann=empty,
            inst=empty,
            cat_l=empty,
            level=empty,
            thresholds=np.asarray(scale.fit_thresholds, dtype=float),
            values=np.asarray(scale.values, dtype=float),
            log_pi=libm.log(np.asarray(pi, dtype=float)),
            n_per_ann=np.asarray(n_per_ann),
            n_instances=0,
            n_categories=int(n_categories),
            mu=float(mu),
            lam=float(lam),
            phi=float(phi),
            eta=float(eta),
            ordinal=ordinal,
            spam=spam,
            exact=exact,
            tau_rate_floor=updates.TAU_RATE_FLOOR * scale.step**2,
            bias=bool(bias),
            spam_dist=spam_dist,
        )

    def with_ratings(
        self,
        ann: np.ndarray,
        inst: np.ndarray,
        cat_l: np.ndarray,
        level: np.ndarray,
        n_instances: int,
        n_categories: int | None = None,
    ) -> Problem:
        """The same problem on these ratings (L,) of ``n_instances`` instances (codes local to
        them) and, if given, ``n_categories`` categories."""
        return replace(
            self,
            ann=np.ascontiguousarray(ann, dtype=np.int32),
            inst=np.ascontiguousarray(inst, dtype=np.int32),
            cat_l=np.ascontiguousarray(cat_l, dtype=np.int32),
            level=np.ascontiguousarray(level, dtype=np.int32),
            n_instances=int(n_instances),
            n_categories=self.n_categories if n_categories is None else int(n_categories),
        )

    @classmethod
    def from_data(
        cls,
        data: CrowdData,
        *,
        mu: float,
        lam: float,
        phi: float,
        eta: float,
        pi: np.ndarray,
        ordinal: bool,
        spam: bool,
        exact: bool,
        bias: bool = False,
        spam_dist: str = "uniform",
    ) -> Problem:
        """The problem of a prepared data set (``create`` + ``with_ratings``)."""
        p = cls.create(
            data.scale,
            pi=pi,
            mu=mu,
            lam=lam,
            phi=phi,
            eta=eta,
            ordinal=ordinal,
            spam=spam,
            exact=exact,
            bias=bias,
            spam_dist=spam_dist,
            n_per_ann=np.bincount(data.ann, minlength=data.n_annotators),
            n_categories=data.n_categories,
        )
        return p.with_ratings(data.ann, data.inst, data.cat, data.level, data.n_instances)

    def with_spam(self, spam: bool) -> Problem:
        return replace(self, spam=spam)

    def at(self, key: object) -> Problem:
        """The problem of a schedule step's key (``race.race`` passes ``spam``, or a
        stage name): True the mixture, False the no-spam warm-up, else ``with_stage(key)``."""
        if key is True:
            return self
        if key is False:
            return replace(self, spam=False)
        return self.with_stage(str(key))

    def with_stage(self, stage: str) -> Problem:
        """The problem of a stage of the schedule: ``nospam`` (the warm-up), ``uniform`` (the
        mixture with the spam distribution held at ``log_pi``) or ``mixture`` (as created)."""
        if stage == "nospam":
            return replace(self, spam=False)
        if stage == "uniform":
            return replace(self, spam_dist="uniform")
        return self

    def with_gold(self, gold: np.ndarray | None) -> Problem:
        """The same problem with the known truth of its instances, (M,) (NaN: unknown)."""
        if gold is None or not np.isfinite(gold).any():
            return replace(self, gold=None)
        return replace(self, gold=np.asarray(gold, dtype=float))


@dataclass
class State:
    """Variational parameters and learned hyperparameters."""

    mu_m: np.ndarray  # (M,) mean of q(z_m)
    lam_m: np.ndarray  # (M,) precision of q(z_m)
    tau_shape: np.ndarray  # (N,) q(tau_n) = Gamma(shape, rate)
    tau_rate: np.ndarray  # (N,)
    delta_shape: np.ndarray  # (C,) q(delta_c)
    delta_rate: np.ndarray  # (C,)
    eps: np.ndarray  # (N,) prior probability that n's rating is not spam
    alpha: float
    beta: float
    omega: np.ndarray | None = None  # (L,) q(y=1); None before the first sweep
    bias_mean: np.ndarray | None = None  # (N,) q(b_n) = N(bias_mean, 1/bias_prec); bias only
    bias_prec: np.ndarray | None = None  # (N,)
    lam_b: float = 0.0  # precision of the bias prior (type-II ML)
    pi: np.ndarray | None = None  # (K,) learned spam distribution (global), or Dirichlet mean
    dir_a: np.ndarray | None = None  # (N, K) q(pi_n) = Dirichlet(dir_a) (spam_dist annotator)
    kappa: float = 0.0  # concentration of the per-annotator Dirichlet(kappa pi)
    omega_eps: np.ndarray | None = None  # (N,) the eps omega was computed with (a sweep's)

    def copy(self) -> State:
        return State(
            **{k: (v.copy() if isinstance(v, np.ndarray) else v) for k, v in self.__dict__.items()}
        )
