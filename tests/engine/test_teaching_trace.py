"""engine.teaching.trace: iteration orders derived by hand for each kind of directive, the
recompute count of a known overlap, the buffers of compute_at vs store_at, truncation, the
loop-nest lines, bad input, and every zoo pipeline's stages. (Store-for-store agreement
with Halide's own trace is test_teaching_halide.py.)"""

import math

import pytest

from engine import api, loopnest, zoo
from engine.schedule import S, Schedule, default_schedule
from engine.teaching.trace import TraceError, default_extent, parse_extent, trace

BLUR = zoo.get("blur", "small")  # blur_x(y, x) = 3 taps along x; blur_y(y, x) = blur_x(y..y+2, x)


def sched(**stages):
    s = Schedule()
    for name, fn in stages.items():
        fn(S(s, name))
    return s


def order(t):
    return [c for st in t.steps for c in st.cells]


def test_default_is_row_major_x_innermost():
    t = trace(BLUR, default_schedule(BLUR), "blur_y", (3, 5))
    assert order(t) == [(y, x) for y in range(3) for x in range(5)]
    assert all(len(st.cells) == 1 and st.thread == 0 and not st.vectorized and not st.unrolled for st in t.steps)
    assert [st.tick for st in t.steps] == list(range(15)) and t.threads == 1 and not t.truncated


def test_reorder_y_x_makes_y_innermost():
    t = trace(BLUR, sched(blur_y=lambda s: s.reorder("y", "x")), "blur_y", (3, 5))
    assert order(t) == [(y, x) for x in range(5) for y in range(3)]
    assert [lp.name for lp in t.loops] == ["x", "y"]


def test_tile_4x4_visits_one_tile_after_another():
    t = trace(BLUR, sched(blur_y=lambda s: s.tile("x", "y", "xo", "yo", "xi", "yi", 4, 4)), "blur_y", (8, 8))
    want = [(yo * 4 + yi, xo * 4 + xi) for yo in range(2) for xo in range(2) for yi in range(4) for xi in range(4)]
    assert order(t) == want
    assert [lp.name for lp in t.loops] == ["yo", "xo", "yi", "xi"]
    assert t.steps[17].indices == (0, 1, 0, 1)  # the second tile's first row, second column


def test_vectorize_by_4_computes_the_lanes_together():
    t = trace(BLUR, sched(blur_y=lambda s: s.vectorize("x", 4)), "blur_y", (2, 8))
    assert len(t.steps) == 4
    assert [st.cells for st in t.steps] == [tuple((y, 4 * xo + v) for v in range(4)) for y in range(2) for xo in range(2)]
    assert all(st.vectorized for st in t.steps)


def test_parallel_over_y_gives_threads_that_advance_side_by_side():
    t = trace(BLUR, sched(blur_y=lambda s: s.parallel("y")), "blur_y", (6, 3), threads=4)
    assert t.threads == 4
    # Rows 0-3 start at once on threads 0-3; rows 4 and 5 go to the first threads that are free.
    want = {}
    for y in range(6):
        w, start = (y, 0) if y < 4 else (y - 4, 3)
        for x in range(3):
            want[(y, x)] = (start + x, w)
    got = {st.cells[0]: (st.tick, st.thread) for st in t.steps}
    assert got == want
    assert t.ticks == 6 and sorted(order(t)) == [(y, x) for y in range(6) for x in range(3)]
    assert [st.tick for st in t.steps] == sorted(st.tick for st in t.steps)  # steps listed in time order


def test_unroll_marks_the_copies_and_keeps_the_order():
    t = trace(BLUR, sched(blur_y=lambda s: s.unroll("x", 2)), "blur_y", (2, 4))
    assert order(t) == [(y, x) for y in range(2) for x in range(4)]
    assert all(st.unrolled for st in t.steps)
    assert [st.indices[-1] for st in t.steps] == [0, 1] * 4  # which copy of the body


def test_split_tails_shift_inwards_and_guard():
    shift = trace(BLUR, sched(blur_y=lambda s: s.split("x", "xo", "xi", 4)), "blur_y", (1, 10))
    assert [x for _, x in order(shift)] == [0, 1, 2, 3, 4, 5, 6, 7, 6, 7, 8, 9]  # the last tile shifted to end at 9
    guard = trace(BLUR, sched(blur_y=lambda s: s.split("x", "xo", "xi", 4, tail="guard_with_if")), "blur_y", (1, 10))
    assert [x for _, x in order(guard)] == list(range(10))


def test_compute_at_x_recomputes_the_known_overlap():
    t = trace(BLUR, sched(blur_x=lambda s: s.compute_at("blur_y", "x")), "blur_y", (16, 16))
    # Each of the 16x16 points computes blur_x rows y..y+2 at its column: 3 points, 768 in all,
    # of 18 x 16 = 288 distinct points: 480 recomputations.
    assert t.computed["blur_x"] == 768 and t.recomputed["blur_x"] == 480
    first = t.steps[0].producer_cells
    assert [(pr.producer, pr.loop, pr.cells, pr.recomputed) for pr in first] == [("blur_x", "x", ((0, 0), (1, 0), (2, 0)), ())]
    # Row 1 reuses nothing: its first point recomputes rows 1 and 2 of column 0.
    assert t.steps[16].producer_cells[0].recomputed == ((1, 0), (2, 0))
    a = t.allocations["blur_x"]
    assert (a.compute_level, a.store_level, a.shape, a.allocations, a.sliding) == ("blur_y.x", "blur_y.x", (3, 1), 256, False)


def test_store_root_slides_the_window_and_folds_the_buffer():
    at_y = trace(BLUR, sched(blur_x=lambda s: s.compute_at("blur_y", "y")), "blur_y", (16, 16))
    assert at_y.recomputed["blur_x"] == 480  # 3 rows per row of blur_y, as at x
    assert at_y.allocations["blur_x"].shape == (3, 16) and at_y.allocations["blur_x"].allocations == 16
    slid = trace(BLUR, sched(blur_x=lambda s: s.store_root().compute_at("blur_y", "y")), "blur_y", (16, 16))
    assert slid.recomputed["blur_x"] == 0 and slid.computed["blur_x"] == 18 * 16  # each point once
    a = slid.allocations["blur_x"]
    # One buffer for the whole stage, 3 rows live at a time, folded to 4 (Halide's circular buffer).
    assert (a.store_level, a.region, a.shape, a.folded, a.sliding, a.allocations) == ("root", (18, 16), (4, 16), (0,), True, 1)
    assert a.bytes == 4 * 16 * 4
    # The first row computes 3 rows of blur_x, every later one the one new row.
    rows = [sum(len(pr.cells) for pr in st.producer_cells) for st in slid.steps if st.producer_cells]
    assert rows == [48] + [16] * 15


def test_store_root_compute_at_x_warms_up_then_computes_one_point_per_step():
    t = trace(BLUR, sched(blur_x=lambda s: s.store_root().compute_at("blur_y", "x")), "blur_y", (4, 5))
    per_step = [sum(len(pr.cells) for pr in st.producer_cells) for st in t.steps]
    # Halide rewinds y by two iterations that only compute rows 0 and 1 of blur_x (5 each), then
    # every step computes the one new point of row y+2.
    assert per_step == [11] + [1] * 19 and t.recomputed["blur_x"] == 0


def test_truncated_trace_keeps_the_first_steps():
    full = trace(BLUR, default_schedule(BLUR), "blur_y", (8, 8))
    cut = trace(BLUR, default_schedule(BLUR), "blur_y", (8, 8), max_steps=10)
    assert cut.truncated and not full.truncated
    assert cut.steps == full.steps[:10]


def test_loop_lines_index_the_loop_nest_text_the_app_shows():
    s = sched(blur_y=lambda s: s.split("y", "yo", "yi", 4).vectorize("x", 4), blur_x=lambda s: s.compute_at("blur_y", "yo"))
    t = trace(BLUR, s, "blur_y", (8, 8))
    text, _ = loopnest.build(BLUR, s).render_with_spans()
    assert t.text == text
    lines = text.splitlines()
    for lp in t.loops:
        assert lines[lp.line].strip().split(" in [")[0].endswith(f"for {lp.name}")
    assert [lp.name for lp in t.loops] == ["yo", "yi", "x", "x_v"]
    assert {st.loop_line for st in t.steps} == {t.loops[2].line}  # the innermost loop a step is an iteration of
    pr = t.steps[0].producer_cells[0]
    assert lines[pr.line].startswith("  " * 2 + "produce blur_x")


def test_reduction_traces_both_definitions():
    p = zoo.get("matmul", "small")
    s = sched(prod=lambda s: s.compute_root())
    t = trace(p, s, "prod", (2, 3))
    pure = [st.cells[0] for st in t.steps if not st.update]
    upd = [st.cells[0] for st in t.steps if st.update]
    assert pure == [(i, j) for i in range(2) for j in range(3)]
    assert upd == [(i, j) for i in range(2) for j in range(3) for _ in range(128)]  # k innermost, as in Halide


def test_default_extent_and_parse_extent():
    assert default_extent(BLUR, default_schedule(BLUR), "blur_y") == (16, 16)
    s = sched(blur_y=lambda s: s.split("x", "xo", "xi", 32))
    assert default_extent(BLUR, s, "blur_y") == (16, 32)  # widened to one whole split tile
    assert parse_extent("4x16") == (4, 16)
    for bad in ("4x", "0x3", "ax3"):
        with pytest.raises(TraceError):
            parse_extent(bad)


def test_bad_input_is_one_clear_error():
    inl = sched(blur_x=lambda s: s.compute_inline())
    with pytest.raises(TraceError, match="inlined"):
        trace(BLUR, inl, "blur_x")
    with pytest.raises(TraceError, match="2 dims"):
        trace(BLUR, default_schedule(BLUR), "blur_y", (4,))
    with pytest.raises(TraceError, match=r"dim 'x' must be in \[1, 64\]"):
        trace(BLUR, default_schedule(BLUR), "blur_y", (4, 65))


@pytest.mark.parametrize("name", zoo.names())
def test_every_zoo_stage_traces(name):
    p = zoo.get(name, "small")
    for spec in ("default", "hand"):
        sch = api.load_schedule(p, spec)
        nest = loopnest.build(p, sch)
        for s in p.stages:
            if nest.placements[s.name].compute == "inline":
                continue
            t = trace(p, sch, s.name, max_steps=256)
            assert t.steps and len(t.steps) <= 256
            n = math.prod(t.extent)
            assert t.truncated or len({c for st in t.steps for c in st.cells}) == n or s.is_reduction
