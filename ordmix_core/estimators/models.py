"""The named models (``model=``) and what a fine scale sets: the model settings a fit takes
when ``bias`` / ``spam_dist`` / ``phi`` / ``eta`` / ``labels`` are left None."""

from __future__ import annotations

__all__ = ["FINE_SCALE", "MODELS", "difficulty_prior"]

#: the named models (``model=``): what each sets when ``bias`` / ``spam_dist`` / ``phi`` /
#: ``eta`` are left None. ``paper``: Lakshminarayanan & Teh's model as published, with their
#: difficulty prior Gamma(10, 5). ``extended`` (the default): an annotator bias with
#: its prior's precision learned, the spam distribution learned (global) after a mixture
#: stage with it held uniform, and a vaguer difficulty prior Gamma(2, 1) (the same mean, 2; a
#: coefficient of variation of 71% instead of 32%), so that a hard item's disagreement is put
#: down to the item rather than to its raters (research: /docs/results.md)
MODELS = {
    "paper": {
        "bias": False,
        "spam_dist": "uniform",
        "phi": 10.0,
        "eta": 5.0,
        "labels": "continuous",
    },
    "extended": {
        "bias": True,
        "spam_dist": "global",
        "phi": 2.0,
        "eta": 1.0,
        "labels": "confusion",
    },
}


#: what a fine scale (``Scale.fine``: more than 11 levels, a 0..100 slider) sets when
#: ``bias`` / ``spam_dist`` / ``labels`` are left None, whatever the model: no annotator bias
#: (once items pile at an end of a slider a lenient crowd and a shifted truth are one answer,
#: and the fit moved every estimate by a third of the range), the fixed uniform spam
#: distribution (a learned one has a parameter a level, imitates the crowd's round numbers
#: and ends, which the truth's smooth likelihood cannot, and took the ratings as spam), and
#: labels from the continuous posterior (a slider's truth is a value; the confusion model
#: would learn K x K answers an annotator). Measured on simulated 0..100 crowds,
#: ``docs/results.md`` "Fine scales"
FINE_SCALE = {"bias": False, "spam_dist": "uniform", "labels": "continuous"}


def difficulty_prior(model: str, phi: float | None, eta: float | None) -> tuple[float, float]:
    """``(phi, eta)`` of a fit: as given, else the named ``model``'s (``MODELS``)."""
    base = MODELS[model]
    return (
        base["phi"] if phi is None else float(phi),
        base["eta"] if eta is None else float(eta),
    )
