"""Which model's level probabilities to ship, chosen from the ratings alone.

Two models of the same ratings give each item's level probabilities: the continuous fit
(the truth a value on the scale, its level the interval it falls in) and the ordinal
confusion model (``label_model``: the truth one of the levels). Neither wins everywhere. On
TREC, Web and Snow the confusion model's labels are far better (TREC 0.47 against 0.64); on
crowds whose truth is a value and whose raters are lenient or strict (the simulated ones) the
confusion model explains an in-between item as a neighbouring level seen by a lenient or a
strict rater, its class prior zig-zags over the levels, and the continuous labels are better
by 0.08-0.11 (``docs/results.md``).

The choice: each model predicts every rating from the others (leave one rating out, the
model's parameters held but what the rating taught its item: the item's posterior without the
rating, and for the continuous model the item's own difficulty without it too,
``held_out_precision``; then the model's chance of the rating's level), and the continuous
labels are shipped when the continuous model predicts the held-out ratings better: its mean
log predictive per rating above the confusion model's (``Z_MIN`` = 0 standard errors of the
per-rating differences; the z is reported, to say how close the call was); otherwise the
confusion model's. With the item's difficulty left in, the continuous model's prediction was
flattered by the rating itself (the more so the fewer ratings an item has) and needed a
margin of 2 standard errors, which still let crowds of careless raters with three ratings an
item ship the continuous labels. The confusion model predicts the ratings two ways, and the
continuous model must beat both: alone (fitted with every rating counting 1, a model of every
rating, spam included) and with the continuous fit's spam component (fitted with each rating
counting for its omega, as the labels it ships are, its truthful part mixed with each
annotator's spam distribution by eps). Alone it cannot express an annotator whose errors
land on any level (Dawid-Skene's crowds: there the continuous model's spam component predicts
them better while the confusion model's labels are better); with the spam component it
predicts Web's ratings worse than the continuous model though its labels are better there.

The same held-out ratings say whether the confusion model's ratings count for the continuous
fit's omega (the chance that a rating came from the truth, not from spam) or all count 1
(``weights_check``): the weighted confusion model, mixed with the spam component, must keep
at least ``KEEP_SHARE`` of what the confusion model alone gains over chance (each annotator's
other ratings' level shares, knowing nothing of the item) in predicting the held-out ratings.
A spam fit that explains almost every rating as spam (a crowd of careless raters on a short
scale) leaves the weighted model predicting no better than chance: its weights would erase
the evidence of every item.

All functions are pure array functions over ratings ``(L,)``, items ``(M,)`` and annotators
``(N,)``; the estimator orchestrates.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass

import numpy as np

from ..numerics import libm
from ..numerics.fixed_order import last_sum
from ..numerics.truncnorm import TNStats, tn_log_z, tn_stats
from ..vb import kernels
from .predictive_rows import confusion_rows
from .reliability import leave_one_out_by_chunk

#: the continuous labels are shipped when the continuous model predicts the held-out ratings
#: better by more than this many standard errors of the per-rating differences: 0, whichever
#: predicts them better (``docs/results.md``, "Careless raters": with a fair held-out
#: prediction every crowd measured but Snow + 3 and three others, wrong at any margin, gets
#: the better labels; a margin of 2 costs three biased crowds their better continuous labels)
Z_MIN = 0.0
#: ratings per chunk of the held-out predictive (no per-rating temporary above a chunk's size)
CHUNK = 1 << 20
#: a predictive probability below this counts as this (log 0 is -inf)
FLOOR = 1e-300
#: the confusion model's ratings count for the continuous fit's omega only when, so weighted
#: and mixed with the spam component, it keeps at least this share of the confusion model's
#: held-out gain over chance (``weights_check``). Measured shares: 0.47 on TREC, 0.40 on TREC
#: + 5, 0.69-0.92 on Web, Web + 3 and Snow + 3, 0.75-1.6 on the simulated crowds; 0.025 and
#: 0.037 on crowds of careless raters whose spam fit explained almost every rating as spam
KEEP_SHARE = 0.25


def continuous_log_predictive(
    level: np.ndarray,
    mean: np.ndarray,
    prec: np.ndarray,
    rho: np.ndarray,
    bias: np.ndarray,
    bias_var: np.ndarray,
    eps: np.ndarray,
    spam_p: np.ndarray,
    thresholds: np.ndarray,
) -> np.ndarray:
    """Log chance of each rating's level under the continuous model, from the others; (L,).

    ``level`` (L,) level index; ``mean``, ``prec`` (L,): the item's posterior without the
    rating (``reliability.leave_one_out``); ``rho`` (L,) the rating's precision E[tau] E[delta];
    ``bias``, ``bias_var`` (L,) its annotator's bias mean and variance (0 without the bias);
    ``eps`` (L,) its annotator's chance of rating from the truth; ``spam_p`` (L,) the spam
    distribution's chance of its level. A truthful rating is ``x ~ N(z + b, 1/rho)``, so ``x ~
    N(mean + bias, 1/prec + 1/rho + bias_var)``, its level's chance normalised over the scale's
    range ``[b_0, b_K)`` (``thresholds`` (K+1,)).
    """
    t = np.asarray(thresholds, dtype=float)
    prec_x = 1.0 / (1.0 / prec + 1.0 / rho + bias_var)  # of x, the item's posterior integrated
    centre = mean + bias
    log_in = tn_log_z(t[level], t[level + 1], centre, prec_x)
    log_on = tn_log_z(np.full_like(centre, t[0]), np.full_like(centre, t[-1]), centre, prec_x)
    return with_spam(libm.exp(log_in - log_on), eps, spam_p)


def mixed_log_predictive(
    q: np.ndarray,
    log_p: np.ndarray,
    annotator: np.ndarray,
    instance: np.ndarray,
    level: np.ndarray,
    weight: np.ndarray,
    eps: np.ndarray,
    spam_p: np.ndarray,
) -> np.ndarray:
    """Log chance of each rating's level under the confusion model fitted with each rating
    counting for ``weight`` (L,), its truthful part mixed with spam: ``eps * sum_c
    q_without(c) P(k | c) + (1 - eps) * spam_p``; ``eps``, ``spam_p`` (L,) as in
    ``continuous_log_predictive``, the rest as in ``confusion_log_predictive`` (the rating's
    factor divided out to the power it counted for). Compiled as that one is."""
    if kernels.USE_JIT:
        return confusion_rows(q, log_p, annotator, instance, level, FLOOR, weight, eps, spam_p)
    truth = libm.exp(confusion_log_predictive(q, log_p, annotator, instance, level, weight))
    return with_spam(truth, eps, spam_p)


def held_out_precision(
    tau: np.ndarray,
    shape: np.ndarray,
    rate: np.ndarray,
    omega: np.ndarray,
    s: np.ndarray,
    eta: float,
) -> np.ndarray:
    """Each rating's precision ``E[tau] E[delta]`` with its category's difficulty fitted
    without it; (L,).

    ``tau`` (L,) its annotator's E[tau]; ``shape``, ``rate`` (L,) its category's Gamma
    posterior of delta, ``phi + sum omega / 2`` and ``eta + sum omega E[tau] S / 2``; the
    rating's own part (``omega``, ``s`` = E[(x - z - b)^2], (L,)) is taken out of both, the
    rate kept at least the prior's ``eta``. At instance granularity the difficulty is the
    item's own: with the rating in it, it would flatter the prediction of that very rating,
    the more so the fewer ratings an item has."""
    return tau * (shape - 0.5 * omega) / np.maximum(rate - 0.5 * omega * tau * s, eta)


def rating_deviation(
    level: np.ndarray,
    centre: np.ndarray,
    rho: np.ndarray,
    thresholds: np.ndarray,
    values: np.ndarray | None,
    var_zb: np.ndarray,
    x: TNStats | None = None,
) -> np.ndarray:
    """``S = E[(x - z - b)^2]`` of each rating (L,), as the fit's difficulty update sees it:
    ``x`` the rating's truncated normal ``N(centre, 1/rho)`` on its level's interval
    (``thresholds`` (K+1,)), or its value when the fit saw values (``values`` (K,), else
    None); ``centre`` (L,) = E[z] + E[b]; ``var_zb`` (L,) = Var z + Var b. ``x``: that
    truncated normal's ``tn_stats`` when the caller has them already (not taken again)."""
    if values is None:
        if x is None:
            x = tn_stats(thresholds[level], thresholds[level + 1], centre, rho)
        return x.var + (x.ex - centre) ** 2 + var_zb
    return (values[level] - centre) ** 2 + var_zb


def chance_log_predictive(
    annotator: np.ndarray, level: np.ndarray, counts: np.ndarray
) -> np.ndarray:
    """Log chance of each rating's level from its annotator's other ratings alone, knowing
    nothing of the item: their share of that level, one pseudo-rating per level; (L,).

    ``counts`` (N, K): each annotator's ratings per level, the rating itself included (so
    ``counts[n, k] - 1 + 1`` of ``total - 1 + K``)."""
    k = counts.shape[1]
    total = last_sum(counts)
    return libm.log(counts[annotator, level] / (total[annotator] - 1.0 + k))


def with_spam(truth: np.ndarray, eps: np.ndarray, spam_p: np.ndarray) -> np.ndarray:
    """``log(eps * truth + (1 - eps) * spam_p)`` (L,): a rating's chance from the truth mixed
    with its annotator's spam distribution's chance of its level, floored at ``FLOOR``."""
    return libm.log(np.maximum(eps * truth + (1.0 - eps) * spam_p, FLOOR))


def confusion_log_predictive(
    q: np.ndarray,
    log_p: np.ndarray,
    annotator: np.ndarray,
    instance: np.ndarray,
    level: np.ndarray,
    weight: np.ndarray | None = None,
) -> np.ndarray:
    """Log chance of each rating's level under the confusion model, from the others; (L,).

    ``q`` (M, K) each item's level posterior from all its ratings, ``log_p`` (N, K, K) the
    annotators' log P(rating k | truth c). Without the rating the item's posterior is
    ``q(c) / P(k | c)`` renormalised (the rating's factor divided out; ``/ P(k | c)^w`` for a
    model fitted with the rating counting for ``weight`` w (L,)); the rating's chance is then
    ``sum_c q_without(c) P(k | c)``. Compiled (``predictive_rows``, the same bits) when
    compiled code is on.
    """
    if kernels.USE_JIT:
        return confusion_rows(q, log_p, annotator, instance, level, FLOOR, weight)
    lp = log_p[annotator, :, level]  # (L, K)
    own = lp if weight is None else lp * weight[:, None]
    cavity = libm.log(np.maximum(q[instance], FLOOR)) - own
    top = cavity.max(axis=1, keepdims=True)
    w = libm.exp(cavity - top)
    return libm.log(np.maximum(last_sum(w * libm.exp(lp)), FLOOR)) - libm.log(last_sum(w))


@dataclass(frozen=True)
class LabelChoice:
    """What the held-out ratings said: ``labels`` (``"continuous"`` or ``"confusion"``), the
    mean log predictive per rating of each model, their difference (continuous minus
    confusion), its standard error, ``z`` = difference / standard error, and how the confusion
    model predicted (``against``: ``"alone"`` or ``"with spam"``, see the module; ``both``:
    the continuous model was compared with both, and this is the closer comparison)."""

    labels: str
    continuous: float
    confusion: float
    difference: float
    std_error: float
    z: float
    against: str = "alone"
    both: bool = False  # the continuous model was compared with both confusion models

    def describe(self) -> str:
        """One sentence: which labels and why (``model_["label_choice"]["why"]``)."""
        figures = f"{self.difference:+.4f} nats a rating, " + (
            f"{self.z:+.1f} standard errors"
            if np.isfinite(self.z)
            else "too few ratings to give it a standard error"
        )
        model = "the confusion model" + (
            " with the spam component" if self.against != "alone" else ""
        )
        if self.labels == "continuous":
            return (
                "labels from the continuous posterior: that model (a truth that is a value on "
                "the scale, each rater's leniency a term of its own) predicts each rating from "
                "the others better than the confusion model"
                + (
                    f", alone and with the spam component (the closer: {figures})"
                    if self.both
                    else f" ({figures})"
                )
            )
        return (
            "labels from the ordinal confusion model (a truth that is one of the levels): the "
            f"continuous model does not predict each rating from the others better than "
            f"{model} ({figures})"
        )

    def as_dict(self) -> dict:
        """``model_["label_choice"]``: the choice, the rule, the figures and why."""
        return {
            "labels": self.labels,
            "rule": f"continuous labels when the continuous model predicts held-out ratings "
            f"better than the confusion model (z above {Z_MIN:g}), alone and with the spam "
            "component",
            "against": self.against,
            "log_predictive": {"continuous": self.continuous, "confusion": self.confusion},
            "difference": self.difference,
            "z": self.z,
            "why": self.describe(),
        }


@dataclass(frozen=True)
class WeightsCheck:
    """Whether the confusion model's ratings count for the continuous fit's omega (``used``),
    from the mean held-out log predictive per rating over chance's (``gain``) of the confusion
    model alone and of the weighted one with the spam component, and ``kept``, the share of
    the first that the second keeps."""

    used: bool
    plain_gain: float
    weighted_gain: float

    @property
    def kept(self) -> float:
        return self.weighted_gain / self.plain_gain if self.plain_gain > 0 else float("nan")

    def describe(self) -> str:
        """One sentence: whether the ratings count for their omega in the labels, and why."""
        share = "" if np.isnan(self.kept) else f", a share of {self.kept:.2f}"
        figures = (
            f"{self.weighted_gain:+.4f} nats a rating over chance against "
            f"{self.plain_gain:+.4f} with every rating counting 1{share}; "
            f"at least {KEEP_SHARE:g} needed"
        )
        if self.used:
            return (
                "each rating counts in the labels for the chance that it came from the truth "
                "(omega): so weighted, the confusion model still predicts the held-out ratings "
                f"({figures})"
            )
        return (
            "every rating counts 1 in the labels: weighted by the spam fit's omega, the "
            "confusion model would predict the held-out ratings hardly better than chance "
            f"({figures}), so the spam fit's judgement of which ratings are spam is not used"
        )

    def as_dict(self) -> dict:
        """``model_["label_weights"]``: the check, the rule, the figures and why."""
        return {
            "weights": "omega" if self.used else "none",
            "rule": f"ratings count for their omega when the confusion model so weighted keeps "
            f"at least {KEEP_SHARE:g} of its held-out gain over chance",
            "gain": {"every rating 1": self.plain_gain, "omega": self.weighted_gain},
            "kept": None if np.isnan(self.kept) else self.kept,
            "why": self.describe(),
        }


def choose(sums: np.ndarray, n: int, against: str = "alone") -> LabelChoice:
    """The choice from the held-out sums (``held_out_sums``: its first four, ``[sum log
    p_cont, sum log p_conf, sum d, sum d^2]``) over ``n`` ratings (``d`` = the per-rating
    difference), the confusion model predicting ``against`` (see ``LabelChoice``). Of several
    comparisons the one with the smallest ``z`` decides (``min(..., key=z)``): the continuous
    labels need every one."""
    cont, conf, s1, s2 = (float(x) for x in sums[:4])
    mean = s1 / n
    var = max(s2 - n * mean * mean, 0.0) / max(n - 1, 1)
    se = float(np.sqrt(var / n))
    z = mean / se if se > 0 else (np.inf if mean > 0 else -np.inf if mean < 0 else 0.0)
    labels = "continuous" if z > Z_MIN else "confusion"
    return LabelChoice(labels, cont / n, conf / n, mean, se, float(z), against)


def weights_check(alone: np.ndarray, with_spam: np.ndarray, n: int) -> WeightsCheck:
    """Whether the omega weights are used, from the held-out sums (``held_out_sums``) of the
    confusion model alone and of the weighted one with the spam component, over ``n`` ratings:
    when the second keeps at least ``KEEP_SHARE`` of the first's gain over chance (and always
    when the first gains nothing: the weights then take nothing away)."""
    chance = float(alone[4])
    plain = (float(alone[1]) - chance) / n
    weighted = (float(with_spam[1]) - chance) / n
    return WeightsCheck(plain <= 0 or weighted >= KEEP_SHARE * plain, plain, weighted)


def _observations(
    data,
    tau: np.ndarray,
    difficulty: np.ndarray,
    estimate: np.ndarray,
    bias: np.ndarray,
    t: np.ndarray,
    values: np.ndarray | None,
) -> tuple[Callable[[slice], tuple[np.ndarray, np.ndarray]], dict[int, TNStats]]:
    """``held_out_sums``' ``rho_ex`` for ``leave_one_out_by_chunk`` (a chunk's precisions and
    truncated-normal means, the items' observations), and the dict in which it leaves the
    chunk's truncated normals (by the chunk's start) for ``rating_deviation``, which then need
    not take them again."""
    stats: dict[int, TNStats] = {}

    def rho_ex(sl: slice) -> tuple[np.ndarray, np.ndarray]:
        a, lev = data.ann[sl], data.level[sl]
        rho = tau[a] * difficulty[data.cat[sl]]
        stats.clear()
        if values is not None:  # the fit saw each rating as its value
            return rho, values[lev] - bias[a]
        centre = estimate[data.inst[sl]] + bias[a]
        stats[sl.start] = x = tn_stats(t[lev], t[lev + 1], centre, rho)
        return rho, x.ex - bias[a]

    return rho_ex, stats


def held_out_sums(
    data,
    omega: np.ndarray,
    annotators: dict[str, np.ndarray],
    difficulty: np.ndarray,
    estimate: np.ndarray,
    hyper: dict,
    fits: Sequence[tuple[np.ndarray, np.ndarray, np.ndarray | None]],
) -> np.ndarray:
    """(F, 5): for each of the F confusion fits ``fits`` (``(q, log_p, weight)``), ``[sum log
    p_cont, sum log p_conf, sum d, sum d^2, sum log p_chance]`` over every
    rating of ``data`` (a ``CrowdData``: ``ann, inst, cat, level`` (L,)), a chunk of ``CHUNK``
    ratings at a time: ``d = log p_cont - log p_conf`` (``choose``) and ``p_chance`` the
    rating's chance from its annotator's other ratings alone (``chance_log_predictive``,
    ``weights_check``).

    ``omega`` (L,) the continuous fit's q(y); ``annotators``: (N,) arrays ``expertise`` (E
    tau), ``reliability`` (eps), ``bias``, ``bias_var``; ``difficulty`` (C,) E[delta];
    ``estimate`` (M,) the items' posterior means; ``hyper``: ``thresholds``, ``mu``,
    ``lambda``, ``phi``, ``eta``, ``estimate_var`` (M,) the items' posterior variances (these
    three for ``held_out_precision``), ``spam_table`` (N, K) each annotator's spam
    distribution and, for a model whose ratings are values rather than intervals (``ordinal``
    False), ``scale`` (the values the item posteriors were fitted to); each of ``fits``: a
    confusion model's item posteriors ``q`` (M, K) and log confusion ``log_p`` (N, K, K),
    fitted with every rating counting 1 (``weight`` None) or with each counting for
    ``weight`` (L,), the continuous fit's omega: the rating's factor is then divided out as it
    counted, and the prediction mixed with the annotator's spam distribution by eps
    (``mixed_log_predictive``). The continuous model's predictions and chance's are made once
    for all the fits (the ratings' held-out items are the costly part).
    """
    t = np.asarray(hyper["thresholds"], dtype=float)
    mu, lam = float(hyper["mu"]), float(hyper["lambda"])
    spam_table = np.asarray(hyper["spam_table"], dtype=float)
    tau, eps = annotators["expertise"], annotators["reliability"]
    bias, bias_var = annotators["bias"], annotators["bias_var"]
    n_inst = data.n_instances
    chunks = [slice(lo, lo + CHUNK) for lo in range(0, len(data.ann), CHUNK)]
    values = None if hyper.get("ordinal", True) else np.asarray(hyper["scale"], dtype=float)

    rho_ex, stats = _observations(data, tau, difficulty, estimate, bias, t, values)
    n_ann, k = fits[0][1].shape[0], fits[0][1].shape[1]
    cells = np.bincount(data.ann * k + data.level, minlength=n_ann * k)
    counts = cells.reshape(n_ann, k).astype(np.float64)
    # each category's Gamma posterior of delta, for the difficulty without the rating
    shape_c = float(hyper["phi"]) + 0.5 * np.bincount(
        data.cat, weights=omega, minlength=difficulty.size
    )
    rate_c = shape_c / difficulty
    item_var = np.asarray(hyper["estimate_var"], dtype=float)
    out = np.zeros((len(fits), 5))
    by_chunk = leave_one_out_by_chunk(data.inst, omega, chunks, rho_ex, mu, lam, n_inst)
    for sl, rho, mean, prec in by_chunk:
        a, inst, lev, cat = data.ann[sl], data.inst[sl], data.level[sl], data.cat[sl]
        s_l = rating_deviation(
            lev, estimate[inst] + bias[a], rho, t, values, item_var[inst] + bias_var[a],
            stats.pop(sl.start, None),
        )  # fmt: skip
        rho_out = held_out_precision(
            tau[a], shape_c[cat], rate_c[cat], omega[sl], s_l, float(hyper["eta"])
        )
        cont = continuous_log_predictive(
            lev, mean, prec, rho_out, bias[a], bias_var[a], eps[a], spam_table[a, lev], t
        )
        chance = chance_log_predictive(a, lev, counts)
        for i, (q, log_p, weight) in enumerate(fits):
            if weight is None:
                conf = confusion_log_predictive(q, log_p, a, inst, lev)
            else:
                conf = mixed_log_predictive(
                    q, log_p, a, inst, lev, weight[sl], eps[a], spam_table[a, lev]
                )
            d = cont - conf
            out[i] += [cont.sum(), conf.sum(), d.sum(), (d * d).sum(), chance.sum()]
    return out
