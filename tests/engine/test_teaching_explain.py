"""Explaining a refused edit (issue 18 item 6): each common refusal of the engine maps to its
explanation, whose picture is the loop nest as it is with the refused place marked."""

import pytest

from engine import schedule as sc
from engine import zoo
from engine.schedule import S, ScheduleError
from engine.teaching import explain as X


def _apply(s, stage, steps, update=False):
    b = S(s, stage)
    if update:
        b = b.update()
    for name, *args in steps:
        getattr(b, name)(*args)
    return s


def refused(pipeline, before_steps, stage, step, update=False):
    """(pipeline, the schedule before the edit, the engine's refusal of `step` on `stage`)."""
    p = zoo.get(pipeline, "small")
    before = sc.default_schedule(p)
    for st, steps, upd in before_steps:
        _apply(before, st, steps, upd)
    sc.validate(p, before)
    after = before.copy()
    with pytest.raises(ScheduleError) as info:
        _apply(after, stage, [step], update)
        sc.validate(p, after)
    return p, before, info.value


CASES = [
    # (kind, pipeline, before, stage, refused step, update, text in the picture's marked lines)
    ("store_outside_compute", "blur", [], "blur_x", ("store_at", "blur_y", "y"), False, "allocate blur_x"),
    (
        "store_outside_compute",
        "blur",
        [("blur_x", [("compute_at", "blur_y", "y")], False)],
        "blur_x",
        ("store_at", "blur_y", "x"),
        False,
        "computed here, outside blur_y.x",
    ),
    ("consumer_not_inside", "harris", [], "Ix", ("compute_at", "Ixx", "x"), False, "Ixy also reads Ix"),
    ("not_a_consumer", "unsharp", [], "blur_x", ("compute_at", "input_c", "x"), False, "input_c never reads blur_x"),
    (
        "consumer_inlined",
        "unsharp",
        [("sharpen", [("compute_inline",)], False)],
        "blur_x",
        ("compute_at", "sharpen", "y"),
        False,
        "no sharpen.y",
    ),
    ("rvar_race", "softmax", [], "softmax_sum", ("vectorize", "r", 8), True, "for r in [0, 64)"),
    (
        "store_race",
        "blur",
        [("blur_x", [("compute_at", "blur_y", "y"), ("store_root",)], False)],
        "blur_y",
        ("parallel", "y"),
        False,
        "for y in [0, 64)",
    ),
    ("output_at_root", "blur", [], "blur_y", ("compute_inline",), False, "an output"),
    ("reduction_inline", "softmax", [], "softmax_sum", ("compute_inline",), False, "update definition"),
    ("runtime_extent", "blur", [], "blur_y", ("vectorize", "x"), False, "for x in [0, 64)"),
    (
        "already_marked",
        "blur",
        [("blur_y", [("split", "x", "xo", "xi", 8), ("vectorize", "xi")], False)],
        "blur_y",
        ("split", "xi", "a", "b", 2),
        False,
        "for xi in [0, 8) (vectorized)",
    ),
]


@pytest.mark.parametrize(
    ("kind", "pipeline", "before", "stage", "step", "update", "marked"), CASES, ids=[f"{c[0]}-{k}" for k, c in enumerate(CASES)]
)
def test_each_refusal_maps_to_its_explanation(kind, pipeline, before, stage, step, update, marked):
    p, sched, err = refused(pipeline, before, stage, step, update)
    assert X.refusal_kind(err) == kind
    ex = X.explain(err, p, sched)
    assert ex is not None and ex.kind == kind and ex.stage == err.stage  # the stage the engine names
    assert ex.title and len(ex.text) > 80
    assert err.stage in ex.text
    # the picture marks why (BAD) on a line of the loop nest as it is now
    bad = [line for line in ex.picture if line.mark == X.BAD]
    assert bad and all(line.note for line in bad)
    assert any(marked in line.text or marked in line.note for line in ex.picture if line.mark != X.PLAIN)
    assert "<- X" in ex.render_text()


def test_the_store_refusal_picture_shows_the_buffer_inside_the_loop_and_the_computation_outside():
    p, sched, err = refused("blur", [], "blur_x", ("store_at", "blur_y", "y"), False)
    ex = X.explain(err, p, sched)
    assert ex is not None
    lines = [line.text.strip() for line in ex.picture]
    assert lines.index("produce blur_x  # computed at root") < lines.index("for y in [0, 64):") < lines.index("allocate blur_x")
    here = next(line for line in ex.picture if line.mark == X.HERE)
    assert here.text.strip() == "allocate blur_x" and "store_at(blur_y, y)" in here.note


def test_refusals_without_an_explanation_and_other_errors_give_none():
    p = zoo.get("blur", "small")
    sched = sc.default_schedule(p)
    err = ScheduleError("blur_y", "new loop name must be an identifier, got '1x'", {"kind": "split"}, 0)
    assert X.refusal_kind(err) is None and X.explain(err, p, sched) is None
    assert X.explain(ValueError("no"), p, sched) is None
    assert X.explain(ScheduleError("nosuch", "an output is always computed at root"), p, sched) is None
