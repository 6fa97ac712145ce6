"""LaMCTS (tree, UCB, partitions, CMA-ES), the schedule encoding and regularized evolution."""

import random
import threading
import time

import numpy as np
import pytest

from engine import loopnest, zoo
from engine.costmodel import AnalyticModel
from engine.measure import Measurement, Runner
from engine.sampler import sample_schedule
from engine.schedule import validate
from engine.search import Budget, run_search
from engine.search.encoding import Encoding, decode, distance, encode
from engine.search.evolution import crossover
from engine.search.lamcts import Partition, Region, maximize_box, two_means
from engine.search.space import seed_schedule

STRATEGIES = ["lamcts", "evolution"]
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


# --- the strategies ---------------------------------------------------------------------------
class Recording(AnalyticModel):
    """The analytic model, recording every schedule it is asked about (checked by the test:
    an exception raised here would be swallowed by ctx.predict as an infinite prediction)."""

    def __init__(self) -> None:
        super().__init__()
        self.seen = []

    def predict(self, p, s, nest=None):
        self.seen.append(s)
        return super().predict(p, s, nest)


def analytic_measure(crash=lambda s: False):
    """A deterministic stand-in for hardware: the analytic prediction as the "measured" time.
    Acceptable for the tests of search mechanics (validity, determinism, cancellation,
    failures) only; real measurements are used in test_real_halide_measurements."""
    model = AnalyticModel()

    def measure(p, s):
        if crash(s):
            return Measurement(p.name, "", s.content_hash(), False, error="worker crashed (test)")
        return Measurement(p.name, "", s.content_hash(), True, True, median_ms=model.predict(p, s).total_ms)

    return measure


@pytest.mark.parametrize("strategy", STRATEGIES)
def test_every_proposal_validates_and_the_seed_is_measured_first(strategy):
    p = zoo.get("unsharp", "small")
    model = Recording()
    res = run_search(p, strategy, Budget(trials=4, wall_s=60), 1, model=model, measure_fn=analytic_measure())
    assert len(model.seen) > 20 and len(res.trials) == 4
    for s in model.seen:
        validate(p, s)
        loopnest.build(p, s)
    assert res.trials[0].schedule.content_hash() == seed_schedule(p).content_hash()
    assert res.verified and res.best_ms <= res.trials[0].measured_ms  # never worse than the seed


@pytest.mark.parametrize("strategy", STRATEGIES)
def test_deterministic_given_a_seed(strategy):
    p = zoo.get("conv_relu", "small")

    def run(seed):
        r = run_search(p, strategy, Budget(trials=5, wall_s=60), seed, measure_fn=analytic_measure())
        return [t.schedule.content_hash() for t in r.trials]

    a = run(3)
    assert len(a) == 5 and a == run(3)


@pytest.mark.parametrize("strategy", STRATEGIES)
def test_cancellation_stops_promptly(strategy):
    p = zoo.get("harris", "small")
    cancel, at = threading.Event(), []

    def stop():
        at.append(time.monotonic())
        cancel.set()

    threading.Timer(1.5, stop).start()
    res = run_search(p, strategy, Budget(trials=1000, wall_s=60), 0, measure_fn=analytic_measure(), cancel=cancel)
    assert res.cancelled and time.monotonic() - at[0] < 1.5  # one decode or prediction chunk at most, on a busy machine


@pytest.mark.parametrize("strategy", STRATEGIES)
def test_crashing_candidates_are_skipped(strategy):
    p = zoo.get("conv_relu", "small")

    def crash(s):
        return int(s.content_hash()[:2], 16) % 2 == 1  # about half of all schedules

    res = run_search(p, strategy, Budget(trials=8, wall_s=60), 2, measure_fn=analytic_measure(crash))
    failed = [t for t in res.trials if not t.verified]
    assert len(res.trials) == 8 and failed and all(t.error for t in failed)
    assert res.verified and not crash(res.best) and res.best_ms == min(t.measured_ms for t in res.trials if t.verified)


@pytest.fixture(scope="module")
def runner():
    with Runner() as r:
        yield r


@pytest.mark.parametrize("strategy", STRATEGIES)
def test_real_halide_measurements(runner, strategy):
    p = zoo.get("conv_relu", "small")
    res = run_search(p, strategy, Budget(trials=3, wall_s=90), 0, runner=runner, confirm=False)  # the strategy's own pick
    seed = res.trials[0]
    assert seed.schedule.content_hash() == seed_schedule(p).content_hash() and seed.verified
    assert res.verified and res.best_ms <= seed.measured_ms, res.to_json()  # never worse than the seed
    assert len(res.trials) == 3 and res.measure_s > 0
