"""The fit that compiles every kernel a default fit calls, run by ``compile_ahead``'s
background child on a first run (the dashboard starts it when it opens)."""

from __future__ import annotations

import warnings

from ..data.simulate import simulate_crowd
from ..vb import kernels
from .ordinal_mixture import OrdinalMixture

#: the simulated crowd ``compile_every_kernel`` fits, (items, ratings an item), at query granularity
WARM_CROWD = (2_000, 5)


def compile_every_kernel() -> None:
    """Fit the default model to a simulated crowd (``WARM_CROWD``) twice, its passes and
    settles on one thread and then over the cores (the thresholds for that set to none
    meanwhile): every kernel a default fit calls is compiled into numba's cache, the label
    model's by ``compile_ahead.label_kernels``' own child on a second core. Checked:
    after it, the default fits of TREC RF10 (either granularity, with gold or without),
    web-zhou2014, adult-content2, metaphor-novelty and the demo crowds compile nothing."""
    n_items, per_item = WARM_CROWD
    crowd = simulate_crowd(n_items=n_items, ratings_per_item=per_item, random_state=0)
    thresholds = kernels.PARALLEL_MIN_RATINGS, kernels.CHUNK_RATINGS
    try:
        for cores in (False, True):
            if cores:  # the answers do not depend on it, only which kernels run
                kernels.PARALLEL_MIN_RATINGS, kernels.CHUNK_RATINGS = 0, 1_000
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")  # a short fit's convergence, the crowd's spam
                model = OrdinalMixture(granularity="query", n_restarts=2, random_state=0)
                model.fit(crowd.ratings)
    finally:
        kernels.PARALLEL_MIN_RATINGS, kernels.CHUNK_RATINGS = thresholds
