"""How sure a label is: the careful annotator's confusion, the report map, and what gold
teaches, each against a computation written out here."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from ordmix_core.labels import calibration as cal


def _confusions(rng, n: int = 6, k: int = 3) -> np.ndarray:
    p = rng.dirichlet(np.ones(k), size=(n, k)) + 3 * np.eye(k)[None]
    return p / p.sum(axis=2, keepdims=True)


def test_balanced_accuracy_is_the_mean_diagonal():
    p = np.array([[[0.9, 0.1], [0.5, 0.5]], [[0.2, 0.8], [0.0, 1.0]]])
    np.testing.assert_allclose(cal.balanced_accuracy(p), [0.7, 0.6])


def test_a_favourite_answer_spammer_is_not_balanced_accurate():
    """Always answering level 0: right on every item of level 0, nowhere else."""
    spammer = np.array([[[1.0, 0.0], [1.0, 0.0]]])
    careful = np.array([[[0.8, 0.2], [0.2, 0.8]]])
    both = np.concatenate([spammer, careful])
    acc = cal.balanced_accuracy(both)
    assert acc[0] == 0.5 and acc[1] == 0.8
    rho = np.array([0.9, 0.1])  # the commonest level: plain accuracy would rank it first
    assert (rho * np.diagonal(spammer[0])).sum() > (rho * np.diagonal(careful[0])).sum()


def test_symmetric_averages_the_cells_at_each_distance():
    table = np.array([[0.6, 0.3, 0.1], [0.2, 0.5, 0.3], [0.0, 0.4, 0.6]])
    rho = np.array([0.5, 0.25, 0.25])
    got = cal.symmetric(table, rho)
    by_d = {}
    for c in range(3):
        for k in range(3):
            d = abs(k - c)
            w, s = by_d.get(d, (0.0, 0.0))
            by_d[d] = (w + rho[c], s + rho[c] * table[c, k])
    mean = {d: s / w for d, (w, s) in by_d.items()}
    want = np.array([[mean[abs(k - c)] for k in range(3)] for c in range(3)])
    want /= want.sum(axis=1, keepdims=True)
    np.testing.assert_allclose(got, want, rtol=1e-12)
    assert got[0, 1] / got[0, 0] == pytest.approx(got[1, 0] / got[1, 1])  # one step, up or down


def test_the_reference_is_the_most_accurate_annotators_giving_the_share():
    rng = np.random.default_rng(1)
    p = _confusions(rng)
    rho = np.array([0.3, 0.4, 0.3])
    n = np.array([10.0, 40.0, 5.0, 25.0, 15.0, 5.0])
    order = np.argsort(-cal.balanced_accuracy(p), kind="stable")
    share = 0.35
    got = cal.reference_confusion(p, rho, n, share)
    # the most accurate first, until their ratings reach the share (the last one whole)
    cum = np.cumsum(n[order]) / n.sum()
    take = order[: int(np.argmax(cum >= share)) + 1]
    mean = (n[take, None, None] * p[take]).sum(axis=0) / n[take].sum()
    np.testing.assert_allclose(got, cal.symmetric(mean, rho), rtol=1e-12)
    np.testing.assert_allclose(got.sum(axis=1), 1.0)
    everyone = cal.reference_confusion(p, rho, n, 1.0)
    mean_all = (n[:, None, None] * p).sum(axis=0) / n.sum()
    np.testing.assert_allclose(everyone, cal.symmetric(mean_all, rho), rtol=1e-12)


def test_annotators_tied_in_accuracy_are_taken_in_their_order():
    """Twenty annotators in three tiers of equal balanced accuracy, each with its own
    off-diagonal answers: the share stops inside the top tier, whose first annotators (by
    code) are taken. An unstable sort takes others of the tier."""
    rng = np.random.default_rng(7)
    k, n_ann = 3, 20
    tier = rng.integers(0, 3, size=n_ann)
    diag = np.array([0.8, 0.6, 0.4])[tier]
    p = np.empty((n_ann, k, k))
    for a in range(n_ann):
        for c in range(k):
            off = rng.dirichlet(np.ones(k - 1)) * (1.0 - diag[a])
            p[a, c] = np.insert(off, c, diag[a])
    n = rng.integers(1, 30, size=n_ann).astype(float)
    rho = np.array([0.3, 0.4, 0.3])
    acc = cal.balanced_accuracy(p)
    assert len(np.unique(acc.round(12))) == 3  # the tiers are exact ties
    order = sorted(range(n_ann), key=lambda a: (-round(acc[a], 12), a))
    top = [a for a in order if tier[a] == 0]
    share = n[top[:2]].sum() / n.sum() - 1e-9  # reached at the top tier's second annotator
    taken, held = [], 0.0
    for a in order:
        taken.append(a)
        held += n[a]
        if held / n.sum() >= share:
            break
    assert taken == top[:2]
    mean = (n[taken, None, None] * p[taken]).sum(axis=0) / n[taken].sum()
    got = cal.reference_confusion(p, rho, n, share)
    np.testing.assert_allclose(got, cal.symmetric(mean, rho), rtol=1e-12)


@settings(max_examples=60, deadline=None)
@given(st.floats(0.0, 1.0), st.integers(2, 6))
def test_the_report_map_mixes_the_latent_level_and_the_reference(weight, k):
    ref = np.random.default_rng(k).dirichlet(np.ones(k), size=k)
    m = cal.report_map(ref, weight)
    np.testing.assert_allclose(m, weight * np.eye(k) + (1 - weight) * ref, rtol=1e-12)
    np.testing.assert_allclose(m.sum(axis=1), 1.0)


def test_tempered_is_the_power_renormalised():
    q = np.array([[0.7, 0.2, 0.1], [1.0, 0.0, 0.0]])
    got = cal.tempered(q, 2.0)
    want = np.sqrt(q) / np.sqrt(q).sum(axis=1, keepdims=True)
    np.testing.assert_allclose(got, want, rtol=1e-12)
    assert (got[1] == [1.0, 0.0, 0.0]).all()  # a zero stays 0, no warning
    np.testing.assert_allclose(cal.tempered(q, 1.0), q, rtol=1e-12)


def test_tempered_rows_need_not_sum_to_one():
    # weights at any scale, each row on its own: 1e-200 squared would underflow unshifted
    q = np.array([[1e-200, 3e-200], [0.5, 0.5], [2.0, 6.0]])
    got = cal.tempered(q, 0.5)
    np.testing.assert_allclose(got, [[0.1, 0.9], [0.5, 0.5], [0.1, 0.9]], rtol=1e-12)


def test_gold_temperature_is_the_most_likely_of_the_grid():
    rng = np.random.default_rng(4)
    q = rng.dirichlet(np.ones(3) * 0.3, size=80)
    expert = np.array([[0.8, 0.15, 0.05], [0.1, 0.8, 0.1], [0.05, 0.15, 0.8]])
    # gold drawn from a flatter posterior than q says: a temperature above 1 fits it
    flat = cal.tempered(q, 3.0) @ expert
    gold = np.array([rng.choice(3, p=row) for row in flat])
    scores = [np.log((cal.tempered(q, t) @ expert)[np.arange(80), gold]).sum()
              for t in cal.GOLD_TEMPERATURES]  # fmt: skip
    got = cal.gold_temperature(q, gold, expert)
    assert got == cal.GOLD_TEMPERATURES[int(np.argmax(scores))]
    assert got > 1.0
