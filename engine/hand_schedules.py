"""Hand-written schedules for the built-in pipelines (engine/zoo.py).

Each schedule reads its extents from the pipeline, so the same function works at the
'small' and the 'full' size. `hand_schedule(p)` dispatches on `p.name`.
"""

from __future__ import annotations

from typing import Callable

from . import loops as L
from .ir import Pipeline
from .schedule import S, Schedule, definition_loops

VEC = 16  # float32 lanes of an AVX-512 vector

# The Halide backend's `reorder` currently fails (it passes a Python list where the
# binding wants varargs), so `_reorder` emulates it with unit-factor tiles: a
# tile(a, b, 1, 1) moves loop b directly outside loop a and leaves two loops of extent 1
# behind, which Halide removes. Set to True once the backend's reorder works.
NATIVE_REORDER = False


def fit(factor: int, extent: int) -> int:
    """Largest power of two <= min(factor, extent) (at least 1)."""
    n = max(1, min(factor, extent))
    return 1 << (n.bit_length() - 1)


def _reorder(s: Schedule, p: Pipeline, stage: str, update: bool, *names: str) -> None:
    """Halide's reorder (loops listed innermost first) on one definition of `stage`.

    Must come before the moved loops are marked vectorized/unrolled/parallel (the
    emulation splits them by 1)."""
    st = S(s, stage, update)
    if NATIVE_REORDER:
        st.reorder(*names)
        return
    loops = definition_loops(p, s, stage, update)
    target = [lp.name for lp in L.reorder(loops, list(names))]
    used = {lp.name for lp in loops}
    count = 0

    def fresh(base: str) -> str:
        nonlocal count
        while True:
            count += 1
            name = f"{base}_{count}"
            if name not in used:
                used.add(name)
                return name

    real = list(target)
    cur = [lp.name for lp in loops]
    for idx, want in enumerate(real):
        if cur[idx] == want:
            continue
        a = cur[idx]
        st.tile(a, want, a, want, fresh(a), fresh(want), 1, 1)
        cur.remove(want)
        cur.insert(idx, want)


# --- linear algebra ----------------------------------------------------------------------
def _matmul_into(s: Schedule, p: Pipeline, prod: str, out: str, rows: int = 8, vecs: int = 2) -> None:
    """`out` reads `prod` pointwise: tile `out`, compute `prod` per tile with its reduction
    outside a rows x (vecs*16) register block (accumulators stay in zmm registers)."""
    m, n = p.shape_of(out)
    rb = fit(rows, m)
    vw = fit(VEC, n)
    cb = vw * fit(vecs, max(1, n // vw))
    o = S(s, out)
    o.tile("j", "i", "jo", "io", "ji", "ii", cb, rb)
    o.vectorize("ji", vw).parallel("io")
    S(s, prod).compute_at(out, "jo").vectorize("j", vw)
    _reorder(s, p, prod, True, "j", "i", "k")  # k outermost: i, j form the register block
    u = S(s, prod).update()
    u.vectorize("j", vw).unroll("j", cb // vw).unroll("i", rb)


def matmul(p: Pipeline) -> Schedule:
    s = Schedule(name="hand")
    _matmul_into(s, p, "prod", "C")
    return s


SCHEDULES: dict[str, Callable[[Pipeline], Schedule]] = {
    "matmul": matmul,
}


def hand_schedule(p: Pipeline) -> Schedule:
    """The hand schedule for built-in pipeline `p` (KeyError for unknown names)."""
    return SCHEDULES[p.name](p)
