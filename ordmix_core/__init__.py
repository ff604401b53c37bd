"""ordmix: ground truth and annotator quality from ordinal crowd ratings.

The ordinal-discrete-mixture model of Lakshminarayanan & Teh fitted by variational Bayes,
with the usual baselines beside it. Pure library: never imports streamlit.
"""

from ._version import __version__
from .data import CrowdData, Scale, prepare
from .errors import InputError
from .model import CollapseWarning, OrdinalMixture

__all__ = [
    "CollapseWarning",
    "CrowdData",
    "InputError",
    "OrdinalMixture",
    "Scale",
    "__version__",
    "prepare",
]
