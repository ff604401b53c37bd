"""The Dask engine: ``DaskOrdinalMixture``, the ordinal-discrete-mixture fit on a cluster.

Needs ``dask[distributed,dataframe]`` (the ``dask`` extra). Imports are lazy, so importing
this package costs nothing until the estimator is used.
"""

from __future__ import annotations

__all__ = ["DaskOrdinalMixture", "DaskData", "write_outputs"]


def __getattr__(name: str):
    if name in __all__:
        from . import estimator

        return getattr(estimator, name)
    raise AttributeError(name)
