"""Wrapper stages (Halide's `source.in(consumer)`): JSON, validation, lowering, exported source."""

import copy
import re

import halide as hl
import numpy as np
import pytest

from engine import api, zoo
from engine import expr as E
from engine import halide_backend as HB
from engine.halide_backend import lowered_stmt
from engine.ir import Dim, Input, Pipeline, Stage
from engine.schedule import Directive, Kind, S, Schedule, ScheduleError, Wrapper, to_source, validate, wrapper_dims


def packed_matmul() -> tuple:
    """The small matmul register-blocked, with B copied per k block and column block."""
    p = zoo.get("matmul", "small")  # 128^3
    s = Schedule(name="packed")
    S(s, "C").split("i", "io", "ii", 32).split("j", "jo", "ji", 32).reorder("ji", "ii", "jo", "io").vectorize("ji", 8)
    S(s, "prod").compute_at("C", "jo").vectorize("j", 8)
    S(s, "prod").update().split("k", "ko", "ki", 32).split("j", "j", "j_v", 8).reorder("j_v", "ki", "i", "j", "ko").vectorize("j_v")
    S(s, "prod").wrap("B").compute_at("prod", "j").vectorize("j", 8)
    return p, s


def test_wrapper_json_round_trip_and_hash():
    p, s = packed_matmul()
    back = Schedule.loads(s.dumps())
    assert back.wrappers == s.wrappers
    assert back.to_json() == s.to_json()
    assert back.content_hash() == s.content_hash()
    (w,) = back.wrappers.values()
    assert (w.source, w.consumer, w.name) == ("B", "prod", "B_in_prod")
    assert [d.kind for d in w.pure] == ["compute_at", "vectorize"]
    # the wrapper is part of the schedule's identity; a schedule without one has no 'wrappers' key
    bare = Schedule(dict(s.stages), s.name)
    assert "wrappers" not in bare.to_json()
    assert bare.content_hash() != s.content_hash()
    # the wrapper stays out of the stage map; its loops are named as prod reads B (B[k, j])
    assert set(s.stages) == {"C", "prod"}
    assert [d.name for d in wrapper_dims(p, w)] == ["k", "j"]


def test_wrapper_validation_names_stage_and_directive():
    p, s = packed_matmul()
    validate(p, s)
    bad = s.copy()
    S(bad, "C").wrap("A")  # C reads prod only
    with pytest.raises(ScheduleError, match=r"stage 'C': wrapper A\.in\(C\): 'C' does not read 'A' \(it reads prod\)"):
        validate(p, bad)
    bad = s.copy()
    S(bad, "prod").wrap("A").compute_at("prod", "j").unroll("nope")
    with pytest.raises(ScheduleError, match=r"stage 'A\.in\(prod\)' directive #1 unroll\(loop=nope\): no loop 'nope'"):
        validate(p, bad)
    bad = s.copy()
    S(bad, "prod").wrap("A").compute_at("C", "ii")  # prod is computed at C.jo, outside C.ii
    with pytest.raises(ScheduleError, match=r"A\.in\(prod\)' directive #0 compute_at\(consumer=C, loop=ii\): 'prod' reads the wrapper but"):
        validate(p, bad)
    bad = s.with_wrapper(Wrapper("A", "prod", (Directive(Kind.COMPUTE_INLINE),)))
    with pytest.raises(ScheduleError, match=r"compute_inline does not apply to it"):
        validate(p, bad)
    # a wrapped stage computed inside C.io is read only by its copy, which must then be inside C.io too
    inner = Schedule()
    S(inner, "C").split("i", "io", "ii", 32)
    S(inner, "prod").compute_at("C", "io")
    S(inner, "C").wrap("prod")
    with pytest.raises(ScheduleError, match=r"stage 'prod\.in\(C\)': 'prod' is computed at C\.io .* computed at root"):
        validate(p, inner)
    S(inner, "C").wrap("prod").compute_at("C", "ii")  # now inside C.io
    validate(p, inner)
    with pytest.raises(ScheduleError, match=r"no update definition"):
        S(s.copy(), "prod").wrap("B").update()
    with pytest.raises(ScheduleError, match=r"A\.in\(prod\)' directive #0 .*unknown directive kind 'pack'"):
        Schedule.from_json({"stages": {}, "wrappers": [{"source": "A", "consumer": "prod", "pure": [{"kind": "pack"}]}]})
    with pytest.raises(ScheduleError, match=r"unexpected key\(s\) 'layout'"):
        Schedule.from_json({"stages": {}, "wrappers": [{"source": "A", "consumer": "prod", "layout": 1}]})


def test_wrapped_matmul_is_verified_through_halide():
    p, s = packed_matmul()
    _, v = api.run_once(p, s, seed=3)
    assert v.ok, v.message
    # the copy is made per (k block, column block) of prod: a 32 x 8 buffer inside prod's loops
    stmt = lowered_stmt(p, s)
    assert re.search(r"allocate B_im(\$\d+)?_in_prod(\$\d+)*\[float32 \* 8 \* 32\]", stmt), "no tile-local copy of B"


def test_exported_source_has_the_wrapper_call():
    p, s = packed_matmul()
    # The copy's k split with the names prod's update gives its RVars (ko, ki): its own loops are
    # prefixed with its name, so the exported code declares no name twice.
    S(s, "prod").wrap("B").split("k", "ko", "ki", 8)
    cpp = to_source(p, s, "cpp")
    assert ".split(B_in_prod.args()[1], B_in_prod_ko, B_in_prod_ki, 8)" in cpp
    assert "Func B_in_prod = B.in(prod);" in cpp
    assert "B_in_prod.compute_at(prod, j).split(B_in_prod.args()[0], B_in_prod.args()[0], B_in_prod_j_v, 8).vectorize(B_in_prod_j_v)" in cpp
    py = to_source(p, s, "python")
    assert "B_in_prod = B.in_(prod)" in py
    # The exported Python schedules the algorithm's Funcs as the engine does: run it (our own
    # exporter's text, on Funcs defined here) and check the output and the tile-local copy.
    low = HB.define(p)
    exec(py, {"hl": hl, **low.funcs, **low.params, "i": hl.Var("i"), "j": hl.Var("j"), "k": low.rdoms["prod"][0]})
    low.hl_pipeline = hl.Pipeline(low.output_funcs())
    low.compile()
    rng = np.random.default_rng(0)
    a, b = (rng.standard_normal((128, 128)).astype(np.float32) for _ in range(2))
    keep = low.bind({"A": a, "B": b})
    out = HB.output_arrays(p)
    low.runner(out)()
    assert keep and np.abs(out["C"] - a.astype(np.float64) @ b).max() < 1e-3
    # a wrapper placed nowhere is computed at root, as the engine lowers it (Halide's default would inline it: no copy)
    assert "A_in_prod.compute_root()" in to_source(p, s.with_wrapper(Wrapper("A", "prod")), "cpp")


def _biased_matmul(stage_bias: bool):
    """prod = bias (or b2 = 2*bias, a stage) then prod += A*B, its update's k split into ko, ki."""
    i, j, k = E.Var("i"), E.Var("j"), E.Var("k")
    ins = [Input("A", (32, 32)), Input("B", (32, 32)), Input("bias", (32,))]
    stages = [Stage("b2", (Dim("j", 32),), E.BinOp("*", E.Access("bias", (j,)), E.Const(2.0)))] if stage_bias else []
    init = E.Access("b2" if stage_bias else "bias", (j,))
    upd = E.BinOp("*", E.Access("A", (i, k)), E.Access("B", (k, j)))
    prod = Stage("prod", (Dim("i", 32), Dim("j", 32)), init, (Dim("k", 32),), upd, "sum", "matmul")
    p = Pipeline("mm", ins, [*stages, prod], ["prod"])
    s = Schedule()
    S(s, "prod").compute_root()
    S(s, "prod").update().split("k", "ko", "ki", 8).reorder("ki", "j", "i", "ko")
    return p, s


@pytest.mark.parametrize("stage_bias", [False, True])
def test_what_the_initial_value_reads_is_computed_at_a_loop_of_both_definitions(stage_bias):
    """A copy (or a stage) the initial value reads, at a loop of the update alone, is refused
    with the reason before Halide sees it; at a loop of both definitions it verifies."""
    p, s = _biased_matmul(stage_bias)
    placed = S(s, "b2") if stage_bias else S(s, "prod").wrap("bias")
    bad = copy.deepcopy(s)
    (S(bad, "b2") if stage_bias else S(bad, "prod").wrap("bias")).compute_at("prod", "ko")
    with pytest.raises(ScheduleError, match="initial value of 'prod' reads 'b2'" if stage_bias else "initial value of 'prod' reads 'bias'"):
        validate(p, bad)
    placed.compute_at("prod", "j")
    validate(p, s)
    _, v = api.run_once(p, s, seed=1)
    assert v.ok, v


def test_wrapper_names_that_clash_are_refused():
    a, b = Wrapper("a_in", "b"), Wrapper("a", "in_b")  # both a_in_in_b
    with pytest.raises(ScheduleError, match="is that of wrapper a_in.in"):
        Schedule().with_wrapper(a).with_wrapper(b)
    text = '{"stages": {}, "wrappers": [{"source": "a_in", "consumer": "b"}, {"source": "a", "consumer": "in_b"}]}'
    with pytest.raises(ScheduleError, match="is that of wrapper"):
        Schedule.loads(text)
    p, s = packed_matmul()
    (w,) = s.wrappers.values()
    clash = Stage(w.name, p.stages[0].dims, p.stages[0].value)
    q = Pipeline(p.name, p.inputs, [clash, *p.stages], p.outputs)
    with pytest.raises(ScheduleError, match="is also a stage or input"):
        validate(q, s)
