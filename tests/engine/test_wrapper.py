"""Wrapper stages (Halide's `source.in(consumer)`): JSON, validation, lowering, exported source."""

import re

import halide as hl
import numpy as np
import pytest

from engine import api, zoo
from engine import halide_backend as HB
from engine.halide_backend import lowered_stmt
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
    cpp = to_source(p, s, "cpp")
    assert "Func B_in_prod = B.in(prod);" in cpp
    assert "B_in_prod.compute_at(prod, j).split(B_in_prod.args()[0], B_in_prod.args()[0], j_v, 8).vectorize(j_v);" in cpp
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
