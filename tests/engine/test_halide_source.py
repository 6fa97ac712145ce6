"""An autoscheduler's schedule source read back into directives (engine/halide_source.py):
Adams2019's own output for blur (as Measurement.schedule_source holds it) becomes a valid
schedule with the same splits, placements and loop order; what has no directive is named."""

from __future__ import annotations

import pytest

from engine import zoo
from engine.halide_source import SourceError, from_halide_source
from engine.schedule import Kind

# What Halide's Adams2019 printed for blur at small size on this machine (its input here).
BLUR_ADAMS = """Func blur_y = pipeline.get_func(2);
Func blur_x = pipeline.get_func(1);
Var x(blur_y.get_schedule().dims()[0].var);
Var xi("xi");
Var y(blur_y.get_schedule().dims()[1].var);
Var yi("yi");
blur_y
    .split(y, y, yi, 32, TailStrategy::ShiftInwards)
    .split(x, x, xi, 8, TailStrategy::ShiftInwards)
    .vectorize(xi)
    .compute_root()
    .reorder({xi, x, yi, y})
    .parallel(y);
blur_x
    .store_in(MemoryType::Stack)
    .split(x, x, xi, 8, TailStrategy::ShiftInwards)
    .unroll(y)
    .vectorize(xi)
    .compute_at(blur_y, x)
    .reorder({xi, x, y});
"""


def test_adams_output_becomes_a_valid_schedule() -> None:
    p = zoo.get("blur", "small")
    sched, notes = from_halide_source(p, BLUR_ADAMS)
    y = sched.stages["blur_y"].pure
    assert [d.kind for d in y] == [Kind.SPLIT, Kind.SPLIT, Kind.VECTORIZE, Kind.COMPUTE_ROOT, Kind.REORDER, Kind.PARALLEL]
    assert (y[0].loop, y[0].outer, y[0].inner, y[0].factor, y[0].tail) == ("y", "y", "yi", 32, "shift_inwards")
    assert y[4].loops == ("xi", "x", "yi", "y")
    x = sched.stages["blur_x"].pure
    assert any(d.kind == Kind.COMPUTE_AT and (d.consumer, d.loop) == ("blur_y", "x") for d in x)
    assert notes == ["blur_x: store_in(MemoryType::Stack) dropped (no directive for where a buffer is stored)"]
    # A worker that defined the pipeline before names its Funcs blur_y_2, ...: the same stages.
    again, _ = from_halide_source(p, BLUR_ADAMS.replace("blur_y", "blur_y_2").replace("blur_x", "blur_x_2"))
    assert again.content_hash() == sched.content_hash()


def test_a_call_without_a_directive_is_refused_with_its_line() -> None:
    p = zoo.get("blur", "small")
    gpu = BLUR_ADAMS.replace('Var yi("yi");\n', 'Var yi("yi");\nblur_y.gpu_blocks(y);\n')  # line 7
    with pytest.raises(SourceError, match=r"line 7 \(blur_y\.gpu_blocks\).*no directive"):
        from_halide_source(p, gpu)
    with pytest.raises(SourceError, match="not a stage of blur"):
        from_halide_source(p, "Func nope = pipeline.get_func(3);\n")


# What Mullapudi2016 and Li2018 printed for matmul at small size: each Func in a block with
# `Var j = C.args()[0]` and rvars()[k]; Li2018 without declarations (its r$x undeclared).
MATMUL_MULLAPUDI = """Var j_vi("j_vi");
Var j_vo("j_vo");

Func C = pipeline.get_func(3);
Func prod = pipeline.get_func(2);

{
    Var j = C.args()[0];
    Var i = C.args()[1];
    C
        .compute_root()
        .split(j, j_vo, j_vi, 8)
        .vectorize(j_vi)
        .parallel(i);
}
{
    Var j = prod.args()[0];
    Var i = prod.args()[1];
    RVar r$x(prod.update(0).get_schedule().rvars()[0].var);
    prod
        .compute_root()
        .split(j, j_vo, j_vi, 8)
        .vectorize(j_vi)
        .parallel(i);
    prod.update(0)
        .reorder(j, r$x, i)
        .split(j, j_vo, j_vi, 8, TailStrategy::GuardWithIf)
        .vectorize(j_vi)
        .parallel(i);
}
"""
MATMUL_LI = """prod.update(0)
    .split(j,v7,v8,8,GuardWithIf)
    .fuse(v7,i,v7)
    .reorder(v8,v7)
    .parallel(v7,136,GuardWithIf)
    .vectorize(v8)
;
"""


def test_the_other_autoschedulers_forms_are_read() -> None:
    p = zoo.get("matmul", "small")
    sched, notes = from_halide_source(p, MATMUL_MULLAPUDI)
    update = sched.stages["prod"].update
    assert update[0].kind == Kind.REORDER and update[0].loops == ("j", "k", "i")  # r$x: prod's reduction loop k
    assert (update[1].inner, update[1].tail) == ("j_vi", "guard_with_if") and not notes
    li, _ = from_halide_source(p, MATMUL_LI)
    par = li.stages["prod"].update[3]
    assert (par.kind, par.loop, par.factor, par.tail) == (Kind.PARALLEL, "v7", 136, "guard_with_if")
    assert li.stages["prod"].pure == () and li.stages["C"].pure == ()  # the output, unmentioned, stays at root


def test_stages_left_out_are_inlined_unless_they_cannot_be() -> None:
    blur, _ = from_halide_source(zoo.get("blur", "small"), "blur_y.compute_root()\n    .parallel(y)\n;\n")
    assert [d.kind for d in blur.stages["blur_x"].pure] == [Kind.COMPUTE_INLINE]  # Halide's default
    matmul, _ = from_halide_source(zoo.get("matmul", "small"), "C.compute_root()\n    .parallel(i)\n;\n")
    assert matmul.stages["prod"].pure == ()  # a reduction cannot be inlined: at root
