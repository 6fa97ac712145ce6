"""LaMCTS (tree, UCB, partitions, CMA-ES), PlaLaM (latent partitions, node values), the schedule
encoding and regularized evolution. The contract every strategy keeps is in test_search_contract.py."""

import random

import numpy as np
import pytest

from engine import loopnest, zoo
from engine.sampler import sample_schedule
from engine.schedule import validate
from engine.search.encoding import Encoding, decode, distance, encode
from engine.search.evolution import crossover
from engine.search.lamcts import Partition, Region, maximize_box, two_means
from engine.search.latent import Autoencoder, AutoencoderParams
from engine.search.space import seed_schedule

CENTER = np.array([0.71, 0.23, 0.55, 0.38, 0.86, 0.12])


def sphere(x: np.ndarray) -> float:
    return -float(np.sum((x - CENTER) ** 2))  # a shifted 6-D sphere, maximized at CENTER


# --- the LaMCTS core on a plain black-box function --------------------------------------------
def test_two_means_separates_two_blobs():
    rng = np.random.default_rng(0)
    Z = np.vstack([rng.normal(0, 0.1, (20, 3)), rng.normal(3, 0.1, (30, 3))])
    lab = two_means(Z, rng)
    assert len(set(lab[:20])) == 1 and len(set(lab[20:])) == 1 and lab[0] != lab[20]


def test_partition_regions_are_what_the_svms_say_and_ucb_finds_the_best_leaf():
    rng = random.Random(0)
    X = np.array([[rng.random() for _ in range(6)] for _ in range(120)])
    y = np.array([sphere(x) for x in X])
    part = Partition(X, y, seed=1, leaf_size=16, cp=0.0)  # no exploration: pure exploitation
    assert part.root.good is not None  # it did split
    leaves, stack = [], [(part.root, [])]
    while stack:
        node, path = stack.pop()
        if node.good is None:
            leaves.append((node, path))
            continue
        stack += [(node.good, [*path, (node, True)]), (node.bad, [*path, (node, False)])]
    assert sorted(int(i) for n, _ in leaves for i in n.idx) == list(range(len(X)))  # the leaves partition the samples
    for node, path in leaves:
        assert part.contains(Region(path, node), X[node.idx]).all()
    region = part.select()
    assert part.best(region) == int(np.argmax(y))  # max-value (PlaLaM) UCB with cp=0 goes to the best sample
    assert part.y[part.root.good.idx].mean() > part.y[part.root.bad.idx].mean()


def test_lamcts_beats_random_sampling_on_a_shifted_sphere():
    n, lo, hi = 120, np.zeros(6), np.ones(6)
    ours, rand = [], []
    for seed in range(3):
        ours.append(-maximize_box(sphere, lo, hi, n, random.Random(seed))[1])
        r = np.random.default_rng(100 + seed)
        rand.append(-max(sphere(r.random(6)) for _ in range(n)))
    # Regret (squared distance to the optimum): random sampling gets ~0.1 with 120 samples.
    assert np.mean(ours) < 0.4 * np.mean(rand), (ours, rand)


# --- encoding and decoding --------------------------------------------------------------------
@pytest.mark.parametrize("name", ["blur", "conv_relu", "unsharp", "mlp", "resnet_block"])
def test_encoding_round_trips(name):
    p = zoo.get(name, "small")
    enc, rng = Encoding.of(p), random.Random(3)
    scheds = [sample_schedule(p, rng) for _ in range(5)] + [seed_schedule(p)]
    xs = [encode(enc, s) for s in scheds]
    assert all(x.shape == (enc.dim,) and x.min() >= 0 and x.max() <= 1 for x in xs)
    near = []
    for s, x in zip(scheds, xs):
        assert decode(enc, x, rng, guides=[s]).content_hash() == s.content_hash()  # exact with the schedule as guide
        d = decode(enc, x, rng)  # without: a legal schedule nearby
        validate(p, d)
        loopnest.build(p, d)
        near.append(distance(enc, x, encode(enc, d)))
    apart = [distance(enc, a, b) for i, a in enumerate(xs) for b in xs[:i]]
    assert np.mean(near) < 0.6 * np.mean(apart), (near, apart)


def test_decoding_any_vector_and_crossover_are_legal():
    for name in ("harris", "attention", "mobilenet_block"):
        p = zoo.get(name, "small")
        enc, rng = Encoding.of(p), random.Random(7)
        for _ in range(3):
            d = decode(enc, np.array([rng.random() for _ in range(enc.dim)]), rng, k=4)
            validate(p, d)
            loopnest.build(p, d)
            c = crossover(p, sample_schedule(p, rng), d, rng)
            validate(p, c)
            loopnest.build(p, c)


# --- PlaLaM: the latent space, node values ----------------------------------------------------
# A multimodal function with known optima on a 3-D manifold in a 12-D box: legal points are
# g(u), u in [0, 1]^3 (as legal schedules fill a thin part of their encoding's box), and f
# has four Gaussian bumps there, the global one (height 1) at g(TOY_C[0]).
_toy = np.random.default_rng(5)
TOY_A, TOY_B = _toy.normal(0, 2.0, (12, 3)), _toy.normal(0, 0.5, 12)
TOY_C = np.array([[0.8, 0.2, 0.7], [0.2, 0.8, 0.3], [0.3, 0.3, 0.8], [0.75, 0.7, 0.2]])
TOY_H = np.array([1.0, 0.8, 0.8, 0.8])


def toy_g(u: np.ndarray) -> np.ndarray:
    return 1 / (1 + np.exp(-(TOY_A @ (u - 0.5) + TOY_B)))


TOY_PEAKS = np.array([toy_g(c) for c in TOY_C])


def toy_f(x: np.ndarray) -> float:
    return float(np.max(TOY_H * np.exp(-np.sum((TOY_PEAKS - x) ** 2, axis=1) / (2 * 0.15**2))))


def toy_draw(rng: random.Random) -> np.ndarray:
    return toy_g(np.array([rng.random() for _ in range(3)]))


def test_the_toy_optimum_is_known():
    assert toy_f(TOY_PEAKS[0]) == pytest.approx(1.0, abs=1e-6)
    assert all(toy_f(x) < 0.81 for x in TOY_PEAKS[1:])  # the other bumps are local optima


def test_latent_partitioning_beats_random_on_a_multimodal_function_at_equal_budget():
    n, lo, hi = 150, np.zeros(12), np.ones(12)
    ae = AutoencoderParams(dim=3, steps=100)  # a short fit: enough for this manifold
    ours, rand = [], []
    for seed in range(3):
        x, v = maximize_box(toy_f, lo, hi, n, random.Random(seed), sample=toy_draw, latent=ae, n_unlabeled=200, rebuild_every=16)
        assert v == toy_f(x)
        ours.append(1.0 - v)  # regret against the known optimum
        r = random.Random(100 + seed)
        rand.append(1.0 - max(toy_f(toy_draw(r)) for _ in range(n)))
    assert np.mean(ours) < 0.5 * np.mean(rand), (ours, rand)


def test_autoencoder_fit_reduces_its_loss_and_is_a_function_of_its_seed():
    rng = random.Random(1)
    X = np.array([toy_draw(rng) for _ in range(100)])
    a, b = Autoencoder(12, AutoencoderParams(dim=3, steps=150), seed=4), Autoencoder(12, AutoencoderParams(dim=3, steps=150), seed=4)
    la, lb = a.fit(X), b.fit(X)
    assert la == lb and la[-1] < 0.2 * la[0]
    Z = a.encode(X)
    assert Z.shape == (100, 3) and np.abs(Z).max() <= 1.0
    assert np.mean((a.decode(Z) - X) ** 2) == pytest.approx(la[-1], rel=0.5)
    with pytest.raises(ValueError, match=r"\(rows, 12\)"):
        a.fit(X[:, :5])


def test_top_node_value_discounts_one_lucky_sample():
    X = np.linspace(0, 1, 40)[:, None]
    y = np.zeros(40)
    y[3] = 1.0  # one outlier in a flat region
    y[30:] = 0.8  # a consistently good region
    mx, top = Partition(X, y, seed=0, value="max"), Partition(X, y, seed=0, value="top")
    assert mx.node_value(mx.root) == 1.0 and top.node_value(top.root) == pytest.approx((1.0 + 0.8 * 3) / 4)
    with pytest.raises(ValueError, match="node value 'mean'"):
        Partition(X, y, seed=0, value="mean")
