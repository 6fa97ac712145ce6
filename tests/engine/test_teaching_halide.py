"""engine.teaching.trace against Halide itself: the order in which Halide's compiled code
stores every point of the traced stage and of its producers (`Func.trace_stores`, one
thread so that the order is the program's) must be the trace's, point for point, vector
store for vector step, for every kind of directive (tails, fuse, compute_at, store_at with
the sliding window and its warm-up, reductions)."""

import json
import os
import re
import subprocess
import sys
import textwrap

import pytest

from engine import loopnest, zoo
from engine.ops import Builder
from engine.schedule import Schedule
from engine.teaching.trace import trace

# One subprocess for every case: HL_NUM_THREADS=1 must hold before Halide's thread pool starts.
SCRIPT = textwrap.dedent(
    """
    import json, sys
    import halide as hl, numpy as np
    from engine import halide_backend as HB
    from engine.ir import Pipeline
    from engine.schedule import Schedule
    from engine.worker import capture_fds
    for case in json.loads(sys.stdin.read()):
        p = Pipeline.from_json(case["pipeline"])
        low = HB.lower(p, Schedule.from_json(case["schedule"]))
        for f in case["funcs"]:
            low.funcs[f].trace_stores()
        low.hl_pipeline.compile_jit(HB.host_target())
        bufs = HB.input_buffers(p, {i.name: np.full(i.shape, 0.5, np.float32) for i in p.inputs})
        for name, param in low.params.items():
            param.set(bufs[name])
        out = hl.Buffer(hl.Float(32), list(reversed(case["extent"])))
        text = capture_fds(lambda: low.hl_pipeline.realize(out))
        print(json.dumps([line for line in text.splitlines() if line.startswith("Store ")]))
    """
)
STORE = re.compile(r"Store (\w+)(?:\$\d+)?\.\d+\((.*)\) = ")


def parse_store(line: str) -> tuple[str, tuple[tuple[int, ...], ...]]:
    """('f', points) of one traced store; a vector store lists every lane (numpy order)."""
    m = STORE.match(line)
    assert m, line
    cols = [[int(v) for v in re.findall(r"-?\d+", x)] for x in re.findall(r"<[^>]*>|-?\d+", m.group(2))]
    n = max(len(c) for c in cols)
    cols = [c * n if len(c) == 1 else c for c in cols]
    return m.group(1), tuple(tuple(reversed(pt)) for pt in zip(*cols))


def d(kind, **args):
    return {"kind": kind, **args}


def matmul_out():
    """A matrix multiply whose output is the reduction itself (its update is traced)."""
    b = Builder("mm", "8x12 by 12x8")
    a, bb = b.input("A", (8, 12)), b.input("B", (12, 8))
    return b.build([b.matmul("prod", a, bb)])


BLUR = zoo.get("blur", "small")
TILE = d("tile", x="x", y="y", xo="xo", yo="yo", xi="xi", yi="yi", xf=4, yf=4)
CASES = {
    "default": (BLUR, "blur_y", (4, 6), {}),
    "reorder": (BLUR, "blur_y", (4, 6), {"blur_y": {"pure": [d("reorder", loops=["y", "x"])]}}),
    "tile": (BLUR, "blur_y", (8, 8), {"blur_y": {"pure": [TILE]}}),
    "vectorize": (BLUR, "blur_y", (4, 8), {"blur_y": {"pure": [d("vectorize", loop="x", factor=4)]}}),
    "parallel": (BLUR, "blur_y", (8, 4), {"blur_y": {"pure": [d("parallel", loop="y")]}}),
    "unroll": (BLUR, "blur_y", (4, 8), {"blur_y": {"pure": [d("unroll", loop="x", factor=2)]}}),
    "shift_inwards": (BLUR, "blur_y", (2, 10), {"blur_y": {"pure": [d("split", loop="x", outer="xo", inner="xi", factor=4)]}}),
    "guard_with_if": (
        BLUR, "blur_y", (2, 10), {"blur_y": {"pure": [d("split", loop="x", outer="xo", inner="xi", factor=4, tail="guard_with_if")]}},
    ),
    "fuse": (
        BLUR, "blur_y", (3, 5),
        {"blur_y": {"pure": [d("fuse", inner="x", outer="y", fused="yx"), d("split", loop="yx", outer="o", inner="i", factor=4)]}},
    ),
    "compute_at_x": (BLUR, "blur_y", (6, 6), {"blur_x": {"pure": [d("compute_at", consumer="blur_y", loop="x")]}}),
    "compute_at_y_split": (
        BLUR, "blur_y", (4, 8),
        {"blur_x": {"pure": [d("compute_at", consumer="blur_y", loop="y"), d("split", loop="x", outer="xo", inner="xi", factor=3)]}},
    ),
    "store_root_compute_at_x": (
        BLUR, "blur_y", (6, 6), {"blur_x": {"pure": [d("store_root"), d("compute_at", consumer="blur_y", loop="x")]}},
    ),
    "store_root_compute_at_y": (
        BLUR, "blur_y", (6, 6), {"blur_x": {"pure": [d("store_root"), d("compute_at", consumer="blur_y", loop="y")]}},
    ),
    "store_at_y_compute_at_x": (
        BLUR, "blur_y", (6, 6),
        {"blur_x": {"pure": [d("store_at", consumer="blur_y", loop="y"), d("compute_at", consumer="blur_y", loop="x")]}},
    ),
    "tile_vectorize_parallel_compute_at": (
        BLUR, "blur_y", (8, 16),
        {
            "blur_y": {"pure": [TILE | {"xf": 8}, d("vectorize", loop="xi", factor=4), d("parallel", loop="yo")]},
            "blur_x": {"pure": [d("compute_at", consumer="blur_y", loop="xo"), d("vectorize", loop="x", factor=4)]},
        },
    ),
    "reduction": (
        matmul_out(), "prod", (4, 8),
        {"prod": {"pure": [d("vectorize", loop="j", factor=4)],
                  "update": [d("split", loop="k", outer="ko", inner="ki", factor=4), d("reorder", loops=["j", "ki", "ko"]),
                             d("vectorize", loop="j", factor=4)]}},
    ),
    # A random schedule (the sampler's) where three producers are computed at one loop: they run
    # in Halide's realization order, not the pipeline's. Traced over the whole output: a split
    # wider than a smaller box would make Halide write outside the buffers it was given.
    "siblings_in_realization_order": (
        zoo.get("harris", "small"), "harris", (64, 64),
        {"Ix": {"pure": [d("compute_inline")]}, "Iy": {"pure": [d("compute_inline")]}, "Iyy": {"pure": [d("compute_inline")]},
         "gray": {"pure": [d("compute_inline")]}, "Sxy": {"pure": [d("compute_inline")]},
         "Ixx": {"pure": [d("compute_root"), d("split", loop="x", outer="xo", inner="xi", factor=16), d("vectorize", loop="xi", factor=8),
                          d("fuse", inner="xo", outer="y", fused="y_xo"), d("parallel", loop="y_xo")]},
         "Ixy": {"pure": [d("compute_at", consumer="harris", loop="y"), d("split", loop="x", outer="xo", inner="xi", factor=32),
                          d("vectorize", loop="xi", factor=8)]},
         "Sxx": {"pure": [d("compute_at", consumer="harris", loop="y"), d("split", loop="x", outer="xo", inner="xi", factor=8),
                          d("unroll", loop="xo", factor=2)]},
         "Syy": {"pure": [d("compute_at", consumer="harris", loop="y"), d("vectorize", loop="x", factor=16)]},
         "harris": {"pure": [d("compute_root"), d("split", loop="x", outer="xo", inner="xi", factor=8), d("unroll", loop="xo", factor=8),
                             d("parallel", loop="y")]}},
    ),
}  # fmt: skip


@pytest.fixture(scope="module")
def halide_stores():
    cases = []
    for p, stage, ext, sj in CASES.values():
        nest = loopnest.build(p, Schedule.from_json({"stages": sj}))
        funcs = [stage] + [q for (c, _), qs in nest.computed_at.items() if c == stage for q in qs]  # what a trace shows
        cases.append({"pipeline": p.to_json(), "schedule": {"stages": sj}, "funcs": funcs, "extent": list(ext)})
    env = dict(os.environ, HL_NUM_THREADS="1")
    r = subprocess.run([sys.executable, "-c", SCRIPT], input=json.dumps(cases), capture_output=True, text=True, env=env, timeout=600)
    assert r.returncode == 0, r.stderr[-3000:]
    lines = [json.loads(x) for x in r.stdout.splitlines() if x.startswith("[")]
    assert len(lines) == len(CASES)
    return {name: [parse_store(x) for x in ls] for name, ls in zip(CASES, lines)}


@pytest.mark.parametrize("case", list(CASES))
def test_trace_is_halides_store_order(case, halide_stores):
    p, stage, ext, sj = CASES[case]
    t = trace(p, Schedule.from_json({"stages": sj}), stage, ext, threads=1)
    ours: list[tuple[str, tuple | None]] = []  # (func, points of one store); None: a point of a reduction producer's update
    for st in sorted(t.steps, key=lambda s: (s.update, s.indices)):  # program order (one thread)
        for pr in st.producer_cells:
            ours.append((pr.producer, pr.cells))
            ours += [(pr.producer, None)] * pr.update_points
        ours.append((stage, st.cells))
    theirs = halide_stores[case]
    assert theirs, "Halide traced nothing"
    # The traced stage: the same stores, in the same order, the same lanes together.
    assert [c for f, c in ours if f == stage] == [c for f, c in theirs if f == stage]

    # Every point, every func, interleaved in the same order.
    def points(seq):
        return [(f, pt) for f, cs in seq for pt in ((None,) if cs is None else cs)]

    a, b = points(ours), points(theirs)
    assert len(a) == len(b)
    assert all(x == y or (x[1] is None and x[0] == y[0]) for x, y in zip(a, b))
