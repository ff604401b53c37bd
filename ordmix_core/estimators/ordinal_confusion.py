"""``OrdinalConfusion``: the default's label model on its own, as an estimator beside the
baselines (``ordmix compare --methods ordinal-confusion``)."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from ..data.crowd import CrowdData
from ..data.scale import Scale
from ..errors import InputError
from ..labels.choose import choose_labels
from ..labels.policy import DEFAULT, LabelPolicy
from .base import CrowdEstimator
from .baselines._common import posterior_frame


class OrdinalConfusion(CrowdEstimator):
    """The ordinal confusion model (``labels.confusion_model``) fitted alone, its posterior
    reported as a careful annotator's answer (``labels.calibration``): the labels and level
    probabilities ``OrdinalMixture`` ships, without the continuous model's annotator columns.

    ``reference_share``: the share of the ratings whose annotators, the most accurate first,
    the careful annotator is the average of (``LabelPolicy.reference_share``).

    Learned: ``posterior_`` (M, K) DataFrame, ``label_result_`` (``labels.choose.LabelResult``:
    the fit, the reference map); the estimate is the posterior mean of the level's value.
    """

    name = "ordinal-confusion"

    def __init__(
        self,
        scale: Scale | Sequence[float] | str | None = None,
        reference_share: float = DEFAULT.reference_share,
    ) -> None:
        self.scale = scale
        self.reference_share = reference_share

    def _fit(self, data: CrowdData) -> np.ndarray:
        """Returns (M,) posterior means of the level's value."""
        share = float(self.reference_share)
        if not 0.0 < share <= 1.0:
            raise InputError(f"reference_share must be in (0, 1], not {self.reference_share!r}")
        policy = LabelPolicy(**{**DEFAULT.__dict__, "reference_share": share})
        self.label_result_ = choose_labels(
            data.ann,
            data.inst,
            data.level,
            data.n_annotators,
            data.n_instances,
            data.scale.values,
            policy=policy,
        )
        post = self.label_result_.posterior
        self.posterior_ = posterior_frame(post.proba, data)
        return post.estimates()[0]
