"""The estimator interface every method shares (scikit-learn / crowd-kit style).

``__init__`` stores parameters only; ``fit(ratings)`` learns attributes ending in ``_`` and
returns ``self``; ``fit_predict(ratings)`` returns the per-instance estimates.
"""

from __future__ import annotations

import inspect
from collections.abc import Callable, Sequence

import numpy as np
import pandas as pd

from .data import CrowdData, Scale, id_array, prepare


class CrowdEstimator:
    """Base class. Subclasses implement ``_fit(data)`` returning ``(M,)`` estimates on the scale.

    After ``fit``: ``estimates_`` (Series indexed by instance, named ``estimate``), ``data_``
    (the :class:`CrowdData` used), ``scale_``.
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
        return self.fit(ratings).estimates_

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
