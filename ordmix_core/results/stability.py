"""What the data cannot decide: how much the near-tied restarts disagree on each item and annotator.

The restarts near-tied with the winner (``restarts.ensemble``) disagree on some items
(``estimate_spread``, ``unstable``) and annotators (``reliability_spread``, ``unstable``);
``stability_summary`` counts them for ``summary.json``, ``still_moving_count`` the annotators
the fit had not settled."""

from __future__ import annotations

from typing import Any

import numpy as np
import pandas as pd

# --------------------------------------------------------------------------- learned frames


#: an item is unstable when its nearest scale level differs across the ensemble, or its
#: estimate's spread (max - min) reaches this share of the scale's step (0.1: ten times the
#: 0.01 a converged fit is asked to hold its estimates to)
UNSTABLE_SPREAD_STEPS = 0.1

#: items per chunk of ``item_stability``'s nearest-level search
_STABILITY_CHUNK = 1 << 18


def item_stability(member_mu: np.ndarray, values: np.ndarray, step: float) -> pd.DataFrame:
    """``estimate_spread`` (max - min of the continuous posterior mean ``z_mean`` across the
    ensemble) and ``unstable`` per item; ``member_mu`` (E, M): each near-tied restart's
    posterior means (E >= 1, the winner first); ``values`` (K,): the scale's levels; ``step``:
    its step."""
    values = np.asarray(values, dtype=float)
    spread = member_mu.max(axis=0) - member_mu.min(axis=0)
    flips = np.zeros(spread.shape, dtype=bool)
    for lo in range(0, member_mu.shape[1], _STABILITY_CHUNK):  # (E, chunk, K) at a time
        mu = member_mu[:, lo : lo + _STABILITY_CHUNK]
        level = np.abs(mu[:, :, None] - values[None, None, :]).argmin(axis=2)
        flips[lo : lo + _STABILITY_CHUNK] = (level != level[:1]).any(axis=0)
    unstable = flips | (spread >= UNSTABLE_SPREAD_STEPS * step)
    return pd.DataFrame({"estimate_spread": spread, "unstable": unstable})


def annotator_stability(member_eps: np.ndarray) -> pd.DataFrame:
    """``reliability_spread`` and ``unstable`` (reliability on both sides of 0.5 across the
    ensemble: honest in one near-tied answer, a spammer in another) per annotator;
    ``member_eps`` (E, N)."""
    spread = member_eps.max(axis=0) - member_eps.min(axis=0)
    honest = member_eps >= 0.5
    return pd.DataFrame(
        {"reliability_spread": spread, "unstable": (honest != honest[:1]).any(axis=0)}
    )


def stability_summary(model: Any) -> dict:
    """``summary.json``'s ``ensemble``: the near-tied restarts, the bound gap that defines
    them, and what they disagree on (``unstable_items`` is None when ``items_`` is a Dask
    DataFrame, which has no stability columns); ``alternative``: the answer with the
    still-moving annotators carried the way they were going (``model.alternative_``), or None."""
    items, ann = model.items_, model.annotators_
    out: dict = {
        "restarts": [int(r) for r in getattr(model, "ensemble_", [model.best_restart_])],
        "bound_gap": float(getattr(model, "ensemble_gap_", 0.0)),
        "unstable_items": None,
        "max_estimate_spread": None,
    }
    if isinstance(items, pd.DataFrame) and "unstable" in items:
        out["unstable_items"] = int(items["unstable"].sum())
        out["max_estimate_spread"] = float(items["estimate_spread"].max()) if len(items) else 0.0
    out["unstable_annotators"] = int(ann["unstable"].sum()) if "unstable" in ann else None
    alt = getattr(model, "alternative_", None)
    out["alternative"] = (
        None if alt is None else {**alt, "annotators": [str(a) for a in alt["annotators"]]}
    )
    return out


def still_moving_count(model: Any) -> int | None:
    """How many annotators the fit had not settled (``still_moving``, ``accel``); None for a
    model without the column."""
    ann = model.annotators_
    return int(ann["still_moving"].sum()) if "still_moving" in ann else None
