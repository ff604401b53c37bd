"""The default's spam decision: keep the spam component only when the ratings hold spammers.

The spam fit is kept when annotators whom the evidence of their own ratings judges unreliable
gave at least ``SPAM_EVIDENCE`` of the ratings; else the model is refitted without it
(``model_["spam_choice"]`` says which and why). A kept spam fit that explained the items away
(``explained_away``: the labels' model, weighted by its omega, predicts the held-out ratings
hardly better than chance) is refitted without it too."""

from __future__ import annotations

from typing import TYPE_CHECKING

import pandas as pd

from ..results import reliability

if TYPE_CHECKING:  # annotations only
    from .ordinal_mixture import OrdinalMixture


#: ``spam=None`` with the extended model: the spam component is kept when annotators the
#: evidence judges unreliable (``reliability.annotator_flags`` of the spam fit: P(reliability <
#: 0.5) >= 0.9 from their own ratings) gave at least this share of the ratings; below it the
#: component only trims honest disagreement, and the model is refitted without it. Measured
#: (docs/results.md): 0.02 on Snow-2008 affect in 4 levels (no spammers; spam costs accuracy
#: there), 0.00 on a simulated crowd without spammers, 0.19-0.74 on TREC, Web, both with fake
#: spam added, Snow with fake spam, simulated crowds with spammers (spam needed there).
SPAM_EVIDENCE = 0.05


def spam_evidence(model: OrdinalMixture, flags: pd.DataFrame | None = None) -> float:
    """Share of the ratings given by annotators the evidence flags unreliable (``flags``:
    ``reliability.annotator_flags(model)``, computed if not given)."""
    flags = reliability.annotator_flags(model) if flags is None else flags
    flag = flags["flag"].to_numpy()
    n = model.annotators_["n_ratings"].to_numpy(dtype=float)
    return float(n[flag == "unreliable"].sum() / max(n.sum(), 1.0))


def spam_choice(spam_fit: dict, model: OrdinalMixture) -> dict:
    """``model_["spam_choice"]``: both candidates' scores, the rule and what it chose."""
    kept = bool(model.spam_)
    share = spam_fit["evidence"]
    candidates = [spam_fit]
    if not kept:
        candidates.append({"spam": False, "lower_bound": model.lower_bound_, "evidence": None})
    why = (
        f"annotators judged unreliable from their own ratings gave {share:.1%} of the ratings "
        f"({'at least' if kept else 'less than'} {SPAM_EVIDENCE:.0%}): "
        + (
            "spammers are there, so the spam component is kept"
            if kept
            else "no group of spammers, so the spam component would only discount honest "
            "disagreement; refitted without it"
        )
    )
    return {
        "spam": kept,
        "rule": f"spam component kept when unreliable annotators give >= {SPAM_EVIDENCE:g} "
        "of the ratings",
        "threshold": SPAM_EVIDENCE,
        "candidates": candidates,
        "why": why,
    }


def explained_away(before: dict, weights: dict, model: OrdinalMixture) -> dict:
    """``model_["spam_choice"]`` when the kept spam fit explained the items away: weighted by
    its omega, the labels' confusion model predicts the held-out ratings hardly better than
    chance (``label_choice.weights_check``, ``weights``: its ``model_["label_weights"]``), so
    the model was refitted without the component. ``before``: the spam choice that kept it."""
    kept = weights.get("kept")
    share = (
        f"a share of {kept:.2f} of what every rating counting 1 gives"
        if kept is not None
        else "none"
    )
    return {
        "spam": False,
        "rule": before.get("rule"),
        "threshold": before.get("threshold"),
        "candidates": [
            *before.get("candidates", [{"spam": True}]),
            {"spam": False, "lower_bound": model.lower_bound_, "evidence": None},
        ],
        "why": "the spam fit explained the items away: weighted by its omega, the labels' "
        f"model predicts the held-out ratings hardly better than chance ({share}), as with "
        "careless raters on a short scale, whose every error the spam component takes; "
        "refitted without it",
        "kept_first": before.get("why"),
    }


def spam_left_out(model: object) -> str | None:
    """Why the fit's spam decision left the spam component out (``model_["spam_choice"]``'s
    ``why``: it was refitted without it), or None when it kept it or decided nothing (the
    paper's model, ``spam`` given, a collapsed fit)."""
    choice = (getattr(model, "model_", None) or {}).get("spam_choice")
    return choice["why"] if choice and not choice["spam"] else None
