import numpy as np

from ordmix_core.numerics.keyed_random import id_hash, keyed_normal, keyed_uniform


def test_draw_follows_the_id_not_its_position():
    ids = np.array([f"item{i}" for i in range(1000)], dtype=object)
    z = keyed_normal(id_hash(ids), key=7)
    perm = np.random.default_rng(0).permutation(1000)
    assert np.array_equal(keyed_normal(id_hash(ids[perm]), key=7), z[perm])
    assert not np.allclose(keyed_normal(id_hash(ids), key=8), z)
    assert not np.allclose(keyed_normal(id_hash(ids), key=7, stream=1), z)


def test_distributions():
    h = id_hash(np.arange(200_000))
    z = keyed_normal(h, key=1)
    assert abs(z.mean()) < 0.01 and abs(z.std() - 1) < 0.01
    u = keyed_uniform(h, key=1)
    assert u.min() >= 0 and u.max() < 1 and abs(u.mean() - 0.5) < 0.01
    assert np.all(np.isfinite(z))
