"""A fit in plain words: what was fitted, which restart won and why, what the data cannot decide.

``fit_summary`` gives the Fit page's lines (and ``selection_explanation``, ``model_line``,
``no_spam_note``, ``ensemble_line``, ``moving_line``, ``undetermined_line`` each one part),
``page_warnings`` the fit's warnings it shows. Restarts are numbered from 0 everywhere, as in
``restarts.csv``, ``trace.csv`` and ``summary.json``."""

from __future__ import annotations

from typing import Any

import pandas as pd

from ..estimators.learned import STOP_WARNING
from ..estimators.models import MODELS
from ..estimators.ordinal_mixture import OrdinalMixture
from ..labels.policy import DEFAULT as DEFAULT_POLICY
from ..results import agreement, decision_columns, decisions, stability


def _count(n: int, what: str) -> str:
    return f"{n:,} {what}" + ("" if n == 1 else "s")


def _capital(text: str) -> str:
    """``text`` with its first letter a capital (a clause made the start of a sentence)."""
    return text[:1].upper() + text[1:]


def _be(n: int) -> str:
    """``is`` or ``are`` for ``n`` things."""
    return "is" if n == 1 else "are"


def _first_names(ids: Any, n: int = 5) -> str:
    """The first ``n`` IDs, comma-separated, with ", ..." when there are more."""
    ids = list(ids)
    return ", ".join(str(a) for a in ids[:n]) + (", ..." if len(ids) > n else "")


def page_warnings(model: OrdinalMixture, stop_said: bool) -> list[str]:
    """The fit's warnings (``warnings_``) as the Fit page shows them: all of them, but the
    engine's note that the fit was stopped when the page already says so (``stop_said``: its
    own message, which names the seconds run and the restart kept), so a stop is said once."""
    return [w for w in model.warnings_ if not (stop_said and w == STOP_WARNING)]


def selection_explanation(model: OrdinalMixture) -> str:
    """Why this restart was chosen, in words.

    A finished fit: the engine's own reason. A stopped one is described from ``restarts_``
    and ``interrupted_``: which restart was kept and in what state, and what became of the
    others (finished, still running at the stop, pruned earlier, not yet in the mixture).
    """
    if not model.interrupted_:
        return model.selection_reason_
    r = model.restarts_
    row = r.loc[model.best_restart_]
    mixing = (r["n_iter"] > 0).to_numpy()
    pruned = r["dropped"].to_numpy(bool)
    stages = [c for c in ("n_iter", "uniform_iter", "warmup_iter", "shared_iter") if c in r]
    total = r[stages].sum(axis=1).to_numpy()  # max_iter caps a restart's sweeps of all stages
    finished = ~pruned & (r["converged"].to_numpy(bool) | (total >= model.max_iter))
    running = mixing & ~pruned & ~finished
    if row["n_iter"] == 0:
        warm = model.trace_[model.trace_["restart"] == model.best_restart_]["lower_bound"]
        bound = f" (lower bound {warm.iloc[-1]:,.1f})" if len(warm) else ""
        kept = (
            "the fit was stopped before any restart reached the mixture stage: the no-spam "
            f"warm-up fit of restart {model.best_restart_}{bound} is kept"
        )
    else:
        candidates = int((~pruned).sum()) or len(r)
        state = "converged" if row["converged"] else "had not converged"
        kept = (
            f"the fit was stopped: restart {model.best_restart_} is kept, the highest lower "
            f"bound at the stop ({row['lower_bound']:,.1f}) among {_count(candidates, 'restart')} "
            f"still in the race; it ran {_count(int(row['n_iter']), 'iteration')} and {state}"
        )
    n_running = int(running.sum())
    parts = [
        (int(finished.sum()), "finished"),
        (n_running, "was still running" if n_running == 1 else "were still running"),
        (int(pruned.sum()), "had been pruned earlier by successive halving"),
        (
            model.planned_restarts() - int(mixing.sum()),
            "had not reached the mixture stage (still in the warm-up, or not started)",
        ),
    ]
    others = ", ".join(f"{n} {what}" for n, what in parts if n)
    return f"{kept}. Of the {model.planned_restarts()} restarts: {others}"


def _in_words(parts: list[str]) -> str:
    """``a``, ``a and b``, ``a, b and c``."""
    return " and ".join([", ".join(parts[:-1]), parts[-1]] if len(parts) > 1 else parts)


def model_line(model: OrdinalMixture) -> str:
    """Which model was fitted and why, with what it learned (``model_``), in one sentence.

    The sentence says what the default (``model="extended"``) adds to the paper's model (its
    difficulty prior too, when not the paper's), the learned spread of the annotators' biases
    and the spammers' answer distribution, and which model the labels come from
    (``model_["labels"]``).
    """
    d = getattr(model, "model_", None) or {}
    if d.get("model") == "paper":
        text = "Model: the paper's (Lakshminarayanan & Teh), as published"
    else:
        parts = []
        if d.get("bias"):
            parts.append("a bias per annotator (lenient raters score high, strict ones low)")
        if d.get("spam_dist") == "global":
            parts.append("a spam answer distribution learned from the data")
        elif d.get("spam_dist") == "annotator":
            parts.append("a spam answer distribution learned per annotator")
        hp = getattr(model, "hyperparams_", None) or {}
        if (hp.get("phi"), hp.get("eta")) != (MODELS["paper"]["phi"], MODELS["paper"]["eta"]):
            parts.append(
                f"a difficulty prior Gamma({hp.get('phi', 0):g}, {hp.get('eta', 0):g}) in place "
                "of the paper's Gamma(10, 5)"
            )
        added = _in_words(parts) or "nothing"
        text = (
            f"Model: {d.get('model', 'extended')}, the paper's model plus {added}, so that a "
            "rater who is consistently lenient or strict is not mistaken for a spammer"
        )
    learned = []
    if d.get("bias_sd_prior"):
        learned.append(f"annotators' biases spread about ±{d['bias_sd_prior']:.2f}")
    pi = d.get("pi")
    if pi is not None and model.spam_:
        levels = getattr(model, "scale_", None)
        names = [f"{v:g}" for v in levels.values] if levels is not None else []
        if len(names) != len(pi):
            names = [str(i + 1) for i in range(len(pi))]
        dist = ", ".join(f"{n}: {p:.0%}" for n, p in zip(names, pi, strict=True))
        learned.append(f"spam answers {dist}")
    if d.get("n_gold"):
        learned.append(f"{d['n_gold']:,} gold items anchored the fit")
    text += f" (learned: {'; '.join(learned)})" if learned else ""
    labels = d.get("labels")
    if isinstance(labels, dict) and "model" in labels:
        text += f". Labels: from the {labels['model']}"
    return text


def no_spam_note(model: OrdinalMixture) -> str:
    """Why a fit without the spam component has none (the model's decision and its reason, or
    the user's switch), and what the annotator flags then rest on."""
    why = (
        "This fit has no spam component (it was switched off): it took every rating as "
        "honest; refit with it on for reliabilities the fit itself estimates. "
    )
    return why + (
        "The flags below still weigh each annotator's ratings against the other ratings of "
        "their items."
    )


def ensemble_line(model: OrdinalMixture) -> str:
    """What the data cannot decide: how many items and annotators the answers
    near-tied with the winner disagree on, with the largest spread. Those answers are the
    restarts that finished near the best bound (``model.ensemble_``) and, when near-tied, the
    answer with the still-moving annotators carried the way they were going
    (``model.alternative_``)."""
    ens = stability.stability_summary(model)
    n = len(ens["restarts"])
    gap = f"{ens['bound_gap']:,.1f}"
    alt = ens["alternative"]
    near = alt is not None and alt["near_tied"]
    judged = ""
    if alt is not None:
        d = alt["bound_above_winner"]
        judged = (
            f"carrying the {_count(len(alt['annotators']), 'still-moving annotator')} "
            f"({_first_names(alt['annotators'])}) "
            f"the way they were going gives an answer whose lower bound is {abs(d):,.1f} "
            f"{'above' if d >= 0 else 'below'} the chosen one's"
        )
    if n < 2 and not near:
        text = (
            f"Unstable: no other restart finished within {gap} of the best lower bound, so "
            "there is no near-tied answer to compare it with."
        )
        return text + (f" And {judged} (more than {gap} below)." if judged else "")
    answers = [f"{n} restarts finished within {gap} of the best lower bound"] if n >= 2 else []
    if near:
        answers.append(judged + ("" if alt["bound_above_winner"] >= 0 else f" (within {gap})"))
    items = ens["unstable_items"]
    about = (
        ""
        if items is None
        else f"{items:,} item(s) (largest spread of z_mean {ens['max_estimate_spread']:.3f}) and "
    )
    return (
        f"Unstable: {', and '.join(answers)}. These answers disagree on {about}"
        f"{ens['unstable_annotators']:,} annotator(s), marked unstable on the Items and "
        "Annotators pages: the data do not settle them."
    )


def moving_line(model: OrdinalMixture) -> str | None:
    """The annotators the fit had not settled (``still_moving``), or None if there are none:
    a longer fit may change their reliability, and their items' estimates with it."""
    ann = model.annotators_
    if "still_moving" not in ann or not ann["still_moving"].any():
        return None
    moving = ann.index[ann["still_moving"].to_numpy()]
    return (
        f"Still moving: the reliability of {_count(len(moving), 'annotator')} "
        f"({_first_names(moving)}) was "
        f"still changing when the fit stopped (leaving its end by more than "
        f"{model.fit_policy.moving_growth:.1%} a sweep, or expected to move by more than "
        f"{model.fit_policy.moving_drift:g}); a longer fit (a tighter tolerance) may change their "
        "verdict and the estimates of the items they rated. Marked still_moving on the "
        "Annotators page."
    )


def undetermined_line(items: pd.DataFrame) -> str:
    """How many items are undetermined (``items``: the decision columns): their two most
    probable levels tie."""
    und = int((items["flag"] == "undetermined").sum())
    return (
        f"{und:,} of {_count(len(items), 'item')} {_be(und)} undetermined: their two most "
        f"probable levels are within {DEFAULT_POLICY.tie:.0%} of each other (a tie), so their "
        "labels are guesses; they are marked in the Items table."
    )


def fit_summary(model: OrdinalMixture, dec: decision_columns.Decisions | None = None) -> list[str]:
    """What the fit says about the data and about itself, one plain sentence each.

    ``dec``: the fit's decisions (``decision_columns.decide(model)`` by default): the annotators
    flagged unreliable / ok / undetermined from the evidence of their ratings, and the items
    whose two most probable levels tie.
    """
    dec = decision_columns.decide(model) if dec is None else dec
    ann = model.annotators_
    lines = []
    warm_up_only = model.interrupted_ and model.restarts_.loc[model.best_restart_, "n_iter"] == 0
    if warm_up_only:
        lines.append(
            "The kept fit is the no-spam warm-up (stopped before the mixture), so it cannot "
            "judge spammers yet; run the fit to the end for that."
        )
    elif dec.annotators is not None:
        flag = dec.annotators["flag"]
        n = {f: int((flag == f).sum()) for f in ("unreliable", "ok", "undetermined")}
        unreliable = (flag == "unreliable").to_numpy()
        share = ann["n_ratings"].to_numpy()[unreliable].sum() / max(int(ann["n_ratings"].sum()), 1)
        t, c = dec.threshold, dec.confidence
        lines.append(
            f"{n['unreliable']:,} of {_count(len(ann), 'annotator')} {_be(n['unreliable'])} "
            f"unreliable: their ratings make a reliability below {t:g} at least {c:.0%} "
            f"probable; they gave {share:.1%} of the ratings. {n['ok']:,} {_be(n['ok'])} ok "
            f"(reliability {t:g} or more with {c:.0%} probability) and {n['undetermined']:,} "
            "undetermined: too few ratings, ratings of items nobody else rated well, or a "
            f"reliability near {t:g}, to judge either way."
        )
        if not model.spam_:
            lines.append(
                "This fit has no spam component: it took every rating as honest; the flags "
                "still weigh each rating against the other ratings of its item."
            )
    else:
        lines.append(f"Annotator flags: {dec.no_flags}.")
    if dec.items is not None:
        lines.append(undetermined_line(dec.items))
    if dec.agreement is not None:
        lines.append(_capital(agreement.words(dec.agreement.as_dict())) + ".")
    if model.spam_ and not warm_up_only:
        spam = 1.0 - decisions.truth_share(model)
        lines.append(
            f"Ratings taken as spam: {spam:.1%} (the mean over all ratings of the probability "
            "that a rating is spam rather than drawn from the item's truth)."
        )
    lines.append(model_line(model) + ".")
    lines.append(f"Chosen: {selection_explanation(model)}.")
    if not warm_up_only:
        lines.append(ensemble_line(model))
    if model.interrupted_ and not model.converged_:
        lines.append("Not converged: the fit was stopped, so treat the estimates as provisional.")
    elif model.converged_:
        lines.append(
            f"Converged: the chosen restart's lower bound settled (changed by less than "
            f"{model.tol:g} of itself)"
            + (
                f" and its estimates are expected to move by less than {model.tol_estimate:g} more"
                if model.tol_estimate > 0
                else ""
            )
            + f", after {_count(model.n_iter_, 'iteration')}."
        )
    else:
        lines.append(
            f"Not converged: the chosen restart reached the cap of {model.max_iter} sweeps; "
            "raise Max sweeps per restart or the tolerances."
        )
    moving = None if warm_up_only else moving_line(model)
    if moving is not None:
        lines.append(moving)
    if model.collapsed_:
        lines.append(
            "Collapsed: every restart explains almost all ratings as spam; compare with the "
            "model without spam."
        )
    return lines
