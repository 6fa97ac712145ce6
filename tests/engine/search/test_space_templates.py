"""The structured decisions zero-measurement greedy offers beside the sampler's random ones
(engine/search/space_templates.py): every one legal at every step, the shapes fast
schedules are made of present (parallel outer loop + vector at the target's width; a
reduction vectorized along a pure loop with the reduction loops outside the vector), and
greedy with V over them deterministic per seed, with a beam."""

from __future__ import annotations

import json
import random

import pytest

from engine import sampler, zoo
from engine.schedule import Kind, Schedule, validate
from engine.search.space import nest_locations, order, with_decision
from engine.search.space_templates import template_options
from engine.search.value_offline import shipped_value, value_greedy

LANES = 8  # AVX2's float32 lanes, given explicitly so the test does not depend on the host


def _walk(p, pick):
    """Decide every stage in order with `pick(options)` of the templates; yield each step's options."""
    partial = Schedule(name="t")
    for st in order(p):
        opts = template_options(p, partial, st, LANES)
        yield st, partial, opts
        partial = with_decision(partial, st, pick(opts))


@pytest.mark.parametrize("name", ["matmul", "layernorm", "unsharp", "conv_relu"])
def test_every_template_is_legal_at_every_step(name):
    p = zoo.get(name, "small")
    for pick in (lambda o: o[0], lambda o: o[-1]):  # two different paths through the space
        for st, partial, opts in _walk(p, pick):
            assert opts, f"{name}: no template for {st}"
            assert len(set(opts)) == len(opts)
            for o in opts:
                validate(p, with_decision(partial, st, o))  # undecided stages stay at root


def test_the_fast_shapes_are_offered():
    p = zoo.get("matmul", "full")
    out, prod = order(p)[0], order(p)[1]
    opts = template_options(p, Schedule(), out, LANES)
    outer = p.stage(out).dims[0].name
    inner = p.stage(out).dims[-1].name

    def kinds(ds):
        return {(d.kind, d.loop, d.factor) for d in ds}

    # parallel outermost loop + innermost loop vectorized at the target's width
    assert any({(Kind.PARALLEL, outer, None), (Kind.VECTORIZE, inner, LANES)} <= kinds(o.pure) for o in opts)
    # row strips: the outer part of a split row loop parallel, and a 2-D tile
    assert any(any(d.kind == Kind.SPLIT and d.loop == outer for d in o.pure) for o in opts)
    partial = with_decision(Schedule(), out, opts[0])
    ups = [o.update for o in template_options(p, partial, prod, LANES) if o.compute().kind == Kind.COMPUTE_ROOT]
    assert ups
    rvar = p.stage(prod).rdom[0].name
    for u in ups:  # the vector is innermost, the reduction loops outside it
        reorder = next(d for d in u if d.kind == Kind.REORDER)
        vec = next(d.loop for d in u if d.kind == Kind.VECTORIZE)
        assert reorder.loops[0] == vec and any(x.startswith(rvar) for x in reorder.loops[1:])
    # a register block (a pure loop's inner part unrolled inside the reduction) and k blocking
    assert any(any(d.kind == Kind.UNROLL for d in u) for u in ups)
    assert any(any(d.kind == Kind.SPLIT and d.loop == rvar for d in u) for u in ups)


def test_beam_greedy_over_templates_is_deterministic_and_legal():
    p = zoo.get("layernorm", "small")
    v = shipped_value()
    a = value_greedy(p, v, random.Random(3), k=2, beam=3)
    b = value_greedy(p, v, random.Random(3), k=2, beam=3)
    validate(p, a)
    assert a.content_hash() == b.content_hash()
    # with no random options, every decision is a template (the beam follows legal states only)
    t = value_greedy(p, v, random.Random(3), k=0, beam=2)
    partial = Schedule(name="t")
    for st in order(p):
        assert t.stages[st] in template_options(p, partial, st)
        partial = with_decision(partial, st, t.stages[st])


def test_a_reduction_vectorized_across_rows_gets_row_lanes_not_the_full_width():
    from engine.heuristic import ROW_LANES

    p = zoo.get("softmax", "small")  # softmax_max[i] = max over r of x[i, r]: a vector along i loads one element per row
    partial = Schedule(name="t")
    for st in order(p):
        if st == "softmax_max":
            break
        partial = with_decision(partial, st, template_options(p, partial, st, 16)[0])
    splits = [d.factor for o in template_options(p, partial, "softmax_max", 16) for d in o.update if d.kind == Kind.SPLIT and d.loop == "i"]
    assert splits and set(splits) == {ROW_LANES}  # never 16 rows, nor two vectors of 8


def test_a_stage_is_offered_the_loop_of_its_readers_reader():
    """harris with Ixx/Ixy/Iyy inlined into Sxx/Sxy/Syy, which are computed at harris's strip
    loop: Ix, Iy (read by three stages) and then gray have no loop from the sampler, but the
    strip loop encloses every reader, so options there are offered and validate."""
    p = zoo.get("harris", "small")
    at = {"kind": "compute_at", "consumer": "harris", "loop": "yo"}
    split = {"kind": "split", "loop": "y", "outer": "yo", "inner": "yi", "factor": 8}
    strips = [{"kind": "compute_root"}, split, {"kind": "parallel", "loop": "yo"}]
    stages = {"harris": {"pure": strips}, **{s: {"pure": [at]} for s in ("Sxx", "Sxy", "Syy")}}
    stages |= {s: {"pure": [{"kind": "compute_inline"}]} for s in ("Ixx", "Ixy", "Iyy")}
    partial = Schedule.loads(json.dumps({"format": 1, "name": "t", "stages": stages}))
    loc = ("at", "harris", "yo")
    for name in ("Ix", "Iy", "gray"):  # gray: once Ix and Iy are at the strip loop
        assert loc not in sampler.locations(p, partial, name)
        assert nest_locations(p, partial, name) == [loc]
        opts = [o for o in template_options(p, partial, name, LANES) if sampler.location_of(o) == loc]
        assert opts, name
        for o in opts:
            validate(p, with_decision(partial, name, o))
        partial = with_decision(partial, name, opts[0])
    assert nest_locations(p, Schedule(name="empty"), "Ix") == []  # consumers at root: only their own loops (the sampler's)


def _vector_widths(opts):
    return {d.factor for o in opts for d in o.pure + o.update if d.kind == Kind.SPLIT and d.loop == "x" and d.inner in _vectorized(o)}


def _vectorized(o):
    return {d.loop for d in o.pure + o.update if d.kind == Kind.VECTORIZE}


def test_an_output_with_short_rows_gets_tail_free_vectors():
    """maxpool's output rows are 56 wide: 16 lanes would leave a guarded tail on every row
    (an output's buffer cannot be rounded up), so its templates take 8 lanes (one vector: no
    guard_with_if); an intermediate stage of the same width (conv_relu's conv) keeps 16."""
    p = zoo.get("maxpool", "full")
    opts = template_options(p, Schedule(name="t"), "pool", 16)
    assert opts and _vector_widths(opts) == {8}
    single = [o for o in opts if not any(d.kind == Kind.UNROLL for d in o.update)]  # one vector wide (no register block)
    assert single and not any(d.tail == "guard_with_if" for o in single for d in o.update if d.kind == Kind.SPLIT and d.loop == "x")
    q = zoo.get("conv_relu", "full")
    partial = with_decision(Schedule(name="t"), "relu", template_options(q, Schedule(name="t"), "relu", 16)[0])
    assert 16 in _vector_widths(template_options(q, partial, "conv", 16))
