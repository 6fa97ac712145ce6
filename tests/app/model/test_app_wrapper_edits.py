"""Edits of stages that wrappers (packed copies) depend on: the reviewer's case, the
heuristic's packed plan of one 128x256x768 dense layer (w0.in(fc0) computed at relu0.jo)."""

from __future__ import annotations

import pytest

from app.model import edits
from engine.heuristic import plan
from engine.ops import Builder
from engine.recipes import VectorTarget
from engine.schedule import Kind, ScheduleError, validate

AVX512 = VectorTarget("x86-64-linux-avx-avx2-avx512-fma", 16, 32)


@pytest.fixture(scope="module")
def packed():
    b = Builder("layer", "test")
    x = b.matmul("fc0", b.input("x", (128, 256)), b.input("w0", (256, 768), -0.1, 0.1), b.input("b0", (768,)))
    p = b.build([b.activation("relu0", x, "relu")])
    s = plan(p, AVX512).schedule
    assert set(s.wrappers) == {"w0_in_fc0"}  # what the tests below are about
    return p, s


def test_root_on_the_wrapped_stage_drops_its_copy(packed) -> None:
    p, s = packed
    out = edits.compute_root(p, s, "fc0")
    validate(p, out)
    assert out.of("fc0").compute().kind == Kind.COMPUTE_ROOT and out.wrappers == {}
    assert [w.label for w in edits.dropped_wrappers(s, out)] == ["w0.in(fc0)"]
    assert s.wrappers["w0_in_fc0"].pure[0].to_json() == {"kind": "compute_at", "consumer": "relu0", "loop": "jo"}  # s untouched


def test_consumer_loop_edits_drop_the_copy_only_when_they_break_it(packed) -> None:
    p, s = packed
    ds = edits.directives(s, "relu0", False)
    reorder = next(k for k, d in enumerate(ds) if d.kind == Kind.REORDER)
    out = edits.remove(p, s, "relu0", False, reorder)  # jo no longer encloses fc0's loop
    assert out.wrappers == {} and edits.dropped_wrappers(s, out)[0].name == "w0_in_fc0"
    par = next(k for k, d in enumerate(ds) if d.kind == Kind.PARALLEL)
    assert edits.remove(p, s, "relu0", False, par).wrappers == s.wrappers
    with pytest.raises(ScheduleError, match="stage 'relu0' directive #1 reorder"):  # invalid for its own reason
        edits.remove(p, s, "relu0", False, 0)


def test_remove_wrapper(packed) -> None:
    p, s = packed
    out = edits.remove_wrapper(p, s, "w0_in_fc0")
    validate(p, out)
    assert out.wrappers == {} and out.stages == s.stages and "w0_in_fc0" in s.wrappers
    with pytest.raises(ScheduleError, match="no such packed copy"):
        edits.remove_wrapper(p, out, "w0_in_fc0")
