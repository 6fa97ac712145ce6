"""Random pipelines: valid, deterministic per seed, varied, and within their FLOP budget."""

from collections import Counter

import pytest

from engine.interpret import interpret
from engine.ir import Pipeline
from engine.randpipe import FLOP_BUDGET, random_pipeline
from engine.reference import evaluate_ops, make_inputs

SEEDS = range(40)


def test_deterministic_named_and_bounded():
    for seed in SEEDS:
        p = random_pipeline(seed, max_stages=6)
        assert p.name == f"rand_{seed}"
        assert p.to_json() == random_pipeline(seed, max_stages=6).to_json()
        assert 1 <= len(p.stages) <= 6 and p.flops() <= FLOP_BUDGET["small"]
        Pipeline.from_json(p.to_json())  # validates (bounds of every access included)
        assert all(o in {r.output for r in p.ops} for o in p.outputs)  # the operator reference covers the outputs
        read = {src for s in p.stages for src in s.sources()}
        assert set(p.outputs) == {s.name for s in p.stages if s.name not in read}


def test_varied():
    hashes = {random_pipeline(seed).content_hash() for seed in SEEDS}
    assert len(hashes) == len(SEEDS)
    ops = Counter(s.op for seed in SEEDS for s in random_pipeline(seed).stages)
    for kind in ("conv2d", "matmul", "stencil", "maxpool", "relu", "row_max"):
        assert ops[kind] > 0, ops
    assert any(len(random_pipeline(seed).outputs) > 1 for seed in SEEDS)  # branches that stay apart
    assert any(s.op in ("add", "add_relu", "mul") for seed in SEEDS for s in random_pipeline(seed).stages)  # joins


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_declaration_matches_the_operator_reference(seed):
    """The stages (interpreted) compute what the op records say: an independent check of randpipe's use of the Builder."""
    p = random_pipeline(seed, max_stages=5)
    inputs = make_inputs(p, 0)
    ref, got = evaluate_ops(p, inputs), interpret(p, inputs)
    for o in p.outputs:
        assert abs(ref[o] - got[o]).max() <= 1e-4 * max(1.0, abs(ref[o]).max())


def test_larger_sizes_are_larger_tensors_under_larger_budgets():
    assert FLOP_BUDGET["small"] < FLOP_BUDGET["medium"] < FLOP_BUDGET["large"]
    assert random_pipeline(5, size="medium").name == "rand_5"
    for seed in range(8):
        small, large = random_pipeline(seed), random_pipeline(seed, size="large")
        s_in, l_in = small.input_map["input"].shape, large.input_map["input"].shape
        assert l_in[-2:] == tuple(4 * n for n in s_in[-2:]) and l_in[:-2] == s_in[:-2]  # same seed: the same kind, 4x the extent
        assert large.flops() <= FLOP_BUDGET["large"]
    flops = [(random_pipeline(s).flops(), random_pipeline(s, size="large").flops()) for s in range(20)]
    assert sum(b for _, b in flops) > 20 * sum(a for a, _ in flops)
    with pytest.raises(ValueError):
        random_pipeline(5, size="huge")
