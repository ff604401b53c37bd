"""The estimator interface every method shares (scikit-learn / crowd-kit style).

``__init__`` stores parameters only; ``fit(ratings)`` learns attributes ending in ``_`` and
returns ``self``. crowd-kit's names mean what they mean there: ``fit_predict`` gives each
task's label, ``fit_predict_proba`` each task's probability of each level (``labels_`` and
``probas_`` after ``fit``, indexed by ``task`` as crowd-kit's are); ``fit_predict_score``
gives the per-instance estimate on the scale (``estimates_``, indexed by ``instance``).

A drop-in for crowd-kit: ``labels_`` and ``probas_`` list the tasks in the order they first
appear in the ratings (crowd-kit's; ``estimates_`` and the other frames are sorted by ID), and
give the labels in the type of the ratings passed: the text as written when the ratings were
text (``pd.read_csv(..., dtype=str)``: ``"3"``, so ``proba["3"]`` works), the names of a
scale of named levels, else the scale's values (``3`` for whole numbers).
"""

from __future__ import annotations

import inspect
from collections.abc import Callable, Sequence

import numpy as np
import pandas as pd

from ..data.coding import id_array
from ..data.crowd import CrowdData, prepare
from ..data.scale import Scale


class CrowdEstimator:
    """Base class. Subclasses implement ``_fit(data)`` returning ``(M,)`` estimates on the scale.

    After ``fit``: ``estimates_`` (Series indexed by instance, named ``estimate``), ``data_``
    (the :class:`CrowdData` used), ``scale_``, and crowd-kit's ``labels_`` and ``probas_``.
    """

    #: name used by ``ordmix compare`` and the dashboard
    name: str = "base"
    #: granularity the data is prepared at (the engine overrides this per instance)
    _granularity: str = "global"

    def __init__(self, scale: Scale | Sequence[float] | str | None = None) -> None:
        self.scale = scale

    def fit(self, ratings: pd.DataFrame | CrowdData) -> CrowdEstimator:
        data = prepare(ratings, self.scale, granularity=self._granularity)
        est = np.asarray(self._fit(data), dtype=float)
        self.data_ = data
        self.scale_ = data.scale
        self.estimates_ = pd.Series(
            est, index=pd.Index(id_array(data.instances), name="instance"), name="estimate"
        )
        return self

    def fit_predict(self, ratings: pd.DataFrame | CrowdData) -> pd.Series:
        """Fit, then return each task's label (crowd-kit's ``fit_predict``).

        Parameters
        ----------
        ratings : DataFrame
            Long ratings ``annotator, instance, rating`` (crowd-kit's ``worker, task, label``
            accepted), or a prepared :class:`CrowdData`.

        Returns
        -------
        Series
            ``labels_``: the label of each task, indexed by ``task``.
        """
        return self.fit(ratings).labels_

    def fit_predict_proba(self, ratings: pd.DataFrame | CrowdData) -> pd.DataFrame:
        """Fit, then return each task's probability of each level (crowd-kit's
        ``fit_predict_proba``): ``probas_``, tasks by levels, rows summing to 1."""
        return self.fit(ratings).probas_

    def fit_predict_score(self, ratings: pd.DataFrame | CrowdData) -> pd.Series:
        """Fit, then return each instance's estimate on the scale (``estimates_``: the
        posterior mean for the model, the mean or median rating for those baselines)."""
        return self.fit(ratings).estimates_

    @property
    def probas_(self) -> pd.DataFrame:
        """Each task's probability of each level: DataFrame indexed by ``task`` (in the order
        the tasks first appear in the ratings), one column per level of the scale, named as
        the labels are (``label_index``), rows summing to 1. A method without level
        probabilities (mean, median) puts all of it on the level nearest its estimate."""
        proba = self._level_proba()
        if proba is None:
            values = self.scale_.values
            est = self.estimates_.to_numpy(dtype=float)
            nearest = np.abs(est[:, None] - values[None, :]).argmin(axis=1)
            proba = np.eye(values.size)[nearest]
        return self._task_frame(np.asarray(proba, dtype=float))

    @property
    def labels_(self) -> pd.Series:
        """Each task's label, its most probable level (in the ratings' type, ``label_index``),
        Series indexed by ``task`` (first-seen order) named ``agg_label`` as in crowd-kit."""
        proba = self.probas_
        return pd.Series(
            proba.columns.to_numpy()[proba.to_numpy().argmax(axis=1)],
            index=proba.index,
            name="agg_label",
        )

    def _level_proba(self) -> np.ndarray | pd.DataFrame | None:
        """(M, K) level probabilities in the order of ``estimates_``, or None."""
        post = getattr(self, "posterior_", None)
        return None if post is None else post.to_numpy(dtype=float)

    def label_index(self) -> pd.Index:
        """The levels as crowd-kit's labels give them (``probas_``' columns, named ``label``):
        the ratings' own text when they were given as text, the names of a scale of named
        levels, else the scale's values (integers when they are whole numbers)."""
        text = getattr(getattr(self, "data_", None), "level_text", None)
        labels = self.scale_.labels if text is None else np.array(text, dtype=object)
        return pd.Index(labels, name="label")

    def _task_order(self) -> np.ndarray:
        """Positions of ``estimates_``' instances in the order their tasks first appear in
        the ratings (crowd-kit's order); the sorted order when the ratings are not kept."""
        inst = getattr(getattr(self, "data_", None), "inst", None)
        if inst is None:
            return np.arange(len(self.estimates_))
        return pd.unique(inst)

    def _task_labels(self, labels: np.ndarray) -> pd.Series:
        """crowd-kit's ``labels_`` from each instance's label (M,) in ``estimates_``' order,
        written as the scale's ``labels``: tasks in first-seen order, in ``label_index``' type."""
        order = self._task_order()
        level = pd.Index(self.scale_.labels).get_indexer(np.asarray(labels)[order])
        return pd.Series(
            self.label_index().to_numpy()[level],
            index=pd.Index(self.estimates_.index.to_numpy()[order], name="task"),
            name="agg_label",
        )

    def _task_frame(self, proba: np.ndarray) -> pd.DataFrame:
        order = self._task_order()
        return pd.DataFrame(
            proba[order],
            index=pd.Index(self.estimates_.index.to_numpy()[order], name="task"),
            columns=self.label_index(),
        )

    def _fit(self, data: CrowdData) -> np.ndarray:  # pragma: no cover - abstract
        raise NotImplementedError

    def get_params(self) -> dict:
        """Every parameter of ``__init__``'s signature (for a subclass declared with
        ``extends_params``: its parent's, then its own) and its value."""
        sig = inspect.signature(type(self).__init__)
        return {k: getattr(self, k) for k in sig.parameters if k != "self"}

    def __repr__(self) -> str:
        args = ", ".join(f"{k}={v!r}" for k, v in self.get_params().items())
        return f"{type(self).__name__}({args})"


def extends_params(parent_init: Callable) -> Callable[[Callable], Callable]:
    """Declare a subclass ``__init__`` by its own parameters only.

    Decorates ``__init__(self, *args, <own keyword-only parameters>, **params)`` that passes
    ``args`` and ``params`` on to ``parent_init``; its signature (what ``help``, ``get_params``
    and ``repr`` read) becomes the parent's parameters followed by its own, so a parameter is
    declared once, in the class that owns it.
    """

    def decorate(init: Callable) -> Callable:
        parent = list(inspect.signature(parent_init).parameters.values())
        own = [
            q
            for q in list(inspect.signature(init).parameters.values())[1:]
            if q.kind not in (q.VAR_POSITIONAL, q.VAR_KEYWORD)
        ]
        clash = {q.name for q in own} & {q.name for q in parent}
        if clash or any(q.kind is not q.KEYWORD_ONLY for q in own):
            raise TypeError(f"{init.__qualname__}: own parameters must be new and keyword-only")
        init.__signature__ = inspect.Signature(parent + own)
        return init

    return decorate
