"""ordmix: ground truth and annotator quality from ordinal crowd ratings.

The ordinal-discrete-mixture model of Lakshminarayanan & Teh fitted by variational Bayes,
with the usual baselines beside it. Pure library: never imports streamlit.
"""

from ._version import __version__
from .data.crowd import CrowdData, prepare
from .data.scale import Scale
from .errors import CollapseWarning, ConvergenceWarning, InputError
from .estimators.ordinal_mixture import OrdinalMixture

__all__ = [
    "CollapseWarning",
    "ConvergenceWarning",
    "CrowdData",
    "InputError",
    "OrdinalMixture",
    "Scale",
    "__version__",
    "prepare",
]
