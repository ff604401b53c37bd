"""Baseline aggregators: each a :class:`~ordmix_core.estimators.base.CrowdEstimator` with a
``name``."""

from .continuous_ml import ContinuousML
from .dawid_skene import DawidSkene
from .glad import GLAD
from .majority import MajorityVote
from .mean import MeanRating
from .median import MedianRating

#: method name (as in ``ordmix compare``) -> estimator class
BASELINES = {
    cls.name: cls
    for cls in (MeanRating, MedianRating, MajorityVote, ContinuousML, DawidSkene, GLAD)
}

__all__ = [
    "BASELINES",
    "ContinuousML",
    "DawidSkene",
    "GLAD",
    "MajorityVote",
    "MeanRating",
    "MedianRating",
]
