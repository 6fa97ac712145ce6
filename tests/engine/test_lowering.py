"""Every directive kind lowers to Halide code whose output equals the independent reference."""

import pytest

from engine import api, zoo
from engine.schedule import S, Schedule


def run_verified(p, s):
    _, v = api.run_once(p, s, seed=3)
    assert v.ok, v.message
    return v


def blur_with(fn):
    s = Schedule()
    fn(s)
    return zoo.get("blur", "small"), s


CASES = {
    "split_guard": lambda s: S(s, "blur_y").split("x", "xo", "xi", 5, tail="guard_with_if"),
    "split_shift": lambda s: S(s, "blur_y").split("y", "yo", "yi", 7, tail="shift_inwards"),
    "split_round_up": lambda s: S(s, "blur_x").split("x", "xo", "xi", 16, tail="round_up"),
    "tile_vectorize_parallel": lambda s: S(s, "blur_y").tile("x", "y", "xo", "yo", "xi", "yi", 16, 8).vectorize("xi", 8).parallel("yo"),
    "reorder": lambda s: S(s, "blur_y").reorder("y", "x"),
    "fuse_parallel": lambda s: S(s, "blur_y").fuse("x", "y", "xy").parallel("xy", 64),
    "unroll": lambda s: (S(s, "blur_y").unroll("x", 4), S(s, "blur_x").split("y", "yo", "yi", 2).unroll("yi")),
    "vectorize_no_factor": lambda s: S(s, "blur_y").split("x", "xo", "xi", 8).vectorize("xi"),
    "compute_inline": lambda s: S(s, "blur_x").compute_inline(),
    "compute_at": lambda s: (S(s, "blur_y").split("y", "yo", "yi", 8), S(s, "blur_x").compute_at("blur_y", "yo").vectorize("x", 8)),
    "store_root_sliding": lambda s: S(s, "blur_x").store_root().compute_at("blur_y", "y"),
    "store_at": lambda s: (S(s, "blur_y").split("y", "yo", "yi", 8), S(s, "blur_x").store_at("blur_y", "yo").compute_at("blur_y", "yi")),
}


@pytest.mark.parametrize("case", sorted(CASES))
def test_directive_lowering_matches_reference(case):
    p, s = blur_with(CASES[case])
    run_verified(p, s)


def test_update_definition_directives():
    p = zoo.get("conv_relu", "small")
    s = Schedule()
    S(s, "conv_pad").compute_inline()
    S(s, "relu").split("c", "co", "ci", 4).parallel("co")
    S(s, "conv").compute_at("relu", "co").vectorize("x", 8)
    S(s, "conv").update().split("rc", "rco", "rci", 2).reorder("x", "c", "rx", "ry", "rci", "rco").vectorize("x", 8).unroll("rx").parallel(
        "y"
    )
    run_verified(p, s)


def test_register_blocked_matmul():
    p = zoo.get("matmul", "small")
    s = Schedule()
    S(s, "C").tile("j", "i", "jo", "io", "ji", "ii", 32, 8).parallel("io")
    S(s, "prod").compute_at("C", "jo").vectorize("j", 16).unroll("i")
    S(s, "prod").update().reorder("j", "i", "k").vectorize("j", 16).unroll("j").unroll("i")
    run_verified(p, s)


def test_multi_stage_fusion_in_image_pipeline():
    p = zoo.get("harris", "small")
    s = Schedule()
    for st in ("Ixx", "Iyy", "Ixy", "gray"):
        S(s, st).compute_inline()
    S(s, "harris").split("y", "yo", "yi", 16).parallel("yo").vectorize("x", 8)
    for st in ("Ix", "Iy", "Sxx", "Syy", "Sxy"):
        S(s, st).compute_at("harris", "yo").vectorize("x", 8)
    run_verified(p, s)


def test_wrong_declaration_fails_verification():
    # Same operator records, but the stage computes something else: verification must fail.
    p = zoo.get("blur", "small")
    d = p.to_json()
    d["stages"][1]["value"]["args"][1] = 0.0
    from engine.ir import Pipeline

    bad = Pipeline.from_json(d)
    with pytest.raises(AssertionError, match="outside tolerance"):
        run_verified(bad, Schedule())
