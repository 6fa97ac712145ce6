"""Profiled per-stage times charge a wrapper's copies to its consumer (none is dropped)."""

import re

import numpy as np
import pytest

from engine import expr as E
from engine import halide_backend as HB
from engine import segments
from engine.ir import Dim, Input, Pipeline, Stage
from engine.schedule import S, Schedule, validate
from engine.worker import capture_fds

N = 128
_LINE = re.compile(r"^\s+([A-Za-z_][\w$.]*):\s+([0-9.]+)ms\s+\(", re.M)


def copying_matmul() -> tuple[Pipeline, Schedule]:
    """prod = A @ Bs (Bs = 2 B), with a copy of Bs made per (ko, i): as many copies as
    multiply-adds, so the profiler surely samples them; and a copy of input A."""
    i, j, k = E.Var("i"), E.Var("j"), E.Var("k")
    ins = [Input("A", (N, N)), Input("B", (N, N))]
    bs = Stage("Bs", (Dim("k", N), Dim("j", N)), E.BinOp("*", E.Access("B", (k, j)), E.Const(2.0)))
    prod = Stage(
        "prod",
        (Dim("i", N), Dim("j", N)),
        E.Const(0.0),
        (Dim("k", N),),
        E.BinOp("*", E.Access("A", (i, k)), E.Access("Bs", (k, j))),
        "sum",
        "matmul",
    )
    p = Pipeline("mm", ins, [bs, prod], ["prod"])
    s = Schedule()
    S(s, "Bs").compute_root()
    S(s, "prod").compute_root()
    S(s, "prod").update().split("k", "ko", "ki", 16).reorder("ki", "j", "i", "ko")
    S(s, "prod").wrap("Bs").compute_at("prod", "i")
    S(s, "prod").wrap("A").compute_root()
    validate(p, s)
    return p, s


def profiled(low: HB.Lowered | segments.Segmented, p: Pipeline) -> str:
    low.compile(profile=True)
    rng = np.random.default_rng(0)
    keep = low.bind({n.name: rng.standard_normal(n.shape).astype(np.float32) for n in p.inputs})
    run = low.runner(HB.output_arrays(p))
    text = capture_fds(lambda: [run() for _ in range(300)])  # ~0.2 s: the profiler samples every ms
    del keep
    return text


@pytest.mark.parametrize("segmented", [False, True])
def test_a_wrappers_copy_time_is_charged_to_its_consumer(segmented: bool) -> None:
    p, s = copying_matmul()
    low = segments.lower(p, s, segmented=segmented)
    text = profiled(low, p)
    # Halide names the copies Bs_in_prod$0 and A_im_in_prod$0 (Bs$1_in_prod$1$0 when lowered again in a process)
    # (halide_malloc / halide_free and the profiler's "overhead" are the runtime's, no stage's)
    reported = [(name, float(ms)) for name, ms in _LINE.findall(text) if not name.startswith("halide_") and name != "overhead"]
    copies = [ms for name, ms in reported if "_in_" in name]
    assert len({name for name, _ in reported if "_im" in name and "_in_" in name}) == 1  # A's copy, in every report
    assert sum(copies) > 0  # the profiler sampled the copies
    totals = low.profile_totals(text)
    assert set(totals) == {"Bs", "prod"}
    # every millisecond the profiler reports lands on a stage: none is dropped
    assert sum(totals.values()) == pytest.approx(sum(ms for _, ms in reported), abs=1e-6)
    assert totals["prod"] >= sum(copies)
