"""The steps of a fit that both engines take in the same way, and the in-memory engine's starts.

``EngineSteps`` is a part of ``OrdinalMixture``: the fit's control constants
(``fit_policy``), how many restarts race (``planned_restarts``), each restart's kind and key
(``_start``), its global factors' start (``_global_start``), the race of ``fit.race`` over
the engine's sweeps with the model's stages and tolerances, the step and the rescues
(``_schedule``), the exact eps step (``_exact_eps``); and the in-memory engine's starts of the
items (``_initial_state``, ``_initial_from_key``) and its branches from the shared warm-up
(``_memory_branch``).
"""

from __future__ import annotations

from typing import ClassVar, NamedTuple

import numpy as np

from ..data.crowd import CrowdData
from ..data.scale import Scale
from ..fit import race, restarts
from ..fit.policy import DEFAULT, FitPolicy
from ..fit.rescues import Rescues
from ..fit.step import Sweeps, make_step
from ..numerics import libm
from ..numerics.keyed_random import id_hash
from ..vb import sweep as vb
from ..vb import updates as vb_updates
from .refit import n_refit_starts


class _StartInputs(NamedTuple):
    """What every restart's start reads of the data (``OrdinalMixture._start_inputs``):
    ratings and their sum per instance (M,), the IDs' ``id_hash`` (M,), (N,), ratings per
    category (C,)."""

    n_m: np.ndarray
    sum_m: np.ndarray
    inst_hash: np.ndarray
    ann_hash: np.ndarray
    n_c: np.ndarray


class EngineSteps:
    """What a restart starts from and how the restarts race (see the module)."""

    #: every constant of the fit's control (``fit.policy``)
    fit_policy: ClassVar[FitPolicy] = DEFAULT

    def _memory_branch(
        self, data: CrowdData, p: vb.Problem, inst_hash: np.ndarray, ann_hash: np.ndarray
    ) -> race.BranchFn:
        """``branch`` of the shared warm-up: the warm-up's state with the restart's own noise
        on q(z)'s means and q(tau) (``restarts.branch_instances``, ``branch_annotators``;
        ``inst_hash``, ``ann_hash``: the IDs' ``id_hash``); gold items keep their truth."""
        policy = self.fit_policy

        def branch(source: vb.State, run: restarts.RestartRun) -> vb.State:
            s = source.copy()
            mu = restarts.branch_instances(
                s.mu_m, inst_hash, run.key, data.scale.thresholds, data.scale.step, policy
            )
            s.mu_m = vb_updates.apply_gold(mu, p.gold)
            s.tau_rate = restarts.branch_annotators(s.tau_rate, ann_hash, run.key)
            return s

        return branch

    def _initial_state(
        self, data: CrowdData, p: vb.Problem, restart: int, rng: np.random.Generator
    ) -> tuple[str, vb.State]:
        """``(kind, state)``: the restart's start (``_start``) over the whole data.

        The noise is keyed on IDs and on a key drawn from ``rng`` (``restarts``), so it does not
        depend on row order or on how the data is partitioned.
        """
        kind, key = self._start(restart, rng)
        return kind, self._initial_from_key(data, p, restart, kind, key)

    @staticmethod
    def _start_inputs(data: CrowdData) -> _StartInputs:
        """What every restart's start reads of the data, computed once per fit."""
        return _StartInputs(
            np.bincount(data.inst, minlength=data.n_instances),
            np.bincount(data.inst, weights=data.values, minlength=data.n_instances),
            id_hash(data.instances),
            id_hash(data.annotators),
            np.bincount(data.cat, minlength=data.n_categories),
        )

    def _initial_from_key(
        self,
        data: CrowdData,
        p: vb.Problem,
        restart: int,
        kind: str,
        key: int,
        inputs: _StartInputs | None = None,
    ) -> vb.State:
        """The start of a restart of ``kind`` with random ``key`` (``_initial_state``);
        ``inputs``: ``_start_inputs(data)`` if already computed."""
        step = data.scale.step
        n_m, sum_m, inst_hash, ann_hash, n_c = inputs or self._start_inputs(data)
        mu_m, lam_m = restarts.init_instances(
            sum_m, n_m, inst_hash, key, restart, p.mu, p.lam, data.scale.thresholds, step,
            self.fit_policy,
        )  # fmt: skip
        mu_m = vb_updates.apply_gold(mu_m, p.gold)
        g = self._global_start(p, ann_hash, n_c, kind, key, restart, step)
        return vb.State(mu_m=mu_m, lam_m=lam_m, **g._asdict())

    def planned_restarts(self, scale: Scale | None = None) -> int:
        """The restarts a fit races: ``n_restarts``, or when it is None as many as the policy
        gives where the labels come from (``FitPolicy.label_fit_restarts``: the data start
        alone when the label fit makes them, ``continuous_label_restarts`` when the continuous
        posterior does); a refit (``init_from``) races ``n_refit_starts`` of them.
        ``scale``: the fit's, asked before the fit (default: the fitted one)."""
        n = self._restarts(None if scale is None else scale.fine)
        return n_refit_starts(n) if self.init_from is not None else n

    def _restarts(self, fine: bool | None = None) -> int:
        """``n_restarts``, or the policy's count for where the labels come from
        (``planned_restarts``, before a refit's cap)."""
        if self.n_restarts is not None:
            return int(self.n_restarts)
        p = self.fit_policy
        continuous = self._label_model(fine) == "continuous"
        return p.continuous_label_restarts if continuous else p.label_fit_restarts

    def _start(self, restart: int, rng: np.random.Generator) -> tuple[str, int]:
        """``(kind, key)`` of a restart (``restarts.restart_kind``); called in restart order,
        one key drawn from the fit's Generator each."""
        key = restarts.restart_key(rng)
        return restarts.restart_kind(restart, self.nospam_warmup, self.spam_), key

    def _global_start(
        self,
        p: vb.Problem,
        ann_hashes: np.ndarray,
        n_c: np.ndarray,
        kind: str,
        key: int,
        restart: int,
        step: float,
    ) -> restarts.Globals:
        """The restart's start of q(tau), eps, q(delta) (``n_c`` ratings per category, (C,);
        empty when categories are the Dask blocks') and the prior of tau."""
        return restarts.init_globals(
            p.n_per_ann, ann_hashes, n_c, key, restart, step, self.spam_, kind == "random",
            p.phi, p.eta, p.bias, p.spam_dist, libm.exp(p.log_pi), self.fit_policy,
        )  # fmt: skip

    def _exact_eps(self) -> bool:
        """Whether mixture sweeps start from each annotator's exact eps optimum
        (``step.make_step``): with ``accelerate`` and a learned spam distribution. A
        fixed (uniform) spam distribution keeps eq. (5)'s EM step alone: its highest bound is
        the all-spam answer, and there the exact step found it (the paper's model on TREC
        RF10: Pearson 0.01 against 0.40; ``docs/benchmarks.md``)."""
        learned = self._extensions()[1] != "uniform"
        return bool(self.accelerate) and learned

    def _schedule(
        self,
        runs: list[restarts.RestartRun],
        sweeps: Sweeps,
        callback: restarts.Callback | None,
        map_runs: restarts.MapRuns = restarts.map_sequential,
        branch: race.BranchFn | None = None,
    ) -> bool:
        """``race.race`` with this estimator's settings over the engine's ``sweeps`` (both
        engines call it): the step (``step.make_step``: SQUAREM with ``accelerate``, the exact
        eps step, ``_exact_eps``) and the rescues (``rescues.Rescues``: the flips with
        ``accelerate``, the settles with the exact eps step); ``branch``: the engine's start of
        a restart from the shared warm-up; the engine's ``park`` (if it has one) hears of each
        restart the race drops. Returns True if the fit was stopped."""
        policy, exact_eps = self.fit_policy, self._exact_eps()
        rescue = Rescues(sweeps, bool(self.accelerate), exact_eps, policy)
        return race.race(
            runs,
            make_step(sweeps, self.accelerate, exact_eps, rescue, policy),
            race.mixture_starter(runs),
            spam=self.spam_,
            max_iter=self.max_iter,
            tol=self.tol,
            tol_estimate=self.tol_estimate * self._fit_scale.fit_unit,  # in the fit's units
            branch=branch,
            prune=self.prune_restarts,
            prune_start=self.prune_start,
            collapse_threshold=self.collapse_threshold,
            callback=callback,
            map_runs=map_runs,
            pre_stage=self._extensions()[2],
            rescues=rescue,
            policy=policy,
            park=getattr(sweeps, "park", None),
            tol_reliability=policy.reliability_share * self.tol_estimate,
        )
