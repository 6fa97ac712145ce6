"""Schedules: JSON round-trip, hashing, source export, and one clear error for each invalid case."""

import json
from dataclasses import FrozenInstanceError

import pytest

from engine import halide_backend as HB
from engine import zoo
from engine.loops import LoopError
from engine.schedule import Directive, Kind, S, Schedule, ScheduleError, StageSchedule, default_schedule, to_source, validate


def blur_tiled() -> Schedule:
    s = Schedule(name="tiled")
    S(s, "blur_y").tile("x", "y", "xo", "yo", "xi", "yi", 32, 8).vectorize("xi", 8).parallel("yo")
    S(s, "blur_x").compute_at("blur_y", "xo").vectorize("x", 8)
    return s


def test_json_round_trip_is_exact_and_hash_stable():
    s = blur_tiled()
    text = s.dumps()
    t = Schedule.loads(text)
    assert t.dumps() == text
    assert t.content_hash() == s.content_hash()
    t.name = "another name"
    assert t.content_hash() == s.content_hash()
    S(t, "blur_x").unroll("y")
    assert t.content_hash() != s.content_hash()


def test_default_schedule_is_all_root():
    p = zoo.get("resnet_block", "small")
    s = default_schedule(p)
    assert all(s.of(st.name).compute().to_json() == {"kind": "compute_root"} for st in p.stages)
    validate(p, s)


def test_source_export_cpp_and_python():
    p = zoo.get("blur", "small")
    cpp = to_source(p, blur_tiled(), "cpp")
    py = to_source(p, blur_tiled(), "python")
    assert 'Var xo("xo");' in cpp
    assert "blur_x.compute_at(blur_y, xo).split(x, x, x_v, 8).vectorize(x_v);" in cpp
    assert 'xo = hl.Var("xo")' in py
    assert "blur_y.tile(x, y, xo, yo, xi, yi, 32, 8)" in py
    conv = zoo.get("conv_relu", "small")
    s = Schedule()
    S(s, "conv").update().split("rc", "rco", "rci", 4)
    assert 'RVar rco("rco");' in to_source(conv, s, "cpp")
    t = Schedule()
    S(t, "blur_y").split("x", "xo", "xi", 8, tail="guard_with_if")
    assert "TailStrategy::GuardWithIf" in to_source(p, t, "cpp") and "hl.TailStrategy.GuardWithIf" in to_source(p, t, "python")


def _sched(stage, directives, update=False):
    return Schedule.from_json({"stages": {stage: {"update" if update else "pure": directives}}})


INVALID = [
    ("blur", "nostage", [{"kind": "compute_root"}], False, "no such stage"),
    ("blur", "blur_y", [{"kind": "split", "loop": "z", "outer": "zo", "inner": "zi", "factor": 4}], False, "no loop 'z'"),
    ("blur", "blur_y", [{"kind": "split", "loop": "x", "outer": "xo", "inner": "xi", "factor": 0}], False, "positive"),
    ("blur", "blur_y", [{"kind": "vectorize", "loop": "x", "factor": -8}], False, "positive"),
    ("blur", "blur_y", [{"kind": "split", "loop": "x", "outer": "xo", "inner": "xi", "factor": 2.5}], False, "integer"),
    ("blur", "blur_y", [{"kind": "twist", "loop": "x"}], False, "unknown directive kind"),
    ("blur", "blur_y", [{"kind": "split", "loop": "x"}], False, "missing argument"),
    ("blur", "blur_x", [{"kind": "compute_at", "consumer": "blur_y", "loop": "w"}], False, "has no loop 'w'"),
    ("harris", "Ix", [{"kind": "compute_at", "consumer": "Iyy", "loop": "y"}], False, "does not consume"),
    ("blur", "blur_y", [{"kind": "compute_inline"}], False, "output is always computed at root"),
    ("conv_relu", "conv", [{"kind": "compute_inline"}], False, "cannot be inlined"),
    ("conv_relu", "conv", [{"kind": "vectorize", "loop": "rx"}], True, "race"),
    ("conv_relu", "conv", [{"kind": "parallel", "loop": "rc"}], True, "race"),
    ("blur", "blur_x", [{"kind": "vectorize", "loop": "x"}], True, "not a reduction"),
    ("blur", "blur_y", [{"kind": "reorder", "loops": ["x", "x"]}], False, "twice"),
    ("blur", "blur_y", [{"kind": "fuse", "inner": "y", "outer": "x", "fused": "f"}], False, "directly outside"),
    ("blur", "blur_y", [{"kind": "split", "loop": "x", "outer": "y", "inner": "xi", "factor": 4}], False, "already used"),
    ("depthwise_conv", "dwconv", [{"kind": "vectorize", "loop": "x", "factor": 6}], True, "does not divide"),
    ("blur", "blur_y", [{"kind": "split", "loop": "x", "outer": "xo", "inner": "xi", "factor": 128}], False, "exceeds loop"),
]


@pytest.mark.parametrize("pipe,stage,directives,update,fragment", INVALID)
def test_invalid_schedules_raise_one_clear_error(pipe, stage, directives, update, fragment):
    p = zoo.get(pipe, "small")
    with pytest.raises(ScheduleError, match=fragment) as info:
        validate(p, _sched(stage, directives, update))
    assert f"stage {stage!r}" in str(info.value)
    if stage != "nostage":
        assert directives[0]["kind"] in str(info.value)


def test_producer_placed_outside_one_of_its_consumers_is_rejected_by_validation():
    # Ix is read by Ixx and Ixy; computing it inside Ixx's loop leaves Ixy without it.
    p = zoo.get("harris", "small")
    s = Schedule()
    S(s, "Ix").compute_at("Ixx", "y")
    with pytest.raises(ScheduleError, match=r"'Ixy' also reads it but is not computed inside Ixx.y") as info:
        validate(p, s)
    assert info.value.stage == "Ix"
    # Both readers inside harris's row loop (through inlined Ixx/Ixy, then Sxx/Sxy at harris.x):
    # accepted, and Halide agrees.
    ok = Schedule()
    for n in ("Ixx", "Ixy"):
        S(ok, n).compute_inline()
    for n in ("Sxx", "Sxy"):
        S(ok, n).compute_at("harris", "x")
    S(ok, "Ix").compute_at("harris", "y")
    validate(p, ok)
    HB.compile_jit(HB.lower(p, ok))
    S(ok, "Ix").compute_at("harris", "x")  # the last directive wins: now at x, but Sxy ...
    S(ok, "Sxy").compute_at("harris", "y")  # ... is computed at y, outside harris.x
    with pytest.raises(ScheduleError, match=r"'Sxy' also reads it but is not computed inside harris.x"):
        validate(p, ok)
    S(ok, "Ix").compute_root()  # the last compute directive is the one in force
    validate(p, ok)


def test_halide_rejection_becomes_schedule_error(monkeypatch):
    # Whatever the validator misses, Halide's own error comes back as a ScheduleError naming the stage.
    p = zoo.get("harris", "small")
    s = Schedule()
    S(s, "Ix").compute_at("Ixx", "y")
    monkeypatch.setattr(HB, "validate", lambda p, s: None)
    with pytest.raises(ScheduleError, match="Halide rejected it") as info:
        low = HB.lower(p, s)
        HB.compile_jit(low)
    assert "Ix" in str(info.value)


def test_malformed_schedule_json():
    with pytest.raises(ScheduleError, match="line 1"):
        Schedule.loads('{"stages": ')
    with pytest.raises(ScheduleError, match="'stages'"):
        Schedule.from_json(json.loads("[1, 2]"))


# --- directives are typed, immutable values ------------------------------------------------
def test_directive_json_round_trip_gives_exactly_the_set_arguments():
    raw = {"kind": "vectorize", "loop": "x", "factor": 8, "tail": "guard_with_if"}
    d = Directive.from_json(raw)
    assert d.kind is Kind.VECTORIZE and d.kind == "vectorize" and (d.loop, d.factor, d.tail) == ("x", 8, "guard_with_if")
    assert d.to_json() == raw and d.outer is None
    assert Directive.from_json({"kind": "reorder", "loops": ["x", "y"]}).loops == ("x", "y")
    assert Directive.from_json({"kind": "reorder", "loops": ["x", "y"]}).to_json() == {"kind": "reorder", "loops": ["x", "y"]}
    with pytest.raises(FrozenInstanceError):
        d.factor = 16  # type: ignore[misc]


def test_equal_directives_and_stage_schedules_are_equal_hashable_values():
    built = Schedule()
    S(built, "blur_y").split("x", "xo", "xi", 8).vectorize("xi")
    read = Schedule.loads(built.dumps())
    assert read.of("blur_y") == built.of("blur_y") and hash(read.of("blur_y")) == hash(built.of("blur_y"))
    assert len({read.of("blur_y"), built.of("blur_y"), StageSchedule()}) == 2
    assert read.of("blur_y").pure[0] == Directive(Kind.SPLIT, loop="x", outer="xo", inner="xi", factor=8)
    assert read.of("blur_y").pure[0] != Directive(Kind.SPLIT, loop="x", outer="xo", inner="xi", factor=4)


def test_schedule_copy_is_independent_of_the_original():
    s = blur_tiled()
    before = s.content_hash()
    t = s.copy()
    S(t, "blur_x").unroll("y")
    t.stages["blur_y"] = StageSchedule()
    u = s.with_stage("blur_x", StageSchedule((Directive(Kind.COMPUTE_ROOT),)))
    assert s.content_hash() == before and t.content_hash() != before and u.content_hash() != before
    assert u.of("blur_y") is s.of("blur_y")  # immutable: shared, not copied


def test_a_malformed_directive_is_refused_when_the_json_is_read():
    split = {"kind": "split", "loop": "x", "outer": "a", "inner": "b"}
    with pytest.raises(ScheduleError, match="missing argument 'factor'") as info:
        Schedule.from_json({"stages": {"blur_y": {"pure": [{"kind": "compute_root"}, split]}}})
    assert (info.value.stage, info.value.index, info.value.update) == ("blur_y", 1, False)
    assert info.value.directive == split
    with pytest.raises(ScheduleError, match="belongs to the pure definition") as info:
        Schedule.from_json({"stages": {"conv": {"update": [{"kind": "compute_root"}]}}})
    assert info.value.update and info.value.index == 0


def test_a_malformed_directive_is_refused_where_it_is_written():
    with pytest.raises(LoopError, match="missing argument 'inner'"):
        Directive(Kind.SPLIT, loop="x", outer="xo", factor=4)
    with pytest.raises(LoopError, match="unexpected argument 'factor'"):
        Directive(Kind.COMPUTE_ROOT, factor=4)
    with pytest.raises(LoopError, match="must be an identifier"):
        Directive(Kind.PARALLEL, loop="x y")
    s = Schedule()
    with pytest.raises(ScheduleError, match="positive") as info:
        S(s, "blur_y").split("x", "xo", "xi", 0)
    assert info.value.stage == "blur_y" and info.value.directive["factor"] == 0
    with pytest.raises(ScheduleError, match="belongs to the pure definition"):
        S(s, "conv").update().compute_root()
